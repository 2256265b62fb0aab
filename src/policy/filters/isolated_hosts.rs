//! `IsolatedHostsFilter`: the images in `isolated_images` run only on `isolated_hosts`, and
//! (with `restrict_isolated_hosts_to_isolated_images`, the default) those hosts run only
//! those images (Nova 34's `isolated_hosts_filter.py`).

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};
use crate::policy::config::PolicyConfig;

/// Nova's `IsolatedHostsFilter`; runs for a rebuild too (`RUN_ON_REBUILD = True`: the image
/// changes).
#[derive(Clone, Debug, Default)]
pub struct IsolatedHostsFilter {
    pub isolated_hosts: Vec<String>,
    pub isolated_images: Vec<String>,
    pub restrict_isolated_hosts_to_isolated_images: bool,
}

impl IsolatedHostsFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "IsolatedHostsFilter";

    /// The filter with the configured hosts and images.
    pub fn new(config: &PolicyConfig) -> Self {
        IsolatedHostsFilter {
            isolated_hosts: config.isolated_hosts.clone(),
            isolated_images: config.isolated_images.clone(),
            restrict_isolated_hosts_to_isolated_images: config
                .restrict_isolated_hosts_to_isolated_images,
        }
    }
}

impl Filter for IsolatedHostsFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, _req: &RequestContext) -> bool {
        // No isolated image, and no isolated host kept from other images: all pass.
        !(self.isolated_images.is_empty()
            && (!self.restrict_isolated_hosts_to_isolated_images || self.isolated_hosts.is_empty()))
    }

    fn runs_on_rebuild(&self) -> bool {
        true
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        let host_isolated = self.isolated_hosts.iter().any(|h| **h == **host.host());
        if self.isolated_images.is_empty() {
            return !self.restrict_isolated_hosts_to_isolated_images || !host_isolated;
        }
        let image_isolated = req
            .image_id
            .as_ref()
            .is_some_and(|id| self.isolated_images.contains(id));
        if self.restrict_isolated_hosts_to_isolated_images {
            image_isolated == host_isolated
        } else {
            !image_isolated || host_isolated
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::request;
    use super::*;
    use crate::domain::{HostState, Resources};

    /// Nova's `_do_test_isolated_hosts`: a host `isolated_host` or `free_host`, an image
    /// `image_ref` or `fake_image_ref`, under the given options.
    fn check(
        hosts: &[&str],
        images: &[&str],
        restrict: bool,
        host_in_list: bool,
        image_in_list: bool,
    ) -> bool {
        let f = IsolatedHostsFilter {
            isolated_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            isolated_images: images.iter().map(|s| s.to_string()).collect(),
            restrict_isolated_hosts_to_isolated_images: restrict,
        };
        let mut h = HostState::synthetic(1, Resources::new(4, 4096, 40), Resources::ZERO);
        h.profile_mut().host = if host_in_list {
            "isolated_host"
        } else {
            "free_host"
        }
        .into();
        let mut req = request();
        req.image_id = Some(
            if image_in_list {
                "image_ref"
            } else {
                "fake_image_ref"
            }
            .into(),
        );
        let passes = f.passes(&h, &req, &FilterEnv::without_heartbeats());
        assert!(
            passes || f.restricts(&req),
            "a filter that restricts nothing passed all"
        );
        passes
    }

    /// Nova's `TestIsolatedHostsFilter`, test by test.
    #[test]
    fn nova_isolation_matrix() {
        let (hosts, images): (&[&str], &[&str]) = (&["isolated_host"], &["image_ref"]);
        // fails_isolated_on_non_isolated, fails_non_isolated_on_isolated,
        // passes_isolated_on_isolated, passes_non_isolated_on_non_isolated
        assert!(!check(hosts, images, true, false, true));
        assert!(!check(hosts, images, true, true, false));
        assert!(check(hosts, images, true, true, true));
        assert!(check(hosts, images, true, false, false));
        // no_config
        for (h, i) in [(false, true), (true, false), (true, true), (false, false)] {
            assert!(check(&[], &[], true, h, i), "no config {h} {i}");
        }
        // no_hosts_config
        assert!(!check(&[], images, true, false, true));
        assert!(check(&[], images, true, true, false));
        assert!(!check(&[], images, true, true, true));
        assert!(check(&[], images, true, false, false));
        // no_images_config
        assert!(check(hosts, &[], true, false, true));
        assert!(!check(hosts, &[], true, true, false));
        assert!(!check(hosts, &[], true, true, true));
        assert!(check(hosts, &[], true, false, false));
        // less_restrictive
        assert!(check(hosts, images, false, true, false));
        assert!(check(hosts, images, false, true, true));
        assert!(check(hosts, images, false, false, false));
        assert!(!check(hosts, images, false, false, true));
    }

    /// A volume-backed request has no image id: an unisolated image.
    #[test]
    fn no_image_is_an_unisolated_image() {
        let f = IsolatedHostsFilter {
            isolated_hosts: vec!["isolated_host".into()],
            isolated_images: vec!["image_ref".into()],
            restrict_isolated_hosts_to_isolated_images: true,
        };
        let mut h = HostState::synthetic(1, Resources::new(4, 4096, 40), Resources::ZERO);
        let env = FilterEnv::without_heartbeats();
        assert!(f.passes(&h, &request(), &env));
        h.profile_mut().host = "isolated_host".into();
        assert!(!f.passes(&h, &request(), &env));
        let defaults = IsolatedHostsFilter::new(&PolicyConfig::default());
        assert!(
            defaults.restrict_isolated_hosts_to_isolated_images,
            "Nova's default"
        );
        assert!(!defaults.restricts(&request()));
    }
}
