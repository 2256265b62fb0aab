//! Nova 34's `NUMATopologyFilter` (`numa_topology_filter.py`): a host passes a request with a
//! NUMA topology when the topology fits its cells (`hardware.numa_fit_instance_to_host`,
//! `domain::numa::fit`) under its allocation ratios, PCI requests and networks included; a
//! host with no NUMA topology passes no such request; `dedicated` CPUs with the `require`
//! thread policy need a host with SMT threads. Per host: Parasol's flat candidate is the host
//! itself (a request on provider trees is judged with its host's first candidate, the one it
//! would claim). The earlier instances of a multi-create are fitted and added to the host's
//! usage first, as Nova's `HostState.consume_from_request` does.

use super::{Filter, FilterEnv};
use crate::domain::numa::fit::{add_usage, fit_instance, PciFit};
use crate::domain::numa::pci::ProviderMapping;
use crate::domain::numa::{HostNuma, NumaLimits, NumaPciRequest, PciPools};
use crate::domain::{ClassId, HostState, RequestContext};
use crate::policy::config::PolicyConfig;

/// Keeps hosts whose NUMA cells can take the instance's topology.
pub struct NumaTopologyFilter {
    pack: bool,
}

impl NumaTopologyFilter {
    pub const NAME: &'static str = "NUMATopologyFilter";

    pub fn new(config: &PolicyConfig) -> Self {
        NumaTopologyFilter {
            pack: config.packing_host_numa_cells_allocation_strategy,
        }
    }
}

/// The allocation ratios of `host` as its inventories give them (Nova's `HostState`
/// ratios, which nova-compute reports to Placement too), 1.0 where it has no such class.
pub fn limits(host: &HostState, req: &NumaPciRequest) -> NumaLimits {
    let ratio = |c: ClassId| {
        host.profile
            .inventory(c)
            .map_or(1.0, |i| i.allocation_ratio)
    };
    NumaLimits {
        cpu_allocation_ratio: ratio(ClassId::VCPU),
        ram_allocation_ratio: ratio(ClassId::MEMORY_MB),
        network_metadata: req.network_metadata.clone(),
    }
}

/// The mapping of the candidate a request is judged on: its host's first candidate on
/// provider trees, none (no group of a PCI request) on a flat host.
pub fn candidate_mapping(host: &HostState, req: &RequestContext) -> ProviderMapping {
    let first = req.trees.as_deref().and_then(|t| t.first(host.uuid()));
    let Some(mappings) = first
        .and_then(|c| c.body.get("mappings"))
        .and_then(|m| m.as_object())
    else {
        return ProviderMapping::new();
    };
    mappings
        .iter()
        .map(|(group, rps)| {
            let rps = rps
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r.as_str().map(str::to_string));
            (group.clone(), rps.collect())
        })
        .collect()
}

/// The instances of this call already claimed on `host` (a multi-create's earlier ones, all
/// with the same request).
pub fn earlier_instances(host: &HostState, req: &RequestContext) -> i64 {
    let Some(taken) = req.call_claims.as_ref().and_then(|c| c.on(host.id)) else {
        return 0;
    };
    req.demand
        .nonzero()
        .map(|(class, amount)| taken.get(class) / amount)
        .min()
        .unwrap_or(0)
}

/// The host's NUMA cells and PCI pools after the call's earlier instances on it, as Nova's
/// `consume_from_request` leaves them.
pub fn after_earlier(
    host: &HostState,
    req: &RequestContext,
    numa_pci: &NumaPciRequest,
    pack: bool,
) -> (Option<HostNuma>, PciPools) {
    let facts = host.profile.facts.as_deref();
    let mut numa = facts.and_then(|f| f.numa.as_deref()).cloned();
    let mut pools = facts.map(|f| (*f.pci).clone()).unwrap_or_default();
    let mapping = candidate_mapping(host, req);
    let limits = limits(host, numa_pci);
    for _ in 0..earlier_instances(host, req) {
        let mut cells = Vec::new();
        if let (Some(n), Some(inst)) = (numa.as_ref(), numa_pci.numa.as_deref()) {
            let pci = PciFit {
                requests: &numa_pci.pci,
                pools: Some(&pools),
                mapping: Some(&mapping),
            };
            if let Some(fitted) = fit_instance(n, inst, Some(&limits), pci, pack) {
                numa = Some(add_usage(n, &fitted));
                cells = fitted.cells;
            }
        }
        if !numa_pci.pci.is_empty() {
            pools.apply(&numa_pci.pci, Some(&mapping), &cells, numa.as_ref());
        }
    }
    (numa, pools)
}

impl Filter for NumaTopologyFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        req.numa_pci
            .as_deref()
            .is_some_and(|n| n.numa.is_some() || (n.cpu_dedicated_asked && n.thread_require_asked))
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        let Some(np) = req.numa_pci.as_deref() else {
            return true;
        };
        // Nova's topologies are false when they have no cell.
        let inst = np.numa.as_deref().filter(|i| !i.cells.is_empty());
        let (numa, pools) = after_earlier(host, req, np, self.pack);
        let Some(numa) = numa.filter(|n| !n.cells.is_empty()) else {
            return inst.is_none();
        };
        if np.cpu_dedicated_asked && np.thread_require_asked && !numa.has_threads() {
            return false;
        }
        let Some(inst) = inst else {
            return true;
        };
        let mapping = candidate_mapping(host, req);
        let pci = PciFit {
            requests: &np.pci,
            pools: Some(&pools),
            mapping: Some(&mapping),
        };
        fit_instance(&numa, inst, Some(&limits(host, np)), pci, self.pack).is_some()
    }
}
