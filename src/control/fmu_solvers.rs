//! The thesis' rebalancers (seed 003): BCPU and BCPU2 (§3.7.2, Graham's 4/3 and 2
//! approximations with the 5 % migration resistance), simulated annealing (§3.8, Table 3.2's
//! parameters, the biased neighbor of §3.8.4) and Greedy Best Move (§3.9.1). Each returns a
//! target placement and the order it prefers its moves in; [`rebalance`] orders them into
//! feasible steps. Every random choice comes from the seed.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::fmu_delta::CostTracker;
use super::fmu_model::{
    evaluate, invalid, FmuError, FmuEvaluation, FmuParams, FmuProblem, VmState,
};
use super::fmu_plan::{order_moves, MoveRules, Occupancy, OrderedPlan, PlanLimits};

/// §3.7.2: keep the VM where it is when the best host would leave it within 5 % of the load
/// its current host would have.
pub const MIGRATION_RESISTANCE: f64 = 0.05;

/// Simulated annealing's parameters (Table 3.2 and the values §3.8.3 chose).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SaParams {
    /// Temperature reduction factor (0.8).
    pub alpha: f64,
    /// Initial temperature (10).
    pub temp: f64,
    /// Steps; `None` is MN/2 (M VMs, N PMs).
    pub time_max: Option<usize>,
    /// Steps per temperature; `None` is 2·time_max/N.
    pub modulus: Option<usize>,
    /// Early stop below this cost (not printed; 1e-9 stops on a perfect schedule only).
    pub cost_threshold: f64,
    /// Also apply `cost_threshold` to the current state: when it is already below, SA keeps
    /// it without searching. §3.8.1's pseudocode tests new states only (`false`, the literal
    /// reading); §3.8.2 calls `cost_thr` a "stopping criteria" that saves time "when an
    /// acceptable assignment is close to the current assignment". With the default 1e-9 the
    /// two coincide: below it only ties are found, and [`rebalance`] never moves to a tie.
    pub threshold_on_start: bool,
    /// How often the neighbor makes a "good" move (§3.8.4; not printed, 0.5 here).
    pub good_move_probability: f64,
    /// §3.8.1's `if cost_new ≤ cost_best`: a state that merely ties the best one replaces it
    /// (`true`, as printed); `false` keeps the first state of the lowest cost found.
    pub accept_ties: bool,
}

impl Default for SaParams {
    fn default() -> Self {
        SaParams {
            alpha: 0.8,
            temp: 10.0,
            time_max: None,
            modulus: None,
            cost_threshold: 1e-9,
            threshold_on_start: false,
            good_move_probability: 0.5,
            accept_ties: true,
        }
    }
}

/// Greedy Best Move's parameters (§3.9.1).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GbmParams {
    /// A move is a candidate when its ΔC is at least this fraction of the VM's best ΔC (the
    /// "prescribed fraction", not printed: 0.9).
    pub candidate_fraction: f64,
    /// Stop after this many moves (`None`: no limit, as in the thesis).
    pub max_moves: Option<usize>,
    /// A move must lower the cost by more than this to count as an improvement.
    pub improvement_epsilon: f64,
}

impl Default for GbmParams {
    fn default() -> Self {
        GbmParams {
            candidate_fraction: 0.9,
            max_moves: None,
            improvement_epsilon: 1e-9,
        }
    }
}

/// Which rebalancer.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Solver {
    /// Balanced CPU: decreasing CPU usage, least-loaded host (§3.7.2).
    Bcpu,
    /// BCPU2: VMs by name, least-loaded host (§3.7.2).
    Bcpu2,
    /// Simulated annealing (§3.8).
    Sa(SaParams),
    /// Greedy Best Move (§3.9).
    Gbm(GbmParams),
}

impl Solver {
    /// The name the thesis uses.
    pub fn name(&self) -> &'static str {
        match self {
            Solver::Bcpu => "BCPU",
            Solver::Bcpu2 => "BCPU2",
            Solver::Sa(_) => "SA",
            Solver::Gbm(_) => "GBM",
        }
    }

    /// The resistance the thesis gives this solver: 5 % for BCPU/BCPU2 (§3.7.2), none for SA
    /// and GBM (the reproduction's reading).
    pub fn thesis_resistance(&self) -> f64 {
        match self {
            Solver::Bcpu | Solver::Bcpu2 => MIGRATION_RESISTANCE,
            Solver::Sa(_) | Solver::Gbm(_) => 0.0,
        }
    }
}

/// One rebalancing request.
#[derive(Clone, Copy, Debug)]
pub struct RebalanceInput<'a> {
    /// Capacities and (estimated) desires, for the FMU cost.
    pub problem: &'a FmuProblem,
    /// The measured CPU usage of each VM, for BCPU/BCPU2 (they see usage, not desire).
    pub usage: &'a [f64],
    /// VM names, BCPU2's order.
    pub names: &'a [String],
    /// The host of each VM now.
    pub current: &'a [usize],
    /// The hard constraints.
    pub rules: &'a MoveRules,
    /// Weights and normalization of the cost.
    pub params: &'a FmuParams,
    /// The migration resistance, a fraction: BCPU/BCPU2 keep a VM whose best host leaves it
    /// within this of its current host's load (§3.7.2: [`MIGRATION_RESISTANCE`]); GBM moves a
    /// VM only to a host whose demand with it stays this fraction below its current host's;
    /// SA's plan is kept only when it lowers C by this fraction. The thesis gives SA and GBM
    /// none (0).
    pub resistance: f64,
}

/// A solver's result: the ordered plan and the predicted before/after.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RebalancePlan {
    /// Which solver.
    pub solver: &'static str,
    /// The moves in feasible steps, and those no order reaches.
    pub plan: OrderedPlan,
    /// VMs left out, each with its reason.
    pub not_movable: Vec<(usize, String)>,
    /// U, F, C now.
    pub before: FmuEvaluation,
    /// U, F, C after the plan (as ordered, dropped moves excluded).
    pub after: FmuEvaluation,
}

/// Plans a rebalance of `input` with `solver`, seeded.
pub fn rebalance(
    input: &RebalanceInput<'_>,
    solver: Solver,
    limits: PlanLimits,
    seed: u64,
) -> Result<RebalancePlan, FmuError> {
    let vms = input.current.len();
    let hosts = input.problem.capacities.len();
    if input.usage.len() != vms || input.names.len() != vms {
        return Err(invalid("usage/names", format!("need {vms} VMs")));
    }
    input.rules.validate(vms, hosts)?;
    let before = evaluate(input.problem, input.current, input.params)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut target, preference) = match solver {
        Solver::Bcpu => bcpu(input, false),
        Solver::Bcpu2 => bcpu(input, true),
        Solver::Sa(p) => anneal(input, &before, p, &mut rng)?,
        Solver::Gbm(p) => greedy_best_move(input, p, &mut rng)?,
    };
    // SA's best state may merely tie the current one (`cost_new ≤ cost_best`); moving to it
    // buys nothing (docs/fmu.md §4). BCPU/BCPU2 do not look at the cost, as in the thesis.
    if matches!(solver, Solver::Sa(_)) {
        let cost = evaluate(input.problem, &target, input.params)?.cost;
        if cost >= before.cost * (1.0 - input.resistance) - 1e-9 {
            target = input.current.to_vec();
        }
    }
    let plan = order_moves(input.current, &target, &preference, input.rules, limits);
    let after = evaluate(input.problem, &plan.apply(input.current), input.params)?;
    let not_movable = (0..vms)
        .filter_map(|vm| input.rules.not_movable[vm].clone().map(|r| (vm, r)))
        .collect();
    Ok(RebalancePlan {
        solver: solver.name(),
        plan,
        not_movable,
        before,
        after,
    })
}

fn movable(input: &RebalanceInput<'_>, vm: usize) -> bool {
    input.rules.not_movable[vm].is_none()
}

/// BCPU (`by_name` false) and BCPU2: Graham's list scheduling on CPU usage, building the new
/// schedule from empty hosts; unmovable VMs are placed first, where they are.
fn bcpu(input: &RebalanceInput<'_>, by_name: bool) -> (Vec<usize>, Vec<usize>) {
    let vms = input.current.len();
    let hosts = input.problem.capacities.len();
    let mut order: Vec<usize> = (0..vms).filter(|vm| movable(input, *vm)).collect();
    if by_name {
        order.sort_by(|a, b| input.names[*a].cmp(&input.names[*b]));
    } else {
        order.sort_by(|a, b| input.usage[*b].total_cmp(&input.usage[*a]).then(a.cmp(b)));
    }
    let mut occupancy = Occupancy::empty(input.rules, vms);
    let mut load = vec![0.0; hosts];
    let mut target = input.current.to_vec();
    for vm in (0..vms).filter(|vm| !movable(input, *vm)) {
        occupancy.place(vm, input.current[vm]);
        load[input.current[vm]] += input.usage[vm];
    }
    for vm in order.iter().copied() {
        let usage = input.usage[vm];
        let current = input.current[vm];
        let best = (0..hosts)
            .filter(|h| occupancy.refusal(vm, *h).is_none())
            .min_by(|a, b| load[*a].total_cmp(&load[*b]).then(a.cmp(b)));
        let current_fits = occupancy.refusal(vm, current).is_none();
        let host = match best {
            Some(best) if current_fits => {
                let at_current = load[current] + usage;
                let at_best = load[best] + usage;
                if at_current - at_best <= input.resistance * at_current {
                    current
                } else {
                    best
                }
            }
            Some(best) => best,
            None => current,
        };
        occupancy.place(vm, host);
        load[host] += usage;
        target[vm] = host;
    }
    (target, order)
}

/// §3.8.1's SA (KGV83 with the Metropolis criterion), reading `neighbor(s)`/`cost(s)` as
/// acting on `s_cur`. Returns the best state visited.
fn anneal(
    input: &RebalanceInput<'_>,
    before: &FmuEvaluation,
    p: SaParams,
    rng: &mut ChaCha8Rng,
) -> Result<(Vec<usize>, Vec<usize>), FmuError> {
    let vms = input.current.len();
    let hosts = input.problem.capacities.len();
    let time_max = p.time_max.unwrap_or(vms * hosts / 2).max(1);
    let modulus = p.modulus.unwrap_or(2 * time_max / hosts.max(1)).max(1);
    let mut cur = input.current.to_vec();
    let mut cur_eval = before.clone();
    let mut best = cur.clone();
    let mut best_cost = cur_eval.cost;
    let mut temp = p.temp;
    let mut moved: Vec<usize> = Vec::new();
    let candidates: Vec<usize> = (0..vms).filter(|vm| movable(input, *vm)).collect();
    if p.threshold_on_start && cur_eval.cost < p.cost_threshold {
        return Ok((cur, moved));
    }
    for time in 0..time_max {
        if let Some(new) = neighbor(input, &cur, &cur_eval, &candidates, p, rng) {
            let new_eval = evaluate(input.problem, &new, input.params)?;
            let accept = new_eval.cost <= cur_eval.cost
                || rng.gen::<f64>() < ((cur_eval.cost - new_eval.cost) / temp).exp();
            if accept {
                for vm in 0..vms {
                    if new[vm] != cur[vm] && !moved.contains(&vm) {
                        moved.push(vm);
                    }
                }
                cur = new;
                cur_eval = new_eval;
                let better = if p.accept_ties {
                    cur_eval.cost <= best_cost
                } else {
                    cur_eval.cost < best_cost
                };
                if better {
                    best_cost = cur_eval.cost;
                    best = cur.clone();
                    if best_cost < p.cost_threshold {
                        break;
                    }
                }
            }
        }
        if (time + 1) % modulus == 0 {
            temp *= p.alpha;
        }
    }
    Ok((best, moved))
}

/// §3.8.4's neighbor: with probability `good_move_probability` the most hungry VM of each
/// resource (the hungry VM receiving least) moves to a random host; otherwise a random VM
/// does. Infeasible suggestions are dropped (`None` when nothing feasible was drawn).
fn neighbor(
    input: &RebalanceInput<'_>,
    cur: &[usize],
    eval: &FmuEvaluation,
    candidates: &[usize],
    p: SaParams,
    rng: &mut ChaCha8Rng,
) -> Option<Vec<usize>> {
    let hosts = input.problem.capacities.len();
    if candidates.is_empty() || hosts < 2 {
        return None;
    }
    let mut chosen: Vec<usize> = Vec::new();
    if rng.gen::<f64>() < p.good_move_probability {
        for r in 0..input.problem.resources() {
            let hungriest = candidates
                .iter()
                .copied()
                .filter(|vm| eval.states[*vm][r] == VmState::Hungry)
                .min_by(|a, b| eval.allocations[*a][r].total_cmp(&eval.allocations[*b][r]));
            if let Some(vm) = hungriest.filter(|vm| !chosen.contains(vm)) {
                chosen.push(vm);
            }
        }
    }
    if chosen.is_empty() {
        chosen.push(candidates[rng.gen_range(0..candidates.len())]);
    }
    let mut occupancy = Occupancy::from_assignment(input.rules, cur);
    let mut new = cur.to_vec();
    let mut any = false;
    for vm in chosen {
        let mut to = rng.gen_range(0..hosts - 1);
        if to >= cur[vm] {
            to += 1;
        }
        occupancy.release(vm, cur[vm]);
        if occupancy.refusal(vm, to).is_none() {
            occupancy.place(vm, to);
            new[vm] = to;
            any = true;
        } else {
            occupancy.place(vm, cur[vm]);
        }
    }
    any.then_some(new)
}

/// §3.9.1's GBM: each VM's candidate moves (within `candidate_fraction` of its best ΔC), one
/// drawn at random, sorted by ΔC, then applied in turn while each still lowers the cost. ΔC
/// comes from a [`CostTracker`] (two hosts re-shared per move) for one resource, from a full
/// evaluation otherwise.
fn greedy_best_move(
    input: &RebalanceInput<'_>,
    p: GbmParams,
    rng: &mut ChaCha8Rng,
) -> Result<(Vec<usize>, Vec<usize>), FmuError> {
    let vms = input.current.len();
    let hosts = input.problem.capacities.len();
    let mut state = input.current.to_vec();
    let mut tracker = CostTracker::new(input.problem, &state);
    let cost_if = |tracker: &Option<CostTracker<'_>>,
                   state: &mut Vec<usize>,
                   vm: usize,
                   to: usize|
     -> Result<f64, FmuError> {
        if let Some(t) = tracker {
            return Ok(t.cost_if_moved(vm, to));
        }
        let from = state[vm];
        state[vm] = to;
        let cost = evaluate(input.problem, state, input.params).map(|e| e.cost);
        state[vm] = from;
        cost
    };
    let base = match &tracker {
        Some(t) => t.cost(),
        None => evaluate(input.problem, &state, input.params)?.cost,
    };
    let mut occupancy = Occupancy::from_assignment(input.rules, &state);
    let mut load = HostLoad::new(input, &state);
    let mut selected: Vec<(f64, usize, usize)> = Vec::new();
    let mut options: Vec<(f64, usize)> = Vec::new();
    for vm in (0..vms).filter(|vm| movable(input, *vm)) {
        let from = state[vm];
        occupancy.release(vm, from);
        options.clear();
        let mut departure = tracker.as_ref().map(|t| t.departure(vm));
        for to in (0..hosts).filter(|h| *h != from) {
            // A move that provably leaves C as it is can never be an option (ΔC ≈ 0 is not
            // below −ε): skipped before anything else is computed for it.
            if let (Some(t), Some(d)) = (&tracker, &departure) {
                if t.leaves_cost_unchanged(d, to) {
                    continue;
                }
            }
            if load.resists(vm, from, to) || !occupancy.fits(vm, to) {
                continue;
            }
            let cost = match (&tracker, &mut departure) {
                (Some(t), Some(d)) => t.cost_if_departed_to(d, to),
                _ => cost_if(&tracker, &mut state, vm, to)?,
            };
            let delta = cost - base;
            if delta < -p.improvement_epsilon {
                options.push((delta, to));
            }
        }
        occupancy.place(vm, from);
        let Some(best) = options.iter().map(|o| o.0).min_by(f64::total_cmp) else {
            continue;
        };
        options.retain(|(delta, _)| *delta <= p.candidate_fraction * best);
        let (delta, to) = options[rng.gen_range(0..options.len())];
        let at = selected.partition_point(|s| s.0 <= delta);
        selected.insert(at, (delta, vm, to));
    }
    let mut cost = base;
    let mut order = Vec::new();
    for (_, vm, to) in selected {
        if p.max_moves.is_some_and(|max| order.len() >= max) {
            break;
        }
        let from = state[vm];
        occupancy.release(vm, from);
        if occupancy.refusal(vm, to).is_none() && !load.resists(vm, from, to) {
            let new_cost = cost_if(&tracker, &mut state, vm, to)?;
            if new_cost < cost - p.improvement_epsilon {
                cost = new_cost;
                state[vm] = to;
                if let Some(t) = &mut tracker {
                    t.apply(vm, to);
                }
                occupancy.place(vm, to);
                load.moved(vm, from, to);
                order.push(vm);
                continue;
            }
        }
        occupancy.place(vm, from);
    }
    Ok((state, order))
}

/// Each host's demand as a fraction of its capacity (Σ_r w_r D_r / c_r), for GBM's migration
/// resistance: with a resistance r > 0, a VM moves only to a host whose demand with it stays
/// at least r below its current host's (§3.7.2's rule, on demand rather than usage).
struct HostLoad<'a> {
    input: &'a RebalanceInput<'a>,
    load: Vec<f64>,
}

impl<'a> HostLoad<'a> {
    fn new(input: &'a RebalanceInput<'a>, state: &[usize]) -> Self {
        let mut load = vec![0.0; input.problem.capacities.len()];
        for (vm, host) in state.iter().enumerate() {
            load[*host] += Self::share(input, vm, *host);
        }
        HostLoad { input, load }
    }

    fn share(input: &RebalanceInput<'_>, vm: usize, host: usize) -> f64 {
        let p = input.problem;
        (0..p.resources())
            .map(|r| {
                let capacity = p.capacities[host][r];
                let w = input.params.weights.get(r).copied().unwrap_or(0.0);
                if capacity > 0.0 {
                    w * p.desires[vm][r] / capacity
                } else {
                    0.0
                }
            })
            .sum()
    }

    fn resists(&self, vm: usize, from: usize, to: usize) -> bool {
        let r = self.input.resistance;
        r > 0.0 && self.load[to] + Self::share(self.input, vm, to) > (1.0 - r) * self.load[from]
    }

    fn moved(&mut self, vm: usize, from: usize, to: usize) {
        self.load[from] -= Self::share(self.input, vm, from);
        self.load[to] += Self::share(self.input, vm, to);
    }
}

#[cfg(test)]
#[path = "fmu_solvers_tests.rs"]
mod tests;
