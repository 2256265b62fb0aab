//! The `[asc]` configuration section: decline thresholds and the bounds and steps of the
//! refresh interval τ. Config keys use seconds; the struct holds milliseconds.

use serde::{Deserialize, Serialize};

use super::error::{seconds_to_ms, ControlError};

/// Validated parameters of the ASC controller (defaults from docs/architecture.md §4).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "AscSection", into = "AscSection")]
pub struct AscParams {
    /// SLA bound: above this decline ratio τ shrinks (`th_decline`).
    pub th_decline: f64,
    /// Below this decline ratio τ grows (`th_low`).
    pub th_low: f64,
    /// τ at start (`start_interval_s`).
    pub start_interval_ms: u64,
    /// Floor of τ; should not be below the time a refresh takes (`min_interval_s`).
    pub min_interval_ms: u64,
    /// Ceiling of τ; `None` is unbounded (`max_interval_s`).
    pub max_interval_ms: Option<u64>,
    /// Factor applied to τ on an SLA breach, in (0, 1) (`speed_up_step`).
    pub speed_up_step: f64,
    /// Factor applied to τ when declines are rare, above 1 (`slow_down_step`).
    pub slow_down_step: f64,
}

impl Default for AscParams {
    fn default() -> Self {
        AscParams {
            th_decline: 0.05,
            th_low: 0.03,
            start_interval_ms: 60_000,
            min_interval_ms: 1_000,
            max_interval_ms: None,
            speed_up_step: 0.5,
            slow_down_step: 1.1,
        }
    }
}

impl AscParams {
    /// Checks every value; the error names the config key at fault.
    pub fn validate(&self) -> Result<(), ControlError> {
        if !(0.0..=1.0).contains(&self.th_decline) {
            return Err(ControlError::param("th_decline", "must be in [0, 1]"));
        }
        if !(0.0..=self.th_decline).contains(&self.th_low) {
            return Err(ControlError::param("th_low", "must be in [0, th_decline]"));
        }
        if !(self.speed_up_step > 0.0 && self.speed_up_step < 1.0) {
            return Err(ControlError::param("speed_up_step", "must be in (0, 1)"));
        }
        if !(self.slow_down_step > 1.0 && self.slow_down_step.is_finite()) {
            return Err(ControlError::param("slow_down_step", "must be above 1"));
        }
        if self.min_interval_ms == 0 {
            return Err(ControlError::param(
                "min_interval_s",
                "must be at least 1 ms",
            ));
        }
        if self.start_interval_ms < self.min_interval_ms {
            return Err(ControlError::param(
                "start_interval_s",
                "must be at least min_interval_s",
            ));
        }
        if self
            .max_interval_ms
            .is_some_and(|max| max < self.start_interval_ms)
        {
            return Err(ControlError::param(
                "max_interval_s",
                "must be at least start_interval_s",
            ));
        }
        Ok(())
    }
}

/// The `[asc]` section as written in the config file.
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
struct AscSection {
    th_decline: f64,
    th_low: f64,
    start_interval_s: f64,
    min_interval_s: f64,
    max_interval_s: Option<f64>,
    speed_up_step: f64,
    slow_down_step: f64,
}

impl Default for AscSection {
    fn default() -> Self {
        AscParams::default().into()
    }
}

impl From<AscParams> for AscSection {
    fn from(params: AscParams) -> Self {
        AscSection {
            th_decline: params.th_decline,
            th_low: params.th_low,
            start_interval_s: params.start_interval_ms as f64 / 1_000.0,
            min_interval_s: params.min_interval_ms as f64 / 1_000.0,
            max_interval_s: params.max_interval_ms.map(|ms| ms as f64 / 1_000.0),
            speed_up_step: params.speed_up_step,
            slow_down_step: params.slow_down_step,
        }
    }
}

impl TryFrom<AscSection> for AscParams {
    type Error = ControlError;

    fn try_from(section: AscSection) -> Result<Self, ControlError> {
        let params = AscParams {
            th_decline: section.th_decline,
            th_low: section.th_low,
            start_interval_ms: seconds_to_ms("start_interval_s", section.start_interval_s)?,
            min_interval_ms: seconds_to_ms("min_interval_s", section.min_interval_s)?,
            max_interval_ms: section
                .max_interval_s
                .map(|max| seconds_to_ms("max_interval_s", max))
                .transpose()?,
            speed_up_step: section.speed_up_step,
            slow_down_step: section.slow_down_step,
        };
        params.validate()?;
        Ok(params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<AscParams, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn an_empty_section_gives_the_design_defaults() {
        assert_eq!(parse("{}").unwrap(), AscParams::default());
    }

    #[test]
    fn seconds_become_milliseconds() {
        let params = parse(
            r#"{"start_interval_s": 30, "min_interval_s": 0.25, "max_interval_s": 600.5,
                "th_decline": 0.1, "th_low": 0.02, "speed_up_step": 0.25, "slow_down_step": 2}"#,
        )
        .unwrap();
        assert_eq!(params.start_interval_ms, 30_000);
        assert_eq!(params.min_interval_ms, 250);
        assert_eq!(params.max_interval_ms, Some(600_500));
        assert_eq!((params.th_decline, params.th_low), (0.1, 0.02));
        assert_eq!((params.speed_up_step, params.slow_down_step), (0.25, 2.0));
    }

    #[test]
    fn invalid_values_name_their_key() {
        for (json, key) in [
            (r#"{"th_decline": 1.5}"#, "th_decline"),
            (r#"{"th_decline": -0.1}"#, "th_decline"),
            (r#"{"th_low": 0.06}"#, "th_low"),
            (r#"{"th_low": -0.01}"#, "th_low"),
            (r#"{"speed_up_step": 1}"#, "speed_up_step"),
            (r#"{"speed_up_step": 0}"#, "speed_up_step"),
            (r#"{"slow_down_step": 1}"#, "slow_down_step"),
            (r#"{"min_interval_s": 0}"#, "min_interval_s"),
            (r#"{"min_interval_s": -2}"#, "min_interval_s"),
            (r#"{"min_interval_s": 90}"#, "start_interval_s"),
            (r#"{"start_interval_s": 1e300}"#, "start_interval_s"),
            (r#"{"max_interval_s": 30}"#, "max_interval_s"),
        ] {
            let err = parse(json).unwrap_err();
            assert!(err.contains(&format!("`{key}`")), "{json}: {err}");
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = parse(r#"{"start_interval": 60}"#).unwrap_err();
        assert!(err.contains("start_interval"), "{err}");
    }
}
