//! One batch solved: the network of [`super::graph`] completed with the unscheduled node, the
//! gates of anti-affinity groups and the sink, every unit sent to the sink by
//! [`super::mcf::Network`], and the flow read back as a host per request.

use super::graph::{build, BatchGraph};
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
    let graph = build(cluster, requests, opts)?;
    Ok(solve_graph(cluster.hosts(), requests.len(), &graph, opts))
}

/// The cost of a request → unscheduled edge, before the shift that makes costs non-negative:
/// 0 as published, or more than any `n` placements can save.
pub fn unscheduled_cost(graph: &BatchGraph, unscheduled: Unscheduled) -> i64 {
    match unscheduled {
        Unscheduled::Zero => 0,
        Unscheduled::Penalty => {
            let largest = graph
                .edges
                .iter()
                .flatten()
                .map(|&(_, c)| c.abs())
                .max()
                .unwrap_or(0);
            largest
                .saturating_mul(graph.units.len() as i64)
                .saturating_add(1)
        }
    }
}

fn solve_graph(
    hosts: usize,
    requests: usize,
    graph: &BatchGraph,
    opts: &SolveOptions,
) -> Placement {
    let n = graph.units.len();
    let edge_count: usize = graph.edges.iter().map(Vec::len).sum();
    // Every unit leaves its node by exactly one edge (to a host, a gate or the unscheduled
    // node), so adding `shift` to all of those changes every solution's cost by n·shift and
    // makes all costs non-negative, as Dijkstra needs.
    let shift = graph
        .edges
        .iter()
        .flatten()
        .map(|&(_, c)| -c)
        .max()
        .unwrap_or(0)
        .max(0);
    let penalty = unscheduled_cost(graph, opts.unscheduled);
    let mut net = Network::with_capacity(n + 2, edge_count * 2 + 2 * n + 1);
    let (unscheduled, sink) = (n as u32, n as u32 + 1);
    net.add_edge(unscheduled, sink, n as i32, 0);
    let mut host_node = vec![NO_NODE; hosts];
    let mut gate_node: HashMap<(u32, u32), u32> = HashMap::new();
    let gated = opts.slots == SlotRule::AsManyAsFit;
    let mut unit_edges: Vec<Vec<(u32, u32, i64)>> = Vec::with_capacity(n);
    for (u, (unit, row)) in graph.units.iter().zip(&graph.edges).enumerate() {
        net.add_edge(u as u32, unscheduled, 1, shift + penalty);
        let mut mine = Vec::with_capacity(row.len());
        for &(h, c) in row {
            let hn = &mut host_node[h as usize];
            if *hn == NO_NODE {
                *hn = net.add_node();
                net.add_edge(*hn, sink, graph.slots[h as usize] as i32, 0);
            }
            let target = match unit.apart {
                Some(g) if gated => *gate_node.entry((g, h)).or_insert_with(|| {
                    let gate = net.add_node();
                    net.add_edge(gate, *hn, 1, 0);
                    gate
                }),
                _ => *hn,
            };
            mine.push((net.add_edge(u as u32, target, 1, c + shift), h, c));
        }
        unit_edges.push(mine);
    }
    for u in 0..n {
        let sent = net.augment(u as u32, sink);
        debug_assert!(sent, "the unscheduled node always reaches the sink");
    }
    let mut out = vec![None; requests];
    let mut cost = 0i64;
    for (unit, mine) in graph.units.iter().zip(&unit_edges) {
        if let Some(&(_, h, c)) = mine.iter().find(|(e, _, _)| net.flow(*e) > 0) {
            cost += c;
            for &m in &unit.members {
                out[m] = Some(h);
            }
        }
    }
    Placement {
        hosts: out,
        cost,
        stats: SolveStats {
            units: n,
            host_nodes: host_node.iter().filter(|&&h| h != NO_NODE).count(),
            edges: edge_count,
            settled: net.settled_total,
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
