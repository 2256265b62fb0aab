//! Nova's weigher that weighs every host alike under the settings Parasol accepts:
//! `ImagePropertiesWeigher` (off at Nova's default multiplier 0.0, the only value Parasol
//! accepts: it does not hold the image properties of the instances on each host). It is in
//! `all_weighers` so that a Nova configuration naming it loads; it never varies, so the
//! pipeline skips it.

use super::Weigher;
use crate::domain::{HostState, RequestContext};
use crate::policy::config::PolicyConfig;

/// The weigher above.
#[derive(Clone, Copy, Debug)]
pub struct IdleWeigher {
    name: &'static str,
    multiplier: f64,
}

impl IdleWeigher {
    /// `ImagePropertiesWeigher` (`image_props_weight_multiplier`, 0.0).
    pub const IMAGE_PROPERTIES: &'static str = "ImagePropertiesWeigher";

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

    /// Nova's `test_weights_image_props` with multiplier 0.0 (Nova returns 0.0 before
    /// reading anything).
    #[test]
    fn weigh_every_host_alike() {
        let cfg = PolicyConfig::default();
        let req = crate::policy::filters::testing::request();
        for w in [IdleWeigher::image_properties(&cfg)] {
            for id in 1..4 {
                let h = crate::policy::filters::testing::host(id);
                assert_eq!(w.weigh(&h, &req), 0.0, "{}", w.name());
            }
            assert!(!w.varies(&req));
        }
        assert_eq!(IdleWeigher::image_properties(&cfg).multiplier(), 0.0);
    }
}
