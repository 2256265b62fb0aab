//! `DiskWeigher`: free disk.

use super::Weigher;
use crate::domain::{HostState, RequestContext};

/// Free DISK_GB after allocation ratios (Nova's `DiskWeigher`; multiplier 1.0 spreads, negative stacks).
#[derive(Clone, Copy, Debug)]
pub struct DiskWeigher {
    /// Normalised weights are multiplied by this (its `*_weight_multiplier` option).
    pub multiplier: f64,
}

impl DiskWeigher {
    /// The name in `weight_classes`.
    pub const NAME: &'static str = "DiskWeigher";
}

impl Weigher for DiskWeigher {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn multiplier(&self) -> f64 {
        self.multiplier
    }

    fn weigh(&self, host: &HostState, _req: &RequestContext) -> f64 {
        host.free().disk_gb() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Resources;

    #[test]
    fn weighs_free_disk() {
        let usable = Resources::new(16, 32768, 400);
        let w = DiskWeigher { multiplier: 1.0 };
        // (used, num_instances, num_io_ops, want)
        let cases = [
            (Resources::ZERO, 0, 0, 400.0),
            (Resources::new(16, 32000, 150), 3, 3, 250.0),
            (Resources::new(0, 0, 400), 0, 0, 0.0),
        ];
        for (used, instances, io_ops, want) in cases {
            let mut host = HostState::synthetic(1, usable, used);
            host.num_instances = instances;
            host.num_io_ops = io_ops;
            let req = RequestContext::with_demand("i", "f", Resources::new(1, 1, 1));
            assert_eq!(w.weigh(&host, &req), want, "{used:?} {instances} {io_ops}");
        }
        assert_eq!(w.name(), DiskWeigher::NAME);
    }
}
