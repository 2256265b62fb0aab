//! The network [`super::solve`] solves (docs/architecture.md §12.3): §3.2's network with
//! interchangeable nodes merged, then pruned. Hosts with the same capacity, the same free
//! amounts and the same machine-affinity lists naming them are one *host group* (every unit
//! sees them alike: the same eligibility, the same cost, the same slots); units with the same
//! demand, machine affinity and anti-affinity group are one *class*, a node whose supply is
//! their number. Both merges keep the optimum's cost (§12.3 says why); without pruning every
//! host is its own group and every unit its own class, which is §3.2's network as drawn.

use super::costs::{fits, Normalised};
use super::graph::{prune, slots};
use super::problem::{BatchError, BatchRequest, Cluster, SlotRule, SolveOptions};
use super::units::{units, Unit};
use std::collections::HashMap;

/// Hash maps of slices keyed per solve: foldhash, as the table's indexes (never iterated, so
/// the per-process seed changes no answer).
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

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
    let (group_start, group_hosts, group_of) = host_groups(cluster, &units, opts.prune);
    let groups = group_start.len() - 1;
    let host_slots: Vec<u32> = (0..groups)
        .map(|g| per_host_slots[group_hosts[group_start[g] as usize] as usize])
        .collect();
    let class_units = unit_classes(&units, opts.prune);
    let norm = Normalised::new(cluster);
    let mut edge_start = Vec::with_capacity(class_units.len() + 1);
    let mut edges: Vec<(u32, i64)> = Vec::new();
    let mut row: Vec<(u32, i64)> = Vec::new();
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
        row.clear();
        let mut consider = |g: usize| {
            let rep = group_hosts[group_start[g] as usize] as usize;
            if fits(&unit.demand, cluster.free(rep)) {
                row.push((g as u32, norm.cost(opts.cost, &d, rep)));
            }
        };
        match &unit.hosts {
            None => (0..groups).for_each(&mut consider),
            Some(list) => {
                for &h in list {
                    let g = group_of[h as usize] as usize;
                    if seen[g] != c as u32 {
                        seen[g] = c as u32;
                        consider(g);
                    }
                }
            }
        }
        if opts.prune {
            let weight = if gated && unit.apart.is_some() {
                &per_host
            } else {
                &per_slot
            };
            prune(&mut row, n, weight, false);
        } else {
            row.sort_unstable_by_key(|&(g, c)| (c, g));
        }
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

/// Hosts grouped when `merge` (same capacity, free amounts and affinity lists naming them),
/// else one group per host: `(group_start, group_hosts, group_of)`, groups numbered by their
/// lowest host, hosts ascending within each.
fn host_groups(cluster: &Cluster, units: &[Unit], merge: bool) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let hosts = cluster.hosts();
    if !merge {
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
    let mut index: Map<(&[u64], &[u64], &[u32]), u32> = Map::default();
    let mut group_of = Vec::with_capacity(hosts);
    let mut sizes: Vec<u32> = Vec::new();
    for h in 0..hosts {
        let names = named.get(h).map_or(&[][..], Vec::as_slice);
        let next = sizes.len() as u32;
        let g = *index
            .entry((cluster.capacity(h), cluster.free(h), names))
            .or_insert(next);
        if g == next {
            sizes.push(0);
        }
        sizes[g as usize] += 1;
        group_of.push(g);
    }
    let mut start = Vec::with_capacity(sizes.len() + 1);
    start.push(0u32);
    for s in &sizes {
        start.push(start.last().copied().unwrap_or(0) + s);
    }
    let mut fill: Vec<u32> = start[..sizes.len()].to_vec();
    let mut members = vec![0u32; hosts];
    for (h, &g) in group_of.iter().enumerate() {
        members[fill[g as usize] as usize] = h as u32;
        fill[g as usize] += 1;
    }
    (start, members, group_of)
}

/// Units grouped into classes when `merge` (same demand, machine affinity and anti-affinity
/// group), else one class per unit; classes in order of their first unit.
fn unit_classes(units: &[Unit], merge: bool) -> Vec<Vec<u32>> {
    if !merge {
        return (0..units.len() as u32).map(|u| vec![u]).collect();
    }
    let mut index: Map<(&[u64], Option<&[u32]>, Option<u32>), usize> = Map::default();
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
        let c = Cluster::new(
            1,
            vec![8, 8, 8, 8],
            vec![4, 6, 4, 4],
        )
        .unwrap();
        let r = |hosts: Option<Vec<u32>>| BatchRequest {
            demand: vec![1],
            hosts,
            group: None,
        };
        let batch = [r(None), r(None), r(Some(vec![3])), r(None)];
        let net = compact(&c, &batch, &SolveOptions::paper(CostModel::DotProduct)).unwrap();
        assert_eq!(net.group_start, vec![0, 2, 3, 4]);
        assert_eq!(net.group_hosts, vec![0, 2, 1, 3]);
        assert_eq!(net.class_units, vec![vec![0, 1, 3], vec![2]]);
        assert_eq!(net.edges_of(1).len(), 1);
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
    fn spreading_keeps_anti_affinity_members_apart_and_fills_hosts_in_order() {
        let mut got = Vec::new();
        let mut received = vec![(0, None), (1, Some(7)), (2, Some(7)), (3, None), (4, Some(9))];
        spread(&[10, 11, 12], 2, &mut received, &mut got);
        got.sort_unstable();
        // 7's members on 10 and 11, 9's on 12; the others fill 10 then 11.
        assert_eq!(got, vec![(0, 10), (1, 10), (2, 11), (3, 11), (4, 12)]);
    }
}
