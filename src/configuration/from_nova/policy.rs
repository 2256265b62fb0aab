//! `[filter_scheduler]`: filters and weighers by Parasol's registry, and every option whose
//! name Parasol's `[policy]` shares (the weigher multipliers, `host_subset_size`).

use super::Out;
use crate::configuration::load::nova_policy_keys;
use crate::configuration::nova_conf::{list, NovaConf};
use crate::policy::registry::{builtin_filters, builtin_weighers};
use crate::policy::PolicyConfig;
use toml::Value;

/// Nova's `[filter_scheduler] enabled_filters` default (nova 34).
pub const NOVA_DEFAULT_FILTERS: [&str; 5] = [
    "ComputeFilter",
    "ComputeCapabilitiesFilter",
    "ImagePropertiesFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
];

pub use crate::policy::NOVA_ALL_WEIGHERS;

/// Parasol filters doing what Nova does outside `enabled_filters` (its host manager, request
/// filters and Placement's allocation candidates): always enabled in the output.
pub const IMPLICIT_FILTERS: [&str; 5] = [
    "ForceHostsFilter",
    "IgnoreHostsFilter",
    "RequestedDestinationFilter",
    "AvailabilityZoneFilter",
    "CapacityFilter",
];

const SECTION: &str = "filter_scheduler";

pub(super) fn carry(conf: &NovaConf, out: &mut Out) {
    let filters = filters(conf, out);
    let weighers = weighers(conf, out);
    super::metrics::carry(conf, out, &filters, &weighers);
    let defaults = serde_json::to_value(PolicyConfig::default()).unwrap_or_default();
    for key in nova_policy_keys() {
        if key == "enabled_filters" || key == "weight_classes" {
            continue;
        }
        let like = match defaults.get(&key) {
            Some(serde_json::Value::Number(n)) if n.is_f64() => Value::Float(0.0),
            Some(serde_json::Value::Number(_)) => Value::Integer(0),
            Some(serde_json::Value::Bool(_)) => Value::Boolean(false),
            _ => Value::String(String::new()),
        };
        if let Some(v) = out.typed(conf, SECTION, &key, &like) {
            out.set("policy", &key, v, format!("[{SECTION}] {key}"));
        }
    }
}

/// The last segment of Nova's dotted class path.
fn short(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// Carries the filters; returns them.
fn filters(conf: &NovaConf, out: &mut Out) -> Vec<&'static str> {
    let known: Vec<&'static str> = builtin_filters().names().collect();
    let (names, from) = match conf.get(SECTION, "enabled_filters") {
        Some(v) => (list(v), format!("[{SECTION}] enabled_filters")),
        None => (
            NOVA_DEFAULT_FILTERS.iter().map(|s| s.to_string()).collect(),
            format!("Nova's default [{SECTION}] enabled_filters"),
        ),
    };
    out.read(SECTION, "enabled_filters");
    let mut chosen: Vec<&'static str> = IMPLICIT_FILTERS
        .iter()
        .copied()
        .filter(|f| known.contains(f))
        .collect();
    for name in &names {
        let wanted: Vec<&'static str> = if short(name) == "all_filters" {
            known.clone()
        } else if let Some(k) = known.iter().find(|k| **k == short(name)) {
            vec![*k]
        } else {
            out.warn(format!(
                "filter {name} ({from}) is not in Parasol yet: not carried, so hosts it would \
                 remove stay candidates"
            ));
            continue;
        };
        for f in wanted {
            if !chosen.contains(&f) {
                chosen.push(f);
            }
        }
    }
    let list = chosen.iter().map(|f| Value::String((*f).into())).collect();
    out.set(
        "policy",
        "enabled_filters",
        Value::Array(list),
        format!(
            "{from}, with Parasol's {} (what Nova does outside its filters)",
            IMPLICIT_FILTERS.join(", ")
        ),
    );
    chosen
}

/// Carries the weighers; returns them.
fn weighers(conf: &NovaConf, out: &mut Out) -> Vec<&'static str> {
    let known: Vec<&'static str> = builtin_weighers().names().collect();
    let (names, from) = match conf.get(SECTION, "weight_classes") {
        Some(v) => (list(v), format!("[{SECTION}] weight_classes")),
        None => (
            vec!["nova.scheduler.weights.all_weighers".to_string()],
            format!("Nova's default [{SECTION}] weight_classes"),
        ),
    };
    out.read(SECTION, "weight_classes");
    let mut chosen: Vec<&'static str> = Vec::new();
    for name in &names {
        let expanded: Vec<&str> = if short(name) == "all_weighers" {
            NOVA_ALL_WEIGHERS.to_vec()
        } else {
            vec![short(name)]
        };
        for w in expanded {
            match known.iter().find(|k| **k == w) {
                Some(k) if !chosen.contains(k) => chosen.push(k),
                Some(_) => {}
                None => out.warn(format!(
                    "weigher {w} ({from}) is not in Parasol yet: not carried"
                )),
            }
        }
    }
    let list = chosen.iter().map(|w| Value::String((*w).into())).collect();
    out.set("policy", "weight_classes", Value::Array(list), from);
    chosen
}
