//! `FlexFilter` (Flex, seed 002, Alg. 3 line 7; issue 45): a host passes when, in every
//! class of `[flex] classes`, P·L̂ + r ≤ C — its measured usage L̂ (plus what was claimed
//! there since the reading) inflated by the penalty P, plus the request, within the
//! physical capacity C = total − reserved (no allocation ratio).
//!
//! It runs on top of `CapacityFilter` (used + r ≤ (total − reserved) × ratio), never instead
//! of it: Flex only refuses hosts the allocations would admit, so nothing is ever placed
//! beyond a provider's allocation ratio. A class without a fresh reading (none yet, or older
//! than `[usage] max_age_s`: a stalled source) is decided on the allocations alone. Not Nova's:
//! `[flex] enabled` adds it to the filters (docs/flex.md).

use super::{Filter, FilterEnv};
use crate::control::{flex_fits, Load};
use crate::domain::{HostState, RequestContext};

/// Admission on measured usage under the penalty P.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlexFilter;

impl FlexFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "FlexFilter";
}

impl Filter for FlexFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    /// Only while Flex is on.
    fn restricts(&self, req: &RequestContext) -> bool {
        req.flex.is_some()
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        let Some(flex) = &req.flex else {
            return true;
        };
        flex.classes.iter().all(|&class| {
            let (Some(usage), Some(inv)) = (
                flex.estimate(host.measured.as_deref(), class),
                host.profile.inventory(class),
            ) else {
                return true;
            };
            flex_fits(
                flex.penalty,
                Load {
                    usage,
                    capacity: (inv.total - inv.reserved) as f64,
                    request: req.demand.get(class) as f64,
                },
            )
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::CapacityFilter;
    use super::*;
    use crate::domain::{
        ClassId, ClassUsage, FlexContext, HostId, HostProfile, Inventory, MeasuredUsage, Resources,
        UsageSource,
    };
    use std::sync::Arc;

    /// A host of 16 VCPU (2 reserved, ratio 4: 56 allocatable) and 32 GB (ratio 1), `used`
    /// allocated, with a VCPU reading of `measured` taken at time 0.
    pub fn host_with(used_vcpu: i64, measured: Option<f64>) -> HostState {
        let profile = HostProfile::new(
            "h1",
            "h1",
            "00000000-0000-4000-8000-000000000001",
            "nova",
            vec![
                (
                    ClassId::VCPU,
                    Inventory {
                        reserved: 2,
                        allocation_ratio: 4.0,
                        ..Inventory::of(16)
                    },
                ),
                (ClassId::MEMORY_MB, Inventory::of(32_768)),
            ],
        );
        let mut host = HostState::new(HostId(1), Arc::new(profile));
        host.used = Resources::new(used_vcpu, 0, 0);
        host.measured = measured.map(|value| {
            let mut m = MeasuredUsage::default();
            m.set(ClassUsage {
                class: ClassId::VCPU,
                value,
                at_ms: 0,
                received_ms: 0,
                source: UsageSource::HostState,
                placed: 0,
            });
            Arc::new(m)
        });
        host
    }

    pub fn flex_request(vcpu: i64, penalty: f64, now_ms: i64) -> RequestContext {
        let mut req = RequestContext::with_demand("i", "f", Resources::new(vcpu, 512, 0));
        req.flex = Some(Arc::new(FlexContext {
            penalty,
            now_ms,
            max_age_ms: 60_000,
            classes: vec![ClassId::VCPU, ClassId::MEMORY_MB],
        }));
        req
    }

    #[test]
    fn a_host_passes_when_penalised_usage_plus_request_fits_the_physical_capacity() {
        let env = FilterEnv::without_heartbeats();
        // C = 16 − 2 = 14. Measured 8, P = 1.5: 12 + r ≤ 14.
        let cases = [
            ("fits", 8.0, 2, true),
            ("one over", 8.0, 3, false),
            ("idle host", 0.0, 14, true),
        ];
        for (name, measured, vcpu, want) in cases {
            let host = host_with(10, Some(measured));
            let req = flex_request(vcpu, 1.5, 0);
            assert_eq!(FlexFilter.passes(&host, &req, &env), want, "{name}");
        }
    }

    #[test]
    fn refuses_what_the_allocation_check_alone_would_admit_and_never_admits_past_the_ratio() {
        let env = FilterEnv::without_heartbeats();
        // Allocated 20 of (16 − 2) × 4 = 56: the allocation check admits 4 more VCPU.
        let busy = host_with(20, Some(12.0));
        let req = flex_request(4, 1.5, 0);
        assert!(CapacityFilter.passes(&busy, &req, &env));
        assert!(!FlexFilter.passes(&busy, &req, &env), "1.5 × 12 + 4 > 14");
        // Measured idle but allocated to the ratio: Flex passes it, the allocation check
        // (which always runs first) refuses it.
        let full = host_with(55, Some(0.5));
        let req = flex_request(2, 1.5, 0);
        assert!(FlexFilter.passes(&full, &req, &env));
        assert!(!CapacityFilter.passes(&full, &req, &env), "55 + 2 > 56");
    }

    #[test]
    fn without_a_fresh_reading_the_allocations_decide() {
        let env = FilterEnv::without_heartbeats();
        let req = flex_request(4, 1.5, 0);
        assert!(
            FlexFilter.passes(&host_with(20, None), &req, &env),
            "none yet"
        );
        // The same busy host, its reading 60.001 s old: expired, so only the allocations.
        let stale = flex_request(4, 1.5, 60_001);
        assert!(FlexFilter.passes(&host_with(20, Some(12.0)), &stale, &env));
        assert!(!FlexFilter.passes(
            &host_with(20, Some(12.0)),
            &flex_request(4, 1.5, 60_000),
            &env
        ));
        // Flex off: the filter does not restrict.
        let off = RequestContext::with_demand("i", "f", Resources::new(4, 0, 0));
        assert!(!FlexFilter.restricts(&off));
        assert!(FlexFilter.passes(&host_with(20, Some(14.0)), &off, &env));
    }

    #[test]
    fn claims_since_the_reading_count_at_their_request() {
        let env = FilterEnv::without_heartbeats();
        let mut host = host_with(10, Some(4.0));
        let req = flex_request(4, 1.5, 0);
        assert!(FlexFilter.passes(&host, &req, &env), "6 + 4 ≤ 14");
        host.consume(&Resources::new(4, 0, 0));
        assert!(!FlexFilter.passes(&host, &req, &env), "1.5 × 8 + 4 > 14");
    }
}
