//! `[usage]` (measured usage as soft state) and `[flex]` (usage-aware admission, Flex, seed
//! 002; issue 45): the service's keys around the controller's constants of
//! `control::FlexParams`, whose defaults and checks they use.

use super::ConfigError;
use crate::control::FlexParams;
use crate::domain::{is_valid_class_name, ClassId};
use crate::policy::{filters::FlexFilter, weighers::FlexWeigher, PolicyConfig};
use crate::usage_poll::PrometheusSettings;
use serde::{Deserialize, Serialize};

/// The longest `[usage] max_age_s` (a day).
const MAX_AGE_S: f64 = 86_400.0;

/// `[usage]`: how long a measured reading decides anything, and the Prometheus poller.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct UsageSettings {
    /// Seconds after which a reading is expired: decisions fall back to the allocations.
    /// 180 s: three of nova-compute's resource updates (60 s each).
    pub max_age_s: f64,
    /// `[usage.prometheus]`: measured usage polled from Prometheus (off without a `url`).
    pub prometheus: PrometheusSettings,
}

impl Default for UsageSettings {
    fn default() -> Self {
        UsageSettings {
            max_age_s: 180.0,
            prometheus: PrometheusSettings::default(),
        }
    }
}

impl UsageSettings {
    /// `max_age_s` in ms.
    pub fn max_age_ms(&self) -> i64 {
        (self.max_age_s * 1_000.0).round() as i64
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.max_age_s.is_finite() && self.max_age_s >= 0.001 && self.max_age_s <= MAX_AGE_S) {
            return Err(ConfigError::key(
                "usage.max_age_s",
                format!(
                    "must be a number of seconds from 0.001 to {MAX_AGE_S}, not {}",
                    self.max_age_s
                ),
            ));
        }
        let prometheus = &self.prometheus;
        prometheus
            .validate()
            .map_err(|(key, why)| ConfigError::key(format!("usage.prometheus.{key}"), why))?;
        if prometheus.enabled() && prometheus.poll_interval_s >= self.max_age_s {
            return Err(ConfigError::key(
                "usage.prometheus.poll_interval_s",
                format!(
                    "must be below usage.max_age_s ({} s): each reading would expire before \
                     the next poll",
                    self.max_age_s
                ),
            ));
        }
        Ok(())
    }
}

/// Where the controller's Q(t) comes from (`[flex] qos_source`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum QosSource {
    /// No signal: P stays at `p_start`.
    #[default]
    None,
    /// The share of hosts with a fresh reading whose most loaded `[flex] classes` class has
    /// measured usage (plus what was claimed since) at most `qos_saturation_threshold` of
    /// total − reserved (`control::unsaturated_share`).
    HostSaturation,
    /// Eq. 14 from the hosts' own report of each instance (`instance_qos` in the host-state
    /// event): the share of instances with a fresh report whose every signal (`cpu_wait`,
    /// `memory_pressure`) is at most its threshold (`control::served_share`).
    InstanceSignals,
}

crate::choice_from_string!(QosSource);

impl crate::choice::Choice for QosSource {
    const ALL: &'static [Self] = &[
        QosSource::None,
        QosSource::HostSaturation,
        QosSource::InstanceSignals,
    ];
    fn as_str(self) -> &'static str {
        QosSource::as_str(self)
    }
}

impl QosSource {
    pub fn as_str(self) -> &'static str {
        match self {
            QosSource::None => "none",
            QosSource::HostSaturation => "host_saturation",
            QosSource::InstanceSignals => "instance_signals",
        }
    }
}

impl std::str::FromStr for QosSource {
    type Err = crate::choice::UnknownChoice;
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        crate::choice::parse_choice(name)
    }
}

/// `[flex]`: Flex's filter, weigher and penalty controller.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlexSettings {
    /// Adds `FlexFilter` and `FlexWeigher` to the pipeline (unless named there) and runs the
    /// penalty controller. Off by default: decisions on allocations only, as Nova.
    pub enabled: bool,
    /// The classes Flex judges, each on its own measured usage.
    pub classes: Vec<String>,
    pub p_start: f64,
    pub p_min: f64,
    pub p_max: f64,
    pub alpha: f64,
    pub beta: f64,
    pub qos_target: f64,
    pub update_period_s: f64,
    /// Where Q(t) comes from: `none` (P stays at `p_start`), `host_saturation` or
    /// `instance_signals`.
    pub qos_source: QosSource,
    /// `host_saturation`: a host whose measured load is above this share of its capacity
    /// counts as not served (0.9).
    pub qos_saturation_threshold: f64,
    /// `instance_signals`: an instance whose vCPUs waited for a host CPU more than this
    /// share of the interval counts as not served (0.05).
    pub qos_cpu_wait_threshold: f64,
    /// `instance_signals`: an instance that stalled on memory more than this share of the
    /// interval counts as not served (0.05).
    pub qos_memory_pressure_threshold: f64,
    /// Lets Flex move each compute node's allocation ratio in Placement (and the ledger) to
    /// where its filter binds, 1 / (P·u), within `allocation_ratio_bounds`, never below what
    /// the node's allocations take; once per Placement sync. Needs `[placement] enabled` and
    /// nova.conf's `cpu_allocation_ratio` (and the RAM and disk ones) unset, as Nova leaves a
    /// ratio set in Placement alone only then. Off by default.
    pub manage_allocation_ratio: bool,
    /// The bounds of the managed ratio per class of `classes` (`{class, min, max}`); a class
    /// not named here keeps its ratio. VCPU 1–4 (Nova's `initial_cpu_allocation_ratio` is
    /// 4.0), MEMORY_MB 1–1.5.
    pub allocation_ratio_bounds: Vec<RatioBound>,
    /// A ratio is written only when it moved by at least this much (or left its bounds).
    pub allocation_ratio_min_change: f64,
}

/// One class's bounds in `[flex] allocation_ratio_bounds`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RatioBound {
    pub class: String,
    pub min: f64,
    pub max: f64,
}

impl RatioBound {
    fn new(class: &str, min: f64, max: f64) -> Self {
        RatioBound {
            class: class.to_string(),
            min,
            max,
        }
    }
}

/// The largest managed allocation ratio accepted.
const MAX_MANAGED_RATIO: f64 = 100.0;

impl Default for FlexSettings {
    fn default() -> Self {
        let p = FlexParams::default();
        FlexSettings {
            enabled: false,
            classes: vec!["VCPU".into(), "MEMORY_MB".into()],
            p_start: p.p_start,
            p_min: p.p_min,
            p_max: p.p_max,
            alpha: p.alpha,
            beta: p.beta,
            qos_target: p.qos_target,
            update_period_s: p.update_period_ms as f64 / 1_000.0,
            qos_source: QosSource::None,
            qos_saturation_threshold: 0.9,
            qos_cpu_wait_threshold: 0.05,
            qos_memory_pressure_threshold: 0.05,
            manage_allocation_ratio: false,
            allocation_ratio_bounds: vec![
                RatioBound::new("VCPU", 1.0, 4.0),
                RatioBound::new("MEMORY_MB", 1.0, 1.5),
            ],
            allocation_ratio_min_change: 0.05,
        }
    }
}

impl FlexSettings {
    /// The controller's constants, checked by `control::FlexParams` (the error names the key).
    pub fn params(&self) -> Result<FlexParams, ConfigError> {
        let section = serde_json::json!({
            "p_start": self.p_start,
            "p_min": self.p_min,
            "p_max": self.p_max,
            "alpha": self.alpha,
            "beta": self.beta,
            "qos_target": self.qos_target,
            "update_period_s": self.update_period_s,
        });
        // A non-finite number is no JSON number (serde_json writes null): name it here.
        for (name, value) in section.as_object().into_iter().flatten() {
            if value.is_null() {
                return Err(ConfigError::key(
                    format!("flex.{name}"),
                    "must be a finite number",
                ));
            }
        }
        serde_json::from_value(section).map_err(|e| ConfigError::Invalid(format!("[flex] {e}")))
    }

    /// The classes, interned (valid names: checked by [`Self::validate`]).
    pub fn class_ids(&self) -> Vec<ClassId> {
        self.classes
            .iter()
            .filter_map(|name| ClassId::intern(name).ok())
            .collect()
    }

    pub fn validate(&self, policy: &PolicyConfig) -> Result<(), ConfigError> {
        self.params()?;
        for (key, t, of) in [
            (
                "flex.qos_saturation_threshold",
                self.qos_saturation_threshold,
                "capacity",
            ),
            (
                "flex.qos_cpu_wait_threshold",
                self.qos_cpu_wait_threshold,
                "the interval",
            ),
            (
                "flex.qos_memory_pressure_threshold",
                self.qos_memory_pressure_threshold,
                "the interval",
            ),
        ] {
            if !(t.is_finite() && t > 0.0 && t <= 1.0) {
                return Err(ConfigError::key(
                    key,
                    format!("must be a share of {of} above 0 and at most 1, not {t}"),
                ));
            }
        }
        if self.classes.is_empty() {
            return Err(ConfigError::key(
                "flex.classes",
                "must name at least one class",
            ));
        }
        for (i, name) in self.classes.iter().enumerate() {
            if !is_valid_class_name(name) {
                return Err(ConfigError::key(
                    "flex.classes",
                    format!(
                        "{name:?} is not a resource class (a standard class or CUSTOM_[A-Z0-9_]+)"
                    ),
                ));
            }
            if self.classes[..i].contains(name) {
                return Err(ConfigError::key(
                    "flex.classes",
                    format!("names {name} twice"),
                ));
            }
        }
        self.validate_ratio_management()?;
        if !self.enabled {
            let named = |list: &[String], name: &str| {
                list.iter().any(|n| n.rsplit('.').next() == Some(name))
            };
            for (key, list, name) in [
                (
                    "policy.enabled_filters",
                    &policy.enabled_filters,
                    FlexFilter::NAME,
                ),
                (
                    "policy.weight_classes",
                    &policy.weight_classes,
                    FlexWeigher::NAME,
                ),
            ] {
                if named(list, name) {
                    return Err(ConfigError::key(
                        key,
                        format!("names {name}, which needs [flex] enabled = true"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// `manage_allocation_ratio` and its bounds (`[placement] enabled` is checked with the
    /// other sections).
    fn validate_ratio_management(&self) -> Result<(), ConfigError> {
        if self.manage_allocation_ratio && !self.enabled {
            return Err(ConfigError::key(
                "flex.manage_allocation_ratio",
                "needs [flex] enabled = true",
            ));
        }
        let step = self.allocation_ratio_min_change;
        if !(step.is_finite() && step > 0.0 && step <= 1.0) {
            return Err(ConfigError::key(
                "flex.allocation_ratio_min_change",
                format!("must be above 0 and at most 1, not {step}"),
            ));
        }
        for (i, RatioBound { class, min, max }) in self.allocation_ratio_bounds.iter().enumerate() {
            let key = format!("flex.allocation_ratio_bounds.{class}");
            if self.allocation_ratio_bounds[..i]
                .iter()
                .any(|b| b.class == *class)
            {
                return Err(ConfigError::key(key, format!("names {class} twice")));
            }
            if !self.classes.contains(class) {
                return Err(ConfigError::key(
                    key,
                    format!(
                        "names {class}, which is not in flex.classes {:?}",
                        self.classes
                    ),
                ));
            }
            if !(min.is_finite() && max.is_finite() && *min > 0.0 && min <= max)
                || *max > MAX_MANAGED_RATIO
            {
                return Err(ConfigError::key(
                    key,
                    format!(
                        "must be [min, max] with 0 < min <= max <= {MAX_MANAGED_RATIO}, \
                         not [{min}, {max}]"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// What the Placement sync's ratio manager needs (`None` unless
    /// `manage_allocation_ratio`).
    pub fn ratio_settings(&self) -> Option<crate::placement::RatioSettings> {
        self.manage_allocation_ratio
            .then(|| crate::placement::RatioSettings {
                classes: self
                    .allocation_ratio_bounds
                    .iter()
                    .filter_map(|b| {
                        let id = ClassId::intern(&b.class).ok()?;
                        let bounds = crate::control::RatioBounds {
                            min: b.min,
                            max: b.max,
                        };
                        Some((id, bounds))
                    })
                    .collect(),
                min_change: self.allocation_ratio_min_change,
            })
    }

    /// `policy` with Flex's filter and weigher added when Flex is on and they are not
    /// named: the filter after the others, the weigher last.
    pub fn policy(&self, policy: &PolicyConfig) -> PolicyConfig {
        let mut policy = policy.clone();
        if self.enabled {
            for (list, name) in [
                (&mut policy.enabled_filters, FlexFilter::NAME),
                (&mut policy.weight_classes, FlexWeigher::NAME),
            ] {
                if !list.iter().any(|n| n.rsplit('.').next() == Some(name)) {
                    list.push(name.to_string());
                }
            }
        }
        policy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flex(toml_text: &str) -> FlexSettings {
        toml::from_str(toml_text).expect("a [flex] section")
    }

    #[test]
    fn defaults_are_off_with_the_controllers_service_constants() {
        let f = FlexSettings::default();
        assert!(!f.enabled);
        assert_eq!(f.params().unwrap(), FlexParams::default());
        assert_eq!(f.class_ids(), [ClassId::VCPU, ClassId::MEMORY_MB]);
        f.validate(&PolicyConfig::default()).unwrap();
        UsageSettings::default().validate().unwrap();
    }

    #[test]
    fn bad_values_are_refused_naming_their_key() {
        let policy = PolicyConfig::default();
        for (text, key) in [
            ("p_min = 0.9", "p_min"),
            ("alpha = 1.0", "alpha"),
            ("update_period_s = 0", "update_period_s"),
            ("classes = []", "flex.classes"),
            ("classes = [\"vcpu\"]", "flex.classes"),
            ("classes = [\"VCPU\", \"VCPU\"]", "flex.classes"),
            ("qos_cpu_wait_threshold = 0", "flex.qos_cpu_wait_threshold"),
            (
                "qos_memory_pressure_threshold = 1.5",
                "flex.qos_memory_pressure_threshold",
            ),
            (
                "qos_saturation_threshold = -1",
                "flex.qos_saturation_threshold",
            ),
        ] {
            let err = flex(text).validate(&policy).unwrap_err().to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
        let nan = FlexSettings {
            beta: f64::NAN,
            ..FlexSettings::default()
        };
        assert!(nan
            .validate(&policy)
            .unwrap_err()
            .to_string()
            .contains("flex.beta"));
        for bad in [0.0, -1.0, f64::NAN, 86_401.0] {
            let err = UsageSettings {
                max_age_s: bad,
                ..Default::default()
            }
            .validate()
            .unwrap_err();
            assert!(err.to_string().contains("usage.max_age_s"), "{err}");
        }
    }

    #[test]
    fn enabled_adds_the_filter_and_the_weigher_once_and_naming_them_needs_it() {
        let mut policy = PolicyConfig::default();
        let on = flex("enabled = true");
        let with = on.policy(&policy);
        assert_eq!(
            with.enabled_filters.last().map(String::as_str),
            Some("FlexFilter")
        );
        assert_eq!(
            with.weight_classes.last().map(String::as_str),
            Some("FlexWeigher")
        );
        assert_eq!(
            on.policy(&with).enabled_filters,
            with.enabled_filters,
            "not twice"
        );
        assert_eq!(
            FlexSettings::default().policy(&policy).enabled_filters,
            policy.enabled_filters
        );
        policy.enabled_filters.push("FlexFilter".into());
        let err = FlexSettings::default()
            .validate(&policy)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("policy.enabled_filters") && err.contains("[flex] enabled"),
            "{err}"
        );
        on.validate(&policy).unwrap();
    }
}
