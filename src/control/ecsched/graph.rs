//! The flow network of §3.2 before it is solved: per unit, its eligible hosts with their edge
//! costs (pruned to those that can be in an optimum), and per host the capacity of its edge
//! to the sink.

use super::costs::{fits, Normalised};
use super::problem::{BatchError, BatchRequest, Cluster, SlotRule, SolveOptions};
use super::units::{units, Unit};
use std::collections::HashMap;

/// A unit's kept edges, `(host, cost)`.
type Row = Vec<(u32, i64)>;

/// The network's request side, in a form another solver can read.
#[derive(Clone, Debug)]
pub struct BatchGraph {
    /// The flow units (requests, affinity groups merged).
    pub units: Vec<Unit>,
    /// Per unit, `(host, cost)` of each request → host edge kept, cheapest first.
    pub edges: Vec<Vec<(u32, i64)>>,
    /// Per host, the capacity of its edge to the sink.
    pub slots: Vec<u32>,
}

/// Builds the network for `requests` on `cluster` under `opts` (costs, slots, pruning).
pub fn build(
    cluster: &Cluster,
    requests: &[BatchRequest],
    opts: &SolveOptions,
) -> Result<BatchGraph, BatchError> {
    let units = units(cluster, requests)?;
    let n = units.len();
    let slots = slots(cluster, &units, opts.slots);
    let norm = Normalised::new(cluster);
    // Units with the same demand, no machine affinity and the same pruning rule have the same
    // edges: computed once (a multi-create is one flavor).
    let mut shared: HashMap<(&[u64], bool), Row> = HashMap::new();
    let mut edges = Vec::with_capacity(n);
    for unit in &units {
        let apart = unit.apart.is_some() && opts.slots == SlotRule::AsManyAsFit;
        if unit.hosts.is_none() {
            if let Some(e) = shared.get(&(unit.demand.as_slice(), apart)) {
                edges.push(e.clone());
                continue;
            }
        }
        let d = norm.demand(&unit.demand);
        let mut row: Row = Vec::new();
        let mut consider = |h: usize| {
            if fits(&unit.demand, cluster.free(h)) {
                row.push((h as u32, norm.cost(opts.cost, &d, h)));
            }
        };
        match &unit.hosts {
            None => (0..cluster.hosts()).for_each(&mut consider),
            Some(list) => list.iter().for_each(|&h| consider(h as usize)),
        }
        if opts.prune {
            prune(&mut row, n, &slots, apart);
        } else {
            row.sort_unstable_by_key(|&(h, c)| (c, h));
        }
        if unit.hosts.is_none() {
            shared.insert((unit.demand.as_slice(), apart), row.clone());
        }
        edges.push(row);
    }
    Ok(BatchGraph {
        units,
        edges,
        slots,
    })
}

/// Host → sink capacities. `AsManyAsFit`: how many of the batch's largest demand (per class)
/// fit in the host's free amounts, at least 1 (any unit eligible for the host fits alone),
/// at most the number of units. Exact for one flavor; for mixed demands a lower bound.
pub(super) fn slots(cluster: &Cluster, units: &[Unit], rule: SlotRule) -> Vec<u32> {
    let n = units.len().min(u32::MAX as usize) as u32;
    match rule {
        SlotRule::OnePerHost => vec![1; cluster.hosts()],
        SlotRule::AsManyAsFit => {
            let mut largest = vec![0u64; cluster.classes()];
            for u in units {
                for (m, d) in largest.iter_mut().zip(&u.demand) {
                    *m = (*m).max(*d);
                }
            }
            (0..cluster.hosts())
                .map(|h| {
                    let fit = cluster
                        .free(h)
                        .iter()
                        .zip(&largest)
                        .filter(|(_, d)| **d > 0)
                        .map(|(f, d)| f / d)
                        .min()
                        .unwrap_or(u64::MAX);
                    fit.clamp(1, u64::from(n.max(1))) as u32
                })
                .collect()
        }
    }
}

/// Keeps the cheapest hosts of `row` (ties by host index) until their slots reach `n`, the
/// number of units: the other n − 1 units fill at most n − 1 of those slots, so one stays
/// free for this unit, at a cost no higher than any host dropped; moving the unit there keeps
/// an optimum optimal. A unit of an anti-affinity group under `AsManyAsFit` counts each host
/// as one slot (it needs a host no other unit is on: n hosts guarantee one).
pub(crate) fn prune(row: &mut Vec<(u32, i64)>, n: usize, slots: &[u32], apart: bool) {
    let key = |&(h, c): &(u32, i64)| (c, h);
    if row.len() > n {
        row.select_nth_unstable_by_key(n - 1, key);
        row.truncate(n);
    }
    row.sort_unstable_by_key(key);
    let mut sum = 0usize;
    let keep = row
        .iter()
        .position(|&(h, _)| {
            sum += if apart { 1 } else { slots[h as usize] as usize };
            sum >= n
        })
        .map_or(row.len(), |i| i + 1);
    row.truncate(keep);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_one_slot_per_host_a_unit_keeps_its_n_cheapest_hosts() {
        let mut row: Vec<(u32, i64)> = (0..10).map(|h| (h, -(h as i64))).collect();
        prune(&mut row, 3, &[1; 10], false);
        assert_eq!(row, vec![(9, -9), (8, -8), (7, -7)]);
    }

    #[test]
    fn with_several_slots_a_unit_keeps_hosts_until_their_slots_reach_n() {
        let mut row: Vec<(u32, i64)> = (0..10).map(|h| (h, -(h as i64))).collect();
        let slots = [4, 4, 4, 4, 4, 4, 4, 4, 2, 3];
        prune(&mut row, 4, &slots, false);
        assert_eq!(row, vec![(9, -9), (8, -8)]);
        let mut apart: Vec<(u32, i64)> = (0..10).map(|h| (h, -(h as i64))).collect();
        prune(&mut apart, 4, &slots, true);
        assert_eq!(apart.len(), 4);
    }

    #[test]
    fn slots_count_the_largest_demand_per_class() {
        let c = Cluster::new(2, vec![16, 64, 16, 64], vec![9, 64, 0, 0]).unwrap();
        let u = |d: Vec<u64>| Unit {
            members: vec![0],
            demand: d,
            hosts: None,
            apart: None,
        };
        let units = [u(vec![2, 8]), u(vec![4, 4]), u(vec![1, 1]), u(vec![1, 1])];
        // ⌊9/4⌋ = 2, ⌊64/8⌋ = 8; the empty host still counts 1 (no unit fits it anyway).
        assert_eq!(slots(&c, &units, SlotRule::AsManyAsFit), vec![2, 1]);
        assert_eq!(slots(&c, &units, SlotRule::OnePerHost), vec![1, 1]);
    }
}
