//! The placement policies the experiments compare, and the library policy the simulator runs.

use parasol::policy::{Algorithm, Policy, PolicyConfig, TieBreak};
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
        name.parse().map(SimPolicy::Classic).map_err(|_| {
            let names: Vec<&str> = Algorithm::ALL.iter().map(|a| a.as_str()).collect();
            format!(
                "unknown policy `{name}` (expected apsr, {})",
                names.join(", ")
            )
        })
    }
}

/// The library policy with only the capacity filter (simulated hosts are always up and
/// requests carry no constraints), ranked by `algorithm`, equal keys ordered by `tie_break`
/// (host order in experiment A, random in experiment B: docs/architecture.md §5); ℓ comes from the
/// algorithm itself (5 for `ffr`/`wfr`, as in the papers).
pub fn build(algorithm: Algorithm, tie_break: TieBreak) -> Policy {
    let config = PolicyConfig {
        algorithm,
        tie_break,
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
        let algorithms = Algorithm::ALL.map(|a| a.as_str());
        for name in algorithms.iter().chain(&["apsr"]) {
            let p: SimPolicy = name.parse().unwrap();
            assert_eq!(p.as_str(), *name);
        }
        let err = "bestfit".parse::<SimPolicy>().unwrap_err();
        assert!(
            err.contains("`bestfit`") && err.contains("best_fit"),
            "{err}"
        );
        assert_eq!(SimPolicy::parse_list("apsr, random").unwrap().len(), 2);
    }
}
