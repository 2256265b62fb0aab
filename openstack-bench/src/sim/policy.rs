//! The placement policies the experiments compare, and the library policy the simulator runs.

use parasol::policy::{Algorithm, Policy, PolicyConfig};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// A policy of the experiments: one of the library's ranking algorithms on a full snapshot,
/// or APSR (random on a d-sample, s and d from the controller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimPolicy {
    Classic(Algorithm),
    Apsr,
}

impl SimPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            SimPolicy::Classic(a) => a.as_str(),
            SimPolicy::Apsr => "apsr",
        }
    }

    /// Parses a comma-separated list, refusing unknown names.
    pub fn parse_list(list: &str) -> Result<Vec<SimPolicy>, String> {
        list.split(',').map(|s| s.trim().parse()).collect()
    }
}

impl fmt::Display for SimPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for SimPolicy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl FromStr for SimPolicy {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        if name == "apsr" {
            return Ok(SimPolicy::Apsr);
        }
        serde_json::from_value::<Algorithm>(serde_json::Value::String(name.into()))
            .map(SimPolicy::Classic)
            .map_err(|_| {
                format!(
                    "unknown policy `{name}` (expected apsr, random, first_fit, ffr, worst_fit, \
                     wfr, best_fit, dist_from_diag, adaptive or nova)"
                )
            })
    }
}

/// The library policy with only the capacity filter (simulated hosts are always up and
/// requests carry no constraints), ranked by `algorithm`; ℓ comes from the algorithm itself
/// (5 for `ffr`/`wfr`, as in the papers).
pub fn build(algorithm: Algorithm) -> Policy {
    let config = PolicyConfig {
        algorithm,
        enabled_filters: vec!["CapacityFilter".to_string()],
        host_subset_size: 1,
        host_timeout_s: 0,
        ..PolicyConfig::default()
    };
    Policy::from_config(&config).expect("the simulator's policy configuration is valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for name in [
            "apsr",
            "random",
            "first_fit",
            "ffr",
            "worst_fit",
            "wfr",
            "dist_from_diag",
            "adaptive",
            "best_fit",
        ] {
            let p: SimPolicy = name.parse().unwrap();
            assert_eq!(p.as_str(), name);
        }
        assert!("bestfit".parse::<SimPolicy>().is_err());
        assert_eq!(SimPolicy::parse_list("apsr, random").unwrap().len(), 2);
    }
}
