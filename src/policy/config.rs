//! The policy's configuration: which filters and weighers run, with Nova's option names.

use crate::choice::Choice;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::str::FromStr;

/// How hosts that pass the filters are ranked (docs/architecture.md §5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum Algorithm {
    /// Nova's weighers (`weight_classes`) with their multipliers.
    #[default]
    Nova,
    /// Smallest post-placement max utilisation first.
    WorstFit,
    /// Lowest host id first.
    FirstFit,
    /// Largest post-placement max utilisation first.
    BestFit,
    /// Uniform among the hosts that pass.
    Random,
    /// Post-placement utilisation vector closest to the diagonal first.
    DistFromDiag,
    /// `worst_fit` while the least-loaded host's load is below 0.6, then `first_fit`.
    Adaptive,
    /// `first_fit` ranking, uniform pick among the top ℓ = max(host_subset_size, 5).
    Ffr,
    /// `worst_fit` ranking, uniform pick among the top ℓ = max(host_subset_size, 5).
    Wfr,
}

crate::choice_from_string!(Algorithm);

impl Choice for Algorithm {
    const ALL: &'static [Self] = &Algorithm::ALL;
    fn as_str(self) -> &'static str {
        Algorithm::as_str(self)
    }
}

impl Algorithm {
    /// Every algorithm, in the order the documentation lists them.
    pub const ALL: [Algorithm; 9] = [
        Algorithm::Nova,
        Algorithm::WorstFit,
        Algorithm::FirstFit,
        Algorithm::BestFit,
        Algorithm::Random,
        Algorithm::DistFromDiag,
        Algorithm::Adaptive,
        Algorithm::Ffr,
        Algorithm::Wfr,
    ];

    /// The configuration name of the algorithm.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Nova => "nova",
            Algorithm::WorstFit => "worst_fit",
            Algorithm::FirstFit => "first_fit",
            Algorithm::BestFit => "best_fit",
            Algorithm::Random => "random",
            Algorithm::DistFromDiag => "dist_from_diag",
            Algorithm::Adaptive => "adaptive",
            Algorithm::Ffr => "ffr",
            Algorithm::Wfr => "wfr",
        }
    }
}

impl FromStr for Algorithm {
    type Err = crate::choice::UnknownChoice;
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        crate::choice::parse_choice(name)
    }
}

/// How hosts with equal ranking keys are ordered (docs/architecture.md §5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum TieBreak {
    /// Equal keys keep host order (the snapshot's order): reproducible without a seed.
    #[default]
    HostOrder,
    /// Equal keys are ordered uniformly at random with the pick's seeded generator (the ASC
    /// paper: hosts that look alike are told apart "at random").
    Random,
}

crate::choice_from_string!(TieBreak);

impl Choice for TieBreak {
    const ALL: &'static [Self] = &[TieBreak::HostOrder, TieBreak::Random];
    fn as_str(self) -> &'static str {
        TieBreak::as_str(self)
    }
}

impl TieBreak {
    /// The configuration name.
    pub fn as_str(self) -> &'static str {
        match self {
            TieBreak::HostOrder => "host_order",
            TieBreak::Random => "random",
        }
    }
}

impl FromStr for TieBreak {
    type Err = crate::choice::UnknownChoice;
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        crate::choice::parse_choice(name)
    }
}

/// Filters, weighers and pick, configured with Nova's option names where they exist.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    /// How passing hosts are ranked (`nova` by default).
    pub algorithm: Algorithm,
    /// Filter names, run in this order (the order the rejection report follows).
    pub enabled_filters: Vec<String>,
    /// Pick uniformly among this many best hosts (Nova's `[filter_scheduler] host_subset_size`).
    pub host_subset_size: usize,
    /// How hosts with equal keys are ordered: `host_order` (default) or `random`.
    pub tie_break: TieBreak,
    /// A host not heard from for this long counts as down (Nova's `service_down_time`);
    /// 0 turns the heartbeat check off (simulator, tests).
    pub host_timeout_s: u64,
    /// `RAMWeigher` multiplier (1.0: spread on free memory).
    pub ram_weight_multiplier: f64,
    /// `CPUWeigher` multiplier (1.0: spread on free VCPU).
    pub cpu_weight_multiplier: f64,
    /// `DiskWeigher` multiplier (1.0: spread on free disk).
    pub disk_weight_multiplier: f64,
    /// `IoOpsWeigher` multiplier (−1.0: prefer hosts with fewer I/O operations).
    pub io_ops_weight_multiplier: f64,
    /// `NumInstancesWeigher` multiplier (0.0: off).
    pub num_instances_weight_multiplier: f64,
    /// `ServerGroupSoftAffinityWeigher` multiplier (1.0). Nova's option, kept so
    /// that an operator's nova.conf values carry over.
    pub soft_affinity_weight_multiplier: f64,
    /// `ServerGroupSoftAntiAffinityWeigher` multiplier (1.0), as above.
    pub soft_anti_affinity_weight_multiplier: f64,
    /// `HostNameWeigher`: a fixed weight per service host (`{ host1 = 100, host2 = 50 }`);
    /// hosts not listed weigh 0. Empty by default.
    pub host_name_weights: BTreeMap<String, f64>,
    /// `HostNameWeigher` multiplier (1.0).
    pub host_name_weight_multiplier: f64,
    /// `FlexWeigher` multiplier (1.0: prefer the host with the most room under Flex's
    /// estimate; the weigher runs only with `[flex] enabled`).
    pub flex_weight_multiplier: f64,
    /// `AggregateImagePropertiesIsolation`: only aggregate metadata keys starting with this
    /// namespace and the separator are compared with the image's properties; empty (Nova's
    /// unset default) compares every key. Nova's `[filter_scheduler]` option.
    pub aggregate_image_properties_isolation_namespace: String,
    /// The separator after the namespace (Nova's default `.`).
    pub aggregate_image_properties_isolation_separator: String,
    /// `ImagePropertiesFilter`: the architecture of an image that names none; empty (Nova's
    /// unset default) means none. Nova's `[filter_scheduler]` option.
    pub image_properties_default_architecture: String,
    /// `IoOpsFilter`: a host with this many concurrent I/O-heavy operations or more takes no
    /// instance (Nova's `[filter_scheduler] max_io_ops_per_host`, 8); `AggregateIoOpsFilter`
    /// takes it from the host's aggregates' metadata key of the same name when set.
    pub max_io_ops_per_host: i64,
    /// `NumInstancesFilter`: a host with this many instances or more takes no more (Nova's
    /// `max_instances_per_host`, 50); `AggregateNumInstancesFilter` as above.
    pub max_instances_per_host: i64,
    /// `IsolatedHostsFilter`: service hosts kept for the images in `isolated_images` (Nova's
    /// option, empty by default).
    pub isolated_hosts: Vec<String>,
    /// `IsolatedHostsFilter`: image ids that only run on `isolated_hosts` (Nova's option).
    pub isolated_images: Vec<String>,
    /// `IsolatedHostsFilter`: isolated hosts take only isolated images (Nova's option, true).
    pub restrict_isolated_hosts_to_isolated_images: bool,
    /// `BuildFailureWeigher` multiplier (1,000,000: a host whose builds failed recently goes
    /// last; Nova negates it). Nova's option.
    pub build_failure_weight_multiplier: f64,
    /// `CrossCellWeigher` multiplier (1,000,000: a cross-cell move prefers the source cell).
    pub cross_cell_move_weight_multiplier: f64,
    /// `HypervisorVersionWeigher` multiplier (1.0: newer hypervisors first).
    pub hypervisor_version_weight_multiplier: f64,
    /// `ImagePropertiesWeigher` multiplier (0.0: off). Any other value is refused: Parasol
    /// does not hold the image properties of the instances on each host.
    pub image_props_weight_multiplier: f64,
    /// `PCIWeigher` multiplier (1.0: keep hosts with PCI devices for requests that need them).
    pub pci_weight_multiplier: f64,
    /// `MetricsWeigher` and `MetricsFilter`: Nova's `[metrics] weight_setting`, `name=ratio`
    /// elements (`["cpu.percent=-1.0"]`): the weigher sums each named monitor metric of the
    /// host times its ratio, the filter keeps hosts reporting every named metric. Empty (Nova's
    /// default): both pass and weigh every host alike.
    pub metrics_weight_setting: Vec<String>,
    /// Nova's `[metrics] required` (true): a host missing a named metric fails the request in
    /// Nova (`ComputeHostMetricNotFound`), so Parasol needs `MetricsFilter` enabled to remove
    /// such hosts first; false: such a host weighs `metrics_weight_of_unavailable`.
    pub metrics_required: bool,
    /// Nova's `[metrics] weight_of_unavailable` (−10000.0).
    pub metrics_weight_of_unavailable: f64,
    /// `MetricsWeigher` multiplier (Nova's `[metrics] weight_multiplier`, 1.0).
    pub metrics_weight_multiplier: f64,
    /// Weigher names for the `nova` algorithm; Nova's dotted paths are accepted too.
    pub weight_classes: Vec<String>,
    /// `NUMATopologyFilter`: fill the most used host NUMA cells first (Nova's `[compute]
    /// packing_host_numa_cells_allocation_strategy`, false: the least used first).
    pub packing_host_numa_cells_allocation_strategy: bool,
    /// The zone of a host that no aggregate puts in one and that was recorded without a zone
    /// of its own (a compute node learnt from Placement): Nova's `[DEFAULT]
    /// default_availability_zone`, `nova` by default. `AvailabilityZoneFilter` and the
    /// Selections' `availability_zone` read it.
    pub default_availability_zone: String,
}

/// The built-in filters enabled by default, in order: cheap request constraints first, then
/// state, capacity and server groups. `AggregateInstanceExtraSpecsFilter` is built in but,
/// as in Nova, only runs when named.
pub const DEFAULT_FILTERS: [&str; 8] = [
    "ForceHostsFilter",
    "IgnoreHostsFilter",
    "RequestedDestinationFilter",
    "AvailabilityZoneFilter",
    "ComputeFilter",
    "CapacityFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
];

/// Every built-in weigher (Nova's `nova.scheduler.weights.all_weighers`).
pub const DEFAULT_WEIGHERS: [&str; 7] = [
    "RAMWeigher",
    "CPUWeigher",
    "DiskWeigher",
    "IoOpsWeigher",
    "NumInstancesWeigher",
    "ServerGroupSoftAffinityWeigher",
    "ServerGroupSoftAntiAffinityWeigher",
];

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            algorithm: Algorithm::Nova,
            enabled_filters: DEFAULT_FILTERS.iter().map(|s| s.to_string()).collect(),
            host_subset_size: 1,
            tie_break: TieBreak::HostOrder,
            host_timeout_s: 60,
            ram_weight_multiplier: 1.0,
            cpu_weight_multiplier: 1.0,
            disk_weight_multiplier: 1.0,
            io_ops_weight_multiplier: -1.0,
            num_instances_weight_multiplier: 0.0,
            soft_affinity_weight_multiplier: 1.0,
            soft_anti_affinity_weight_multiplier: 1.0,
            host_name_weights: BTreeMap::new(),
            host_name_weight_multiplier: 1.0,
            flex_weight_multiplier: 1.0,
            aggregate_image_properties_isolation_namespace: String::new(),
            aggregate_image_properties_isolation_separator: ".".into(),
            image_properties_default_architecture: String::new(),
            max_io_ops_per_host: 8,
            max_instances_per_host: 50,
            isolated_hosts: Vec::new(),
            isolated_images: Vec::new(),
            packing_host_numa_cells_allocation_strategy: false,
            restrict_isolated_hosts_to_isolated_images: true,
            build_failure_weight_multiplier: 1_000_000.0,
            cross_cell_move_weight_multiplier: 1_000_000.0,
            hypervisor_version_weight_multiplier: 1.0,
            image_props_weight_multiplier: 0.0,
            pci_weight_multiplier: 1.0,
            metrics_weight_setting: Vec::new(),
            metrics_required: true,
            metrics_weight_of_unavailable: -10_000.0,
            metrics_weight_multiplier: 1.0,
            weight_classes: DEFAULT_WEIGHERS.iter().map(|s| s.to_string()).collect(),
            default_availability_zone: crate::domain::zones::NOVA_DEFAULT_ZONE.into(),
        }
    }
}

impl PolicyConfig {
    /// Refuses values Nova's options refuse (their `min`), and what Parasol cannot do.
    pub(crate) fn check_ranges(&self) -> Result<(), super::PolicyError> {
        let invalid = |key: &'static str, message: &str| {
            Err(super::PolicyError::Invalid {
                key,
                message: message.to_string(),
            })
        };
        if self.max_io_ops_per_host < 0 {
            return invalid("max_io_ops_per_host", "must be at least 0 (Nova's minimum)");
        }
        if self.max_instances_per_host < 1 {
            return invalid(
                "max_instances_per_host",
                "must be at least 1 (Nova's minimum)",
            );
        }
        if self.pci_weight_multiplier < 0.0 {
            return invalid(
                "pci_weight_multiplier",
                "must be at least 0.0 (Nova's minimum)",
            );
        }
        if self.image_props_weight_multiplier != 0.0 {
            return invalid(
                "image_props_weight_multiplier",
                "only 0.0 (off, Nova's default) is supported: Parasol does not hold the image \
                 properties of the instances on each host, which ImagePropertiesWeigher weighs",
            );
        }
        self.metrics_setting()?;
        if !self.metrics_weight_of_unavailable.is_finite() {
            return invalid("metrics_weight_of_unavailable", "must be a finite number");
        }
        Ok(())
    }

    /// `metrics_weight_setting` as (metric, ratio) pairs, in order, as Nova's
    /// `utils.parse_options(sep='=', converter=float)` reads it. An element Nova would ignore
    /// (no `=`, no name, a ratio that is no number) is refused, and so are a ratio that is not
    /// finite and a name with spaces around it (Nova would look for the spaces too, so no
    /// host would ever report it).
    pub fn metrics_setting(&self) -> Result<Vec<(String, f64)>, super::PolicyError> {
        self.metrics_weight_setting
            .iter()
            .map(|element| {
                parse_metric_weight(element).map_err(|why| super::PolicyError::Invalid {
                    key: "metrics_weight_setting",
                    message: format!("{element:?} {why}"),
                })
            })
            .collect()
    }
}

/// One `name=ratio` element of `[metrics] weight_setting`, or why it is refused.
pub fn parse_metric_weight(element: &str) -> Result<(String, f64), String> {
    let Some((name, ratio)) = element.split_once('=') else {
        return Err("is not name=ratio (Nova ignores it with a warning)".into());
    };
    if name.is_empty() {
        return Err("names no metric (Nova ignores it with a warning)".into());
    }
    if name.trim() != name {
        return Err(format!(
            "has spaces around the metric name: Nova would look for {name:?}, spaces \
             included, which no host reports"
        ));
    }
    match ratio.trim().parse::<f64>() {
        Ok(r) if r.is_finite() => Ok((name.to_string(), r)),
        Ok(_) => Err("has a ratio that is not a finite number".into()),
        Err(_) => Err(format!(
            "has a ratio {ratio:?} that is not a number (Nova ignores it with a warning)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_config_gets_novas_defaults() {
        let cfg: PolicyConfig = toml::from_str("").unwrap();
        assert_eq!(cfg, PolicyConfig::default());
        assert_eq!(cfg.algorithm, Algorithm::Nova);
        assert_eq!(cfg.host_subset_size, 1);
        assert_eq!(cfg.io_ops_weight_multiplier, -1.0);
        assert_eq!(cfg.enabled_filters.len(), DEFAULT_FILTERS.len());
    }

    #[test]
    fn algorithms_parse_by_snake_case_name() {
        let names = [
            ("nova", Algorithm::Nova),
            ("worst_fit", Algorithm::WorstFit),
            ("first_fit", Algorithm::FirstFit),
            ("best_fit", Algorithm::BestFit),
            ("random", Algorithm::Random),
            ("dist_from_diag", Algorithm::DistFromDiag),
            ("adaptive", Algorithm::Adaptive),
            ("ffr", Algorithm::Ffr),
            ("wfr", Algorithm::Wfr),
        ];
        for (name, want) in names {
            let cfg: PolicyConfig = toml::from_str(&format!("algorithm = \"{name}\"")).unwrap();
            assert_eq!(cfg.algorithm, want);
            assert_eq!(want.as_str(), name);
            assert_eq!(name.parse(), Ok(want));
        }
        assert_eq!(Algorithm::ALL.len(), names.len());
        assert!(names.iter().all(|(_, a)| Algorithm::ALL.contains(a)));
    }

    #[test]
    fn tie_break_defaults_to_host_order_and_parses_by_name() {
        assert_eq!(PolicyConfig::default().tie_break, TieBreak::HostOrder);
        for (name, want) in [
            ("host_order", TieBreak::HostOrder),
            ("random", TieBreak::Random),
        ] {
            let cfg: PolicyConfig = toml::from_str(&format!("tie_break = \"{name}\"")).unwrap();
            assert_eq!(cfg.tie_break, want);
            assert_eq!(want.as_str(), name);
        }
        let err = toml::from_str::<PolicyConfig>("tie_break = \"randm\"").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("host_order, random"), "{text}");
        assert!(text.contains("did you mean \"random\""), "{text}");
    }

    #[test]
    fn nova_option_minimums_are_refused_by_name() {
        assert_eq!(PolicyConfig::default().check_ranges(), Ok(()));
        for (text, key) in [
            ("max_io_ops_per_host = -1", "max_io_ops_per_host"),
            ("max_instances_per_host = 0", "max_instances_per_host"),
            ("pci_weight_multiplier = -1.0", "pci_weight_multiplier"),
            (
                "image_props_weight_multiplier = 2.0",
                "image_props_weight_multiplier",
            ),
        ] {
            let cfg: PolicyConfig = toml::from_str(text).unwrap();
            let err = cfg.check_ranges().unwrap_err().to_string();
            assert!(err.contains(key), "{err}");
        }
        let ok: PolicyConfig = toml::from_str("max_io_ops_per_host = 0").unwrap();
        assert_eq!(ok.check_ranges(), Ok(()));
    }

    /// Nova's `test_parse_setting` as a table: the elements Nova keeps parse to its pairs;
    /// those it ignores with a warning (and a name with spaces, a ratio not finite) are
    /// refused naming the element and why.
    #[test]
    fn metrics_weight_setting_parses_as_nova_and_refuses_what_nova_ignores() {
        let parse = |list: &[&str]| {
            PolicyConfig {
                metrics_weight_setting: list.iter().map(|s| s.to_string()).collect(),
                ..PolicyConfig::default()
            }
            .metrics_setting()
        };
        type Case<'a> = (&'a [&'a str], &'a [(&'a str, f64)]);
        let ok: [Case; 4] = [
            (&["cpu.idle.time=1"], &[("cpu.idle.time", 1.0)]),
            (
                &["cpu.idle.time=1", "cpu.kernel.time=-2.1"],
                &[("cpu.idle.time", 1.0), ("cpu.kernel.time", -2.1)],
            ),
            (&["cpu.percent= 0.5 "], &[("cpu.percent", 0.5)]),
            (&[], &[]),
        ];
        for (list, want) in ok {
            let want: Vec<(String, f64)> = want.iter().map(|(n, r)| (n.to_string(), *r)).collect();
            assert_eq!(parse(list), Ok(want), "{list:?}");
        }
        for (element, why) in [
            ("cpu.idle.time=a1", "is not a number"),
            ("cpu.idle.time", "is not name=ratio"),
            ("=5", "names no metric"),
            ("cpu.kernel.time = 2.0", "spaces around the metric name"),
            ("cpu.percent=inf", "not a finite number"),
        ] {
            let err = parse(&["cpu.percent=1", element]).unwrap_err().to_string();
            assert!(err.contains("metrics_weight_setting"), "{err}");
            assert!(err.contains(&format!("{element:?}")), "{err}");
            assert!(err.contains(why), "{element}: {err}");
            let cfg = PolicyConfig {
                metrics_weight_setting: vec![element.to_string()],
                ..PolicyConfig::default()
            };
            assert!(cfg.check_ranges().is_err(), "{element}");
        }
    }

    #[test]
    fn unknown_keys_and_algorithms_are_refused() {
        let err = toml::from_str::<PolicyConfig>("host_subset = 2").unwrap_err();
        assert!(err.to_string().contains("host_subset"), "{err}");
        let err = toml::from_str::<PolicyConfig>("algorithm = \"best\"").unwrap_err();
        assert!(err.to_string().contains("unknown value \"best\""), "{err}");
        assert!(err.to_string().contains("dist_from_diag"), "{err}");
    }
}
