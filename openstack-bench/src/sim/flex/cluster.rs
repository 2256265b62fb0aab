//! The simulated cluster of `sim flex`: nodes, their running tasks, and one measurement of
//! usage and QoS per period through the library's own Flex model (`parasol::control`'s
//! `fair_allocation` and `served`, the code the service's emulated hosts use).

use std::collections::HashMap;

use parasol::control::{fair_allocation, served, Share};

use super::trace::{Task, CPU, MEM};

/// One running task on a node.
#[derive(Clone, Debug)]
pub struct Running {
    /// Index into the workload.
    pub task: usize,
    /// When it ends, seconds.
    pub end_s: f64,
}

/// One node. Capacities are 1 per class (requests are fractions of a node).
#[derive(Clone, Debug, Default)]
pub struct Node {
    /// Its running tasks.
    pub running: Vec<Running>,
    /// Σ requests of its running tasks per class.
    pub requested: [f64; 2],
    /// The load estimate L̂ per class: the last measured usage plus the requests of tasks placed
    /// since (eq. 9 counts a task placed in the round at its request r_j).
    pub estimate: [f64; 2],
    /// The last measured usage per class (Σ allocations a_j).
    pub measured: [f64; 2],
}

/// What one measurement saw across the cluster.
#[derive(Clone, Copy, Debug, Default)]
pub struct Measurement {
    /// Tasks served (q_j = 1) and judged.
    pub served: usize,
    pub judged: usize,
    /// Σ allocations and Σ requests per class, as fractions of the cluster's capacity.
    pub usage: [f64; 2],
    pub requested: [f64; 2],
    /// std / mean of the nodes' memory usage (Fig. 9).
    pub mem_balance: f64,
}

/// The nodes plus the count of tasks per (node, job) for Alg. 3 line 9's source preference.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub nodes: Vec<Node>,
    same_job: HashMap<(usize, u64), u32>,
}

impl Cluster {
    /// `hosts` empty nodes.
    pub fn new(hosts: usize) -> Self {
        Cluster {
            nodes: vec![Node::default(); hosts],
            same_job: HashMap::new(),
        }
    }

    /// Tasks of `job` running on `node`.
    pub fn same_job(&self, node: usize, job: u64) -> u32 {
        self.same_job.get(&(node, job)).copied().unwrap_or(0)
    }

    /// Starts `task` on `node` at `now_s`.
    pub fn place(&mut self, node: usize, index: usize, task: &Task, now_s: f64) {
        let n = &mut self.nodes[node];
        n.running.push(Running {
            task: index,
            end_s: now_s + task.duration_s,
        });
        for class in [CPU, MEM] {
            n.requested[class] += task.request[class];
            n.estimate[class] += task.request[class];
        }
        *self.same_job.entry((node, task.job)).or_default() += 1;
    }

    /// Ends every task whose end is at or before `now_s`.
    pub fn finish(&mut self, tasks: &[Task], now_s: f64) {
        for (i, node) in self.nodes.iter_mut().enumerate() {
            let mut k = 0;
            while k < node.running.len() {
                if node.running[k].end_s <= now_s {
                    let task = &tasks[node.running.swap_remove(k).task];
                    for class in [CPU, MEM] {
                        node.requested[class] =
                            (node.requested[class] - task.request[class]).max(0.0);
                    }
                    if let Some(count) = self.same_job.get_mut(&(i, task.job)) {
                        *count -= 1;
                        if *count == 0 {
                            self.same_job.remove(&(i, task.job));
                        }
                    }
                } else {
                    k += 1;
                }
            }
        }
    }

    /// Measures period `period`: each task's demand d_j = r_j · usage ratio · `demand_scale` ·
    /// its own noise for the period, each node's allocations by §3's sharing, who is served,
    /// and resets every node's estimate to what it uses.
    pub fn measure(
        &mut self,
        tasks: &[Task],
        period: u64,
        noise: &impl Fn(u64, u64, usize) -> f64,
        demand_scale: f64,
    ) -> Measurement {
        let mut m = Measurement::default();
        let mut mem_usage = Vec::with_capacity(self.nodes.len());
        for node in &mut self.nodes {
            let mut ok = vec![true; node.running.len()];
            for class in [CPU, MEM] {
                let shares: Vec<Share> = node
                    .running
                    .iter()
                    .map(|r| {
                        let t = &tasks[r.task];
                        Share {
                            request: t.request[class],
                            demand: t.request[class]
                                * t.usage_ratio[class]
                                * demand_scale
                                * noise(t.id, period, class),
                        }
                    })
                    .collect();
                let alloc = fair_allocation(1.0, &shares);
                for (j, (a, s)) in alloc.iter().zip(&shares).enumerate() {
                    ok[j] &= served(*a, *s);
                }
                let used: f64 = alloc.iter().sum();
                node.measured[class] = used;
                node.estimate[class] = used;
                m.usage[class] += used;
                m.requested[class] += node.requested[class];
            }
            mem_usage.push(node.measured[MEM]);
            m.served += ok.iter().filter(|&&s| s).count();
            m.judged += ok.len();
        }
        let hosts = self.nodes.len().max(1) as f64;
        for class in [CPU, MEM] {
            m.usage[class] /= hosts;
            m.requested[class] /= hosts;
        }
        let mean = mem_usage.iter().sum::<f64>() / hosts;
        let var = mem_usage.iter().map(|u| (u - mean).powi(2)).sum::<f64>() / hosts;
        m.mem_balance = if mean > 0.0 { var.sqrt() / mean } else { 0.0 };
        m
    }
}
