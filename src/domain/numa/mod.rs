//! NUMA topologies and PCI device pools, of the instance (the RequestSpec's `numa_topology`
//! and `pci_requests`) and of the host (`compute_nodes.numa_topology` and `pci_stats`), with
//! the part of Nova 34's logic its scheduler runs on them: `PciDeviceStats.support_requests`
//! (`pci`, docs/numa-pci.md) and `hardware.numa_fit_instance_to_host` (`fit`).
//!
//! # Layout
//! - this file: the types ([`InstanceNuma`], [`HostNuma`], [`PciRequest`], [`PciPools`]) and
//!   [`NumaPciRequest`], what one request carries, computed once per call.
//! - `pci`: the pools' filtering per request (spec, NUMA policy, PFs, VDPA, remote-managed,
//!   live-migratable) and their consumption.
//! - `fit`: the cell fitting (memory, pagesizes, CPUs, allocation limits), the pinning of
//!   dedicated CPUs with their thread policies, and the host's usage after an instance.

pub mod fit;
pub mod pci;
pub mod pyset;

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A set of CPU ids (Nova's `SetOfIntegersField`), iterated in ascending order.
pub type CpuSet = BTreeSet<u32>;

/// `hw:cpu_policy` of an instance cell (Nova's `CPUAllocationPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuAllocation {
    Dedicated,
    Shared,
    Mixed,
}

impl CpuAllocation {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "dedicated" => Some(Self::Dedicated),
            "shared" => Some(Self::Shared),
            "mixed" => Some(Self::Mixed),
            _ => None,
        }
    }

    /// Dedicated or mixed: the cell has pinned CPUs.
    pub fn pins(policy: Option<Self>) -> bool {
        matches!(policy, Some(Self::Dedicated | Self::Mixed))
    }

    /// Shared, mixed or unset: the cell has floating CPUs.
    pub fn floats(policy: Option<Self>) -> bool {
        matches!(policy, None | Some(Self::Shared | Self::Mixed))
    }
}

/// `hw:cpu_thread_policy` (Nova's `CPUThreadAllocationPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ThreadPolicy {
    Prefer,
    Isolate,
    Require,
}

impl ThreadPolicy {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "prefer" => Some(Self::Prefer),
            "isolate" => Some(Self::Isolate),
            "require" => Some(Self::Require),
            _ => None,
        }
    }
}

/// `hw:pci_numa_affinity_policy` of a PCI request (Nova's `PCINUMAAffinityPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PciNumaPolicy {
    Required,
    Legacy,
    Preferred,
    Socket,
}

impl PciNumaPolicy {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "required" => Some(Self::Required),
            "legacy" => Some(Self::Legacy),
            "preferred" => Some(Self::Preferred),
            "socket" => Some(Self::Socket),
            _ => None,
        }
    }
}

/// The page sizes an instance cell may ask (`hw:mem_page_size`): small, large, any, or a
/// size in KiB.
pub const MEMPAGES_SMALL: i64 = -1;
pub const MEMPAGES_LARGE: i64 = -2;
pub const MEMPAGES_ANY: i64 = -3;

/// One guest NUMA cell (Nova's `InstanceNUMACell`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InstanceCell {
    pub id: i64,
    /// Floating vCPUs.
    pub cpuset: CpuSet,
    /// Dedicated vCPUs.
    pub pcpuset: CpuSet,
    /// MiB.
    pub memory: i64,
    /// `None` or 0: no page size asked.
    pub pagesize: Option<i64>,
    pub cpu_policy: Option<CpuAllocation>,
    pub cpu_thread_policy: Option<ThreadPolicy>,
    /// Host CPUs reserved for the emulator threads, once fitted.
    pub cpuset_reserved: Option<CpuSet>,
    /// vCPU → host CPU, once fitted.
    pub cpu_pinning: BTreeMap<u32, u32>,
}

/// A guest NUMA topology (Nova's `InstanceNUMATopology`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InstanceNuma {
    pub cells: Vec<InstanceCell>,
    /// `hw:emulator_threads_policy` (`share` or `isolate`).
    pub emulator_threads_policy: Option<String>,
}

impl InstanceNuma {
    /// `emulator_threads_isolated`: one more host CPU reserved, on the host cell of guest
    /// cell 0.
    pub fn emulator_threads_isolated(&self) -> bool {
        self.emulator_threads_policy.as_deref() == Some("isolate")
    }
}

/// One page size of a host cell (Nova's `NUMAPagesTopology`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Pages {
    pub size_kb: i64,
    pub total: i64,
    pub used: i64,
    pub reserved: i64,
}

impl Pages {
    pub fn free_kb(&self) -> i64 {
        (self.total - self.used - self.reserved) * self.size_kb
    }

    pub fn total_kb(&self) -> i64 {
        self.total * self.size_kb
    }
}

/// The networks a NUMA cell (or a request) has affinity to (Nova's `NetworkMetadata`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NetworkMetadata {
    pub physnets: BTreeSet<String>,
    pub tunneled: bool,
}

/// One host NUMA cell (Nova's `NUMACell`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HostCell {
    pub id: i64,
    /// CPUs for floating vCPUs (`cpu_shared_set`).
    pub cpuset: CpuSet,
    /// CPUs for dedicated vCPUs (`cpu_dedicated_set`).
    pub pcpuset: CpuSet,
    /// MiB.
    pub memory: i64,
    pub cpu_usage: i64,
    pub memory_usage: i64,
    pub pinned_cpus: CpuSet,
    pub siblings: Vec<CpuSet>,
    pub mempages: Vec<Pages>,
    pub network_metadata: Option<NetworkMetadata>,
    pub socket: Option<i64>,
    /// `pcpuset`, `pinned_cpus` and `siblings` in the order Nova's record lists them, which
    /// decides the order Python iterates the sets in (`pyset`); empty: ascending.
    pub order: CellOrder,
}

/// The CPU lists of a host cell as its record gives them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CellOrder {
    pub pcpuset: Vec<u32>,
    pub pinned_cpus: Vec<u32>,
    pub siblings: Vec<Vec<u32>>,
}

impl HostCell {
    /// Dedicated CPUs not pinned yet.
    pub fn free_pcpus(&self) -> CpuSet {
        self.pcpuset
            .difference(&self.pinned_cpus)
            .copied()
            .collect()
    }

    pub fn avail_memory(&self) -> i64 {
        self.memory - self.memory_usage
    }

    /// Some core has more than one thread.
    pub fn has_threads(&self) -> bool {
        self.siblings.iter().any(|s| s.len() > 1)
    }
}

/// A host's NUMA topology (Nova's `NUMATopology`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HostNuma {
    pub cells: Vec<HostCell>,
}

impl HostNuma {
    pub fn has_threads(&self) -> bool {
        self.cells.iter().any(HostCell::has_threads)
    }
}

/// One PCI request (Nova's `InstancePCIRequest`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PciRequest {
    pub count: i64,
    /// Alternatives: a pool matches when it matches one of them. Values as Nova keeps them
    /// (`ListOfDictOfNullableStringsField`).
    pub spec: Vec<BTreeMap<String, Option<String>>>,
    /// Set for a flavor's alias (`pci_passthrough:alias`); `None` for a Neutron port.
    pub alias_name: Option<String>,
    pub request_id: Option<String>,
    pub requester_id: Option<String>,
    pub numa_policy: Option<PciNumaPolicy>,
}

/// A pool of equivalent free PCI devices (Nova's `PciDevicePool` as `to_dict` flattens it:
/// `product_id`, `vendor_id`, `numa_node` and every tag side by side).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PciPool {
    /// Every key but `count` (`numa_node` as a number or null).
    pub props: BTreeMap<String, serde_json::Value>,
    pub count: i64,
}

impl PciPool {
    /// The pool's `numa_node`, when it has one.
    pub fn numa_node(&self) -> Option<i64> {
        self.props
            .get("numa_node")
            .and_then(serde_json::Value::as_i64)
    }
}

/// A host's PCI device pools (Nova's `PciDeviceStats.pools`), in Nova's order: by number of
/// keys, stable.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PciPools {
    pub pools: Vec<PciPool>,
}

impl PciPools {
    /// The pools of `pools`, sorted as Nova's `PciDeviceStats.__init__` sorts them.
    pub fn new(mut pools: Vec<PciPool>) -> Self {
        // Nova's dicts hold the keys, `count` and the flattened tags: `len(pool)`.
        pools.sort_by_key(|p| p.props.len() + 1);
        PciPools { pools }
    }

    /// Free devices over the pools.
    pub fn free(&self) -> i64 {
        self.pools.iter().map(|p| p.count).sum()
    }
}

/// What one request asks of NUMA cells and PCI devices, read once per call; `None` on the
/// context of a request that asks neither (the filters then skip it).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NumaPciRequest {
    pub numa: Option<Arc<InstanceNuma>>,
    pub pci: Vec<PciRequest>,
    /// The RequestSpec's `network_metadata` (physnets and tunneled networks of the ports).
    pub network_metadata: Option<NetworkMetadata>,
    /// `hw:cpu_policy` / `hw_cpu_policy` and `hw:cpu_thread_policy` / `hw_cpu_thread_policy`
    /// as flavor and image give them: `NUMATopologyFilter._satisfies_cpu_policy` reads both.
    pub cpu_dedicated_asked: bool,
    pub thread_require_asked: bool,
}

impl NumaPciRequest {
    /// True when the request asks nothing of NUMA cells or PCI devices.
    pub fn is_empty(&self) -> bool {
        self.numa.is_none() && self.pci.is_empty()
    }
}

/// Allocation ratios the shared CPUs and memory of a cell are limited by (Nova's
/// `NUMATopologyLimits`: the host's `cpu_allocation_ratio`, `ram_allocation_ratio`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NumaLimits {
    pub cpu_allocation_ratio: f64,
    pub ram_allocation_ratio: f64,
    pub network_metadata: Option<NetworkMetadata>,
}

impl NumaLimits {
    /// The limits `NUMATopologyFilter` sets for `req` on `host`: the allocation ratios of
    /// its inventories (Nova's `HostState` ratios, which nova-compute reports to Placement
    /// too), 1.0 where it has no such class, and the request's networks.
    pub fn of_host(host: &super::host::HostState, req: &NumaPciRequest) -> Self {
        let ratio = |c: super::classes::ClassId| {
            host.profile
                .inventory(c)
                .map_or(1.0, |i| i.allocation_ratio)
        };
        NumaLimits {
            cpu_allocation_ratio: ratio(super::classes::ClassId::VCPU),
            ram_allocation_ratio: ratio(super::classes::ClassId::MEMORY_MB),
            network_metadata: req.network_metadata.clone(),
        }
    }
}
