//! `HostNameWeigher`: a fixed weight per service host, from a table in the configuration
//! (`[policy] host_name_weights`), times `host_name_weight_multiplier`.
//!
//! Nova has no such weigher in its tree; its functional tests use one of the same name
//! (`nova.tests.fixtures.HostNameWeigher`: `weights.get(host_state.host, 0)`) to make the
//! choice between equal hosts deterministic. For an operator it is a standing preference:
//! fill the newest racks first, keep a host last in line before maintenance, or reproduce
//! a placement order exactly. Hosts missing from the table weigh 0; the value is normalised
//! with the other weighers' (Nova's min–max), so only the differences between hosts count.
//! Host names are compared ignoring ASCII case (the configuration loader lowercases table
//! keys; host names are DNS names).

use super::Weigher;
use crate::domain::{HostState, RequestContext};
use crate::policy::config::PolicyConfig;
use std::collections::HashMap;

/// The table weigher: the raw value of a host is its entry in `host_name_weights`.
#[derive(Clone, Debug, Default)]
pub struct HostNameWeigher {
    weights: HashMap<String, f64>,
    multiplier: f64,
}

impl HostNameWeigher {
    /// The name in `weight_classes` (the dotted path of Nova's test weigher resolves to it).
    pub const NAME: &'static str = "HostNameWeigher";

    /// The weigher with the configured table and multiplier.
    pub fn new(config: &PolicyConfig) -> Self {
        HostNameWeigher {
            weights: config
                .host_name_weights
                .iter()
                .map(|(host, weight)| (host.to_ascii_lowercase(), *weight))
                .collect(),
            multiplier: config.host_name_weight_multiplier,
        }
    }
}

impl Weigher for HostNameWeigher {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn multiplier(&self) -> f64 {
        self.multiplier
    }

    /// An empty table weighs every host 0.
    fn varies(&self, _req: &RequestContext) -> bool {
        !self.weights.is_empty()
    }

    /// The entry of the host's service host (Nova's `host_state.host`, not the node), 0 when
    /// the table has none.
    fn weigh(&self, host: &HostState, _req: &RequestContext) -> f64 {
        let name: &str = host.host();
        let found = match self.weights.get(name) {
            Some(w) => Some(*w),
            None if name.bytes().any(|b| b.is_ascii_uppercase()) => {
                self.weights.get(&name.to_ascii_lowercase()).copied()
            }
            None => None,
        };
        found.unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::filters::testing::{host, request};
    use crate::policy::weighers::add_normalised;

    fn config(text: &str) -> PolicyConfig {
        toml::from_str(text).expect("valid [policy]")
    }

    #[test]
    fn weighs_each_service_host_by_its_table_entry() {
        let cfg = config(
            r#"host_name_weights = { host1 = 100, host2 = 50.5, host3 = -10 }
               host_name_weight_multiplier = 2.0"#,
        );
        let w = HostNameWeigher::new(&cfg);
        assert_eq!((w.name(), w.multiplier()), ("HostNameWeigher", 2.0));
        let req = request();
        assert!(w.varies(&req));
        let cases = [
            ("listed", 1, 100.0),
            ("listed, fraction", 2, 50.5),
            ("listed, negative", 3, -10.0),
            ("not listed weighs 0", 4, 0.0),
        ];
        for (name, id, want) in cases {
            assert_eq!(w.weigh(&host(id), &req), want, "{name}");
        }
    }

    #[test]
    fn names_match_ignoring_ascii_case() {
        let w = HostNameWeigher::new(&config("host_name_weights = { HOST1 = 5 }"));
        assert_eq!(w.weigh(&host(1), &request()), 5.0, "table key in capitals");
        let mut upper = host(2);
        let mut profile = (*upper.profile).clone();
        profile.host = "Host2".into();
        upper.profile = std::sync::Arc::new(profile);
        let w = HostNameWeigher::new(&config("host_name_weights = { host2 = 7 }"));
        assert_eq!(w.weigh(&upper, &request()), 7.0, "host name in capitals");
    }

    #[test]
    fn defaults_are_an_empty_table_and_multiplier_one() {
        let w = HostNameWeigher::new(&PolicyConfig::default());
        assert_eq!(w.multiplier(), 1.0);
        assert!(!w.varies(&request()), "an empty table adds nothing");
        assert_eq!(w.weigh(&host(1), &request()), 0.0);
    }

    #[test]
    fn normalised_order_follows_the_table_as_novas_fixture() {
        // Nova's fixture default: {'host1': 100, 'host2': 50, 'host3': 10}.
        let w = HostNameWeigher::new(&config(
            "host_name_weights = { host1 = 100, host2 = 50, host3 = 10 }",
        ));
        let req = request();
        let raw: Vec<f64> = (1..=3).map(|id| w.weigh(&host(id), &req)).collect();
        let mut scores = vec![0.0; 3];
        add_normalised(&raw, w.multiplier(), w.minval(), &mut scores);
        assert_eq!(scores, [1.0, 40.0 / 90.0, 0.0]);
    }
}
