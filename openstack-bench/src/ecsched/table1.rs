//! ECSched's Table 1 (seed 004, §4.1): average CPU and memory utilisation of the 30-VM cluster
//! when every sampled task is submitted at time 0, for ECSched-dp, ECSched-ml (the library's
//! `control::ecsched::solve` with the paper's rules), Kubernetes (≈ the library's `worst_fit`:
//! spreading) and Swarm (≈ `best_fit`: packing), each one task at a time from a FIFO queue.
//!
//! The simulator's model (docs/bench-history/2026-12-02-ecsched.md says why each holds):
//! - A task runs its duration from when it is placed; utilisation is Σ used / Σ capacity per
//!   class, averaged over time from 0 to the last completion.
//! - Nova has no pending queue: the queue with retries exists only here. Queue-based schedulers
//!   place, in queue order, every task that fits somewhere; a task that fits nowhere waits.
//! - ECSched runs a round at every completion (a heartbeat shorter than any gap between
//!   completions), repeated while a round places something. A round's batch is the first
//!   `window` pending tasks (in queue order) that fit some host; the paper's batch is every
//!   pending task (K = N), which only differs when more than `window` could start at once.
//! - Affinity (6 % of tasks) is not modelled here: all hosts are eligible for every task.

use super::shapes::CLASSES;
use super::trace::Task;
use parasol::control::ecsched::{solve, BatchRequest, Cluster, CostModel, SolveOptions};
use parasol::domain::{HostState, Resources};
use parasol::policy::algorithms::{best_fit, worst_fit, KeyFn};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The schedulers of Table 1.
#[derive(Clone, Copy, Debug)]
pub enum Scheduler {
    Ecsched(CostModel),
    /// One at a time, the host that fits with the key's highest score.
    Queue(&'static str, KeyFn),
}

impl Scheduler {
    /// Table 1's four columns.
    pub fn table1() -> [Scheduler; 4] {
        [
            Scheduler::Ecsched(CostModel::DotProduct),
            Scheduler::Ecsched(CostModel::MostLoaded),
            Scheduler::Queue("Kubernetes (worst_fit)", worst_fit::score),
            Scheduler::Queue("Swarm (best_fit)", best_fit::score),
        ]
    }

    /// The column's name.
    pub fn name(&self) -> String {
        match self {
            Scheduler::Ecsched(CostModel::DotProduct) => "ECSched-dp".into(),
            Scheduler::Ecsched(CostModel::MostLoaded) => "ECSched-ml".into(),
            Scheduler::Ecsched(m) => format!("ECSched-{m:?}"),
            Scheduler::Queue(name, _) => (*name).into(),
        }
    }
}

/// The outcome of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Outcome {
    pub cpu_utilisation: f64,
    pub mem_utilisation: f64,
    pub makespan_s: f64,
    /// Per task, the time from submission to completion.
    pub completed: usize,
}

/// Task demands in the units of [`super::shapes`] (1.0 = 4 cores, 12 GiB).
pub fn demand(t: &Task) -> [u64; CLASSES] {
    [
        (t.cpu * 4_000.0).ceil() as u64,
        (t.mem * 12_288.0).ceil() as u64,
    ]
}

/// Runs `tasks` (all submitted at 0) on `hosts` under `scheduler`; also returns each task's
/// completion time.
pub fn run(
    scheduler: Scheduler,
    hosts: &[[u64; CLASSES]],
    tasks: &[Task],
    window: usize,
) -> (Outcome, Vec<f64>) {
    let mut free: Vec<[u64; CLASSES]> = hosts.to_vec();
    let total: [f64; CLASSES] = [0, 1].map(|k| hosts.iter().map(|h| h[k] as f64).sum());
    let demands: Vec<[u64; CLASSES]> = tasks.iter().map(demand).collect();
    let mut queue: Vec<usize> = (0..tasks.len())
        .filter(|&i| hosts.iter().any(|h| fits(&demands[i], h)))
        .collect();
    let mut running: BinaryHeap<Reverse<(u64, usize, usize)>> = BinaryHeap::new();
    let mut done = vec![f64::NAN; tasks.len()];
    let (mut now, mut area) = (0.0f64, [0.0f64; CLASSES]);
    let mut changed: Vec<usize> = (0..hosts.len()).collect();
    loop {
        let placed = match scheduler {
            Scheduler::Ecsched(model) => ecsched_rounds(
                model, hosts, &mut free, &demands, &mut queue, &changed, window,
            ),
            Scheduler::Queue(_, key) => {
                queue_pass(key, hosts, &mut free, &demands, &mut queue, &changed)
            }
        };
        for (task, host) in placed {
            let end = now + tasks[task].duration_s;
            running.push(Reverse(((end * 1e3) as u64, task, host)));
        }
        let Some(Reverse((end_ms, task, host))) = running.pop() else {
            break;
        };
        let end = end_ms as f64 / 1e3;
        for (k, a) in area.iter_mut().enumerate() {
            let used: u64 = hosts.iter().zip(&free).map(|(h, f)| h[k] - f[k]).sum();
            *a += used as f64 * (end - now);
        }
        now = end;
        done[task] = now;
        for k in 0..CLASSES {
            free[host][k] += demands[task][k];
        }
        changed = vec![host];
    }
    let outcome = Outcome {
        cpu_utilisation: area[0] / (total[0] * now.max(1e-9)),
        mem_utilisation: area[1] / (total[1] * now.max(1e-9)),
        makespan_s: now,
        completed: done.iter().filter(|d| !d.is_nan()).count(),
    };
    (outcome, done)
}

fn fits(d: &[u64; CLASSES], free: &[u64; CLASSES]) -> bool {
    d[0] <= free[0] && d[1] <= free[1]
}

/// Queue order, each task to the fitting host of highest key. Only hosts in `changed` gained
/// room since the last pass, so a task that fits none of them still fits nowhere.
fn queue_pass(
    key: KeyFn,
    hosts: &[[u64; CLASSES]],
    free: &mut [[u64; CLASSES]],
    demands: &[[u64; CLASSES]],
    queue: &mut Vec<usize>,
    changed: &[usize],
) -> Vec<(usize, usize)> {
    let mut placed = Vec::new();
    queue.retain(|&t| {
        let d = &demands[t];
        if !changed.iter().any(|&h| fits(d, &free[h])) {
            return true;
        }
        let want = Resources::new(d[0] as i64, d[1] as i64, 0);
        let mut best: Option<(f64, usize)> = None;
        for h in (0..hosts.len()).filter(|&h| fits(d, &free[h])) {
            let state = host_state(h, &hosts[h], &free[h]);
            let s = key(&state, &want);
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, h));
            }
        }
        let Some((_, h)) = best else { return true };
        for k in 0..CLASSES {
            free[h][k] -= d[k];
        }
        placed.push((t, h));
        false
    });
    placed
}

fn host_state(h: usize, cap: &[u64; CLASSES], free: &[u64; CLASSES]) -> HostState {
    HostState::synthetic(
        h as i64,
        Resources::new(cap[0] as i64, cap[1] as i64, 0),
        Resources::new((cap[0] - free[0]) as i64, (cap[1] - free[1]) as i64, 0),
    )
}

/// ECSched's rounds at one instant: the batch of the first `window` pending tasks that fit a
/// host that gained room, solved by the library with the paper's rules, repeated while a
/// round places something.
fn ecsched_rounds(
    model: CostModel,
    hosts: &[[u64; CLASSES]],
    free: &mut [[u64; CLASSES]],
    demands: &[[u64; CLASSES]],
    queue: &mut Vec<usize>,
    changed: &[usize],
    window: usize,
) -> Vec<(usize, usize)> {
    let opts = SolveOptions::paper(model);
    let mut placed = Vec::new();
    loop {
        let batch: Vec<usize> = queue
            .iter()
            .copied()
            .filter(|&t| changed.iter().any(|&h| fits(&demands[t], &free[h])))
            .take(window)
            .collect();
        if batch.is_empty() {
            return placed;
        }
        let cluster = Cluster::new(
            CLASSES,
            hosts.iter().flatten().copied().collect(),
            free.iter().flatten().copied().collect(),
        )
        .expect("free within capacity");
        let requests: Vec<BatchRequest> = batch
            .iter()
            .map(|&t| BatchRequest {
                demand: demands[t].to_vec(),
                ..Default::default()
            })
            .collect();
        let p = solve(&cluster, &requests, &opts).expect("valid batch");
        let mut round = 0;
        for (&t, h) in batch.iter().zip(&p.hosts) {
            if let Some(h) = *h {
                for k in 0..CLASSES {
                    free[h as usize][k] -= demands[t][k];
                }
                placed.push((t, h as usize));
                round += 1;
            }
        }
        if round == 0 {
            return placed;
        }
        let started: std::collections::HashSet<usize> = placed.iter().map(|p| p.0).collect();
        queue.retain(|t| !started.contains(t));
    }
}
