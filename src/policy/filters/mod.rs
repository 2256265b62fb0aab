//! Filters: each says yes or no for one host and one request (Nova's `BaseHostFilter`).
//!
//! One file per filter, each with its name constant and table-driven tests.

mod affinity;
mod aggregate_image_properties_isolation;
mod aggregate_instance_extra_specs;
mod aggregate_multitenancy_isolation;
mod all_hosts;
mod anti_affinity;
mod availability_zone;
mod capacity;
mod compute;
mod compute_capabilities;
mod force_hosts;
mod ignore_hosts;
mod image_properties;
mod requested_destination;

pub use affinity::ServerGroupAffinityFilter;
pub use aggregate_image_properties_isolation::AggregateImagePropertiesIsolation;
pub use aggregate_instance_extra_specs::{
    matches as extra_spec_matches, AggregateExtraSpecs, AggregateInstanceExtraSpecsFilter,
};
pub use aggregate_multitenancy_isolation::AggregateMultiTenancyIsolation;
pub use all_hosts::AllHostsFilter;
pub use anti_affinity::members_on;
pub use anti_affinity::ServerGroupAntiAffinityFilter;
pub use availability_zone::AvailabilityZoneFilter;
pub use capacity::CapacityFilter;
pub use compute::heard_from_recently;
pub use compute::ComputeFilter;
pub use compute_capabilities::ComputeCapabilitiesFilter;
pub use force_hosts::ForceHostsFilter;
pub use ignore_hosts::IgnoreHostsFilter;
pub use image_properties::ImagePropertiesFilter;
pub use requested_destination::RequestedDestinationFilter;

use super::config::PolicyConfig;
use crate::domain::{HostState, RequestContext};

/// What a filter may know besides the host and the request: the time and the host timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterEnv {
    /// Now, in milliseconds since the Unix epoch (from the injected clock).
    pub now_ms: i64,
    /// A host whose last report is further than this from `now_ms` counts as down;
    /// 0 turns the heartbeat check off.
    pub host_timeout_ms: i64,
}

impl FilterEnv {
    /// The environment at `now_ms` with the configured `host_timeout_s`.
    pub fn new(now_ms: i64, config: &PolicyConfig) -> Self {
        let timeout = i64::try_from(config.host_timeout_s.saturating_mul(1000)).unwrap_or(i64::MAX);
        FilterEnv {
            now_ms,
            host_timeout_ms: timeout,
        }
    }

    /// No heartbeat check: for the simulator and tests, whose hosts never report.
    pub fn without_heartbeats() -> Self {
        FilterEnv {
            now_ms: 0,
            host_timeout_ms: 0,
        }
    }
}

/// Keeps a host or not, for one request. Implementations hold no per-request state.
pub trait Filter: Send + Sync {
    /// The filter's name in `enabled_filters` (Nova's class name).
    fn name(&self) -> &'static str;
    /// True when `host` may take `req`.
    fn passes(&self, host: &HostState, req: &RequestContext, env: &FilterEnv) -> bool;
    /// False when the filter passes every host for `req` (it has nothing to check, e.g. no
    /// host is forced): the pipeline then skips it for that request.
    fn restricts(&self, _req: &RequestContext) -> bool {
        true
    }
    /// True when the filter also runs for a rebuild check (Nova's `RUN_ON_REBUILD`; false
    /// for most filters, whose question the instance's running there already answered).
    /// Forced, ignored and requested hosts, which Nova's host manager applies before any
    /// filter, and image filters say true.
    fn runs_on_rebuild(&self) -> bool {
        false
    }
    /// The test this filter makes, when a host's [`crate::domain::HostScan`] row can answer
    /// it (the built-in capacity and compute filters): a full scan then reads the dense row
    /// instead of calling [`Filter::passes`]. `None` (the default) always calls `passes`.
    fn scan_check(&self) -> Option<ScanCheck> {
        None
    }
}

/// A filter's test expressed over a host's scan row (see [`Filter::scan_check`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanCheck {
    /// [`ComputeFilter`]: up, enabled, not forced down, heard from recently.
    Compute,
    /// [`CapacityFilter`]: room in every demanded class, unit rules, Placement's query.
    Capacity,
}

/// Whether `filter` has something to check for `req`: it restricts the request, and the
/// request is not a rebuild check or the filter runs on one.
pub fn applies(filter: &dyn Filter, req: &RequestContext) -> bool {
    (!req.rebuild || filter.runs_on_rebuild()) && filter.restricts(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nova's `RUN_ON_REBUILD`: of Parasol's filters, the host manager's steps (forced,
    /// ignored, requested hosts) and the image filters `AggregateImagePropertiesIsolation`
    /// and `ImagePropertiesFilter` run for a rebuild check; capacity (Placement's candidates), liveness, zones, tenancy
    /// and the group filters do not.
    #[test]
    fn a_rebuild_runs_only_the_filters_nova_runs_on_a_rebuild() {
        let config = PolicyConfig::default();
        let registry = crate::policy::registry::builtin_filters();
        let names: Vec<String> = registry.names().map(str::to_string).collect();
        let built = registry.build(&names, &config).unwrap();
        let mut rebuild = testing::request();
        rebuild.rebuild = true;
        rebuild.force_hosts = vec!["host1".into()];
        rebuild.ignore_hosts = vec!["host2".into()];
        let mut on_rebuild: Vec<&str> = built
            .iter()
            .filter(|f| f.runs_on_rebuild())
            .map(|f| f.name())
            .collect();
        on_rebuild.sort();
        assert_eq!(
            on_rebuild,
            [
                "AggregateImagePropertiesIsolation",
                "ForceHostsFilter",
                "IgnoreHostsFilter",
                "ImagePropertiesFilter",
                "RequestedDestinationFilter"
            ]
        );
        for f in &built {
            assert_eq!(
                applies(f.as_ref(), &rebuild),
                f.runs_on_rebuild() && f.restricts(&rebuild),
                "{}",
                f.name()
            );
        }
    }

    #[test]
    fn env_takes_the_host_timeout_from_config_in_milliseconds() {
        let cfg = PolicyConfig::default();
        assert_eq!(
            FilterEnv::new(5, &cfg),
            FilterEnv {
                now_ms: 5,
                host_timeout_ms: 60_000
            }
        );
        let huge = PolicyConfig {
            host_timeout_s: u64::MAX,
            ..cfg
        };
        assert_eq!(FilterEnv::new(5, &huge).host_timeout_ms, i64::MAX);
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use crate::domain::{HostState, RequestContext, Resources};

    /// A roomy, up host named `host{id}`.
    pub fn host(id: i64) -> HostState {
        HostState::synthetic(id, Resources::new(16, 32768, 400), Resources::ZERO)
    }

    /// A small request.
    pub fn request() -> RequestContext {
        RequestContext::with_demand("inst-1", "m1.small", Resources::new(1, 2048, 20))
    }
}
