//! `ComputeCapabilitiesFilter`: the flavor's `capabilities:` extra specs (and unscoped keys
//! naming a host-state attribute) must match the host's attributes, with Nova's extra-spec
//! operators (Nova 34's `compute_capabilities_filter.py`; what is read and how:
//! [`crate::domain::capabilities`]).

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// Nova's `ComputeCapabilitiesFilter`. Not run for a rebuild (`RUN_ON_REBUILD = False`).
#[derive(Clone, Copy, Debug, Default)]
pub struct ComputeCapabilitiesFilter;

impl ComputeCapabilitiesFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "ComputeCapabilitiesFilter";
}

impl Filter for ComputeCapabilitiesFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        req.capability_specs.is_some()
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        match &req.capability_specs {
            Some(specs) => specs.host_passes(host),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;
    use crate::domain::CapabilitySpecs;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn with_specs(pairs: &[(&str, &str)]) -> RequestContext {
        let extra: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut req = request();
        req.capability_specs = CapabilitySpecs::new(&extra).map(Arc::new);
        req
    }

    #[test]
    fn a_flavor_without_capability_specs_restricts_nothing() {
        let req = with_specs(&[("hw:cpu_policy", "dedicated"), ("ssd", "true")]);
        assert!(!ComputeCapabilitiesFilter.restricts(&req));
        let env = FilterEnv::without_heartbeats();
        assert!(ComputeCapabilitiesFilter.passes(&host(1), &req, &env));
    }

    #[test]
    fn keeps_hosts_whose_attributes_match_and_drops_the_others() {
        let env = FilterEnv::without_heartbeats();
        let h = host(1);
        let name = h.host().to_string();
        let cases = [
            ("the host's name", format!("s== {name}"), true),
            ("another name", "s== elsewhere".to_string(), false),
        ];
        for (what, req_value, want) in cases {
            let req = with_specs(&[("capabilities:host", &req_value)]);
            assert!(ComputeCapabilitiesFilter.restricts(&req), "{what}");
            assert_eq!(
                ComputeCapabilitiesFilter.passes(&h, &req, &env),
                want,
                "{what}"
            );
        }
        // An attribute the host does not have (or Parasol does not know) fails it.
        let req = with_specs(&[("capabilities:hypervisor_type", "QEMU")]);
        assert!(!ComputeCapabilitiesFilter.passes(&h, &req, &env));
    }

    #[test]
    fn does_not_run_on_a_rebuild() {
        assert!(!ComputeCapabilitiesFilter.runs_on_rebuild());
    }
}
