//! Nova's five resource weighers (`RAMWeigher`, `CPUWeigher`, `DiskWeigher`, `IoOpsWeigher`,
//! `NumInstancesWeigher`) as one weigher driven by a table, the way Kubernetes'
//! `resourceAllocationScorer` serves its scorers: each row names the weigher, the host value
//! it reads, Nova's `[filter_scheduler]` option for its multiplier and that option's default.

use super::Weigher;
use crate::domain::{ClassId, HostScan, HostState, RequestContext};
use crate::policy::config::PolicyConfig;

/// What a resource weigher reads from a host. An enum, not a function pointer: `weigh` runs
/// once per host and weigher, and a `match` inlines where an indirect call cannot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostValue {
    /// Free memory as Nova's `RAMWeigher` reads it (`free_ram_mb`): total − reserved − used,
    /// no allocation ratio ([`crate::domain::WeighBase`]).
    FreeMemoryMb,
    /// Free VCPU as Nova's `CPUWeigher` computes it: total × allocation ratio − (reserved +
    /// used).
    FreeVcpu,
    /// Free DISK_GB as Nova's `DiskWeigher` reads it (`free_disk_mb`, in GB): total −
    /// reserved − used, no allocation ratio.
    FreeDiskGb,
    /// Concurrent I/O-heavy operations.
    IoOps,
    /// Instances on the host.
    Instances,
}

impl HostValue {
    /// Nova's `minval` of the weigher that reads this value (`RAMWeigher`, `CPUWeigher`,
    /// `DiskWeigher` and `IoOpsWeigher` set `minval = 0`; `NumInstancesWeigher` none): a raw
    /// value below it counts as it, and it is the low end of the normalisation instead of the
    /// least value among the hosts (`nova/weights.py`, `normalize`). A host over its capacity
    /// (negative free memory) weighs as an empty one would not: as 0.
    #[inline]
    pub const fn minval(self) -> Option<f64> {
        match self {
            HostValue::FreeMemoryMb
            | HostValue::FreeVcpu
            | HostValue::FreeDiskGb
            | HostValue::IoOps => Some(0.0),
            HostValue::Instances => None,
        }
    }

    /// `v` raised to [`HostValue::minval`]: the minval when `v` is below it (or NaN), else
    /// `v`. One comparison: `f64::max`'s NaN handling costs several instructions per value in
    /// the fused scan, the hottest loop of `filter` (callgrind, docs/bench-history/2026-12-03-*).
    #[inline]
    pub fn raise(self, v: f64) -> f64 {
        match self.minval() {
            Some(min) if v > min => v,
            Some(min) => min,
            None => v,
        }
    }

    /// The value of `host`, raised to [`HostValue::minval`].
    #[inline]
    pub fn of(self, host: &HostState) -> f64 {
        let v = match self {
            HostValue::FreeMemoryMb => host.weigher_free(ClassId::MEMORY_MB.index()),
            HostValue::FreeVcpu => host.weigher_free(ClassId::VCPU.index()),
            HostValue::FreeDiskGb => host.weigher_free(ClassId::DISK_GB.index()),
            HostValue::IoOps => host.num_io_ops as f64,
            HostValue::Instances => return host.num_instances as f64,
        };
        self.raise(v)
    }

    /// The same value read from the host's scan row alone: equal to [`HostValue::of`] for a
    /// row built from that host when the row holds the value ([`HostValue::in_row`]).
    #[inline]
    pub fn of_scan(self, row: &HostScan) -> f64 {
        self.raise(self.of_scan_unraised(row))
    }

    /// [`HostValue::of_scan`] before the raise to [`HostValue::minval`] (never NaN): what the
    /// fused scan reads, raising afterwards only the columns whose least value is below it.
    #[inline]
    pub fn of_scan_unraised(self, row: &HostScan) -> f64 {
        match self {
            HostValue::FreeMemoryMb => row.free(ClassId::MEMORY_MB.index()) as f64,
            HostValue::FreeVcpu => row.free(ClassId::VCPU.index()) as f64,
            HostValue::FreeDiskGb => row.free(ClassId::DISK_GB.index()) as f64,
            HostValue::IoOps => row.num_io_ops as f64,
            HostValue::Instances => row.num_instances as f64,
        }
    }

    /// True when `row` holds this value ([`HostValue::of_scan`] is [`HostValue::of`]): always
    /// for I/O operations and instances; for the free amounts when the weighers' free amount is
    /// the capacity less the usage ([`HostScan::WEIGH_FROM_ROW`]).
    #[inline]
    pub fn in_row(self, row: &HostScan) -> bool {
        matches!(self, HostValue::IoOps | HostValue::Instances)
            || row.flags & HostScan::WEIGH_FROM_ROW != 0
    }

    /// The value of `host`, whose row is `row`: from the row when it holds it, else from the
    /// host (what the fused scan reads).
    #[inline]
    pub fn of_row(self, row: &HostScan, host: &HostState) -> f64 {
        if self.in_row(row) {
            self.of_scan(row)
        } else {
            self.of(host)
        }
    }
}

/// One row of [`RESOURCE_WEIGHERS`].
#[derive(Debug)]
pub struct ResourceWeigherSpec {
    /// The name in `weight_classes` (Nova's class name).
    pub name: &'static str,
    /// The raw value of a host (larger ranks higher under a positive multiplier).
    pub value: HostValue,
    /// Nova's option for the multiplier (`[filter_scheduler]`), the same key in `[policy]`.
    pub option: &'static str,
    /// The option's default in Nova, and in Parasol.
    pub default_multiplier: f64,
    /// Reads the option from the policy configuration.
    pub multiplier: fn(&PolicyConfig) -> f64,
}

/// Every resource weigher, in Nova's `all_weighers` order.
pub static RESOURCE_WEIGHERS: [ResourceWeigherSpec; 5] = [
    // Free memory (total − reserved − used, no allocation ratio): 1.0 spreads, negative
    // stacks.
    ResourceWeigherSpec {
        name: "RAMWeigher",
        value: HostValue::FreeMemoryMb,
        option: "ram_weight_multiplier",
        default_multiplier: 1.0,
        multiplier: |c| c.ram_weight_multiplier,
    },
    // Free VCPU (total × allocation ratio − reserved − used).
    ResourceWeigherSpec {
        name: "CPUWeigher",
        value: HostValue::FreeVcpu,
        option: "cpu_weight_multiplier",
        default_multiplier: 1.0,
        multiplier: |c| c.cpu_weight_multiplier,
    },
    // Free DISK_GB (total − reserved − used, no allocation ratio).
    ResourceWeigherSpec {
        name: "DiskWeigher",
        value: HostValue::FreeDiskGb,
        option: "disk_weight_multiplier",
        default_multiplier: 1.0,
        multiplier: |c| c.disk_weight_multiplier,
    },
    // Concurrent I/O-heavy operations: −1.0 prefers idle hosts.
    ResourceWeigherSpec {
        name: "IoOpsWeigher",
        value: HostValue::IoOps,
        option: "io_ops_weight_multiplier",
        default_multiplier: -1.0,
        multiplier: |c| c.io_ops_weight_multiplier,
    },
    // Instances on the host: off by default, negative spreads.
    ResourceWeigherSpec {
        name: "NumInstancesWeigher",
        value: HostValue::Instances,
        option: "num_instances_weight_multiplier",
        default_multiplier: 0.0,
        multiplier: |c| c.num_instances_weight_multiplier,
    },
];

/// A resource weigher: one row of [`RESOURCE_WEIGHERS`] with its configured multiplier.
#[derive(Clone, Copy, Debug)]
pub struct ResourceWeigher {
    /// Which resource, under which name.
    pub spec: &'static ResourceWeigherSpec,
    /// Normalised weights are multiplied by this.
    pub multiplier: f64,
}

impl ResourceWeigher {
    /// The weigher of `spec`, its multiplier read from `config`.
    pub fn new(spec: &'static ResourceWeigherSpec, config: &PolicyConfig) -> Self {
        ResourceWeigher {
            spec,
            multiplier: (spec.multiplier)(config),
        }
    }
}

impl Weigher for ResourceWeigher {
    fn name(&self) -> &'static str {
        self.spec.name
    }

    fn multiplier(&self) -> f64 {
        self.multiplier
    }

    fn weigh(&self, host: &HostState, _req: &RequestContext) -> f64 {
        self.spec.value.of(host)
    }

    fn scan_value(&self) -> Option<HostValue> {
        Some(self.spec.value)
    }

    fn minval(&self) -> Option<f64> {
        self.spec.value.minval()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Resources;

    type Case = (Resources, i64, i64, f64);

    /// Checks the row named `name`: its raw values on `cases` (used, num_instances,
    /// num_io_ops, want) of a 16 VCPU / 32,768 MB / 400 GB host, its option and default
    /// against the configuration, and that setting the option by Nova's name reaches it.
    fn check_row(name: &str, option: &str, default: f64, cases: [Case; 3]) {
        let spec = RESOURCE_WEIGHERS
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no row {name}"));
        assert_eq!(spec.option, option, "{name}");
        assert_eq!(spec.default_multiplier, default, "{name}");
        let defaults = PolicyConfig::default();
        let w = ResourceWeigher::new(spec, &defaults);
        assert_eq!((w.name(), w.multiplier()), (name, default));
        let set: PolicyConfig = toml::from_str(&format!("{option} = 2.5")).unwrap();
        assert_eq!(
            ResourceWeigher::new(spec, &set).multiplier(),
            2.5,
            "{option}"
        );

        let usable = Resources::new(16, 32768, 400);
        let req = RequestContext::with_demand("i", "f", Resources::new(1, 1, 1));
        for (used, instances, io_ops, want) in cases {
            let mut host = HostState::synthetic(1, usable, used);
            host.num_instances = instances;
            host.num_io_ops = io_ops;
            assert_eq!(
                w.weigh(&host, &req),
                want,
                "{name}: {used:?} {instances} {io_ops}"
            );
        }
    }

    #[test]
    fn ram_weigher_weighs_free_memory() {
        check_row(
            "RAMWeigher",
            "ram_weight_multiplier",
            1.0,
            [
                (Resources::ZERO, 0, 0, 32768.0),
                (Resources::new(16, 32000, 400), 3, 3, 768.0),
                (Resources::new(0, 32768, 0), 0, 0, 0.0),
            ],
        );
    }

    #[test]
    fn cpu_weigher_weighs_free_vcpus() {
        check_row(
            "CPUWeigher",
            "cpu_weight_multiplier",
            1.0,
            [
                (Resources::ZERO, 0, 0, 16.0),
                (Resources::new(10, 32000, 400), 3, 3, 6.0),
                (Resources::new(16, 0, 0), 0, 0, 0.0),
            ],
        );
    }

    #[test]
    fn disk_weigher_weighs_free_disk() {
        check_row(
            "DiskWeigher",
            "disk_weight_multiplier",
            1.0,
            [
                (Resources::ZERO, 0, 0, 400.0),
                (Resources::new(16, 32000, 150), 3, 3, 250.0),
                (Resources::new(0, 0, 400), 0, 0, 0.0),
            ],
        );
    }

    #[test]
    fn io_ops_weigher_weighs_io_ops() {
        check_row(
            "IoOpsWeigher",
            "io_ops_weight_multiplier",
            -1.0,
            [
                (Resources::ZERO, 0, 0, 0.0),
                (Resources::new(16, 32000, 150), 3, 2, 2.0),
                (Resources::ZERO, 9, 7, 7.0),
            ],
        );
    }

    #[test]
    fn num_instances_weigher_weighs_instances() {
        check_row(
            "NumInstancesWeigher",
            "num_instances_weight_multiplier",
            0.0,
            [
                (Resources::ZERO, 0, 0, 0.0),
                (Resources::new(16, 32000, 150), 3, 2, 3.0),
                (Resources::ZERO, 9, 7, 9.0),
            ],
        );
    }

    /// Nova's `RAMWeigher` and `DiskWeigher` weigh total − reserved − used, its `CPUWeigher`
    /// total × ratio − reserved − used: not the capacity the filters test, `(total −
    /// reserved) × ratio`. The scan reads them from the host when the row cannot say them,
    /// from the row when it can; both the same as `weigh`.
    #[test]
    fn free_amounts_are_nova_s_not_the_capacity_after_allocation_ratios() {
        use crate::domain::{ClassId, HostId, HostProfile, HostScan, Inventory};
        use std::sync::Arc;
        let host = |inv: [(i64, i64, f64); 3], used: Resources| {
            let classes = [ClassId::VCPU, ClassId::MEMORY_MB, ClassId::DISK_GB];
            let inventories = classes
                .into_iter()
                .zip(inv)
                .map(|(c, (total, reserved, ratio))| {
                    (c, Inventory::of(total).with(reserved, ratio))
                })
                .collect();
            let profile = HostProfile::new("h", "h", "u", "nova", inventories);
            let mut h = HostState::new(HostId(1), Arc::new(profile));
            h.used = used;
            h
        };
        let values = [
            HostValue::FreeVcpu,
            HostValue::FreeMemoryMb,
            HostValue::FreeDiskGb,
        ];
        // (inventories, used, Nova's free VCPU, memory, disk, the row holds them)
        let cases = [
            // 16 VCPU at 4.0 with 2 reserved: Nova 64 − 2 − 10, capacity 56 − 10.
            (
                [(16, 2, 4.0), (32768, 512, 1.5), (400, 10, 2.0)],
                Resources::new(10, 1024, 100),
                [52.0, 31232.0, 290.0],
                false,
            ),
            // Ratios below 1 and fractional VCPU: 7 × 1.3 − 1 − 3.
            (
                [(7, 1, 1.3), (4096, 0, 0.5), (100, 0, 0.75)],
                Resources::new(3, 1024, 10),
                [7.0 * 1.3 - 4.0, 3072.0, 90.0],
                false,
            ),
            // Over-committed past Nova's free amounts (an allocation ratio lowered): 0.
            (
                [(8, 0, 4.0), (4096, 512, 2.0), (100, 0, 1.5)],
                Resources::new(31, 5000, 120),
                [1.0, 0.0, 0.0],
                false,
            ),
            // Ratios of 1 (reserved or not), or an integral VCPU ratio with nothing reserved:
            // the room left, which the row holds.
            (
                [(16, 0, 4.0), (32768, 512, 1.0), (400, 10, 1.0)],
                Resources::new(10, 1024, 100),
                [54.0, 31232.0, 290.0],
                true,
            ),
        ];
        for (inv, used, want, exact) in cases {
            let h = host(inv, used);
            let row = HostScan::of(&h);
            assert_eq!(h.profile.weigh_base.row_exact, exact, "{inv:?}");
            for (value, want) in values.into_iter().zip(want) {
                assert_eq!(value.of(&h), want, "{value:?} {inv:?}");
                assert_eq!(value.in_row(&row), exact, "{value:?} {inv:?}");
                assert_eq!(value.of_row(&row, &h), want, "{value:?} {inv:?} row");
                if exact {
                    assert_eq!(value.of_scan(&row), want, "{value:?} {inv:?} row");
                }
            }
            assert!(HostValue::IoOps.in_row(&row) && HostValue::Instances.in_row(&row));
        }
    }

    #[test]
    fn the_table_holds_nova_s_five_resource_weighers_in_its_order() {
        let names: Vec<_> = RESOURCE_WEIGHERS.iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "RAMWeigher",
                "CPUWeigher",
                "DiskWeigher",
                "IoOpsWeigher",
                "NumInstancesWeigher"
            ]
        );
    }
}
