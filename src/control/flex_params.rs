//! The `[flex]` configuration section: the penalty controller's constants (Flex, seed 002,
//! Alg. 3 and §5.1) and the service's bounds on them. Config keys use seconds; the struct
//! holds milliseconds.
//!
//! Two sets of defaults: [`FlexParams::default`] is the service's, [`FlexParams::paper`] is
//! §5.1's literal setting for the reproduction. They differ in one place, `p_min`: with the
//! paper's P_min = 1, once P has decayed to 1 the increase P + β(P − 1) of Alg. 3 line 23
//! adds nothing and P stays at 1 for good (shown in the controller's tests), so the service
//! defaults P_min above 1, as §4.3's own text recommends ("P_min > 1"). `p_max` bounds the
//! doubling of the overestimate (β = 1) that the paper leaves unbounded.

use serde::{Deserialize, Serialize};

use super::error::{seconds_to_ms, ControlError};

/// Validated parameters of the Flex penalty controller.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "FlexSection", into = "FlexSection")]
pub struct FlexParams {
    /// P at start (`p_start`; §5.1: 1.5).
    pub p_start: f64,
    /// Floor of P (`p_min`; §5.1 uses 1, the service 1.1: see the module docs).
    pub p_min: f64,
    /// Ceiling of P (`p_max`; not in the paper, which leaves P unbounded).
    pub p_max: f64,
    /// Decay factor while QoS holds, in (0, 1) (`alpha`; §5.1: 0.99).
    pub alpha: f64,
    /// Growth constant when QoS drops, above 0 (`beta`; §5.1: 1).
    pub beta: f64,
    /// The cluster's QoS target ρ, in (0, 1] (`qos_target`; §5.1: 0.99).
    pub qos_target: f64,
    /// The period of Alg. 3's `PeriodicEstimationPenaltyUpdate` (`update_period_s`; the
    /// paper does not give it: 60 s, one nova-compute resource update).
    pub update_period_ms: u64,
}

impl Default for FlexParams {
    fn default() -> Self {
        FlexParams {
            p_min: 1.1,
            p_max: 4.0,
            ..FlexParams::paper()
        }
    }
}

impl FlexParams {
    /// §5.1's setting, literally: P = 1.5, P_min = 1, α = 0.99, β = 1, ρ = 0.99, no ceiling.
    pub fn paper() -> Self {
        FlexParams {
            p_start: 1.5,
            p_min: 1.0,
            p_max: f64::INFINITY,
            alpha: 0.99,
            beta: 1.0,
            qos_target: 0.99,
            update_period_ms: 60_000,
        }
    }

    /// Checks every value; the error names the config key at fault.
    pub fn validate(&self) -> Result<(), ControlError> {
        if !(self.p_min >= 1.0 && self.p_min.is_finite()) {
            return Err(ControlError::param(
                "p_min",
                "must be at least 1 (below 1 Flex would admit past measured usage)",
            ));
        }
        if self.p_max.is_nan() || self.p_max < self.p_min {
            return Err(ControlError::param("p_max", "must be at least p_min"));
        }
        if !(self.p_min..=self.p_max).contains(&self.p_start) {
            return Err(ControlError::param("p_start", "must be in [p_min, p_max]"));
        }
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            return Err(ControlError::param("alpha", "must be in (0, 1)"));
        }
        if !(self.beta > 0.0 && self.beta.is_finite()) {
            return Err(ControlError::param("beta", "must be above 0"));
        }
        if !(self.qos_target > 0.0 && self.qos_target <= 1.0) {
            return Err(ControlError::param("qos_target", "must be in (0, 1]"));
        }
        if self.update_period_ms == 0 {
            return Err(ControlError::param(
                "update_period_s",
                "must be at least 1 ms",
            ));
        }
        Ok(())
    }
}

/// The `[flex]` section as written in the config file. `p_max` absent means the default;
/// there is no way to write "unbounded" in the service's config.
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
struct FlexSection {
    p_start: f64,
    p_min: f64,
    p_max: f64,
    alpha: f64,
    beta: f64,
    qos_target: f64,
    update_period_s: f64,
}

impl Default for FlexSection {
    fn default() -> Self {
        FlexParams::default().into()
    }
}

impl From<FlexParams> for FlexSection {
    fn from(params: FlexParams) -> Self {
        FlexSection {
            p_start: params.p_start,
            p_min: params.p_min,
            p_max: params.p_max,
            alpha: params.alpha,
            beta: params.beta,
            qos_target: params.qos_target,
            update_period_s: params.update_period_ms as f64 / 1_000.0,
        }
    }
}

impl TryFrom<FlexSection> for FlexParams {
    type Error = ControlError;

    fn try_from(section: FlexSection) -> Result<Self, ControlError> {
        let params = FlexParams {
            p_start: section.p_start,
            p_min: section.p_min,
            p_max: section.p_max,
            alpha: section.alpha,
            beta: section.beta,
            qos_target: section.qos_target,
            update_period_ms: seconds_to_ms("update_period_s", section.update_period_s)?,
        };
        params.validate()?;
        Ok(params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<FlexParams, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn an_empty_section_gives_the_service_defaults() {
        let params = parse("{}").unwrap();
        assert_eq!(params, FlexParams::default());
        assert!(
            params.p_min > 1.0,
            "the service's floor must let P grow again"
        );
    }

    #[test]
    fn the_paper_setting_is_section_5_1() {
        let paper = FlexParams::paper();
        assert_eq!(
            (
                paper.p_start,
                paper.p_min,
                paper.alpha,
                paper.beta,
                paper.qos_target
            ),
            (1.5, 1.0, 0.99, 1.0, 0.99)
        );
        paper.validate().unwrap();
    }

    #[test]
    fn seconds_become_milliseconds() {
        let params = parse(r#"{"update_period_s": 0.5}"#).unwrap();
        assert_eq!(params.update_period_ms, 500);
    }

    #[test]
    fn invalid_values_name_their_key() {
        for (json, key) in [
            (r#"{"p_min": 0.9}"#, "p_min"),
            (r#"{"p_max": 1.05}"#, "p_max"),
            (r#"{"p_start": 1.0}"#, "p_start"),
            (r#"{"p_start": 5.0}"#, "p_start"),
            (r#"{"alpha": 1}"#, "alpha"),
            (r#"{"alpha": 0}"#, "alpha"),
            (r#"{"beta": 0}"#, "beta"),
            (r#"{"qos_target": 0}"#, "qos_target"),
            (r#"{"qos_target": 1.01}"#, "qos_target"),
            (r#"{"update_period_s": 0}"#, "update_period_s"),
        ] {
            let err = parse(json).unwrap_err();
            assert!(err.contains(&format!("`{key}`")), "{json}: {err}");
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = parse(r#"{"penalty": 2}"#).unwrap_err();
        assert!(err.contains("penalty"), "{err}");
    }
}
