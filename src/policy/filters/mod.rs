//! Filters: each says yes or no for one host and one request (Nova's `BaseHostFilter`).
//!
//! One file per filter, each with its name constant and table-driven tests.

mod affinity;
mod aggregate_image_properties_isolation;
mod aggregate_instance_extra_specs;
mod aggregate_io_ops;
mod aggregate_multitenancy_isolation;
mod aggregate_num_instances;
mod aggregate_type_affinity;
mod all_hosts;
mod anti_affinity;
mod availability_zone;
mod capacity;
mod compute;
mod compute_capabilities;
mod different_host;
mod flex;
mod force_hosts;
mod ignore_hosts;
mod image_properties;
mod io_ops;
mod isolated_hosts;
pub mod json;
mod metrics;
mod num_instances;
pub(crate) mod numa_topology;
mod pci_passthrough;
mod requested_destination;
mod same_host;
mod simple_cidr_affinity;

pub use affinity::ServerGroupAffinityFilter;
pub use aggregate_image_properties_isolation::AggregateImagePropertiesIsolation;
pub use aggregate_instance_extra_specs::{
    matches as extra_spec_matches, AggregateExtraSpecs, AggregateInstanceExtraSpecsFilter,
};
pub use aggregate_io_ops::AggregateIoOpsFilter;
pub use aggregate_multitenancy_isolation::AggregateMultiTenancyIsolation;
pub use aggregate_num_instances::AggregateNumInstancesFilter;
pub use aggregate_type_affinity::AggregateTypeAffinityFilter;
pub use all_hosts::AllHostsFilter;
pub use anti_affinity::members_on;
pub use anti_affinity::ServerGroupAntiAffinityFilter;
pub use availability_zone::AvailabilityZoneFilter;
pub use capacity::CapacityFilter;
pub use compute::heard_from_recently;
pub use compute::ComputeFilter;
pub use compute_capabilities::ComputeCapabilitiesFilter;
pub use different_host::DifferentHostFilter;
#[cfg(test)]
pub(crate) use flex::tests as flex_testing;
pub use flex::FlexFilter;
pub use force_hosts::ForceHostsFilter;
pub use ignore_hosts::IgnoreHostsFilter;
pub use image_properties::ImagePropertiesFilter;
pub use io_ops::IoOpsFilter;
pub use isolated_hosts::IsolatedHostsFilter;
pub use json::JsonFilter;
pub use metrics::MetricsFilter;
pub use num_instances::NumInstancesFilter;
pub use numa_topology::NumaTopologyFilter;
pub use pci_passthrough::PciPassthroughFilter;
pub use requested_destination::RequestedDestinationFilter;
pub use same_host::SameHostFilter;
pub use simple_cidr_affinity::SimpleCIDRAffinityFilter;

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

/// The limit a per-aggregate filter applies to `host` (Nova's `aggregate_values_from_key`
/// then `validate_num_values(values, default, int, min)`): the least of the values the host's
/// aggregates give `key`, `default` when none does or when one is not an integer (Nova logs
/// a warning and uses the configured value).
pub fn aggregate_int_limit(host: &HostState, req: &RequestContext, key: &str, default: i64) -> i64 {
    let Some(values) = req
        .aggregate_metadata
        .as_ref()
        .and_then(|m| m.values_of(host.host(), key))
    else {
        return default;
    };
    values
        .iter()
        .map(|v| python_int(v))
        .collect::<Option<Vec<i64>>>()
        .and_then(|v| v.into_iter().min())
        .unwrap_or(default)
}

/// Python's `int(text)` for base 10: surrounding whitespace, a sign, digits with single
/// underscores between them; `None` where Python raises `ValueError` (or past `i64`).
pub fn python_int(text: &str) -> Option<i64> {
    let t = text.trim();
    let (negative, digits) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.bytes().all(|b| b.is_ascii_digit() || b == b'_')
    {
        return None;
    }
    let clean: String = digits.chars().filter(|c| *c != '_').collect();
    let n: i64 = clean.parse().ok()?;
    Some(if negative { -n } else { n })
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
    /// and `ImagePropertiesFilter`, and `IsolatedHostsFilter` run for a rebuild check; capacity (Placement's candidates), liveness, zones, tenancy
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
                "IsolatedHostsFilter",
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
    fn python_int_parses_as_python_does() {
        let cases: [(&str, Option<i64>); 10] = [
            ("8", Some(8)),
            (" 8 ", Some(8)),
            ("-3", Some(-3)),
            ("+3", Some(3)),
            ("1_000", Some(1000)),
            ("1__0", None),
            ("_1", None),
            ("XXX", None),
            ("", None),
            ("4.0", None),
        ];
        for (text, want) in cases {
            assert_eq!(python_int(text), want, "{text:?}");
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

    /// `host(id)` reporting monitor `metrics` (name, value), measured and received at time 0.
    pub fn host_with_metrics(id: i64, metrics: &[(&str, f64)]) -> HostState {
        use crate::domain::{MeasuredUsage, MonitorMetric, MonitorMetrics, UsageSource};
        let mut h = host(id);
        h.measured = Some(std::sync::Arc::new(MeasuredUsage {
            metrics: Some(MonitorMetrics {
                at_ms: 0,
                received_ms: 0,
                source: UsageSource::NovaMetrics,
                metrics: metrics
                    .iter()
                    .map(|(name, value)| MonitorMetric {
                        name: (*name).into(),
                        value: *value,
                        at_ms: 0,
                    })
                    .collect(),
            }),
            ..MeasuredUsage::default()
        }));
        h
    }

    /// A small request.
    pub fn request() -> RequestContext {
        RequestContext::with_demand("inst-1", "m1.small", Resources::new(1, 2048, 20))
    }

    /// `req` with hints edited by `edit` (starting from none).
    pub fn with_hints(
        mut req: RequestContext,
        edit: impl FnOnce(&mut crate::domain::SchedulerHints),
    ) -> RequestContext {
        let mut hints = crate::domain::SchedulerHints::default();
        edit(&mut hints);
        req.hints = Some(std::sync::Arc::new(hints));
        req
    }

    /// One aggregate: its hosts and its key–value pairs.
    pub type Agg<'a> = (&'a [&'a str], Vec<(&'a str, &'a str)>);

    /// Aggregates' metadata from (hosts, key–value pairs) per aggregate.
    pub fn aggregates(
        list: &[Agg<'_>],
    ) -> Option<std::sync::Arc<crate::domain::HostAggregateMetadata>> {
        type Owned = (Vec<String>, std::collections::BTreeMap<String, String>);
        let owned: Vec<Owned> = list
            .iter()
            .map(|(hosts, meta)| {
                (
                    hosts.iter().map(|h| h.to_string()).collect(),
                    meta.iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                )
            })
            .collect();
        Some(std::sync::Arc::new(
            crate::domain::HostAggregateMetadata::new(owned.iter().map(|(h, m)| (h.as_slice(), m))),
        ))
    }
}
