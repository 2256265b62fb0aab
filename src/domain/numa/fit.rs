//! Nova 34's `hardware.numa_fit_instance_to_host` and what it calls
//! (`_numa_fit_instance_cell`, `_numa_cell_supports_pagesize_request`,
//! `_pack_instance_onto_cores`, `_numa_cells_support_network_metadata`), and
//! `numa_usage_from_instance_numa` (a multi-create's earlier instances on a host).
//!
//! As in Nova, fitting a cell writes into the instance's cells (the page size chosen, the
//! pinning, the host cell's id) and later permutations see what earlier ones wrote: the
//! search runs on a copy of the request's topology, and the result is that copy.

use super::pci::ProviderMapping;
use super::pyset::PySet;
use super::{
    CpuAllocation, CpuSet, HostCell, HostNuma, InstanceCell, InstanceNuma, NetworkMetadata,
    NumaLimits, PciPools, PciRequest, ThreadPolicy, MEMPAGES_ANY, MEMPAGES_LARGE, MEMPAGES_SMALL,
};
use std::collections::{BTreeMap, BTreeSet};

/// The PCI side of a fit: the requests and the host's pools (`pci_requests`, `pci_stats`).
#[derive(Clone, Copy, Debug, Default)]
pub struct PciFit<'a> {
    pub requests: &'a [PciRequest],
    pub pools: Option<&'a PciPools>,
    pub mapping: Option<&'a ProviderMapping>,
}

/// `can_fit_pagesize`: `None` when the host cell has no pages of `size_kb` (Nova raises
/// `MemoryPageSizeNotSupported`).
fn can_fit_pagesize(cell: &HostCell, size_kb: i64, memory_kb: i64, use_free: bool) -> Option<bool> {
    let pages = cell.mempages.iter().find(|p| p.size_kb == size_kb)?;
    let avail = if use_free {
        pages.free_kb()
    } else {
        pages.total_kb()
    };
    Some(memory_kb <= avail && size_kb != 0 && memory_kb % size_kb == 0)
}

/// `_numa_cell_supports_pagesize_request`: the page size the cell can give the instance
/// cell; `None` when none (or the size asked is not the host's).
fn supported_pagesize(host: &HostCell, inst: &InstanceCell, asked: i64) -> Option<i64> {
    let mut sizes: Vec<i64> = host.mempages.iter().map(|p| p.size_kb).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let memory_kb = inst.memory * 1024;
    let candidates: Vec<i64> = match asked {
        MEMPAGES_SMALL => sizes.last().copied().into_iter().collect(),
        MEMPAGES_LARGE => sizes[..sizes.len().saturating_sub(1)].to_vec(),
        MEMPAGES_ANY => sizes,
        size => vec![size],
    };
    for size in candidates {
        if can_fit_pagesize(host, size, memory_kb, true)? {
            return Some(size);
        }
    }
    None
}

/// `_get_pinning`: vCPU → host CPU pairs taking `threads` threads of each sibling set.
fn pinning(threads: usize, sets: &[PySet], cores: &CpuSet) -> Option<Vec<(u32, u32)>> {
    if threads * sets.len() < cores.len() {
        return None;
    }
    let usable = sets.iter().flat_map(|s| s.iter().take(threads));
    Some(cores.iter().copied().zip(usable).collect())
}

/// `_get_reserved`: the host CPUs reserved for the emulator threads, `None` when none.
fn reserved(
    sets: &[PySet],
    pins: Option<&[(u32, u32)]>,
    count: usize,
    isolate: bool,
) -> Option<CpuSet> {
    let pins = pins.filter(|p| !p.is_empty())?;
    if count == 0 {
        return None;
    }
    let mut usable: Vec<Vec<u32>> = sets.iter().map(|s| s.iter().collect()).collect();
    for (_, pcpu) in pins {
        // Python's `for sib in usable_cores` while removing from it skips the next one.
        let mut i = 0;
        while i < usable.len() {
            if usable[i].contains(pcpu) {
                if isolate {
                    usable.remove(i);
                } else {
                    usable[i].retain(|c| c != pcpu);
                }
            }
            i += 1;
        }
    }
    let chosen: CpuSet = usable.into_iter().flatten().take(count).collect();
    (!chosen.is_empty()).then_some(chosen)
}

/// A set field of `host` as Python holds it, from the record's list (`order`) or, without
/// one, ascending.
fn py(listed: &[u32], set: &CpuSet) -> PySet {
    if listed.len() == set.len() && listed.iter().all(|c| set.contains(c)) {
        PySet::from_primitive(listed)
    } else {
        PySet::from_primitive(&set.iter().copied().collect::<Vec<_>>())
    }
}

/// The free dedicated CPUs of `host` grouped as Nova's `sibling_sets`: for each number of
/// threads, the free sibling sets (`free_siblings`) with at least that many, in the host's
/// order, each iterated as Python iterates it.
fn sibling_sets(host: &HostCell) -> BTreeMap<usize, Vec<PySet>> {
    let o = &host.order;
    let free = py(&o.pcpuset, &host.pcpuset).difference(&py(&o.pinned_cpus, &host.pinned_cpus));
    let mut sets: BTreeMap<usize, Vec<PySet>> = BTreeMap::new();
    for (k, sib) in host.siblings.iter().enumerate() {
        let listed = o.siblings.get(k).map_or(&[][..], Vec::as_slice);
        let free_sib = py(listed, sib).intersection(&free);
        for n in 1..=free_sib.len() {
            sets.entry(n).or_default().push(free_sib.clone());
        }
    }
    sets
}

type Pinned = (Vec<(u32, u32)>, Option<CpuSet>);

/// `_pack_instance_onto_cores` for the isolate policy.
fn pack_isolate(
    host: &HostCell,
    inst: &InstanceCell,
    sets: &BTreeMap<usize, Vec<PySet>>,
    tpc: usize,
    reserve: usize,
) -> Option<Pinned> {
    let full = sets.get(&tpc)?;
    if tpc != 1 && host.pcpuset != host.cpuset {
        return None;
    }
    let pins = pinning(1, full, &inst.pcpuset);
    let ones = sets.get(&1).map_or(&[][..], Vec::as_slice);
    let res = reserved(ones, pins.as_deref(), reserve, true);
    match pins {
        Some(p) if !p.is_empty() && (reserve == 0 || res.is_some()) => Some((p, res)),
        _ => None,
    }
}

/// `_pack_instance_onto_cores` for `require` and `prefer` (explicit or implied).
fn pack_siblings(
    inst: &InstanceCell,
    sets: &BTreeMap<usize, Vec<PySet>>,
    tpc: usize,
    reserve: usize,
) -> Option<Pinned> {
    let require = inst.cpu_thread_policy == Some(ThreadPolicy::Require);
    if require && tpc <= 1 {
        return None;
    }
    let ones = sets.get(&1).map_or(&[][..], Vec::as_slice);
    let (mut pins, mut res, mut threads) = (None, None, 1);
    for (&n, set) in sets.iter().rev() {
        threads = n;
        if require && n <= 1 {
            continue;
        }
        pins = pinning(n, set, &inst.pcpuset);
        res = reserved(ones, pins.as_deref(), reserve, false);
        if pins.is_none() || (reserve > 0 && res.is_none()) {
            continue;
        }
        break;
    }
    if !require && pins.as_ref().is_none_or(Vec::is_empty) {
        let singles: Vec<PySet> = ones
            .iter()
            .flat_map(|s| s.iter().map(|c| PySet::from_list([c])))
            .collect();
        pins = pinning(threads, &singles, &inst.pcpuset);
        res = reserved(&singles, pins.as_deref(), reserve, false);
    }
    match pins {
        Some(p) if reserve == 0 || res.is_some() => Some((p, res)),
        _ => None,
    }
}

/// `_pack_instance_onto_cores`: pins the cell's dedicated vCPUs on `host`; false when the
/// thread policy cannot be met.
fn pack(host: &HostCell, inst: &mut InstanceCell, reserve: usize) -> bool {
    let Some(tpc) = host.siblings.iter().map(BTreeSet::len).max() else {
        return false; // Nova's max() of no siblings raises
    };
    let tpc = tpc.max(1);
    let sets = sibling_sets(host);
    let packed = if inst.cpu_thread_policy == Some(ThreadPolicy::Isolate) {
        pack_isolate(host, inst, &sets, tpc, reserve)
    } else {
        pack_siblings(inst, &sets, tpc, reserve)
    };
    let Some((pins, res)) = packed else {
        return false;
    };
    inst.cpu_pinning.extend(pins);
    inst.id = host.id;
    inst.cpuset_reserved = res;
    true
}

/// The memory test of `_numa_fit_instance_cell` (choosing the page size when one is asked).
fn fits_memory(host: &HostCell, inst: &mut InstanceCell) -> bool {
    let pins = CpuAllocation::pins(inst.cpu_policy);
    if let Some(asked) = inst.pagesize.filter(|p| *p != 0) {
        return match supported_pagesize(host, inst, asked) {
            Some(size) => {
                inst.pagesize = Some(size);
                true
            }
            None => false,
        };
    }
    if let Some(smallest) = host.mempages.iter().map(|p| p.size_kb).min() {
        return can_fit_pagesize(host, smallest, inst.memory * 1024, pins) == Some(true);
    }
    if pins {
        host.avail_memory() >= inst.memory
    } else {
        host.memory >= inst.memory
    }
}

/// `_numa_fit_instance_cell`: fits `inst` on `host`, writing the page size, pinning and
/// host cell id into it; false when it does not fit.
pub fn fit_cell(
    host: &HostCell,
    inst: &mut InstanceCell,
    limits: Option<&NumaLimits>,
    reserve: usize,
) -> bool {
    if !fits_memory(host, inst) {
        return false;
    }
    let (pins, floats) = (
        CpuAllocation::pins(inst.cpu_policy),
        CpuAllocation::floats(inst.cpu_policy),
    );
    let required = inst.pcpuset.len() + reserve;
    if pins && required > host.pcpuset.len() {
        return false;
    }
    if floats && inst.cpuset.len() > host.cpuset.len() {
        return false;
    }
    if pins && (required > host.free_pcpus().len() || !pack(host, inst, reserve)) {
        return false;
    }
    if let Some(l) = limits.filter(|_| floats) {
        let cpu_usage = (host.cpu_usage + inst.cpuset.len() as i64) as f64;
        if cpu_usage > host.cpuset.len() as f64 * l.cpu_allocation_ratio {
            return false;
        }
        let ram_usage = (host.memory_usage + inst.memory) as f64;
        if ram_usage > host.memory as f64 * l.ram_allocation_ratio {
            return false;
        }
    }
    inst.id = host.id;
    true
}

/// `_numa_cells_support_network_metadata`.
fn supports_networks(host: &HostNuma, cells: &[&HostCell], wanted: &NetworkMetadata) -> bool {
    let mut physnets = wanted.physnets.clone();
    if !physnets.is_empty() {
        for c in cells {
            if let Some(m) = &c.network_metadata {
                physnets.retain(|p| !m.physnets.contains(p));
            }
        }
        let outside = host
            .cells
            .iter()
            .filter_map(|c| c.network_metadata.as_ref());
        if outside
            .into_iter()
            .any(|m| !m.physnets.is_disjoint(&physnets))
        {
            return false;
        }
    }
    if wanted.tunneled {
        if cells
            .iter()
            .any(|c| c.network_metadata.as_ref().is_some_and(|m| m.tunneled))
        {
            return true;
        }
        if host
            .cells
            .iter()
            .any(|c| c.network_metadata.as_ref().is_some_and(|m| m.tunneled))
        {
            return false;
        }
    }
    true
}

/// The host cells in the order Nova tries them when the instance has fewer cells than the
/// host: most free memory first, then least used CPUs (shared) or most free dedicated CPUs,
/// then PCI devices (most first when the instance asks some, else least); reversed where
/// `pack` (`[compute] packing_host_numa_cells_allocation_strategy`).
fn cell_order(host: &HostNuma, inst: &InstanceNuma, pci: &PciFit<'_>, pack: bool) -> Vec<usize> {
    let cells = &host.cells;
    let mut order: Vec<usize> = (0..cells.len()).collect();
    if cells.len() <= inst.cells.len() {
        return order;
    }
    let by = |order: &mut Vec<usize>, key: &dyn Fn(&HostCell) -> i64, descending: bool| {
        order.sort_by(|&a, &b| {
            let (ka, kb) = (key(&cells[a]), key(&cells[b]));
            if descending {
                kb.cmp(&ka)
            } else {
                ka.cmp(&kb)
            }
        });
    };
    by(&mut order, &|c| c.avail_memory(), !pack);
    if CpuAllocation::floats(inst.cells[0].cpu_policy)
        && inst.cells[0].cpu_policy != Some(CpuAllocation::Mixed)
    {
        by(&mut order, &|c| c.cpu_usage, pack);
    } else {
        by(&mut order, &|c| c.free_pcpus().len() as i64, !pack);
    }
    if let Some(pools) = pci.pools {
        let mut per_cell: BTreeMap<Option<i64>, i64> = BTreeMap::new();
        for p in &pools.pools {
            *per_cell.entry(p.numa_node()).or_default() += p.count;
        }
        let devices = |c: &HostCell| per_cell.get(&Some(c.id)).copied().unwrap_or(0);
        by(&mut order, &devices, !pci.requests.is_empty());
    }
    order
}

/// The search over permutations of host cells (`itertools.permutations` order), with Nova's
/// caches of pairs that fit and pairs that do not.
struct Search<'a> {
    host: &'a HostNuma,
    order: Vec<usize>,
    cells: Vec<InstanceCell>,
    limits: Option<&'a NumaLimits>,
    pci: PciFit<'a>,
    emulator_isolated: bool,
    fit: BTreeSet<(i64, i64)>,
    no_fit: BTreeSet<(i64, i64)>,
    chosen: Vec<usize>,
}

impl Search<'_> {
    /// Depth-first over the permutations: true at the first whose every pair fits and whose
    /// PCI requests and networks the chosen cells support.
    fn walk(&mut self, depth: usize) -> bool {
        if depth == self.cells.len() {
            return self.accepts();
        }
        for k in 0..self.order.len() {
            let h = self.order[k];
            if self.chosen.contains(&h) {
                continue;
            }
            let host_cell = &self.host.cells[h];
            let pair = (host_cell.id, self.cells[depth].id);
            if self.no_fit.contains(&pair) {
                continue;
            }
            if self.fit.contains(&pair) {
                self.cells[depth].id = host_cell.id;
            } else {
                let reserve = usize::from(self.emulator_isolated && depth == 0);
                if !fit_cell(host_cell, &mut self.cells[depth], self.limits, reserve) {
                    self.no_fit.insert(pair);
                    continue;
                }
                self.fit.insert(pair);
            }
            self.chosen.push(h);
            if self.walk(depth + 1) {
                return true;
            }
            self.chosen.pop();
        }
        false
    }

    fn accepts(&self) -> bool {
        let chosen: Vec<&HostCell> = self.chosen.iter().map(|&h| &self.host.cells[h]).collect();
        if let (false, Some(pools)) = (self.pci.requests.is_empty(), self.pci.pools) {
            if !pools.supports(
                self.pci.requests,
                self.pci.mapping,
                &self.cells,
                Some(self.host),
            ) {
                return false;
            }
        }
        match self.limits.and_then(|l| l.network_metadata.as_ref()) {
            Some(wanted) => supports_networks(self.host, &chosen, wanted),
            None => true,
        }
    }
}

/// `numa_fit_instance_to_host`: the instance's topology fitted on `host` (cells carrying the
/// host cell ids, page sizes and pinning), or `None` when it does not fit.
pub fn fit_instance(
    host: &HostNuma,
    inst: &InstanceNuma,
    limits: Option<&NumaLimits>,
    pci: PciFit<'_>,
    pack: bool,
) -> Option<InstanceNuma> {
    if host.cells.is_empty() || inst.cells.is_empty() || host.cells.len() < inst.cells.len() {
        return None;
    }
    let mut search = Search {
        host,
        order: cell_order(host, inst, &pci, pack),
        cells: inst.cells.clone(),
        limits,
        pci,
        emulator_isolated: inst.emulator_threads_isolated(),
        fit: BTreeSet::new(),
        no_fit: BTreeSet::new(),
        chosen: Vec::new(),
    };
    search.walk(0).then(|| InstanceNuma {
        cells: search.cells,
        emulator_threads_policy: inst.emulator_threads_policy.clone(),
    })
}

/// `numa_usage_from_instance_numa` (taking, not freeing): `host` with a fitted instance's
/// memory, pages, shared CPUs and pinned CPUs added to the cells it was fitted on.
pub fn add_usage(host: &HostNuma, inst: &InstanceNuma) -> HostNuma {
    let mut out = host.clone();
    for cell in &mut out.cells {
        for ic in inst.cells.iter().filter(|c| c.id == cell.id) {
            let size = ic
                .pagesize
                .filter(|p| *p != 0)
                .or_else(|| cell.mempages.iter().map(|p| p.size_kb).min());
            if let Some(size) = size {
                for pages in cell
                    .mempages
                    .iter_mut()
                    .filter(|p| p.size_kb == size && size > 0)
                {
                    pages.used = (pages.used + ic.memory * 1024 / size).max(0);
                }
            }
            cell.memory_usage += ic.memory;
            cell.cpu_usage += ic.cpuset.len() as i64;
            if !CpuAllocation::pins(ic.cpu_policy) {
                continue;
            }
            let mut pinned: CpuSet = ic.cpu_pinning.values().copied().collect();
            pinned.extend(ic.cpuset_reserved.iter().flatten().copied());
            if ic.cpu_thread_policy == Some(ThreadPolicy::Isolate) {
                let siblings: Vec<CpuSet> = cell
                    .siblings
                    .iter()
                    .filter(|s| !s.is_disjoint(&pinned))
                    .cloned()
                    .collect();
                pinned.extend(siblings.into_iter().flatten());
            }
            cell.pinned_cpus.extend(pinned);
            // Python's order of the grown set is not followed: ascending from here on.
            cell.order.pinned_cpus.clear();
        }
        cell.memory_usage = cell.memory_usage.max(0);
        cell.cpu_usage = cell.cpu_usage.max(0);
    }
    out
}

#[cfg(test)]
mod tests;
