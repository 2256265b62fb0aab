//! `[metrics]`: Nova's `MetricsFilter` and `MetricsWeigher` options, into `[policy]` as
//! `metrics_weight_setting`, `metrics_required`, `metrics_weight_of_unavailable` and
//! `metrics_weight_multiplier`.

use super::Out;
use crate::configuration::nova_conf::{list, NovaConf};
use crate::policy::parse_metric_weight;
use toml::Value;

const SECTION: &str = "metrics";

/// Carries `[metrics]` for the carried `filters` and `weighers`. A `weight_setting` element
/// Nova ignores is left out, as Nova leaves it out, and named; `required` (Nova's default,
/// true) with a setting, `MetricsWeigher` and no `MetricsFilter` becomes false, named: Nova
/// would fail every request meeting a host that lacks a metric, Parasol ranks that host last.
pub(super) fn carry(conf: &NovaConf, out: &mut Out, filters: &[&str], weighers: &[&str]) {
    let mut setting = Vec::new();
    if let Some(raw) = conf.get(SECTION, "weight_setting") {
        out.read(SECTION, "weight_setting");
        for element in list(raw) {
            match parse_metric_weight(&element) {
                Ok(_) => setting.push(Value::String(element)),
                Err(why) => out.warn(format!(
                    "[{SECTION}] weight_setting element {element:?} is not carried: it {why}"
                )),
            }
        }
        out.set(
            "policy",
            "metrics_weight_setting",
            Value::Array(setting.clone()),
            format!("[{SECTION}] weight_setting"),
        );
    }
    for (key, like) in [
        ("weight_of_unavailable", Value::Float(0.0)),
        ("weight_multiplier", Value::Float(0.0)),
    ] {
        if let Some(v) = out.typed(conf, SECTION, key, &like) {
            out.set(
                "policy",
                &format!("metrics_{key}"),
                v,
                format!("[{SECTION}] {key}"),
            );
        }
    }
    let required = out
        .typed(conf, SECTION, "required", &Value::Boolean(false))
        .is_none_or(|v| v == Value::Boolean(true));
    let unfiltered = weighers.contains(&"MetricsWeigher") && !filters.contains(&"MetricsFilter");
    if required && unfiltered && !setting.is_empty() {
        out.warn(format!(
            "[{SECTION}] required = true is carried as false: without MetricsFilter, Nova \
             fails a request whose hosts lack a metric of weight_setting \
             (ComputeHostMetricNotFound); Parasol weighs such a host \
             weight_of_unavailable instead. Enable MetricsFilter to keep Nova's meaning"
        ));
        out.set(
            "policy",
            "metrics_required",
            Value::Boolean(false),
            format!("[{SECTION}] required, false without MetricsFilter"),
        );
    } else if conf.get(SECTION, "required").is_some() {
        out.set(
            "policy",
            "metrics_required",
            Value::Boolean(required),
            format!("[{SECTION}] required"),
        );
    }
}
