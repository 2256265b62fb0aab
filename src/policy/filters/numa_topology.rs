//! Nova 34's `NUMATopologyFilter` (`numa_topology_filter.py`): a host passes a request with a
//! NUMA topology when the topology fits its cells (`hardware.numa_fit_instance_to_host`,
//! `domain::numa::fit`) under its allocation ratios, PCI requests and networks included; a
//! host with no NUMA topology passes no such request; `dedicated` CPUs with the `require`
//! thread policy need a host with SMT threads. Per allocation candidate, as Nova's
//! `CandidateFilterMixin`: a host passes when one of its candidates fits (a flat host's one
//! candidate is the host itself; on provider trees each of Placement's candidates is tried
//! with its `mappings`), and [`first_fit`] names the candidate claimed. The earlier
//! instances of a multi-create are fitted and added to the host's usage first, each with the
//! candidate it claimed, as Nova's `HostState.consume_from_request` does.

use super::{Filter, FilterEnv};
use crate::domain::numa::fit::{add_usage, fit_instance, PciFit};
use crate::domain::numa::pci::ProviderMapping;
use crate::domain::numa::{HostNuma, InstanceNuma, NumaLimits, NumaPciRequest, PciPools};
use crate::domain::{HostState, RequestContext};
use crate::policy::config::PolicyConfig;
use serde_json::Value;

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

/// The `mappings` of an allocation request (Placement's candidate): each request group's
/// providers.
pub fn mapping_of(body: &Value) -> ProviderMapping {
    let Some(mappings) = body.get("mappings").and_then(Value::as_object) else {
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

/// The candidates `req` is judged on at `host`, as their mappings: Placement's, in its
/// order, on provider trees; the host itself (no group mapped) on a flat host.
pub fn candidate_mappings(host: &HostState, req: &RequestContext) -> Vec<ProviderMapping> {
    match req.trees.as_deref() {
        Some(trees) => trees
            .of_host(host.uuid())
            .iter()
            .map(|c| mapping_of(&c.body))
            .collect(),
        None => vec![ProviderMapping::new()],
    }
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

/// The mapping each of the call's earlier instances on `host` claimed with: on provider
/// trees the candidate it claimed (Nova's request group mapping of the claimed allocation
/// request), on a flat host none.
fn earlier_mappings(host: &HostState, req: &RequestContext) -> Vec<ProviderMapping> {
    match (req.trees.is_some(), req.call_claims.as_deref()) {
        (true, Some(claims)) => claims.candidates_on(host.id).map(mapping_of).collect(),
        (true, None) => Vec::new(),
        (false, _) => vec![ProviderMapping::new(); earlier_instances(host, req).max(0) as usize],
    }
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
    let limits = NumaLimits::of_host(host, numa_pci);
    for mapping in earlier_mappings(host, req) {
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

/// One host as the two filters judge its candidates: its cells and pools after the call's
/// earlier instances, the request and the host's allocation limits.
pub struct Judged<'a> {
    np: &'a NumaPciRequest,
    /// The instance's topology, `None` when it has none (or no cell: Nova's false).
    inst: Option<&'a InstanceNuma>,
    numa: Option<HostNuma>,
    pools: PciPools,
    limits: NumaLimits,
    pack: bool,
}

impl<'a> Judged<'a> {
    pub fn new(
        host: &HostState,
        req: &'a RequestContext,
        np: &'a NumaPciRequest,
        pack: bool,
    ) -> Self {
        let (numa, pools) = after_earlier(host, req, np, pack);
        Judged {
            np,
            inst: np.numa.as_deref().filter(|i| !i.cells.is_empty()),
            numa,
            pools,
            limits: NumaLimits::of_host(host, np),
            pack,
        }
    }

    /// The host's topology after the call's earlier instances; `None` when it has none (or
    /// no cell).
    pub fn host_numa(&self) -> Option<&HostNuma> {
        self.numa.as_ref().filter(|n| !n.cells.is_empty())
    }

    /// Whether the instance asks a NUMA topology.
    pub fn asks_numa(&self) -> bool {
        self.inst.is_some()
    }

    /// `NUMATopologyFilter`'s test of one candidate: the instance's topology fits the
    /// host's cells with the candidate's PCI devices (true without a topology asked; false
    /// when the host has none).
    pub fn numa_fits(&self, mapping: &ProviderMapping) -> bool {
        let Some(inst) = self.inst else {
            return true;
        };
        let Some(numa) = self.host_numa() else {
            return false;
        };
        let pci = PciFit {
            requests: &self.np.pci,
            pools: Some(&self.pools),
            mapping: Some(mapping),
        };
        fit_instance(numa, inst, Some(&self.limits), pci, self.pack).is_some()
    }

    /// `PciPassthroughFilter`'s test of one candidate (`support_requests`).
    pub fn pci_fits(&self, mapping: &ProviderMapping) -> bool {
        self.np.pci.is_empty()
            || self
                .pools
                .supports(&self.np.pci, Some(mapping), &[], self.numa.as_ref())
    }
}

/// The index of `host`'s first candidate both filters' tests pass for `req` (0 on a flat
/// host, whose one candidate is the host itself): the candidate Nova claims, the first its
/// `CandidateFilterMixin` filters left. `None` when none passes, or the request asks
/// neither NUMA nor PCI of it (then the first is claimed, as before).
pub fn first_fit(host: &HostState, req: &RequestContext, pack: bool) -> Option<usize> {
    let np = req.numa_pci.as_deref()?;
    let judged = Judged::new(host, req, np, pack);
    candidate_mappings(host, req)
        .iter()
        .position(|m| judged.numa_fits(m) && judged.pci_fits(m))
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
        let judged = Judged::new(host, req, np, self.pack);
        let Some(numa) = judged.host_numa() else {
            return !judged.asks_numa();
        };
        if np.cpu_dedicated_asked && np.thread_require_asked && !numa.has_threads() {
            return false;
        }
        if !judged.asks_numa() {
            return true;
        }
        // Nova keeps the candidates that fit (`filter_candidates`): the host passes when one
        // does.
        candidate_mappings(host, req)
            .iter()
            .any(|m| judged.numa_fits(m))
    }
}
