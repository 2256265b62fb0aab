//! `CapacityFilter`: Placement's allocation-candidate test for one host.
//!
//! Nova asks Placement for allocation candidates before any of its filters run; Parasol
//! answers that query itself from the live table, with this filter, which therefore always
//! runs first whether `enabled_filters` names it or not.

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// Passes hosts that Placement would list as allocation candidates for the request: room for
/// the demand in every class after allocation ratios, each class' unit rules (min_unit,
/// max_unit, step_size), the required and forbidden traits, the aggregates (`member_of`,
/// forbidden aggregates) and the provider tree (`in_tree`).
#[derive(Clone, Copy, Debug, Default)]
pub struct CapacityFilter;

impl CapacityFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "CapacityFilter";
}

impl Filter for CapacityFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        host.fits(&req.demand) && req.query.accepts(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Resources;

    #[test]
    fn passes_only_when_every_class_has_room() {
        let usable = Resources::new(4, 4096, 40);
        let cases = [
            (
                "empty host",
                Resources::ZERO,
                Resources::new(4, 4096, 40),
                true,
            ),
            (
                "exact fit",
                Resources::new(2, 2048, 20),
                Resources::new(2, 2048, 20),
                true,
            ),
            (
                "vcpu short",
                Resources::new(3, 0, 0),
                Resources::new(2, 1, 1),
                false,
            ),
            (
                "memory short",
                Resources::new(0, 4000, 0),
                Resources::new(1, 97, 1),
                false,
            ),
            (
                "disk short",
                Resources::new(0, 0, 40),
                Resources::new(0, 0, 1),
                false,
            ),
        ];
        for (name, used, demand, want) in cases {
            let host = HostState::synthetic(1, usable, used);
            let req = RequestContext::with_demand("i", "f", demand);
            let got = CapacityFilter.passes(&host, &req, &FilterEnv::without_heartbeats());
            assert_eq!(got, want, "{name}");
        }
    }
}
