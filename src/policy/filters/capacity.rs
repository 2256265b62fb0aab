//! `CapacityFilter`: Placement's allocation-candidate test for one host.
//!
//! Nova asks Placement for allocation candidates before any of its filters run; Parasol
//! answers that query itself from the live table, with this filter, which therefore always
//! runs first whether `enabled_filters` names it or not.

use super::{Filter, FilterEnv};
use crate::domain::{ClassId, HostState, RequestContext, Resources};

/// Passes hosts that Placement would list as allocation candidates for the request: room for
/// the demand in every class after allocation ratios, each class' unit rules (min_unit,
/// max_unit, step_size), the required and forbidden traits, the aggregates (`member_of`,
/// forbidden aggregates) and the provider tree (`in_tree`). In a multi-create, room is
/// Placement's when the call started: a host the call's earlier instances filled still
/// passes (`RequestContext::fitted_before_the_call`), as Nova weighs it, and is not claimed.
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
        (has_room(host, &req.demand) || req.fitted_before_the_call(host))
            && host.profile.admits(&req.demand)
            && req.query.accepts(host)
    }

    fn scan_check(&self) -> Option<super::ScanCheck> {
        Some(super::ScanCheck::Capacity)
    }
}

/// [`HostState::fits`]'s room test over the classes the process knows: every other class is
/// 0 in the demand, so the answer is the same, without reading all `MAX_CLASSES` of them for
/// every host of every request (this test is the inner loop of every full-snapshot decision).
/// Only the classes the demand asks for are compared, as Placement does.
pub fn has_room(host: &HostState, demand: &Resources) -> bool {
    let n = ClassId::count();
    let (used, usable) = (&host.used.0[..n], &host.usable().0[..n]);
    demand.0[..n]
        .iter()
        .zip(used)
        .zip(usable)
        .all(|((d, u), cap)| *d == 0 || u.checked_add(*d).is_some_and(|total| total <= *cap))
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
            assert_eq!(has_room(&host, &demand), host.fits(&demand), "{name}");
        }
    }

    /// (name, host's usage now, what the call's earlier instances took there, passes): a host
    /// counts as it was when the call started, as Nova's allocation candidates do.
    #[test]
    fn a_host_the_call_filled_passes_for_the_calls_next_instance_only() {
        use crate::domain::{CallClaims, HostId};
        use std::sync::Arc;
        let usable = Resources::new(4, 4096, 40);
        let demand = Resources::new(2, 2048, 20);
        let cases = [
            (
                "no claim of the call",
                Resources::new(4, 4096, 40),
                None,
                false,
            ),
            (
                "filled by the call",
                Resources::new(4, 4096, 40),
                Some(demand),
                true,
            ),
            (
                "full before the call too",
                Resources::new(4, 4096, 40),
                Some(Resources::new(1, 1, 1)),
                false,
            ),
            ("room now anyway", Resources::ZERO, Some(demand), true),
        ];
        for (name, used, taken, want) in cases {
            let host = HostState::synthetic(1, usable, used);
            let mut req = RequestContext::with_demand("i", "f", demand);
            if let Some(taken) = taken {
                let mut claims = CallClaims::default();
                claims.add(HostId(1), taken);
                req.call_claims = Some(Arc::new(claims));
            }
            let got = CapacityFilter.passes(&host, &req, &FilterEnv::without_heartbeats());
            assert_eq!(got, want, "{name}");
            // Another host the call did not claim on is not given anything back.
            let other = HostState::synthetic(2, usable, used);
            let fits = CapacityFilter.passes(&other, &req, &FilterEnv::without_heartbeats());
            assert_eq!(fits, has_room(&other, &demand), "{name}: host 2");
        }
    }

    #[test]
    fn has_room_agrees_with_host_fits_including_saturation() {
        let usable = Resources::new(10, 10, 10);
        let demands = [
            Resources::new(0, 0, 0),
            Resources::new(10, 10, 10),
            Resources::new(11, 0, 0),
            Resources::new(i64::MAX, 0, 0),
            Resources::new(-1, 5, 5),
        ];
        let usages = [
            Resources::ZERO,
            Resources::new(5, 5, 5),
            Resources::new(10, 0, 10),
            Resources::new(i64::MAX, 0, 0),
        ];
        for used in usages {
            for demand in demands {
                let host = HostState::synthetic(1, usable, used);
                assert_eq!(
                    has_room(&host, &demand),
                    host.fits(&demand),
                    "used {:?} demand {:?}",
                    &used.0[..3],
                    &demand.0[..3]
                );
            }
        }
    }
}
