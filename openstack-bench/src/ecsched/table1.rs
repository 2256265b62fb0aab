//! ECSched's Table 1 (seed 004, §4.1): average CPU and memory utilisation of the 30-VM cluster
//! when every sampled task is submitted at time 0, for ECSched-dp, ECSched-ml (the library's
//! `control::ecsched::solve` with the paper's rules), Kubernetes (≈ the library's `worst_fit`:
//! spreading) and Swarm (≈ `best_fit`: packing), each one task at a time from a FIFO queue.
//!
//! The simulator's model (docs/bench-history/2026-12-02-ecsched.md says why each holds):
//! - A task runs its duration from when it is placed; utilisation is Σ used / Σ capacity per
//!   class, averaged over time ([`Outcome`] says over which spans).
//! - Nova has no pending queue: the queue with retries exists only here. Queue-based schedulers
//!   place, in queue order, every task that fits somewhere; a task that fits nowhere waits.
//! - ECSched runs a round at every completion and arrival (a heartbeat shorter than any gap
//!   between events), repeated while a round places something. A round's batch is the first
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

/// The outcome of one run. Utilisation is Σ used / Σ capacity per class (CPU, memory),
/// averaged over time three ways: over the experiment's `horizon_s` (§4.1: "5 hours at each
/// experiment"; the run's end if it ends sooner), over the whole run (0 to the last
/// completion), and over the time some submitted task waits (the cluster is backlogged: what
/// the packing alone decides).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Outcome {
    pub horizon: [f64; CLASSES],
    pub makespan: [f64; CLASSES],
    pub backlogged: [f64; CLASSES],
    pub makespan_s: f64,
    pub backlogged_s: f64,
    pub completed: usize,
}

impl Outcome {
    /// Adds `o / n` to each field (the mean of `n` runs).
    pub fn add_share(&mut self, o: &Outcome, n: f64) {
        for k in 0..CLASSES {
            self.horizon[k] += o.horizon[k] / n;
            self.makespan[k] += o.makespan[k] / n;
            self.backlogged[k] += o.backlogged[k] / n;
        }
        self.makespan_s += o.makespan_s / n;
        self.backlogged_s += o.backlogged_s / n;
        self.completed += o.completed;
    }
}

/// Task demands in the units of [`super::shapes`] (1.0 = 4 cores, 12 GiB).
pub fn demand(t: &Task) -> [u64; CLASSES] {
    [
        (t.cpu * 4_000.0).ceil() as u64,
        (t.mem * 12_288.0).ceil() as u64,
    ]
}

/// The settings of a run: ECSched's largest batch, the experiment's length.
#[derive(Clone, Copy, Debug)]
pub struct RunSettings {
    pub window: usize,
    pub horizon_s: f64,
}

/// Time-weighted sums of what the hosts use.
#[derive(Default)]
struct Areas {
    all: [f64; CLASSES],
    horizon: [f64; CLASSES],
    backlogged: [f64; CLASSES],
    backlogged_s: f64,
}

impl Areas {
    /// Adds the interval [`from`, `to`) during which the hosts use `used` and the queue is
    /// `waiting` or not.
    fn add(&mut self, used: [f64; CLASSES], from: f64, to: f64, horizon: f64, waiting: bool) {
        let (dt, dt_h) = (to - from, to.min(horizon) - from.min(horizon));
        for (k, u) in used.iter().enumerate() {
            self.all[k] += u * dt;
            self.horizon[k] += u * dt_h;
            if waiting {
                self.backlogged[k] += u * dt;
            }
        }
        if waiting {
            self.backlogged_s += dt;
        }
    }
}

/// Runs `tasks` (each submitted at its `submit_s`) on `hosts` under `scheduler`; also
/// returns each task's completion time (finish − submission; NaN for a task that fits no
/// host and never runs).
pub fn run(
    scheduler: Scheduler,
    hosts: &[[u64; CLASSES]],
    tasks: &[Task],
    settings: RunSettings,
) -> (Outcome, Vec<f64>) {
    let mut free: Vec<[u64; CLASSES]> = hosts.to_vec();
    let total: [f64; CLASSES] = [0, 1].map(|k| hosts.iter().map(|h| h[k] as f64).sum());
    let demands: Vec<[u64; CLASSES]> = tasks.iter().map(demand).collect();
    let mut order: Vec<usize> = (0..tasks.len())
        .filter(|&i| hosts.iter().any(|h| fits(&demands[i], h)))
        .collect();
    order.sort_by(|&a, &b| tasks[a].submit_s.total_cmp(&tasks[b].submit_s));
    let mut arrivals = order.into_iter().peekable();
    let mut queue: Vec<usize> = Vec::new();
    let mut running: BinaryHeap<Reverse<(u64, usize, usize)>> = BinaryHeap::new();
    let mut done = vec![f64::NAN; tasks.len()];
    let (mut now, mut areas) = (0.0f64, Areas::default());
    let every_host: Vec<usize> = (0..hosts.len()).collect();
    let mut changed = every_host.clone();
    loop {
        while let Some(&t) = arrivals.peek().filter(|&&t| tasks[t].submit_s <= now) {
            queue.push(t);
            arrivals.next();
            changed.clone_from(&every_host);
        }
        let placed = match scheduler {
            Scheduler::Ecsched(model) => ecsched_rounds(
                model,
                hosts,
                &mut free,
                &demands,
                &mut queue,
                &changed,
                settings.window,
            ),
            Scheduler::Queue(_, key) => {
                queue_pass(key, hosts, &mut free, &demands, &mut queue, &changed)
            }
        };
        for (task, host) in placed {
            let end = now + tasks[task].duration_s;
            running.push(Reverse(((end * 1e3) as u64, task, host)));
        }
        let next_end = running.peek().map(|Reverse((e, ..))| *e as f64 / 1e3);
        let next_arrival = arrivals.peek().map(|&t| tasks[t].submit_s);
        let Some(next) = [next_end, next_arrival]
            .into_iter()
            .flatten()
            .reduce(f64::min)
        else {
            break;
        };
        let used = [0, 1].map(|k| {
            let u: u64 = hosts.iter().zip(&free).map(|(h, f)| h[k] - f[k]).sum();
            u as f64
        });
        areas.add(used, now, next, settings.horizon_s, !queue.is_empty());
        now = next;
        changed.clear();
        while let Some(&Reverse((end_ms, task, host))) = running.peek() {
            if end_ms as f64 / 1e3 > now {
                break;
            }
            running.pop();
            done[task] = now - tasks[task].submit_s;
            for k in 0..CLASSES {
                free[host][k] += demands[task][k];
            }
            changed.push(host);
        }
    }
    let share = |area: f64, k: usize, span: f64| area / (total[k] * span.max(1e-9));
    let outcome = Outcome {
        horizon: [0, 1].map(|k| share(areas.horizon[k], k, now.min(settings.horizon_s))),
        makespan: [0, 1].map(|k| share(areas.all[k], k, now)),
        backlogged: [0, 1].map(|k| share(areas.backlogged[k], k, areas.backlogged_s)),
        makespan_s: now,
        backlogged_s: areas.backlogged_s,
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
        // Only the hosts that gained room can take a queued task (after each instant's
        // rounds no queued task fits any host): every other host would have no edge, so the
        // network is the same with the batch's machine affinity set to those hosts, and
        // small (the normalisation still reads the whole cluster).
        let mut room: Vec<u32> = changed.iter().map(|&h| h as u32).collect();
        room.sort_unstable();
        room.dedup();
        let requests: Vec<BatchRequest> = batch
            .iter()
            .map(|&t| BatchRequest {
                demand: demands[t].to_vec(),
                hosts: Some(room.clone()),
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
