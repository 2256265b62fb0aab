//! A fluid model of the thesis' Xen testbed (seed 003 §4.1): hosts of one 2.13 GHz core shared
//! fairly by `parasol::control::hungry_level`, VM desires from a workload, the loader's ±5 %
//! error, 20 s samples of 1-minute averages, and migrations that take time and Domain-0 CPU on
//! both hosts. The scheduler sees only the averages; the library's solvers plan each round.

use std::collections::VecDeque;

use parasol::control::{
    detect_hungry, hungry_level, jain_index, rebalance, FmuParams, FmuProblem, Move, MoveRules,
    PlanLimits, RebalanceInput, Solver,
};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// What drives each VM's desire (MHz) over time.
pub trait Workload {
    /// The desire of `vm` at second `t`, before the loader's error.
    fn desire(&self, vm: usize, t: u64) -> f64;
}

/// The testbed's constants (§4.1) and the model's choices (docs/fmu.md §6).
#[derive(Clone, Debug)]
pub struct Testbed {
    /// One core per host (§4.2: "limit our testbed to use only a single core").
    pub mhz: f64,
    /// Hosts.
    pub hosts: usize,
    /// The initial host of each VM.
    pub placement: Vec<usize>,
    /// Length of the run in seconds.
    pub duration_s: u64,
    /// When the scheduler is switched on.
    pub scheduler_start_s: u64,
    /// Monitoring sample period (20 s).
    pub sample_s: u64,
    /// Averaging window of the reported usage (60 s).
    pub average_s: u64,
    /// Seconds one step of migrations takes (128 MB over 1 Gbps plus Xen's rounds).
    pub migration_s: u64,
    /// Seconds from a round's sample to its first migration: the solver's search time
    /// (Tables 4.3–4.4 report 3–23 s; 0, the reproduction's default, plans instantly).
    pub search_s: u64,
    /// Domain-0 CPU per migration on each of the two hosts, MHz.
    pub migration_mhz: f64,
    /// The loader's error (±5 %), redrawn every `noise_period_s`.
    pub noise: f64,
    /// The loader's calibration period (2 s).
    pub noise_period_s: u64,
    /// Moves per source and at once.
    pub limits: PlanLimits,
    /// The scheduler stops after this many rounds with moves (`None`: it runs to the end, the
    /// reproduction's reading of §4.2 "runs for the remainder of the experiment").
    pub max_rounds: Option<usize>,
    /// The scheduler knows each hungry VM's true desire (an oracle, for isolation) instead
    /// of estimating one core (docs/fmu.md §6 reading 4).
    pub oracle_desire: bool,
    /// The migration resistance given to the solver (`None`: the thesis', 5 % for BCPU/BCPU2
    /// and none for SA and GBM).
    pub resistance: Option<f64>,
}

/// One scheduling round that moved VMs.
#[derive(Clone, Debug, PartialEq)]
pub struct Round {
    /// When it was planned.
    pub at_s: u64,
    /// Migrations.
    pub moves: usize,
    /// Seconds from the first migration's start to the last one's end.
    pub migration_s: u64,
    /// The cost C the scheduler saw before the round and predicted after it (on its own
    /// observed problem, docs/fmu.md §6 reading 4).
    pub cost_before: f64,
    /// See `cost_before`.
    pub cost_after: f64,
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Rounds that moved VMs.
    pub rounds: Vec<Round>,
    /// Per sample: (t, utilization of VMs, hungry count, Jain's index over the hungry).
    pub samples: Vec<(u64, f64, usize, f64)>,
}

impl Outcome {
    /// All migrations.
    pub fn migrations(&self) -> usize {
        self.rounds.iter().map(|r| r.moves).sum()
    }
}

struct InFlight {
    steps: VecDeque<Vec<Move>>,
    step_started: u64,
    first_started: u64,
}

/// Runs `workload` on the testbed with `solver` (`None`: the NULL scheduler), seeded.
#[allow(clippy::too_many_lines)]
pub fn run(
    bed: &Testbed,
    workload: &dyn Workload,
    solver: Option<Solver>,
    rng: &mut ChaCha8Rng,
) -> anyhow::Result<Outcome> {
    let vms = bed.placement.len();
    let mut host = bed.placement.clone();
    let mut noise = vec![0.0; vms];
    let mut history: Vec<VecDeque<f64>> = vec![VecDeque::new(); vms];
    let mut flight: Option<InFlight> = None;
    let mut last_move_end: Option<u64> = None;
    let mut outcome = Outcome {
        rounds: Vec::new(),
        samples: Vec::new(),
    };
    let names: Vec<String> = (0..vms).map(|vm| format!("vm{vm:04}")).collect();
    let rules = MoveRules::unconstrained(vms, bed.hosts);
    let params = FmuParams::equal(1);
    for t in 0..bed.duration_s {
        if t % bed.noise_period_s.max(1) == 0 {
            for n in noise.iter_mut() {
                *n = rng.gen_range(-bed.noise..=bed.noise);
            }
        }
        // Migrations: a step ends after `migration_s`, the next starts.
        if let Some(f) = flight.as_mut() {
            if t >= f.step_started + bed.migration_s {
                for m in f.steps.pop_front().unwrap_or_default() {
                    host[m.vm] = m.to;
                    history[m.vm].clear();
                }
                f.step_started = t;
                if f.steps.is_empty() {
                    if let Some(round) = outcome.rounds.last_mut() {
                        round.migration_s = t - f.first_started;
                    }
                    last_move_end = Some(t);
                    flight = None;
                }
            }
        }
        let mut dom0 = vec![0.0; bed.hosts];
        let migrating = flight.iter().filter(|f| t >= f.step_started);
        for m in migrating.flat_map(|f| f.steps.front()).flatten() {
            dom0[m.from] += bed.migration_mhz;
            dom0[m.to] += bed.migration_mhz;
        }
        let desire: Vec<f64> = (0..vms)
            .map(|vm| (workload.desire(vm, t) * (1.0 + noise[vm])).clamp(0.0, bed.mhz))
            .collect();
        let mut alloc = vec![0.0; vms];
        let mut hungry = vec![false; vms];
        for (h, busy) in dom0.iter().enumerate() {
            let members: Vec<usize> = (0..vms).filter(|vm| host[*vm] == h).collect();
            let wants: Vec<f64> = members.iter().map(|vm| desire[*vm]).collect();
            let capacity = (bed.mhz - busy).max(0.0);
            let hl = hungry_level(capacity, &wants, Some(bed.mhz));
            for vm in members {
                alloc[vm] = desire[vm].min(hl);
                hungry[vm] = desire[vm] > hl + 1e-9;
            }
        }
        for (window, a) in history.iter_mut().zip(&alloc) {
            window.push_back(*a);
            if window.len() as u64 > bed.average_s {
                window.pop_front();
            }
        }
        if t % bed.sample_s != 0 {
            continue;
        }
        outcome.samples.push(sample(t, bed, &alloc, &hungry));
        let settled = !matches!(last_move_end, Some(end) if t < end + bed.average_s);
        let done = bed
            .max_rounds
            .is_some_and(|max| outcome.rounds.len() >= max);
        let Some(solver) =
            solver.filter(|_| t >= bed.scheduler_start_s && flight.is_none() && !done)
        else {
            continue;
        };
        if !settled {
            continue;
        }
        let usage: Vec<f64> = history
            .iter()
            .map(|h| h.iter().sum::<f64>() / h.len().max(1) as f64)
            .collect();
        let mut problem = observed_problem(bed, &host, &usage);
        if bed.oracle_desire {
            for (vm, desire) in problem.desires.iter_mut().enumerate() {
                if desire[0] >= bed.mhz {
                    desire[0] = workload.desire(vm, t).min(bed.mhz);
                }
            }
        }
        let input = RebalanceInput {
            problem: &problem,
            usage: &usage,
            names: &names,
            current: &host,
            rules: &rules,
            params: &params,
            resistance: bed.resistance.unwrap_or(solver.thesis_resistance()),
        };
        let plan = rebalance(&input, solver, bed.limits, rng.gen())?;
        let moves = plan.plan.moves().count();
        if moves > 0 {
            outcome.rounds.push(Round {
                at_s: t,
                moves,
                migration_s: 0,
                cost_before: plan.before.cost,
                cost_after: plan.after.cost,
            });
            flight = Some(InFlight {
                steps: plan.plan.steps.into_iter().collect(),
                step_started: t + bed.search_s,
                first_started: t + bed.search_s,
            });
        }
    }
    Ok(outcome)
}

/// What the scheduler believes (docs/fmu.md §6 reading 4): usage for satisfied VMs, one core
/// for the VMs §3.6 detects as hungry.
fn observed_problem(bed: &Testbed, host: &[usize], usage: &[f64]) -> FmuProblem {
    let mut desires = vec![vec![0.0]; usage.len()];
    for h in 0..bed.hosts {
        let members: Vec<usize> = (0..usage.len()).filter(|vm| host[*vm] == h).collect();
        let seen: Vec<f64> = members.iter().map(|vm| usage[*vm]).collect();
        for (vm, is_hungry) in members.iter().zip(detect_hungry(bed.mhz, &seen, 0.95)) {
            desires[*vm][0] = if is_hungry { bed.mhz } else { usage[*vm] };
        }
    }
    FmuProblem {
        capacities: vec![vec![bed.mhz]; bed.hosts],
        desires,
        max_alloc: vec![Some(bed.mhz)],
    }
}

/// Utilization by VMs, hungry count and Jain's index over the augmented hungry set (§3.4).
fn sample(t: u64, bed: &Testbed, alloc: &[f64], hungry: &[bool]) -> (u64, f64, usize, f64) {
    let used: f64 = alloc.iter().sum();
    let count = hungry.iter().filter(|h| **h).count();
    let average = if count > 0 {
        (0..alloc.len())
            .filter(|vm| hungry[*vm])
            .map(|vm| alloc[vm])
            .sum::<f64>()
            / count as f64
    } else {
        f64::INFINITY
    };
    let fairness = jain_index(
        (0..alloc.len())
            .filter(|vm| hungry[*vm] || alloc[*vm] > average + 1e-9)
            .map(|vm| alloc[vm]),
    );
    (t, used / (bed.mhz * bed.hosts as f64), count, fairness)
}
