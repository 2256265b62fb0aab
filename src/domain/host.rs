//! The state of one compute host as a scheduler sees it: what changes rarely (its names,
//! inventory, traits and aggregates: [`HostProfile`], shared between copies) and what changes
//! with every claim and report (usage, liveness: [`HostState`]).

use super::classes::ClassId;
use super::markers::{Aggregates, Traits};
use super::resources::{Inventory, Resources};
use super::usage::MeasuredUsage;
use serde::Serialize;
use std::sync::Arc;

/// The ledger's row id of a host; also its fixed order for `first_fit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct HostId(pub i64);

/// What Nova's records say of a compute node beyond Placement (nova-scheduler's `HostState`
/// reads the same from the cell database): what Nova's capability filters check.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ComputeFacts {
    pub hypervisor_type: String,
    pub hypervisor_version: i64,
    /// `(architecture, hypervisor type, VM mode)` triples the node can run.
    pub supported_instances: Vec<(String, String, String)>,
    /// The node's `cpu_info` JSON, when it reports one.
    pub cpu_info: Option<serde_json::Value>,
    pub has_numa_topology: bool,
    /// Pools of PCI devices the node offers.
    pub pci_pools: usize,
    /// The cell the node lives in (the Selection's `cell_uuid`).
    pub cell_uuid: Option<String>,
    /// The nova-compute service's version.
    pub service_version: i64,
    /// The node's `host_ip` (`SimpleCIDRAffinityFilter`), when it reports a valid one.
    pub host_ip: Option<std::net::IpAddr>,
    /// Builds that failed on the node since its last success, from its `stats`
    /// (`BuildFailureWeigher`).
    pub failed_builds: i64,
    /// Free PCI devices over its pools (`PCIWeigher`).
    pub pci_free: i64,
    /// Its NUMA topology (`compute_nodes.numa_topology`), usage and pinned CPUs included,
    /// as of the last read (`NUMATopologyFilter`); `None` when it reports none.
    pub numa: Option<Arc<super::numa::HostNuma>>,
    /// Its free PCI devices by pool (`compute_nodes.pci_stats`, `PciPassthroughFilter`).
    pub pci: Arc<super::numa::PciPools>,
}

/// What a host is: names, inventory, traits, aggregates. Changes when the host re-registers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostProfile {
    /// Nova's `service_host`: where nova-conductor sends the build.
    pub host: Arc<str>,
    /// Nova's `nodename`, Placement's provider name.
    pub node: Arc<str>,
    /// Nova's `compute_node_uuid`, Placement's provider uuid.
    pub uuid: Arc<str>,
    pub availability_zone: Arc<str>,
    /// The inventory of each class the host has, by class index.
    pub inventories: Vec<(ClassId, Inventory)>,
    /// `(total − reserved) × allocation_ratio` per class (0 for classes it lacks).
    #[serde(skip)]
    pub usable: Resources,
    /// Some class has a unit rule beyond Placement's defaults (min 1, step 1, no max).
    #[serde(skip)]
    pub unit_rules: bool,
    /// What Nova's resource weighers read of the host beside its usage.
    #[serde(skip)]
    pub weigh_base: WeighBase,
    pub traits: Traits,
    pub aggregates: Aggregates,
    /// Nova's records of the node, when Parasol reads them (`[nova_db]`).
    pub facts: Option<Arc<ComputeFacts>>,
    /// `host` was laid over from Nova's records and the ledger's row holds another name.
    #[serde(skip)]
    pub renamed: bool,
    /// This profile's part of a candidate as operator plugins are offered it, encoded once
    /// (`plugins::wire`); emptied whenever the profile is changed or copied.
    #[serde(skip)]
    pub encoded: EncodedOnce,
}

/// What operator plugins are offered of a [`HostProfile`] (`plugins::wire`), derived once on
/// first use. Not part of what a host is: it compares equal to any other, and a copy starts
/// empty (a copy is made to be changed). Whoever changes a profile in place goes through
/// [`HostState::profile_mut`] or calls [`EncodedOnce::clear`].
#[derive(Default)]
pub struct EncodedOnce(std::sync::OnceLock<Encoded>);

/// A profile's part of a candidate, encoded (`plugins::wire` writes and reads it): in one
/// allocation, so that offering a candidate reads one run of bytes, its unchanging keys as
/// JSON and, after them, its classes with usable capacity with their keys written out, so
/// that a call writes a candidate's amounts without reading the profile's [`Resources`] again.
pub struct Encoded {
    /// The unchanging keys up to `head`, then the classes' records.
    pub bytes: Box<[u8]>,
    pub head: u32,
    /// Bit `i` set: class `i` has a record; `None` when some class could not have one (its
    /// amounts are then written the long way).
    pub mask: Option<u32>,
}

impl EncodedOnce {
    /// The encoding, computed by `encode` the first time.
    pub fn get_or_init(&self, encode: impl FnOnce() -> Encoded) -> &Encoded {
        self.0.get_or_init(encode)
    }

    /// Forgets the encoding: the profile it came from changed.
    pub fn clear(&mut self) {
        self.0 = std::sync::OnceLock::new();
    }
}

impl Clone for EncodedOnce {
    fn clone(&self) -> Self {
        EncodedOnce::default()
    }
}

impl PartialEq for EncodedOnce {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for EncodedOnce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EncodedOnce")
    }
}

impl HostProfile {
    /// A profile with the given inventories (their usable capacity derived), no traits and
    /// no aggregates.
    pub fn new(
        host: &str,
        node: &str,
        uuid: &str,
        availability_zone: &str,
        inventories: Vec<(ClassId, Inventory)>,
    ) -> Self {
        let mut inventories = inventories;
        inventories.sort_by_key(|(c, _)| *c);
        inventories.dedup_by_key(|(c, _)| *c);
        let usable = Resources::from_pairs(inventories.iter().map(|(c, inv)| (*c, inv.usable())));
        let unit_rules = inventories
            .iter()
            .any(|(_, inv)| inv.min_unit > 1 || inv.step_size > 1 || inv.max_unit < inv.total);
        let inventory = |class: ClassId| {
            inventories
                .binary_search_by_key(&class, |(c, _)| *c)
                .ok()
                .map(|i| inventories[i].1)
        };
        let weigh_base = WeighBase::new(
            [
                inventory(ClassId::VCPU),
                inventory(ClassId::MEMORY_MB),
                inventory(ClassId::DISK_GB),
            ],
            &usable,
        );
        HostProfile {
            host: Arc::from(host),
            node: Arc::from(node),
            uuid: Arc::from(uuid),
            availability_zone: Arc::from(availability_zone),
            inventories,
            usable,
            unit_rules,
            weigh_base,
            traits: Traits::default(),
            aggregates: Aggregates::default(),
            facts: None,
            renamed: false,
            encoded: EncodedOnce::default(),
        }
    }

    /// The inventory of `class`, when the host has one.
    pub fn inventory(&self, class: ClassId) -> Option<&Inventory> {
        self.inventories
            .binary_search_by_key(&class, |(c, _)| *c)
            .ok()
            .map(|i| &self.inventories[i].1)
    }

    /// True when one allocation of `demand` respects every class' unit rules (min_unit,
    /// max_unit, step_size), as Placement checks an allocation candidate.
    pub fn admits(&self, demand: &Resources) -> bool {
        !self.unit_rules
            || demand
                .nonzero()
                .all(|(c, amount)| self.inventory(c).is_some_and(|inv| inv.admits(amount)))
    }
}

/// What Nova 34's `CPUWeigher`, `RAMWeigher` and `DiskWeigher` read of a host beside its
/// usage. They weigh nova-scheduler's `HostState`, which is read from the compute node
/// (`HostState._update_from_compute_node`, with Placement or without): `free_ram_mb` and
/// `free_disk_mb` (total − used, the resource tracker counting the `reserved_host_*` options
/// as used, no allocation ratio) and `vcpus_total × cpu_allocation_ratio − vcpus_used`
/// (`vcpus_used` counting `reserved_host_cpus`). From Placement's inventories (whose
/// `reserved` are those options) that is `total − reserved − used` for MEMORY_MB and DISK_GB
/// and `total × ratio − (reserved + used)` for VCPU: not the capacity the filters test,
/// `(total − reserved) × ratio` (docs/weighers.md).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WeighBase {
    /// VCPU `total × allocation_ratio`.
    pub vcpu_scaled: f64,
    /// VCPU `reserved`.
    pub vcpu_reserved: i64,
    /// MEMORY_MB `total − reserved`.
    pub memory_mb: i64,
    /// DISK_GB `total − reserved`.
    pub disk_gb: i64,
    /// For each of the three classes the weighers' free amount is `usable − used`, all of
    /// them below 2^52 (exact as `f64`): the host's [`HostScan`] row says it
    /// ([`HostScan::WEIGH_FROM_ROW`]). True with allocation ratios of 1, or with nothing
    /// reserved and an integral `total × ratio` (VCPU).
    pub row_exact: bool,
}

impl WeighBase {
    /// Below this, `i64` amounts convert to `f64` and subtract exactly.
    const EXACT: i64 = 1 << 52;

    /// The bases of the VCPU, MEMORY_MB and DISK_GB inventories (`None`: the host lacks
    /// the class; then Nova's total is 0) of a host of capacity `usable`.
    fn new(inventories: [Option<Inventory>; 3], usable: &Resources) -> Self {
        let [vcpu, memory, disk] = inventories.map(|inv| inv.unwrap_or_else(|| Inventory::of(0)));
        let unreserved = |inv: Inventory| inv.total.saturating_sub(inv.reserved);
        let base = WeighBase {
            vcpu_scaled: vcpu.total as f64 * vcpu.allocation_ratio,
            vcpu_reserved: vcpu.reserved,
            memory_mb: unreserved(memory),
            disk_gb: unreserved(disk),
            row_exact: false,
        };
        let small = |v: i64| v.unsigned_abs() < Self::EXACT as u64;
        let scaled = base.vcpu_scaled;
        let vcpu_exact = scaled.fract() == 0.0
            && scaled.abs() < Self::EXACT as f64
            && small(vcpu.reserved)
            && scaled as i64 - vcpu.reserved == usable.vcpu();
        WeighBase {
            row_exact: vcpu_exact
                && base.memory_mb == usable.memory_mb()
                && base.disk_gb == usable.disk_gb()
                && [usable.vcpu(), base.memory_mb, base.disk_gb]
                    .into_iter()
                    .all(small),
            ..base
        }
    }
}

/// One host's usage and liveness on top of its profile, read from the live table (or a
/// snapshot or sample of it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostState {
    pub id: HostId,
    pub profile: Arc<HostProfile>,
    /// Sum of the allocations on the host per class.
    pub used: Resources,
    pub num_instances: i64,
    pub num_io_ops: i64,
    pub up: bool,
    pub disabled: bool,
    pub forced_down: bool,
    /// When the host last reported, in milliseconds since the Unix epoch.
    pub last_seen_ms: i64,
    /// Measured usage (soft state, `table::usage`); `None` until a source reports one.
    pub measured: Option<Arc<MeasuredUsage>>,
}

impl HostState {
    /// A host with `profile`, nothing used, up and enabled.
    pub fn new(id: HostId, profile: Arc<HostProfile>) -> Self {
        HostState {
            id,
            profile,
            used: Resources::ZERO,
            num_instances: 0,
            num_io_ops: 0,
            up: true,
            disabled: false,
            forced_down: false,
            last_seen_ms: 0,
            measured: None,
        }
    }

    /// This copy's profile, to change (names, zone, marks); shared copies are not affected.
    pub fn profile_mut(&mut self) -> &mut HostProfile {
        let profile = Arc::make_mut(&mut self.profile);
        profile.encoded.clear();
        profile
    }

    /// Nova's `service_host`.
    pub fn host(&self) -> &Arc<str> {
        &self.profile.host
    }

    /// Nova's `nodename`.
    pub fn node(&self) -> &Arc<str> {
        &self.profile.node
    }

    /// Nova's `compute_node_uuid`.
    pub fn uuid(&self) -> &Arc<str> {
        &self.profile.uuid
    }

    pub fn availability_zone(&self) -> &Arc<str> {
        &self.profile.availability_zone
    }

    /// Capacity per class after reserved and allocation ratios.
    pub fn usable(&self) -> &Resources {
        &self.profile.usable
    }

    /// Room left in every class.
    pub fn free(&self) -> Resources {
        self.profile.usable - self.used
    }

    /// The free amount of class `i` (VCPU, MEMORY_MB or DISK_GB) Nova's `CPUWeigher`,
    /// `RAMWeigher` or `DiskWeigher` weighs ([`WeighBase`]), before their `minval`; for a
    /// host whose row says it, computed as the row computes it (the same value).
    #[inline]
    pub fn weigher_free(&self, i: usize) -> f64 {
        let base = &self.profile.weigh_base;
        if base.row_exact {
            return self.profile.usable.0[i].saturating_sub(self.used.0[i]) as f64;
        }
        let used = self.used.0[i];
        match i {
            0 => base.vcpu_scaled - base.vcpu_reserved.saturating_add(used) as f64,
            1 => base.memory_mb.saturating_sub(used) as f64,
            2 => base.disk_gb.saturating_sub(used) as f64,
            _ => 0.0,
        }
    }

    /// True when `demand` fits in the room left in every class and respects the host's unit
    /// rules (Placement's capacity test for one allocation candidate).
    ///
    /// Only the classes the demand asks for are compared, as Placement does: a class the
    /// request does not ask for never hides a host, even one over its capacity there (after an
    /// allocation ratio was lowered). It is also the scan's hot loop: the host's other classes
    /// are never read.
    pub fn fits(&self, demand: &Resources) -> bool {
        let usable = &self.profile.usable.0;
        let used = &self.used.0;
        // Classes past the process' class table are 0 in every demand.
        demand.0[..ClassId::count()]
            .iter()
            .enumerate()
            .all(|(i, &d)| {
                d == 0
                    || used[i]
                        .checked_add(d)
                        .is_some_and(|total| total <= usable[i])
            })
            && self.profile.admits(demand)
    }

    /// Fraction used of each class the host has capacity of, by class index (`None` for a
    /// class it lacks: such classes take no part in utilisation-based ranking).
    pub fn utilisation(&self) -> impl Iterator<Item = Option<f64>> + '_ {
        (0..ClassId::count()).map(|i| {
            let cap = self.profile.usable.0[i];
            (cap > 0).then(|| self.used.0[i] as f64 / cap as f64)
        })
    }

    /// Records a successful claim in this copy (Nova's `consume_from_request`).
    pub fn consume(&mut self, demand: &Resources) {
        self.used = self.used + *demand;
        self.num_instances += 1;
        self.num_io_ops += 1;
        if let Some(measured) = &mut self.measured {
            Arc::make_mut(measured).add_placed(demand);
        }
    }

    /// A host with the given capacity (VCPU, MEMORY_MB, DISK_GB with ratio 1, or whatever
    /// classes `usable` has) and usage, for tests, the simulator and the benchmark.
    pub fn synthetic(id: i64, usable: Resources, used: Resources) -> Self {
        let name = format!("host{id}");
        let inventories = usable
            .nonzero()
            .map(|(c, total)| (c, Inventory::of(total)))
            .collect();
        let uuid = format!("00000000-0000-4000-8000-{id:012}");
        let profile = HostProfile::new(&name, &name, &uuid, "nova", inventories);
        HostState {
            used,
            ..HostState::new(HostId(id), Arc::new(profile))
        }
    }
}

/// How many classes (the first, by index: VCPU, MEMORY_MB, DISK_GB, PCPU) a [`HostScan`] row
/// carries. A request that asks for a class beyond them is checked on the [`HostState`].
pub const SCAN_CLASSES: usize = 4;

/// The part of a [`HostState`] a full scan reads, copied into one small row (96 bytes) kept
/// beside the host in the live table: the capacity test of the first [`SCAN_CLASSES`]
/// classes, the compute state and heartbeat, and the resource weighers' values, with no
/// pointer to follow. The table rebuilds a host's row with [`HostScan::of`] whenever the host
/// changes, so a row always says what its host says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostScan {
    /// `used` of the first [`SCAN_CLASSES`] classes.
    pub used: [i64; SCAN_CLASSES],
    /// `usable` of the first [`SCAN_CLASSES`] classes.
    pub usable: [i64; SCAN_CLASSES],
    pub last_seen_ms: i64,
    pub num_io_ops: i64,
    pub num_instances: i64,
    /// The host's traits' [`super::markers::MarkSet::low_mask`] (a request's forbidden
    /// `COMPUTE_STATUS_DISABLED` among them).
    pub traits: u32,
    /// [`HostScan::SERVICE_OK`], [`HostScan::UNIT_RULES`] and [`HostScan::WEIGH_FROM_ROW`].
    pub flags: u8,
}

impl HostScan {
    /// Up, enabled and not forced down (ComputeFilter's state test, heartbeat aside).
    pub const SERVICE_OK: u8 = 1;
    /// The profile has unit rules ([`HostProfile::admits`] must be asked).
    pub const UNIT_RULES: u8 = 2;
    /// The resource weighers' free amounts are [`HostScan::free`] ([`WeighBase::row_exact`]);
    /// without it they are read from the host ([`HostState::weigher_free`]).
    pub const WEIGH_FROM_ROW: u8 = 4;

    /// The row of `host`.
    #[inline]
    pub fn of(host: &HostState) -> HostScan {
        let mut used = [0; SCAN_CLASSES];
        let mut usable = [0; SCAN_CLASSES];
        used.copy_from_slice(&host.used.0[..SCAN_CLASSES]);
        usable.copy_from_slice(&host.profile.usable.0[..SCAN_CLASSES]);
        let mut flags = 0;
        if host.up && !host.disabled && !host.forced_down {
            flags |= Self::SERVICE_OK;
        }
        if host.profile.unit_rules {
            flags |= Self::UNIT_RULES;
        }
        if host.profile.weigh_base.row_exact {
            flags |= Self::WEIGH_FROM_ROW;
        }
        HostScan {
            used,
            usable,
            last_seen_ms: host.last_seen_ms,
            num_io_ops: host.num_io_ops,
            num_instances: host.num_instances,
            traits: host.profile.traits.low_mask(),
            flags,
        }
    }

    /// Room left in class `i` (below [`SCAN_CLASSES`]), as [`HostState::free`] computes it.
    #[inline]
    pub fn free(&self, i: usize) -> i64 {
        self.usable[i].saturating_sub(self.used[i])
    }

    /// True when `amount` more of class `i` fits, as [`HostState::fits`] compares a class.
    #[inline]
    pub fn has_room(&self, i: usize, amount: i64) -> bool {
        self.used[i]
            .checked_add(amount)
            .is_some_and(|total| total <= self.usable[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_checks_room_in_every_class_and_the_unit_rules() {
        let mut host = HostState::synthetic(1, Resources::new(8, 1024, 10), Resources::ZERO);
        assert!(host.fits(&Resources::new(8, 1024, 10)));
        assert!(!host.fits(&Resources::new(1, 1, 11)));
        let pcpu = Resources::from_pairs([(ClassId::PCPU, 1)]);
        assert!(!host.fits(&pcpu), "a class the host lacks never fits");
        let mut inventories = host.profile.inventories.clone();
        inventories[0].1.step_size = 2;
        host.profile = Arc::new(HostProfile::new("h", "h", "u", "nova", inventories));
        assert!(
            !host.fits(&Resources::new(3, 1, 1)),
            "3 VCPU is not a step of 2"
        );
        assert!(host.fits(&Resources::new(4, 1, 1)));
    }

    #[test]
    fn a_class_the_request_does_not_ask_for_never_hides_a_host() {
        // Disk overcommitted (an allocation ratio lowered after the fact): Placement still
        // lists the host for a request without disk, and so does Parasol.
        let host = HostState::synthetic(1, Resources::new(8, 1024, 10), Resources::new(0, 0, 12));
        assert!(host.fits(&Resources::new(2, 512, 0)));
        assert!(!host.fits(&Resources::new(2, 512, 1)));
        let overflow = Resources::new(i64::MAX, 0, 0);
        let full = HostState::synthetic(2, Resources::new(8, 1024, 10), Resources::new(1, 0, 0));
        assert!(!full.fits(&overflow), "a sum past i64 never fits");
    }

    #[test]
    fn utilisation_skips_classes_without_capacity() {
        let host = HostState::synthetic(1, Resources::new(10, 0, 20), Resources::new(5, 0, 5));
        let u: Vec<_> = host.utilisation().take(3).collect();
        assert_eq!(u, [Some(0.5), None, Some(0.25)]);
    }
}
