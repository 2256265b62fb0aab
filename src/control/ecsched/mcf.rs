//! Min-cost flow by successive shortest paths with node potentials (Ahuja, Magnanti & Orlin,
//! *Network Flows*, §9.7): supply is sent along a shortest residual path found
//! by Dijkstra, as much as the path takes, on reduced costs, which stay non-negative because every edge cost is. Dijkstra
//! stops when it settles the sink; the potentials of the nodes settled before it move by
//! `d(v) − d(sink)` and the others keep theirs, which keeps every residual reduced cost
//! non-negative (docs/architecture.md §12.4).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

const NONE: u32 = u32::MAX;

/// A residual network in forward-star form; edge `e`'s reverse is `e ^ 1`.
#[derive(Default)]
pub(crate) struct Network {
    head: Vec<u32>,
    next: Vec<u32>,
    to: Vec<u32>,
    cap: Vec<i32>,
    cost: Vec<i64>,
    potential: Vec<i64>,
    dist: Vec<i64>,
    parent: Vec<u32>,
    settled: Vec<bool>,
    touched: Vec<u32>,
    heap: BinaryHeap<Reverse<(i64, u32)>>,
    /// Nodes settled by Dijkstra over all augmentations.
    pub(crate) settled_total: usize,
}

impl Network {
    /// A network of `nodes` nodes and room for `edges` edges.
    pub(crate) fn with_capacity(nodes: usize, edges: usize) -> Self {
        let mut n = Network::default();
        n.head.reserve(nodes);
        for _ in 0..nodes {
            n.add_node();
        }
        n.next.reserve(2 * edges);
        n.to.reserve(2 * edges);
        n.cap.reserve(2 * edges);
        n.cost.reserve(2 * edges);
        n
    }

    /// Adds a node and returns its index.
    pub(crate) fn add_node(&mut self) -> u32 {
        self.head.push(NONE);
        self.potential.push(0);
        self.dist.push(i64::MAX);
        self.parent.push(NONE);
        self.settled.push(false);
        (self.head.len() - 1) as u32
    }

    /// Adds an edge of capacity `cap` and non-negative `cost`; returns its index.
    pub(crate) fn add_edge(&mut self, from: u32, to: u32, cap: i32, cost: i64) -> u32 {
        debug_assert!(
            cost >= 0,
            "successive shortest paths needs non-negative costs"
        );
        let e = self.to.len() as u32;
        self.push_half(from, to, cap, cost);
        self.push_half(to, from, 0, -cost);
        e
    }

    fn push_half(&mut self, from: u32, to: u32, cap: i32, cost: i64) {
        let e = self.to.len() as u32;
        self.to.push(to);
        self.cap.push(cap);
        self.cost.push(cost);
        self.next.push(self.head[from as usize]);
        self.head[from as usize] = e;
    }

    /// The flow on edge `e` (as returned by [`Network::add_edge`]).
    pub(crate) fn flow(&self, e: u32) -> i32 {
        self.cap[(e ^ 1) as usize]
    }

    /// Sends up to `most` units from `from` to `sink` along one least-cost residual path (as
    /// many as the path's narrowest edge takes); returns how many, 0 when the sink cannot be
    /// reached.
    pub(crate) fn augment(&mut self, from: u32, sink: u32, most: i32) -> i32 {
        let reached = self.dijkstra(from, sink);
        let mut sent = 0;
        if reached {
            let d_sink = self.dist[sink as usize];
            for &v in &self.touched {
                let v = v as usize;
                if self.settled[v] {
                    self.potential[v] += self.dist[v] - d_sink;
                }
            }
            sent = most;
            let mut v = sink;
            while v != from {
                let e = self.parent[v as usize] as usize;
                sent = sent.min(self.cap[e]);
                v = self.to[e ^ 1];
            }
            let mut v = sink;
            while v != from {
                let e = self.parent[v as usize] as usize;
                self.cap[e] -= sent;
                self.cap[e ^ 1] += sent;
                v = self.to[e ^ 1];
            }
        }
        for &v in &self.touched {
            let v = v as usize;
            self.dist[v] = i64::MAX;
            self.parent[v] = NONE;
            self.settled[v] = false;
        }
        self.touched.clear();
        self.heap.clear();
        sent
    }

    fn dijkstra(&mut self, from: u32, sink: u32) -> bool {
        self.dist[from as usize] = 0;
        self.touched.push(from);
        self.heap.push(Reverse((0, from)));
        while let Some(Reverse((d, u))) = self.heap.pop() {
            let ui = u as usize;
            if self.settled[ui] || d > self.dist[ui] {
                continue;
            }
            self.settled[ui] = true;
            self.settled_total += 1;
            if u == sink {
                return true;
            }
            let pu = self.potential[ui];
            let mut e = self.head[ui];
            while e != NONE {
                let ei = e as usize;
                if self.cap[ei] > 0 {
                    let v = self.to[ei] as usize;
                    let nd = d + self.cost[ei] + pu - self.potential[v];
                    if nd < self.dist[v] {
                        if self.dist[v] == i64::MAX {
                            self.touched.push(v as u32);
                        }
                        self.dist[v] = nd;
                        self.parent[v] = e;
                        self.heap.push(Reverse((nd, v as u32)));
                    }
                }
                e = self.next[ei];
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_unit_reroutes_an_earlier_one_when_that_lowers_the_total() {
        // Units a, b; hosts x, y of one slot each. a: x 1, y 2. b: x 1, y 10.
        // Greedy in order puts a on x and b on y (11); the optimum is a→y, b→x (3).
        let mut n = Network::with_capacity(5, 6);
        let (a, b, x, y, t) = (0, 1, 2, 3, 4);
        let ax = n.add_edge(a, x, 1, 1);
        let ay = n.add_edge(a, y, 1, 2);
        let bx = n.add_edge(b, x, 1, 1);
        let by = n.add_edge(b, y, 1, 10);
        n.add_edge(x, t, 1, 0);
        n.add_edge(y, t, 1, 0);
        assert_eq!(n.augment(a, t, 1), 1);
        assert_eq!((n.flow(ax), n.flow(ay)), (1, 0));
        assert_eq!(n.augment(b, t, 1), 1);
        assert_eq!(
            (n.flow(ax), n.flow(ay), n.flow(bx), n.flow(by)),
            (0, 1, 1, 0)
        );
    }

    #[test]
    fn a_path_carries_as_much_as_its_narrowest_edge() {
        // A supply of 5 at node 0; host 1 takes 3, host 2 (dearer) takes the rest.
        let mut n = Network::with_capacity(4, 4);
        let a = n.add_edge(0, 1, 5, 1);
        let b = n.add_edge(0, 2, 5, 2);
        n.add_edge(1, 3, 3, 0);
        n.add_edge(2, 3, 9, 0);
        assert_eq!(n.augment(0, 3, 5), 3);
        assert_eq!(n.augment(0, 3, 2), 2);
        assert_eq!((n.flow(a), n.flow(b)), (3, 2));
    }

    #[test]
    fn an_unreachable_sink_sends_nothing() {
        let mut n = Network::with_capacity(3, 1);
        let e = n.add_edge(0, 1, 1, 5);
        assert_eq!(n.augment(0, 2, 1), 0);
        assert_eq!(n.flow(e), 0);
    }
}
