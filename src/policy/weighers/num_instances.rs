//! `NumInstancesWeigher`: instances on the host.

use super::Weigher;
use crate::domain::{HostState, RequestContext};

/// The host's `num_instances` (Nova's `NumInstancesWeigher`; multiplier 0.0 by default, negative spreads).
#[derive(Clone, Copy, Debug)]
pub struct NumInstancesWeigher {
    /// Normalised weights are multiplied by this (its `*_weight_multiplier` option).
    pub multiplier: f64,
}

impl NumInstancesWeigher {
    /// The name in `weight_classes`.
    pub const NAME: &'static str = "NumInstancesWeigher";
}

impl Weigher for NumInstancesWeigher {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn multiplier(&self) -> f64 {
        self.multiplier
    }

    fn weigh(&self, host: &HostState, _req: &RequestContext) -> f64 {
        host.num_instances as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Resources;

    #[test]
    fn weighs_instances() {
        let usable = Resources::new(16, 32768, 400);
        let w = NumInstancesWeigher { multiplier: 1.0 };
        // (used, num_instances, num_io_ops, want)
        let cases = [
            (Resources::ZERO, 0, 0, 0.0),
            (Resources::new(16, 32000, 150), 3, 2, 3.0),
            (Resources::ZERO, 9, 7, 9.0),
        ];
        for (used, instances, io_ops, want) in cases {
            let mut host = HostState::synthetic(1, usable, used);
            host.num_instances = instances;
            host.num_io_ops = io_ops;
            let req = RequestContext::with_demand("i", "f", Resources::new(1, 1, 1));
            assert_eq!(w.weigh(&host, &req), want, "{used:?} {instances} {io_ops}");
        }
        assert_eq!(w.name(), NumInstancesWeigher::NAME);
    }
}
