//! Nova's weighers that read a compute node's own records (`[nova_db]`), as one weigher
//! driven by a table like `resource.rs`: `BuildFailureWeigher` (recent failed builds, from the
//! node's `stats`; Nova negates the multiplier), `HypervisorVersionWeigher` (newer first) and
//! `PCIWeigher` (`100 − min(free PCI devices, 99)`: hosts with PCI devices kept for requests
//! that need them). A node without records weighs as Nova's host without the figure: 0 failed
//! builds, version 0, no PCI device.
//!
//! None reads a scan row: with one of them in `weight_classes` and a non-zero multiplier a
//! request is weighed host by host rather than by the sorted walk.

use super::Weigher;
use crate::domain::{ComputeFacts, HostState, RequestContext};
use crate::policy::config::PolicyConfig;

/// Nova's `pci.py` `MAX_DEVS`.
pub const MAX_DEVS: i64 = 100;

/// One row of [`NODE_RECORD_WEIGHERS`].
#[derive(Debug)]
pub struct NodeRecordWeigherSpec {
    /// The name in `weight_classes`.
    pub name: &'static str,
    /// The raw value from the node's records (`None`: no records).
    pub value: fn(Option<&ComputeFacts>) -> f64,
    /// Nova's `[filter_scheduler]` option for the multiplier, the same key in `[policy]`.
    pub option: &'static str,
    /// The option's default in Nova, and in Parasol.
    pub default_multiplier: f64,
    /// The multiplier as Nova applies it (`BuildFailureWeigher` negates its option).
    pub multiplier: fn(&PolicyConfig) -> f64,
}

/// The weighers over node records, in Nova's `all_weighers` (alphabetical) order.
pub static NODE_RECORD_WEIGHERS: [NodeRecordWeigherSpec; 3] = [
    NodeRecordWeigherSpec {
        name: "BuildFailureWeigher",
        value: |f| f.map_or(0, |f| f.failed_builds) as f64,
        option: "build_failure_weight_multiplier",
        default_multiplier: 1_000_000.0,
        multiplier: |c| -c.build_failure_weight_multiplier,
    },
    NodeRecordWeigherSpec {
        name: "HypervisorVersionWeigher",
        value: |f| f.map_or(0, |f| f.hypervisor_version) as f64,
        option: "hypervisor_version_weight_multiplier",
        default_multiplier: 1.0,
        multiplier: |c| c.hypervisor_version_weight_multiplier,
    },
    NodeRecordWeigherSpec {
        name: "PCIWeigher",
        value: |f| (MAX_DEVS - f.map_or(0, |f| f.pci_free).min(MAX_DEVS - 1)) as f64,
        option: "pci_weight_multiplier",
        default_multiplier: 1.0,
        multiplier: |c| c.pci_weight_multiplier,
    },
];

/// A row of [`NODE_RECORD_WEIGHERS`] with its configured multiplier.
#[derive(Clone, Copy, Debug)]
pub struct NodeRecordWeigher {
    pub spec: &'static NodeRecordWeigherSpec,
    pub multiplier: f64,
}

impl NodeRecordWeigher {
    /// The weigher of `spec`, its multiplier read from `config`.
    pub fn new(spec: &'static NodeRecordWeigherSpec, config: &PolicyConfig) -> Self {
        NodeRecordWeigher {
            spec,
            multiplier: (spec.multiplier)(config),
        }
    }
}

impl Weigher for NodeRecordWeigher {
    fn name(&self) -> &'static str {
        self.spec.name
    }

    fn multiplier(&self) -> f64 {
        self.multiplier
    }

    fn weigh(&self, host: &HostState, _req: &RequestContext) -> f64 {
        (self.spec.value)(host.profile.facts.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Resources;
    use std::sync::Arc;

    fn host_with(facts: Option<ComputeFacts>) -> HostState {
        let mut h = HostState::synthetic(1, Resources::new(4, 4096, 40), Resources::ZERO);
        h.profile_mut().facts = facts.map(Arc::new);
        h
    }

    fn spec(name: &str) -> &'static NodeRecordWeigherSpec {
        NODE_RECORD_WEIGHERS
            .iter()
            .find(|s| s.name == name)
            .unwrap()
    }

    fn weigh(name: &str, facts: Option<ComputeFacts>) -> f64 {
        let w = NodeRecordWeigher::new(spec(name), &PolicyConfig::default());
        w.weigh(
            &host_with(facts),
            &crate::policy::filters::testing::request(),
        )
    }

    /// Each row's option and default, and the multiplier as Nova applies it.
    #[test]
    fn rows_carry_novas_options_and_defaults() {
        let cfg = PolicyConfig::default();
        for s in &NODE_RECORD_WEIGHERS {
            let sign = if s.name == "BuildFailureWeigher" {
                -1.0
            } else {
                1.0
            };
            assert_eq!(
                (s.multiplier)(&cfg),
                sign * s.default_multiplier,
                "{}",
                s.name
            );
            let json = serde_json::to_value(&cfg).unwrap();
            assert_eq!(
                json[s.option].as_f64(),
                Some(s.default_multiplier),
                "{}",
                s.option
            );
        }
    }

    /// Nova's `test_weights_compute`: failed builds 0, 1, 2, 3 weigh as their count (the
    /// host with none wins once the negated multiplier applies).
    #[test]
    fn build_failures_weigh_their_count() {
        for n in [0, 1, 2, 3] {
            let facts = ComputeFacts {
                failed_builds: n,
                ..ComputeFacts::default()
            };
            assert_eq!(weigh("BuildFailureWeigher", Some(facts)), n as f64);
        }
        assert_eq!(weigh("BuildFailureWeigher", None), 0.0);
    }

    /// Nova's `test_weights_hypervisor_version`: the version itself, None as 0.
    #[test]
    fn hypervisor_version_weighs_the_version() {
        for v in [1_000_000, 2_000_000, 3_000_000] {
            let facts = ComputeFacts {
                hypervisor_version: v,
                ..ComputeFacts::default()
            };
            assert_eq!(weigh("HypervisorVersionWeigher", Some(facts)), v as f64);
        }
        assert_eq!(weigh("HypervisorVersionWeigher", None), 0.0);
    }

    /// Nova's `test_weights_pci`: 100 − min(free, 99): no device 100, 2 free 98, 500 free 1.
    #[test]
    fn pci_weighs_keeping_pci_hosts_free() {
        for (free, want) in [(0, 100.0), (2, 98.0), (99, 1.0), (500, 1.0)] {
            let facts = ComputeFacts {
                pci_free: free,
                ..ComputeFacts::default()
            };
            assert_eq!(weigh("PCIWeigher", Some(facts)), want, "{free}");
        }
        assert_eq!(weigh("PCIWeigher", None), 100.0);
    }
}
