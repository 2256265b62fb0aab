//! The network [`super::solve`] solves (docs/architecture.md §12.3): §3.2's network with
//! interchangeable nodes merged, then pruned. Hosts with the same capacity, the same free
//! amounts and the same machine-affinity lists naming them are one *host group* (every unit
//! sees them alike: the same eligibility, the same cost, the same slots); units with the same
//! demand, machine affinity and anti-affinity group are one *class*, a node whose supply is
//! their number. Under a cost model that reads capacity only, host groups that every class
//! fits alike are merged further, whatever their free amounts. The merges keep the optimum's
//! cost (§12.3 says why); without pruning every host is its own group and every unit its own
//! class, which is §3.2's network as drawn.

use super::costs::{cost_of_scaled, fits, scaled_score, Normalised};
use super::graph::slots;
use super::problem::CostModel;
use super::problem::{BatchError, BatchRequest, Cluster, SlotRule, SolveOptions};
use super::units::{units, Unit};
use std::collections::{BinaryHeap, HashMap};

/// Hash maps of slices keyed per solve: foldhash, as the table's indexes (never iterated, so
/// the per-process seed changes no answer).
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A host as every unit sees it: capacity, free amounts, the units whose affinity names it.
type HostKey<'a> = (&'a [u64], &'a [u64], &'a [u32]);

/// A host group as capacity costs see it: capacity, slots, naming units, classes that fit.
type AlikeKey<'a> = (&'a [u64], u32, &'a [u32], &'a [u64]);

/// A unit as the network sees it: demand, machine affinity, anti-affinity group.
type UnitKey<'a> = (&'a [u64], Option<&'a [u32]>, Option<u32>);

/// A merged, pruned network ready for the min-cost flow.
pub(crate) struct Compact {
    /// The flow units (requests, affinity groups merged).
    pub(crate) units: Vec<Unit>,
    /// Per class, the units it stands for (indices into `units`, ascending).
    pub(crate) class_units: Vec<Vec<u32>>,
    /// Per class, its kept `(group, cost)` edges, cheapest first: `edges[edge_start[c]..
    /// edge_start[c + 1]]`.
    pub(crate) edge_start: Vec<u32>,
    pub(crate) edges: Vec<(u32, i64)>,
    /// Per group, its hosts in ascending index: `group_hosts[group_start[g]..
    /// group_start[g + 1]]`.
    pub(crate) group_start: Vec<u32>,
    pub(crate) group_hosts: Vec<u32>,
    /// Per group, the slots of each of its hosts (all alike).
    pub(crate) host_slots: Vec<u32>,
}

impl Compact {
    /// The number of classes (supply nodes).
    pub(crate) fn classes(&self) -> usize {
        self.class_units.len()
    }

    /// Class `c`'s kept edges.
    pub(crate) fn edges_of(&self, c: usize) -> &[(u32, i64)] {
        &self.edges[self.edge_start[c] as usize..self.edge_start[c + 1] as usize]
    }

    /// Group `g`'s hosts.
    pub(crate) fn hosts_of(&self, g: usize) -> &[u32] {
        &self.group_hosts[self.group_start[g] as usize..self.group_start[g + 1] as usize]
    }

    /// The anti-affinity group of class `c` (all its units share it).
    pub(crate) fn apart(&self, c: usize) -> Option<u32> {
        self.units[self.class_units[c][0] as usize].apart
    }

    /// The capacity of group `g`'s edge to the sink: its hosts' slots, at most `n`.
    pub(crate) fn group_capacity(&self, g: usize) -> u64 {
        let k = self.hosts_of(g).len() as u64;
        (k * u64::from(self.host_slots[g])).min(self.units.len() as u64)
    }
}

/// Builds the network for `requests` on `cluster` under `opts`: merged and pruned when
/// `opts.prune`, else one node per host and per unit with every eligible edge.
pub(crate) fn compact(
    cluster: &Cluster,
    requests: &[BatchRequest],
    opts: &SolveOptions,
) -> Result<Compact, BatchError> {
    let units = units(cluster, requests)?;
    let n = units.len();
    let per_host_slots = slots(cluster, &units, opts.slots);
    let class_units = unit_classes(&units, opts.prune);
    let (group_start, group_hosts, group_of) =
        host_groups(cluster, &units, &class_units, &per_host_slots, opts);
    let groups = group_start.len() - 1;
    let host_slots: Vec<u32> = (0..groups)
        .map(|g| per_host_slots[group_hosts[group_start[g] as usize] as usize])
        .collect();
    let norm = Normalised::new(cluster);
    // Each group's representative (its lowest host): free amounts and the normalised amounts
    // the cost reads, contiguous, so that one pass over them scans every group.
    let k = cluster.classes();
    let mut rep_free = Vec::with_capacity(groups * k);
    let mut rep_vector = Vec::with_capacity(groups * k);
    for g in 0..groups {
        let rep = group_hosts[group_start[g] as usize] as usize;
        rep_free.extend_from_slice(cluster.free(rep));
        rep_vector.extend_from_slice(norm.vector(opts.cost, rep));
    }
    let reps = Reps {
        classes: k,
        free: &rep_free,
        vector: &rep_vector,
        model: opts.cost,
    };
    let mut edge_start = Vec::with_capacity(class_units.len() + 1);
    let mut edges: Vec<(u32, i64)> = Vec::new();
    let mut row: Vec<(u32, i64)> = Vec::new();
    let mut heap: BinaryHeap<(i64, u32)> = BinaryHeap::new();
    // What a group offers a unit when pruning: its hosts' slots, or under a gate (an
    // anti-affinity member with several slots per host) one per host.
    let gated = opts.slots == SlotRule::AsManyAsFit;
    let per_host: Vec<u32> = (0..groups)
        .map(|g| group_start[g + 1] - group_start[g])
        .collect();
    let per_slot: Vec<u32> = (0..groups)
        .map(|g| per_host[g].saturating_mul(host_slots[g]))
        .collect();
    let mut seen = vec![u32::MAX; groups];
    edge_start.push(0);
    for (c, members) in class_units.iter().enumerate() {
        let unit = &units[members[0] as usize];
        let d = norm.demand(&unit.demand);
        // Pruning keeps, while scanning, the cheapest edges whose offers reach n (§12.3).
        let weight = match (opts.prune, gated && unit.apart.is_some()) {
            (false, _) => None,
            (true, true) => Some(&per_host[..]),
            (true, false) => Some(&per_slot[..]),
        };
        let mut keep = Cheapest::new(n as u64, weight, &mut heap, &mut row);
        match &unit.hosts {
            None => reps.scan_all(&unit.demand, &d, &mut keep),
            Some(list) => {
                for &h in list {
                    let g = group_of[h as usize] as usize;
                    if seen[g] != c as u32 {
                        seen[g] = c as u32;
                        reps.consider(g, &unit.demand, &d, &mut keep);
                    }
                }
            }
        }
        keep.finish();
        edges.extend_from_slice(&row);
        edge_start.push(edges.len() as u32);
    }
    Ok(Compact {
        units,
        class_units,
        edge_start,
        edges,
        group_start,
        group_hosts,
        host_slots,
    })
}

/// The groups' representatives as edge costs read them.
struct Reps<'a> {
    classes: usize,
    free: &'a [u64],
    vector: &'a [f64],
    model: CostModel,
}

impl Reps<'_> {
    /// Offers `(g, cost)` to `keep` if `demand` fits group `g`.
    fn consider(&self, g: usize, demand: &[u64], d: &[f64], keep: &mut Cheapest) {
        let at = g * self.classes;
        if fits(demand, &self.free[at..at + self.classes]) {
            let f = scaled_score(self.model, d, &self.vector[at..at + self.classes]);
            if f >= keep.floor() {
                keep.offer(g as u32, cost_of_scaled(f));
            }
        }
    }

    /// Offers every group `demand` fits to `keep`, in group order.
    fn scan_all(&self, demand: &[u64], d: &[f64], keep: &mut Cheapest) {
        let k = self.classes;
        let model = self.model;
        for (g, (f, v)) in self
            .free
            .chunks_exact(k)
            .zip(self.vector.chunks_exact(k))
            .enumerate()
        {
            if fits(demand, f) {
                let f = scaled_score(model, d, v);
                if f >= keep.floor() {
                    keep.offer(g as u32, cost_of_scaled(f));
                }
            }
        }
    }
}

/// One class's edges as they are found: every one (no pruning), or only the shortest prefix,
/// by (cost, group), whose weights reach `n` — what `graph::prune` keeps of the whole row,
/// found without holding the row: an edge dearer than the dearest kept is dropped at once
/// once the kept ones reach `n`, and the dearest kept goes as soon as the others reach `n`
/// without it.
struct Cheapest<'a> {
    n: u64,
    weight: Option<&'a [u32]>,
    sum: u64,
    heap: &'a mut BinaryHeap<(i64, u32)>,
    row: &'a mut Vec<(u32, i64)>,
}

impl<'a> Cheapest<'a> {
    fn new(
        n: u64,
        weight: Option<&'a [u32]>,
        heap: &'a mut BinaryHeap<(i64, u32)>,
        row: &'a mut Vec<(u32, i64)>,
    ) -> Self {
        heap.clear();
        row.clear();
        Cheapest {
            n,
            weight,
            sum: 0,
            heap,
            row,
        }
    }

    /// A scaled score (see `costs::scaled_score`) below which an offer would be dropped
    /// anyway, known before rounding it: once the kept reach n, a score f < −c − 0.5 rounds to
    /// a cost above c, the dearest kept. −∞ while nothing can be dropped.
    #[inline]
    fn floor(&self) -> f64 {
        match (self.weight, self.heap.peek()) {
            (Some(_), Some(&(dearest, _))) if self.sum >= self.n => -(dearest as f64) - 0.5,
            _ => f64::NEG_INFINITY,
        }
    }

    #[inline]
    fn offer(&mut self, g: u32, cost: i64) {
        let Some(weight) = self.weight else {
            self.row.push((g, cost));
            return;
        };
        if self.sum >= self.n && self.heap.peek().is_some_and(|&top| (cost, g) > top) {
            return;
        }
        self.heap.push((cost, g));
        self.sum += u64::from(weight[g as usize]);
        while let Some(&(_, top)) = self.heap.peek() {
            let w = u64::from(weight[top as usize]);
            if self.sum - w < self.n {
                break;
            }
            self.heap.pop();
            self.sum -= w;
        }
    }

    /// The kept edges in `row`, cheapest first (ties by group).
    fn finish(self) {
        self.row.extend(self.heap.drain().map(|(c, g)| (g, c)));
        self.row.sort_unstable_by_key(|&(g, c)| (c, g));
    }
}

/// Hosts grouped when `opts.prune`, else one group per host: `(group_start, group_hosts,
/// group_of)`, groups numbered by their lowest host, hosts ascending within each. Grouped:
/// first the hosts with the same capacity, free amounts and affinity lists naming them; then,
/// under a cost model that reads capacity only, those groups whose capacity, slots and lists
/// are the same and that every class fits alike (the free amounts differ, but no unit can
/// tell them apart).
fn host_groups(
    cluster: &Cluster,
    units: &[Unit],
    class_units: &[Vec<u32>],
    per_host_slots: &[u32],
    opts: &SolveOptions,
) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let hosts = cluster.hosts();
    if !opts.prune {
        let ids: Vec<u32> = (0..hosts as u32).collect();
        let start: Vec<u32> = (0..=hosts as u32).collect();
        return (start, ids.clone(), ids);
    }
    // Per host, the units whose machine affinity names it (ascending unit index).
    let mut named: Vec<Vec<u32>> = Vec::new();
    if units.iter().any(|u| u.hosts.is_some()) {
        named = vec![Vec::new(); hosts];
        for (i, u) in units.iter().enumerate() {
            for &h in u.hosts.iter().flatten() {
                named[h as usize].push(i as u32);
            }
        }
    }
    let names = |h: usize| named.get(h).map_or(&[][..], Vec::as_slice);
    let mut index: Map<HostKey, u32> = Map::default();
    let mut group_of = Vec::with_capacity(hosts);
    let mut reps: Vec<u32> = Vec::new();
    for h in 0..hosts {
        let next = reps.len() as u32;
        let g = *index
            .entry((cluster.capacity(h), cluster.free(h), names(h)))
            .or_insert(next);
        if g == next {
            reps.push(h as u32);
        }
        group_of.push(g);
    }
    if matches!(opts.cost, CostModel::DotProduct | CostModel::MostLoaded) {
        let remap = alike_by_eligibility(cluster, units, class_units, per_host_slots, &reps, names);
        for g in &mut group_of {
            *g = remap[*g as usize];
        }
    }
    lay_out(&group_of)
}

/// Per group of `reps`, the group it joins: groups whose representatives have the same
/// capacity, slots and naming lists, and the same set of classes that fit them, are one.
fn alike_by_eligibility<'a>(
    cluster: &'a Cluster,
    units: &[Unit],
    class_units: &[Vec<u32>],
    per_host_slots: &[u32],
    reps: &[u32],
    names: impl Fn(usize) -> &'a [u32],
) -> Vec<u32> {
    let words = class_units.len().div_ceil(64).max(1);
    let mut fit = vec![0u64; reps.len() * words];
    for (g, &rep) in reps.iter().enumerate() {
        let free = cluster.free(rep as usize);
        let bits = &mut fit[g * words..(g + 1) * words];
        for (c, members) in class_units.iter().enumerate() {
            if fits(&units[members[0] as usize].demand, free) {
                bits[c / 64] |= 1 << (c % 64);
            }
        }
    }
    let mut index: Map<AlikeKey, u32> = Map::default();
    let mut remap = Vec::with_capacity(reps.len());
    for (g, &rep) in reps.iter().enumerate() {
        let h = rep as usize;
        let key = (
            cluster.capacity(h),
            per_host_slots[h],
            names(h),
            &fit[g * words..(g + 1) * words],
        );
        let next = index.len() as u32;
        remap.push(*index.entry(key).or_insert(next));
    }
    remap
}

/// `(group_start, group_hosts, group_of)` from each host's group.
fn lay_out(group_of: &[u32]) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let groups = group_of.iter().map(|&g| g as usize + 1).max().unwrap_or(0);
    let mut start = vec![0u32; groups + 1];
    for &g in group_of {
        start[g as usize + 1] += 1;
    }
    for g in 0..groups {
        start[g + 1] += start[g];
    }
    let mut fill: Vec<u32> = start[..groups].to_vec();
    let mut members = vec![0u32; group_of.len()];
    for (h, &g) in group_of.iter().enumerate() {
        members[fill[g as usize] as usize] = h as u32;
        fill[g as usize] += 1;
    }
    (start, members, group_of.to_vec())
}

/// Units grouped into classes when `merge` (same demand, machine affinity and anti-affinity
/// group), else one class per unit; classes in order of their first unit.
fn unit_classes(units: &[Unit], merge: bool) -> Vec<Vec<u32>> {
    if !merge {
        return (0..units.len() as u32).map(|u| vec![u]).collect();
    }
    let mut index: Map<UnitKey, usize> = Map::default();
    let mut out: Vec<Vec<u32>> = Vec::new();
    for (i, u) in units.iter().enumerate() {
        let key = (u.demand.as_slice(), u.hosts.as_deref(), u.apart);
        match index.get(&key) {
            Some(&c) => out[c].push(i as u32),
            None => {
                index.insert(key, out.len());
                out.push(vec![i as u32]);
            }
        }
    }
    out
}

/// Spreads the units a group received over its hosts: anti-affinity members first, round
/// robin with each group's members consecutive (a group of at most k members on k hosts lands
/// on distinct hosts; at most ⌈members / k⌉ ≤ slots per host), then the others filling hosts
/// in index order. `received` holds `(unit, apart)`; returns `(unit, host)`.
pub(crate) fn spread(
    hosts: &[u32],
    slots: u32,
    received: &mut [(u32, Option<u32>)],
    out: &mut Vec<(u32, u32)>,
) {
    received.sort_unstable_by_key(|&(u, apart)| (apart.is_none(), apart, u));
    let k = hosts.len();
    let mut used = vec![0u32; k];
    let apart = received.iter().take_while(|(_, a)| a.is_some()).count();
    for (i, &(u, _)) in received[..apart].iter().enumerate() {
        used[i % k] += 1;
        out.push((u, hosts[i % k]));
    }
    let mut at = 0;
    for &(u, _) in &received[apart..] {
        while at + 1 < k && used[at] >= slots {
            at += 1;
        }
        used[at] += 1;
        out.push((u, hosts[at]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::ecsched::problem::CostModel;

    #[test]
    fn identical_hosts_are_one_group_and_identical_requests_one_class() {
        // Hosts 0, 2 and 3 alike, host 1 different; host 3 named by a machine affinity.
        let c = Cluster::new(1, vec![8, 8, 8, 8], vec![4, 6, 4, 4]).unwrap();
        let r = |hosts: Option<Vec<u32>>| BatchRequest {
            demand: vec![1],
            hosts,
            group: None,
        };
        let batch = [r(None), r(None), r(Some(vec![3])), r(None)];
        let free_costs = SolveOptions {
            cost: CostModel::DotProductFree,
            ..SolveOptions::paper(CostModel::DotProduct)
        };
        let net = compact(&c, &batch, &free_costs).unwrap();
        assert_eq!(net.group_start, vec![0, 2, 3, 4]);
        assert_eq!(net.group_hosts, vec![0, 2, 1, 3]);
        assert_eq!(net.class_units, vec![vec![0, 1, 3], vec![2]]);
        assert_eq!(net.edges_of(1).len(), 1);
        // On capacity costs, host 1's other free amount changes nothing any unit sees.
        let net = compact(&c, &batch, &SolveOptions::paper(CostModel::DotProduct)).unwrap();
        assert_eq!(net.group_start, vec![0, 3, 4]);
        assert_eq!(net.group_hosts, vec![0, 1, 2, 3]);
        // Unless a unit fits one and not the other.
        let big = [
            r(None),
            BatchRequest {
                demand: vec![5],
                hosts: None,
                group: None,
            },
        ];
        let net = compact(&c, &big, &SolveOptions::paper(CostModel::DotProduct)).unwrap();
        assert_eq!(net.group_hosts, vec![0, 2, 3, 1]);
        let apart = compact(
            &c,
            &batch,
            &SolveOptions {
                prune: false,
                ..SolveOptions::paper(CostModel::DotProduct)
            },
        )
        .unwrap();
        assert_eq!((apart.group_start.len(), apart.classes()), (5, 4));
    }

    #[test]
    fn keeping_while_scanning_keeps_what_pruning_the_whole_row_keeps() {
        let mut x = 7u64;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let (mut heap, mut row) = (BinaryHeap::new(), Vec::new());
        for _ in 0..500 {
            let groups = 1 + next(60) as usize;
            let n = 1 + next(40) as usize;
            let weight: Vec<u32> = (0..groups).map(|_| 1 + next(5) as u32).collect();
            // Few distinct costs, so that ties by group are exercised.
            let mut offers: Vec<(u32, i64)> = Vec::new();
            for g in 0..groups as u32 {
                if next(4) > 0 {
                    offers.push((g, -(next(8) as i64)));
                }
            }
            if next(2) == 0 {
                // A machine affinity lists its hosts in any order.
                offers.reverse();
            }
            let mut whole = offers.clone();
            crate::control::ecsched::graph::prune(&mut whole, n, &weight, false);
            let mut keep = Cheapest::new(n as u64, Some(&weight), &mut heap, &mut row);
            for &(g, c) in &offers {
                keep.offer(g, c);
            }
            keep.finish();
            assert_eq!(row, whole, "n {n}, weights {weight:?}, offers {offers:?}");
        }
    }

    #[test]
    fn spreading_keeps_anti_affinity_members_apart_and_fills_hosts_in_order() {
        let mut got = Vec::new();
        let mut received = vec![
            (0, None),
            (1, Some(7)),
            (2, Some(7)),
            (3, None),
            (4, Some(9)),
        ];
        spread(&[10, 11, 12], 2, &mut received, &mut got);
        got.sort_unstable();
        // 7's members on 10 and 11, 9's on 12; the others fill 10 then 11.
        assert_eq!(got, vec![(0, 10), (1, 10), (2, 11), (3, 11), (4, 12)]);
    }
}
