//! Name → factory maps for filters and weighers, built at start-up; unknown or duplicate
//! names are refused with an error naming the offender.

use std::sync::Arc;

use super::config::PolicyConfig;
use super::error::PolicyError;
use super::filters::{self, Filter};
use super::weighers::{self, Weigher};

/// What `nova.scheduler.weights.all_weighers`, Nova's default `weight_classes`, loads (nova 34;
/// `tests/from_nova.rs` compares it with the installed Nova).
pub const NOVA_ALL_WEIGHERS: [&str; 13] = [
    "BuildFailureWeigher",
    "CPUWeigher",
    "CrossCellWeigher",
    "DiskWeigher",
    "HypervisorVersionWeigher",
    "ImagePropertiesWeigher",
    "IoOpsWeigher",
    "MetricsWeigher",
    "NumInstancesWeigher",
    "PCIWeigher",
    "RAMWeigher",
    "ServerGroupSoftAffinityWeigher",
    "ServerGroupSoftAntiAffinityWeigher",
];

/// Builds one plugin from the policy configuration (e.g. to read its multiplier).
pub type Factory<T> = Arc<dyn Fn(&PolicyConfig) -> Box<T> + Send + Sync>;

/// The plugins of one extension point, by name.
pub struct Registry<T: ?Sized> {
    kind: &'static str,
    /// Nova's name for "every plugin" (`all_filters`, `all_weighers`).
    all_alias: &'static str,
    factories: Vec<(&'static str, Factory<T>)>,
    /// Names the `all_*` alias leaves out (plugins Nova's alias does not load).
    outside_alias: Vec<&'static str>,
}

impl<T: ?Sized> Registry<T> {
    /// An empty registry of `kind` ("filter", "weigher").
    pub fn new(kind: &'static str, all_alias: &'static str) -> Self {
        Registry {
            kind,
            all_alias,
            factories: Vec::new(),
            outside_alias: Vec::new(),
        }
    }

    /// Adds a plugin that only runs when named: the `all_*` alias does not include it.
    pub fn register_outside_alias(
        &mut self,
        name: &'static str,
        factory: impl Fn(&PolicyConfig) -> Box<T> + Send + Sync + 'static,
    ) -> Result<(), PolicyError> {
        self.register(name, factory)?;
        self.outside_alias.push(name);
        Ok(())
    }

    /// Adds a plugin; refuses a name already registered.
    pub fn register(
        &mut self,
        name: &'static str,
        factory: impl Fn(&PolicyConfig) -> Box<T> + Send + Sync + 'static,
    ) -> Result<(), PolicyError> {
        if self.factories.iter().any(|(n, _)| *n == name) {
            return Err(PolicyError::Duplicate {
                kind: self.kind,
                name: name.to_string(),
            });
        }
        self.factories.push((name, Arc::new(factory)));
        Ok(())
    }

    /// Registered names, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.factories.iter().map(|(n, _)| *n)
    }

    /// Builds the named plugins in order. Nova's dotted paths
    /// (`nova.scheduler.weights.ram.RAMWeigher`) resolve by their last segment, and the
    /// `all_*` alias expands to every plugin; a name unknown or listed twice is refused.
    pub fn build(
        &self,
        names: &[String],
        config: &PolicyConfig,
    ) -> Result<Vec<Box<T>>, PolicyError> {
        let mut chosen: Vec<(&'static str, Factory<T>)> = Vec::new();
        for raw in names {
            let short = raw.rsplit('.').next().unwrap_or(raw);
            let entries: Vec<_> = if short == self.all_alias {
                self.factories
                    .iter()
                    .filter(|(n, _)| !self.outside_alias.contains(n))
                    .cloned()
                    .collect()
            } else {
                match self.factories.iter().find(|(n, _)| *n == short) {
                    Some(entry) => vec![entry.clone()],
                    None => {
                        return Err(PolicyError::Unknown {
                            kind: self.kind,
                            name: raw.clone(),
                            known: self.names().collect::<Vec<_>>().join(", "),
                        })
                    }
                }
            };
            for (name, factory) in entries {
                if chosen.iter().any(|(n, _)| *n == name) {
                    return Err(PolicyError::Duplicate {
                        kind: self.kind,
                        name: name.to_string(),
                    });
                }
                chosen.push((name, factory));
            }
        }
        Ok(chosen.into_iter().map(|(_, f)| f(config)).collect())
    }
}

/// Every built-in filter.
pub fn builtin_filters() -> Registry<dyn Filter> {
    let mut r = Registry::new("filter", "all_filters");
    type FilterFactory = fn(&PolicyConfig) -> Box<dyn Filter>;
    let entries: [(&'static str, FilterFactory); 27] = [
        (filters::ForceHostsFilter::NAME, |_| {
            Box::new(filters::ForceHostsFilter)
        }),
        (filters::IgnoreHostsFilter::NAME, |_| {
            Box::new(filters::IgnoreHostsFilter)
        }),
        (filters::RequestedDestinationFilter::NAME, |_| {
            Box::new(filters::RequestedDestinationFilter)
        }),
        (filters::AvailabilityZoneFilter::NAME, |_| {
            Box::new(filters::AvailabilityZoneFilter)
        }),
        (filters::ComputeFilter::NAME, |_| {
            Box::new(filters::ComputeFilter)
        }),
        (filters::CapacityFilter::NAME, |_| {
            Box::new(filters::CapacityFilter)
        }),
        (filters::ServerGroupAntiAffinityFilter::NAME, |_| {
            Box::new(filters::ServerGroupAntiAffinityFilter)
        }),
        (filters::ServerGroupAffinityFilter::NAME, |_| {
            Box::new(filters::ServerGroupAffinityFilter)
        }),
        (filters::AggregateInstanceExtraSpecsFilter::NAME, |_| {
            Box::new(filters::AggregateInstanceExtraSpecsFilter)
        }),
        (filters::AggregateImagePropertiesIsolation::NAME, |c| {
            Box::new(filters::AggregateImagePropertiesIsolation::new(c))
        }),
        (filters::AggregateMultiTenancyIsolation::NAME, |_| {
            Box::new(filters::AggregateMultiTenancyIsolation)
        }),
        (filters::AllHostsFilter::NAME, |_| {
            Box::new(filters::AllHostsFilter)
        }),
        (filters::ImagePropertiesFilter::NAME, |c| {
            Box::new(filters::ImagePropertiesFilter::new(c))
        }),
        (filters::ComputeCapabilitiesFilter::NAME, |_| {
            Box::new(filters::ComputeCapabilitiesFilter)
        }),
        (filters::IoOpsFilter::NAME, |c| {
            Box::new(filters::IoOpsFilter::new(c))
        }),
        (filters::AggregateIoOpsFilter::NAME, |c| {
            Box::new(filters::AggregateIoOpsFilter::new(c))
        }),
        (filters::NumInstancesFilter::NAME, |c| {
            Box::new(filters::NumInstancesFilter::new(c))
        }),
        (filters::AggregateNumInstancesFilter::NAME, |c| {
            Box::new(filters::AggregateNumInstancesFilter::new(c))
        }),
        (filters::AggregateTypeAffinityFilter::NAME, |_| {
            Box::new(filters::AggregateTypeAffinityFilter)
        }),
        (filters::DifferentHostFilter::NAME, |_| {
            Box::new(filters::DifferentHostFilter)
        }),
        (filters::SameHostFilter::NAME, |_| {
            Box::new(filters::SameHostFilter)
        }),
        (filters::SimpleCIDRAffinityFilter::NAME, |_| {
            Box::new(filters::SimpleCIDRAffinityFilter)
        }),
        (filters::IsolatedHostsFilter::NAME, |c| {
            Box::new(filters::IsolatedHostsFilter::new(c))
        }),
        (filters::JsonFilter::NAME, |_| Box::new(filters::JsonFilter)),
        (filters::NumaTopologyFilter::NAME, |c| {
            Box::new(filters::NumaTopologyFilter::new(c))
        }),
        (filters::PciPassthroughFilter::NAME, |c| {
            Box::new(filters::PciPassthroughFilter::new(c))
        }),
        (filters::MetricsFilter::NAME, |c| {
            Box::new(filters::MetricsFilter::new(c))
        }),
    ];
    for (name, factory) in entries {
        r.register(name, factory)
            .expect("built-in filter names are distinct");
    }
    // Not one of Nova's filters: `all_filters` does not load it; `[flex] enabled` adds it.
    r.register_outside_alias(filters::FlexFilter::NAME, |_| -> Box<dyn Filter> {
        Box::new(filters::FlexFilter)
    })
    .expect("built-in filter names are distinct");
    r
}

/// Every built-in weigher, each taking its multiplier from the configuration: the rows of
/// the resource table, then the rows of the soft server-group table (Nova's order).
pub fn builtin_weighers() -> Registry<dyn Weigher> {
    use weighers::*;
    let mut r: Registry<dyn Weigher> = Registry::new("weigher", "all_weighers");
    for spec in &RESOURCE_WEIGHERS {
        r.register(spec.name, move |c| -> Box<dyn Weigher> {
            Box::new(ResourceWeigher::new(spec, c))
        })
        .expect("built-in weigher names are distinct");
    }
    for spec in &GROUP_WEIGHERS {
        r.register(spec.name, move |c| -> Box<dyn Weigher> {
            Box::new(SoftGroupWeigher::new(spec, c))
        })
        .expect("built-in weigher names are distinct");
    }
    for spec in &NODE_RECORD_WEIGHERS {
        r.register(spec.name, move |c| -> Box<dyn Weigher> {
            Box::new(NodeRecordWeigher::new(spec, c))
        })
        .expect("built-in weigher names are distinct");
    }
    r.register(CrossCellWeigher::NAME, |c| -> Box<dyn Weigher> {
        Box::new(CrossCellWeigher::new(c))
    })
    .expect("built-in weigher names are distinct");
    r.register(MetricsWeigher::NAME, |c| -> Box<dyn Weigher> {
        Box::new(MetricsWeigher::new(c))
    })
    .expect("built-in weigher names are distinct");
    r.register(IdleWeigher::IMAGE_PROPERTIES, |c| -> Box<dyn Weigher> {
        Box::new(IdleWeigher::image_properties(c))
    })
    .expect("built-in weigher names are distinct");
    // Not one of Nova's weighers: `all_weighers` does not load it.
    r.register_outside_alias(HostNameWeigher::NAME, |c| -> Box<dyn Weigher> {
        Box::new(HostNameWeigher::new(c))
    })
    .expect("built-in weigher names are distinct");
    // Not one of Nova's either; `[flex] enabled` adds it.
    r.register_outside_alias(FlexWeigher::NAME, |c| -> Box<dyn Weigher> {
        Box::new(FlexWeigher::new(c))
    })
    .expect("built-in weigher names are distinct");
    r
}

#[cfg(test)]
mod tests {
    use super::super::config::{DEFAULT_FILTERS, DEFAULT_WEIGHERS};
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn builds_every_default_in_order() {
        let cfg = PolicyConfig::default();
        let f = builtin_filters().build(&cfg.enabled_filters, &cfg).unwrap();
        assert_eq!(
            f.iter().map(|f| f.name()).collect::<Vec<_>>(),
            DEFAULT_FILTERS
        );
        let w = builtin_weighers().build(&cfg.weight_classes, &cfg).unwrap();
        assert_eq!(
            w.iter().map(|w| w.name()).collect::<Vec<_>>(),
            DEFAULT_WEIGHERS
        );
        assert_eq!(w[3].multiplier(), -1.0);
    }

    #[test]
    fn accepts_novas_dotted_paths_and_all_alias() {
        let cfg = PolicyConfig::default();
        let w = builtin_weighers()
            .build(&names(&["nova.scheduler.weights.ram.RAMWeigher"]), &cfg)
            .unwrap();
        assert_eq!(w[0].name(), "RAMWeigher");
        let all = builtin_weighers()
            .build(&names(&["nova.scheduler.weights.all_weighers"]), &cfg)
            .unwrap();
        // Nova's thirteen, so that a default Nova configuration ranks as Nova does.
        let mut all_names: Vec<&str> = all.iter().map(|w| w.name()).collect();
        all_names.sort();
        assert_eq!(all_names, NOVA_ALL_WEIGHERS, "Nova's all_weighers (sorted)");
        assert!(all.iter().all(|w| w.name() != "HostNameWeigher"));
        assert!(DEFAULT_WEIGHERS.iter().all(|d| all_names.contains(d)));
        let named = builtin_weighers()
            .build(&names(&["nova.tests.fixtures.nova.HostNameWeigher"]), &cfg)
            .unwrap();
        assert_eq!(named[0].name(), "HostNameWeigher", "only runs when named");
    }

    #[test]
    fn refuses_unknown_and_duplicate_names() {
        let cfg = PolicyConfig::default();
        let cases: [(&[&str], PolicyError); 3] = [
            (
                &["ComputeFilter", "RamFilter"],
                PolicyError::Unknown {
                    kind: "filter",
                    name: "RamFilter".into(),
                    known: builtin_filters().names().collect::<Vec<_>>().join(", "),
                },
            ),
            (
                &["ComputeFilter", "ComputeFilter"],
                PolicyError::Duplicate {
                    kind: "filter",
                    name: "ComputeFilter".into(),
                },
            ),
            (
                &["CapacityFilter", "all_filters"],
                PolicyError::Duplicate {
                    kind: "filter",
                    name: "CapacityFilter".into(),
                },
            ),
        ];
        for (list, want) in cases {
            let err = builtin_filters().build(&names(list), &cfg).err().unwrap();
            assert_eq!(err, want, "{list:?}");
        }
        let err = builtin_filters()
            .build(&names(&["RamFilter"]), &cfg)
            .err()
            .unwrap();
        assert!(
            err.to_string().starts_with("unknown filter \"RamFilter\""),
            "{err}"
        );
    }

    #[test]
    fn refuses_registering_a_name_twice() {
        let mut r = builtin_filters();
        let err = r
            .register(filters::CapacityFilter::NAME, |_| {
                Box::new(filters::CapacityFilter)
            })
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "filter \"CapacityFilter\" is named more than once"
        );
    }
}
