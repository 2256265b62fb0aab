//! `FlexWeigher` (Flex, seed 002, Alg. 3 line 9; issue 45): prefers the host with the most
//! room left after placing under Flex's estimate, min over `[flex] classes` of
//! 1 − (P·L̂ + r) / C (`control::flex_headroom`: the dominant class decides). A class without
//! a fresh reading is judged by its allocations (L̂ = used, no penalty). Alg. 3's score also
//! prefers fewer instances of the same source; that part is not built (docs/flex.md).
//! Multiplier `[policy] flex_weight_multiplier`; `[flex] enabled` adds it to the weighers.

use super::Weigher;
use crate::control::{flex_headroom, Load};
use crate::domain::{HostState, RequestContext};
use crate::policy::config::PolicyConfig;

/// Low estimated load first.
#[derive(Clone, Copy, Debug)]
pub struct FlexWeigher {
    multiplier: f64,
}

impl FlexWeigher {
    /// The name in `weight_classes`.
    pub const NAME: &'static str = "FlexWeigher";

    pub fn new(config: &PolicyConfig) -> Self {
        FlexWeigher {
            multiplier: config.flex_weight_multiplier,
        }
    }
}

impl Weigher for FlexWeigher {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn multiplier(&self) -> f64 {
        self.multiplier
    }

    fn varies(&self, req: &RequestContext) -> bool {
        req.flex.is_some()
    }

    fn weigh(&self, host: &HostState, req: &RequestContext) -> f64 {
        let Some(flex) = &req.flex else {
            return 0.0;
        };
        let measured = host.measured.as_deref();
        flex.classes
            .iter()
            .filter_map(|&class| {
                let inv = host.profile.inventory(class)?;
                let usage = match flex.estimate(measured, class) {
                    Some(estimate) => flex.penalty * estimate,
                    None => host.used.get(class) as f64,
                };
                let load = Load {
                    usage,
                    capacity: (inv.total - inv.reserved) as f64,
                    request: req.demand.get(class) as f64,
                };
                Some(flex_headroom(1.0, &[load]))
            })
            .fold(1.0, f64::min)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::filters::flex_testing::{flex_request, host_with};

    #[test]
    fn prefers_low_penalised_usage_and_falls_back_to_allocations() {
        let w = FlexWeigher::new(&PolicyConfig::default());
        let req = flex_request(2, 1.5, 0);
        // C = 14: 1 − (1.5 × 4 + 2) / 14 against 1 − (1.5 × 8 + 2) / 14.
        let idle = w.weigh(&host_with(10, Some(4.0)), &req);
        let busy = w.weigh(&host_with(10, Some(8.0)), &req);
        assert!((idle - (1.0 - 8.0 / 14.0)).abs() < 1e-12, "{idle}");
        assert!(idle > busy);
        // No reading: the allocation (10 VCPU, unpenalised) is the load.
        let unmeasured = w.weigh(&host_with(10, None), &req);
        assert!(
            (unmeasured - (1.0 - 12.0 / 14.0)).abs() < 1e-12,
            "{unmeasured}"
        );
        // Memory (32 GB, nothing used) never dominates here.
        assert!(w.varies(&req));
        let off = RequestContext::with_demand("i", "f", req.demand);
        assert!(!w.varies(&off));
    }
}
