//! `sim flex`: the Flex paper's evaluation (seed 002, §5) in virtual time — LeastFit, OverSub
//! θ = 2, FlexF and FlexL on the same workload, driving the library's own Flex controller
//! (`parasol::control::FlexController`), admission test and QoS model.
//!
//! The model, period by period (5 min, the trace's usage sampling interval, §2.2): tasks that
//! ended leave; arrivals join the pending queue; every node is measured (each task's demand
//! this period, §3's sharing, who is served, Q(t) of eq. 14); Flex updates P (Alg. 3's
//! `PeriodicEstimationPenaltyUpdate`, once per period); then one pass of Alg. 3's
//! `ScheduleOne` over the queue in order (FIFO for FlexF and the baselines, largest memory
//! request first for FlexL), a task that fits nowhere going back to the end of the queue.
//! Nova has no pending queue (a request that fits nowhere is NoValidHost): the queue exists
//! only here, to reproduce the paper.
//!
//! Readings (docs/flex.md names each with the paper's section):
//! - Alg. 3 line 8 "more than 1 filtered nodes" is read as at least one.
//! - L̂ is the last measured usage; a task placed since counts at its request (eq. 9's
//!   Σ x_ij r_j), so one period cannot pile tasks onto a node whose new load is unseen.
//! - Line 9's score: the least estimated load after placing (the dominant class), then
//!   fewer tasks of the same job (`SAME_JOB_WEIGHT` of headroom per task).
//! - LeastFit picks the node whose largest requested share after placing is least.

pub mod cli;
pub mod cluster;
pub mod report;
pub mod trace;

use parasol::control::{flex_fits_all, flex_headroom, FlexController, FlexParams, Load};
use serde::Serialize;

use cluster::{Cluster, Measurement};
use report::FlexRow;
use trace::{lognormal, Task, CPU, MEM};

/// Headroom one same-job task on a node is worth in Flex's score.
pub const SAME_JOB_WEIGHT: f64 = 0.01;

/// The four methods of §5.1.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlexPolicy {
    /// Requests within capacity, least requested node.
    LeastFit,
    /// Requests within θ × capacity, least requested node (§5.1: θ = 2).
    OverSub,
    /// Alg. 3 with a FIFO queue.
    FlexF,
    /// Alg. 3 with the largest memory request first.
    FlexL,
}

impl FlexPolicy {
    /// Every policy, in the paper's order.
    pub const ALL: [FlexPolicy; 4] = [
        FlexPolicy::LeastFit,
        FlexPolicy::OverSub,
        FlexPolicy::FlexF,
        FlexPolicy::FlexL,
    ];

    /// The name used on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            FlexPolicy::LeastFit => "LeastFit",
            FlexPolicy::OverSub => "OverSub",
            FlexPolicy::FlexF => "FlexF",
            FlexPolicy::FlexL => "FlexL",
        }
    }

    /// Parses a name case-insensitively.
    pub fn parse(name: &str) -> anyhow::Result<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| {
                anyhow::anyhow!("unknown policy {name:?}; valid: LeastFit, OverSub, FlexF, FlexL")
            })
    }

    fn is_flex(self) -> bool {
        matches!(self, FlexPolicy::FlexF | FlexPolicy::FlexL)
    }
}

/// One run's setting.
#[derive(Clone, Debug)]
pub struct FlexSetup {
    pub policy: FlexPolicy,
    /// Nodes (§5.1: 4,000).
    pub hosts: usize,
    /// Measurement and update period, seconds.
    pub period_s: f64,
    /// Simulated time, seconds.
    pub horizon_s: f64,
    /// OverSub's factor θ.
    pub oversub: f64,
    /// Demand multiplier of the sensitivity runs (§5.6: 0.5, 1, 1.5).
    pub demand_scale: f64,
    /// Coefficient of variation of a task's demand from one period to the next (ours).
    pub temporal_cv: f64,
    /// The controller's constants (§5.1 for the reproduction).
    pub params: FlexParams,
    pub seed: u64,
}

/// One period's figures, for Fig. 8's P and Q over time.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct FlexPoint {
    pub hour: f64,
    pub penalty: f64,
    pub qos: Option<f64>,
    pub requested_cpu: f64,
    pub requested_mem: f64,
    pub usage_cpu: f64,
    pub usage_mem: f64,
}

/// One run's result.
#[derive(Clone, Debug, Serialize)]
pub struct FlexOutcome {
    pub policy: FlexPolicy,
    pub hosts: usize,
    pub demand_scale: f64,
    pub seed: u64,
    /// Time-averaged Σ requests of running tasks / capacity, CPU and memory (Fig. 6).
    pub requested: [f64; 2],
    /// Time-averaged Σ allocations / capacity, CPU and memory (Fig. 6's usage).
    pub usage: [f64; 2],
    /// Mean of 1 − Q(t) over the periods, in % (Fig. 7b).
    pub violations_pct: f64,
    /// Share of periods with Q(t) ≥ ρ.
    pub periods_on_target: f64,
    /// Mean over periods of std / mean of the nodes' memory usage (Fig. 9).
    pub mem_balance: f64,
    /// Tasks placed, and left pending at the end.
    pub placed: usize,
    pub pending: usize,
    pub series: Vec<FlexPoint>,
}

/// A task's demand multiplier in `period` for `class`: lognormal with mean 1, drawn from a
/// hash of (seed, task, period, class) so every policy sees the same demands.
pub fn noise(seed: u64, cv: f64) -> impl Fn(u64, u64, usize) -> f64 {
    move |task, period, class| {
        if cv <= 0.0 {
            return 1.0;
        }
        let mut rng = SplitMix(
            seed ^ task.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ period.wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
                ^ (class as u64).wrapping_mul(0x1656_67B1_9E37_79F9),
        );
        lognormal(&mut rng, 1.0, cv)
    }
}

/// SplitMix64: a counter-based generator cheap enough to seed once per draw.
struct SplitMix(u64);

impl rand::RngCore for SplitMix {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

/// The node `task` goes to under `policy` with penalty `penalty`, if any fits.
fn choose(
    policy: FlexPolicy,
    oversub: f64,
    cluster: &Cluster,
    task: &Task,
    penalty: f64,
) -> Option<usize> {
    let mut best: Option<(f64, usize)> = None;
    for (i, node) in cluster.nodes.iter().enumerate() {
        let score = if policy.is_flex() {
            let loads = [CPU, MEM].map(|c| Load {
                usage: node.estimate[c],
                capacity: 1.0,
                request: task.request[c],
            });
            if !flex_fits_all(penalty, &loads) {
                continue;
            }
            flex_headroom(penalty, &loads)
                - SAME_JOB_WEIGHT * f64::from(cluster.same_job(i, task.job))
        } else {
            let limit = if policy == FlexPolicy::OverSub {
                oversub
            } else {
                1.0
            };
            let after = [CPU, MEM].map(|c| node.requested[c] + task.request[c]);
            if after.iter().any(|&a| a > limit) {
                continue;
            }
            -after[CPU].max(after[MEM])
        };
        if best.is_none_or(|(s, _)| score > s) {
            best = Some((score, i));
        }
    }
    best.map(|(_, i)| i)
}

/// Runs one policy over `tasks` (sorted by arrival).
pub fn run(setup: &FlexSetup, tasks: &[Task]) -> anyhow::Result<FlexOutcome> {
    let mut controller = FlexController::new(setup.params.clone())?;
    let noise = noise(setup.seed, setup.temporal_cv);
    let mut cluster = Cluster::new(setup.hosts);
    let mut queue: Vec<usize> = Vec::new();
    let mut next = 0;
    let periods = (setup.horizon_s / setup.period_s).ceil() as u64;
    let mut series = Vec::with_capacity(periods as usize);
    let mut seen: Vec<Measurement> = Vec::new();
    let (mut placed, mut penalty) = (0, 1.0);
    for period in 0..periods {
        let now = period as f64 * setup.period_s;
        cluster.finish(tasks, now);
        while next < tasks.len() && tasks[next].arrival_s <= now {
            queue.push(next);
            next += 1;
        }
        let m = cluster.measure(tasks, period, &noise, setup.demand_scale);
        let qos = (m.judged > 0).then(|| m.served as f64 / m.judged as f64);
        if setup.policy.is_flex() {
            penalty = controller.on_period(qos);
        }
        if period > 0 {
            seen.push(m);
            series.push(FlexPoint {
                hour: now / 3_600.0,
                penalty,
                qos,
                requested_cpu: m.requested[CPU],
                requested_mem: m.requested[MEM],
                usage_cpu: m.usage[CPU],
                usage_mem: m.usage[MEM],
            });
        }
        if setup.policy == FlexPolicy::FlexL {
            queue.sort_by(|&a, &b| {
                tasks[b].request[MEM]
                    .total_cmp(&tasks[a].request[MEM])
                    .then(a.cmp(&b))
            });
        }
        placed += schedule_pass(setup, &mut cluster, tasks, &mut queue, penalty, now);
    }
    Ok(summarise(setup, seen, series, placed, queue.len()))
}

/// One pass of `ScheduleOne` over the queue; returns the tasks placed. A task whose request
/// is at least a failed one's in both classes fails too without a search: within a pass
/// nodes only fill up and every rule is monotone in the request.
fn schedule_pass(
    setup: &FlexSetup,
    cluster: &mut Cluster,
    tasks: &[Task],
    queue: &mut Vec<usize>,
    penalty: f64,
    now: f64,
) -> usize {
    let mut failed: Vec<[f64; 2]> = Vec::new();
    let mut left = Vec::with_capacity(queue.len());
    let mut placed = 0;
    for &index in queue.iter() {
        let task = &tasks[index];
        let r = task.request;
        if failed.iter().any(|f| r[CPU] >= f[CPU] && r[MEM] >= f[MEM]) {
            left.push(index);
            continue;
        }
        match choose(setup.policy, setup.oversub, cluster, task, penalty) {
            Some(node) => {
                cluster.place(node, index, task, now);
                placed += 1;
            }
            None => {
                failed.retain(|f| !(f[CPU] >= r[CPU] && f[MEM] >= r[MEM]));
                failed.push(r);
                left.push(index);
            }
        }
    }
    *queue = left;
    placed
}

fn summarise(
    setup: &FlexSetup,
    seen: Vec<Measurement>,
    series: Vec<FlexPoint>,
    placed: usize,
    pending: usize,
) -> FlexOutcome {
    let n = seen.len().max(1) as f64;
    let avg = |f: &dyn Fn(&Measurement) -> f64| seen.iter().map(f).sum::<f64>() / n;
    let qos: Vec<f64> = series.iter().filter_map(|p| p.qos).collect();
    let target = setup.params.qos_target;
    FlexOutcome {
        policy: setup.policy,
        hosts: setup.hosts,
        demand_scale: setup.demand_scale,
        seed: setup.seed,
        requested: [avg(&|m| m.requested[CPU]), avg(&|m| m.requested[MEM])],
        usage: [avg(&|m| m.usage[CPU]), avg(&|m| m.usage[MEM])],
        violations_pct: 100.0 * qos.iter().map(|q| 1.0 - q).sum::<f64>() / qos.len().max(1) as f64,
        periods_on_target: qos.iter().filter(|&&q| q >= target).count() as f64
            / qos.len().max(1) as f64,
        mem_balance: avg(&|m| m.mem_balance),
        placed,
        pending,
        series,
    }
}

/// Runs every (policy, seed) of one setting on `threads` threads; tasks per seed come from
/// `workload(seed)`. Rows give the mean and spread over seeds.
pub fn run_grid(
    base: &FlexSetup,
    policies: &[FlexPolicy],
    seeds: &[u64],
    threads: usize,
    workload: &(dyn Fn(u64) -> anyhow::Result<Vec<Task>> + Sync),
) -> anyhow::Result<(Vec<FlexRow>, Vec<FlexOutcome>)> {
    let jobs: Vec<(FlexPolicy, u64)> = seeds
        .iter()
        .flat_map(|&s| policies.iter().map(move |&p| (p, s)))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    let cache: std::sync::Mutex<std::collections::HashMap<u64, std::sync::Arc<Vec<Task>>>> =
        Default::default();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<()> {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(policy, seed)) = jobs.get(i) else {
                            return Ok(());
                        };
                        let tasks = {
                            let mut cache = cache.lock().expect("workload cache");
                            match cache.get(&seed) {
                                Some(t) => t.clone(),
                                None => {
                                    let t = std::sync::Arc::new(workload(seed)?);
                                    cache.insert(seed, t.clone());
                                    t
                                }
                            }
                        };
                        let setup = FlexSetup {
                            policy,
                            seed,
                            ..base.clone()
                        };
                        let outcome = run(&setup, &tasks)?;
                        results.lock().expect("results").push(outcome);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join()
                .map_err(|_| anyhow::anyhow!("a simulation thread panicked"))??;
        }
        Ok(())
    })?;
    let mut outcomes = results.into_inner().expect("results");
    outcomes.sort_by_key(|o| (policies.iter().position(|p| *p == o.policy), o.seed));
    Ok((report::rows(&outcomes, policies), outcomes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::{generate, TraceParams};

    fn setup(policy: FlexPolicy, hosts: usize) -> FlexSetup {
        FlexSetup {
            policy,
            hosts,
            period_s: 300.0,
            horizon_s: 6.0 * 3_600.0,
            oversub: 2.0,
            demand_scale: 1.0,
            temporal_cv: 0.3,
            params: FlexParams::paper(),
            seed: 1,
        }
    }

    #[test]
    fn the_orderings_of_section_5_hold_on_a_small_cloud() {
        let params = TraceParams {
            hosts: 40,
            horizon_s: 6.0 * 3_600.0,
            ..TraceParams::default()
        };
        let tasks = generate(&params, 1);
        let out = |p| run(&setup(p, 40), &tasks).unwrap();
        let (least, over, flex) = (
            out(FlexPolicy::LeastFit),
            out(FlexPolicy::OverSub),
            out(FlexPolicy::FlexF),
        );
        assert!(
            least.requested[CPU] <= 1.0 + 1e-9,
            "LeastFit never over-commits requests"
        );
        assert!(over.requested[CPU] <= 2.0 + 1e-9);
        assert!(
            flex.requested[CPU] > 1.3 * least.requested[CPU],
            "{flex:?}\n{least:?}"
        );
        assert!(
            flex.violations_pct < over.violations_pct,
            "{} vs {}",
            flex.violations_pct,
            over.violations_pct
        );
        assert!(least.violations_pct <= flex.violations_pct);
    }

    #[test]
    fn the_same_seed_gives_the_same_run() {
        let params = TraceParams {
            hosts: 10,
            horizon_s: 3_600.0,
            ..TraceParams::default()
        };
        let tasks = generate(&params, 3);
        let a = run(&setup(FlexPolicy::FlexL, 10), &tasks).unwrap();
        let b = run(&setup(FlexPolicy::FlexL, 10), &tasks).unwrap();
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
    }
}
