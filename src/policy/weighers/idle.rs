//! Nova's weighers that weigh every host alike under the settings Parasol accepts:
//! `MetricsWeigher` (with `[metrics] weight_setting` empty, Nova's default and the only
//! setting Parasol has — it holds no host metrics — each host weighs 0) and
//! `ImagePropertiesWeigher` (off at Nova's default multiplier 0.0, the only value Parasol
//! accepts: it does not hold the image properties of the instances on each host). They are
//! in `all_weighers` so that a Nova configuration naming them loads; they never vary, so
//! the pipeline skips them.

use super::Weigher;
use crate::domain::{HostState, RequestContext};
use crate::policy::config::PolicyConfig;

/// One of the two weighers above.
#[derive(Clone, Copy, Debug)]
pub struct IdleWeigher {
    name: &'static str,
    multiplier: f64,
}

impl IdleWeigher {
    /// `MetricsWeigher` (`[metrics] weight_multiplier`, 1.0, not configurable here).
    pub const METRICS: &'static str = "MetricsWeigher";
    /// `ImagePropertiesWeigher` (`image_props_weight_multiplier`, 0.0).
    pub const IMAGE_PROPERTIES: &'static str = "ImagePropertiesWeigher";

    /// `MetricsWeigher`.
    pub fn metrics(_config: &PolicyConfig) -> Self {
        IdleWeigher {
            name: Self::METRICS,
            multiplier: 1.0,
        }
    }

    /// `ImagePropertiesWeigher` with the configured multiplier (always 0.0: other values
    /// are refused when the policy is built).
    pub fn image_properties(config: &PolicyConfig) -> Self {
        IdleWeigher {
            name: Self::IMAGE_PROPERTIES,
            multiplier: config.image_props_weight_multiplier,
        }
    }
}

impl Weigher for IdleWeigher {
    fn name(&self) -> &'static str {
        self.name
    }

    fn multiplier(&self) -> f64 {
        self.multiplier
    }

    fn varies(&self, _req: &RequestContext) -> bool {
        false
    }

    fn weigh(&self, _host: &HostState, _req: &RequestContext) -> f64 {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nova's `test_weights_metrics` with no setting (`_test_weigher` over empty
    /// `weight_setting`: every host 0.0) and `test_weights_image_props` with multiplier 0.0
    /// (Nova returns 0.0 before reading anything).
    #[test]
    fn weigh_every_host_alike() {
        let cfg = PolicyConfig::default();
        let req = crate::policy::filters::testing::request();
        for w in [
            IdleWeigher::metrics(&cfg),
            IdleWeigher::image_properties(&cfg),
        ] {
            for id in 1..4 {
                let h = crate::policy::filters::testing::host(id);
                assert_eq!(w.weigh(&h, &req), 0.0, "{}", w.name());
            }
            assert!(!w.varies(&req));
        }
        assert_eq!(IdleWeigher::image_properties(&cfg).multiplier(), 0.0);
    }
}
