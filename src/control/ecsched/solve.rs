//! One batch solved: the network of [`super::compact`] completed with the unscheduled node,
//! the gates of anti-affinity groups and the sink, every class's supply sent to the sink by
//! [`super::mcf::Network`], and the flow read back as a host per request.

use super::compact::{compact, spread, Compact};
use super::graph::BatchGraph;
use super::mcf::Network;
use super::problem::{
    BatchError, BatchRequest, Cluster, Placement, SlotRule, SolveOptions, SolveStats, Unscheduled,
};
use std::collections::HashMap;

const NO_NODE: u32 = u32::MAX;

/// Places `requests` on `cluster` at least total cost under `opts`: exact for the network
/// of §3.2 as built (docs/architecture.md §12).
pub fn solve(
    cluster: &Cluster,
    requests: &[BatchRequest],
    opts: &SolveOptions,
) -> Result<Placement, BatchError> {
    let net = compact(cluster, requests, opts)?;
    Ok(solve_compact(requests.len(), &net, opts))
}

/// The cost of a request → unscheduled edge, before the shift that makes costs non-negative:
/// 0 as published, or more than any `n` placements can save.
pub fn unscheduled_cost(graph: &BatchGraph, unscheduled: Unscheduled) -> i64 {
    let largest = graph.edges.iter().flatten().map(|&(_, c)| c.abs()).max();
    penalty(largest.unwrap_or(0), graph.units.len(), unscheduled)
}

fn penalty(largest: i64, units: usize, unscheduled: Unscheduled) -> i64 {
    match unscheduled {
        Unscheduled::Zero => 0,
        Unscheduled::Penalty => largest.saturating_mul(units as i64).saturating_add(1),
    }
}

/// The flow network of `net` with the node of each group and gate made, and the edge index
/// of each class edge.
struct Built {
    flow: Network,
    sink: u32,
    /// Per class edge (as in `net.edges`), its edge in `flow`.
    class_edge: Vec<u32>,
    host_nodes: usize,
}

fn network(net: &Compact, opts: &SolveOptions) -> Built {
    let n = net.units.len();
    let classes = net.classes();
    // Every unit leaves its node by exactly one edge (to a host, a gate or the unscheduled
    // node), so adding `shift` to all of those changes every solution's cost by n·shift and
    // makes all costs non-negative, as Dijkstra needs.
    let shift = net.edges.iter().map(|&(_, c)| -c).max().unwrap_or(0).max(0);
    let largest = net.edges.iter().map(|&(_, c)| c.abs()).max().unwrap_or(0);
    let penalty = penalty(largest, n, opts.unscheduled);
    let mut flow = Network::with_capacity(classes + 2, net.edges.len() * 2 + 2 * classes + 1);
    let (unscheduled, sink) = (classes as u32, classes as u32 + 1);
    let cap = |x: usize| x.min(i32::MAX as usize) as i32;
    flow.add_edge(unscheduled, sink, cap(n), 0);
    let mut group_node = vec![NO_NODE; net.host_slots.len()];
    let mut gate_node: HashMap<(u32, u32), u32> = HashMap::new();
    let gated = opts.slots == SlotRule::AsManyAsFit;
    let mut class_edge = Vec::with_capacity(net.edges.len());
    let mut host_nodes = 0;
    for c in 0..classes {
        let supply = cap(net.class_units[c].len());
        flow.add_edge(c as u32, unscheduled, supply, shift + penalty);
        let apart = net.apart(c);
        for &(g, cost) in net.edges_of(c) {
            let gi = g as usize;
            if group_node[gi] == NO_NODE {
                group_node[gi] = flow.add_node();
                host_nodes += 1;
                let to_sink = net.group_capacity(gi).min(i32::MAX as u64) as i32;
                flow.add_edge(group_node[gi], sink, to_sink, 0);
            }
            let target = match apart {
                Some(a) if gated => *gate_node.entry((a, g)).or_insert_with(|| {
                    let gate = flow.add_node();
                    flow.add_edge(gate, group_node[gi], cap(net.hosts_of(gi).len()), 0);
                    gate
                }),
                _ => group_node[gi],
            };
            class_edge.push(flow.add_edge(c as u32, target, supply, cost + shift));
        }
    }
    Built {
        flow,
        sink,
        class_edge,
        host_nodes,
    }
}

fn solve_compact(requests: usize, net: &Compact, opts: &SolveOptions) -> Placement {
    let Built {
        mut flow,
        sink,
        class_edge,
        host_nodes,
    } = network(net, opts);
    for c in 0..net.classes() {
        let mut left = net.class_units[c].len().min(i32::MAX as usize) as i32;
        while left > 0 {
            let sent = flow.augment(c as u32, sink, left);
            debug_assert!(sent > 0, "the unscheduled node always reaches the sink");
            if sent == 0 {
                break;
            }
            left -= sent;
        }
    }
    // Per group, the units it received; then spread over its hosts.
    let mut received: Vec<Vec<(u32, Option<u32>)>> = vec![Vec::new(); net.host_slots.len()];
    let mut cost = 0i64;
    for c in 0..net.classes() {
        let mut members = net.class_units[c].iter();
        let apart = net.apart(c);
        let start = net.edge_start[c] as usize;
        for (i, &(g, edge_cost)) in net.edges_of(c).iter().enumerate() {
            let f = flow.flow(class_edge[start + i]).max(0) as usize;
            cost += edge_cost * f as i64;
            for &u in members.by_ref().take(f) {
                received[g as usize].push((u, apart));
            }
        }
    }
    let mut placed = Vec::new();
    for (g, got) in received.iter_mut().enumerate() {
        if !got.is_empty() {
            spread(net.hosts_of(g), net.host_slots[g], got, &mut placed);
        }
    }
    let mut out = vec![None; requests];
    for (u, h) in placed {
        for &m in &net.units[u as usize].members {
            out[m] = Some(h);
        }
    }
    Placement {
        hosts: out,
        cost,
        stats: SolveStats {
            units: net.units.len(),
            host_nodes,
            edges: net.edges.len(),
            settled: flow.settled_total,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::ecsched::problem::{CostModel, Group, GroupPolicy};

    fn flavor(cpu: u64, mem: u64) -> BatchRequest {
        BatchRequest {
            demand: vec![cpu, mem],
            ..Default::default()
        }
    }

    #[test]
    fn an_empty_batch_places_nothing_at_no_cost() {
        let c = Cluster::new(2, vec![4, 4], vec![4, 4]).unwrap();
        let p = solve(&c, &[], &SolveOptions::service()).unwrap();
        assert_eq!((p.hosts.len(), p.cost), (0, 0));
        let none = Cluster::new(2, vec![], vec![]).unwrap();
        let p = solve(&none, &[flavor(1, 1)], &SolveOptions::service()).unwrap();
        assert_eq!((p.hosts, p.cost), (vec![None], 0));
    }

    #[test]
    fn a_request_that_fits_nowhere_goes_to_the_unscheduled_node() {
        let c = Cluster::new(2, vec![4, 4], vec![4, 4]).unwrap();
        let p = solve(&c, &[flavor(5, 1), flavor(1, 1)], &SolveOptions::service()).unwrap();
        assert_eq!(p.hosts, vec![None, Some(0)]);
        assert_eq!(p.unscheduled(), 1);
    }

    #[test]
    fn the_literal_rule_places_one_per_host_and_the_service_rule_as_many_as_fit() {
        let c = Cluster::new(2, vec![4, 4], vec![4, 4]).unwrap();
        let batch = [flavor(1, 1), flavor(1, 1), flavor(1, 1)];
        let p = solve(&c, &batch, &SolveOptions::paper(CostModel::DotProduct)).unwrap();
        assert_eq!(p.unscheduled(), 2);
        let p = solve(&c, &batch, &SolveOptions::service()).unwrap();
        assert_eq!(p.hosts, vec![Some(0); 3]);
    }

    #[test]
    fn with_the_penalty_the_solver_places_more_rather_than_better() {
        // h0 takes either; h1 only a. Zero-cost unscheduled: a on its best host alone beats
        // both placed. The penalty places both.
        let c = Cluster::new(1, vec![10, 2], vec![10, 2]).unwrap();
        let a = BatchRequest {
            demand: vec![2],
            ..Default::default()
        };
        let b = BatchRequest {
            demand: vec![1],
            hosts: Some(vec![0]),
            group: None,
        };
        let mut opts = SolveOptions::paper(CostModel::DotProduct);
        let p = solve(&c, &[a.clone(), b.clone()], &opts).unwrap();
        assert_eq!(p.hosts, vec![Some(0), None]);
        opts.unscheduled = Unscheduled::Penalty;
        let p = solve(&c, &[a, b], &opts).unwrap();
        assert_eq!(p.hosts, vec![Some(1), Some(0)]);
    }

    #[test]
    fn an_affinity_group_lands_whole_on_the_one_host_that_holds_it() {
        // Host 0 (the biggest) holds 4 of the 10, host 1 all of them.
        let c = Cluster::new(2, vec![64, 64, 32, 32], vec![8, 64, 20, 32]).unwrap();
        let group = Some(Group {
            id: 1,
            policy: GroupPolicy::Affinity,
        });
        let batch: Vec<_> = (0..10)
            .map(|_| BatchRequest {
                demand: vec![2, 2],
                hosts: None,
                group,
            })
            .collect();
        let p = solve(&c, &batch, &SolveOptions::service()).unwrap();
        assert_eq!(p.hosts, vec![Some(1); 10]);
        assert_eq!(p.stats.units, 1);
    }

    #[test]
    fn anti_affinity_keeps_members_apart_even_when_a_host_has_room_for_several() {
        let c = Cluster::new(1, vec![8, 8, 8], vec![8, 8, 8]).unwrap();
        let group = Some(Group {
            id: 2,
            policy: GroupPolicy::AntiAffinity,
        });
        let member = BatchRequest {
            demand: vec![1],
            hosts: None,
            group,
        };
        let p = solve(&c, &vec![member; 4], &SolveOptions::service()).unwrap();
        let mut used: Vec<_> = p.hosts.iter().flatten().collect();
        used.sort();
        used.dedup();
        assert_eq!((used.len(), p.unscheduled()), (3, 1));
    }
}
