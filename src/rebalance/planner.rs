//! From the cloud's state and a request to a checked plan (docs/fmu.md §8): the model
//! (`model`), the solver, the `max_moves` cut, each move's predicted ΔU, ΔF and ΔC, and a
//! replay of the whole plan.

use super::model::{choose_hosts, model, Model};
use super::request::{PlanError, PlanRequest};
use super::state::CloudState;
use crate::configuration::RebalanceSolver;
use crate::control::{
    fmu_evaluate, rebalance, FmuError, FmuEvaluation, FmuParams, FmuProblem, GbmParams, Move,
    MoveRules, PlanLimits, RebalanceInput, SaParams, Solver,
};

/// U, F, C of one placement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figures {
    pub utilization: f64,
    pub fairness: f64,
    pub cost: f64,
}

impl From<&FmuEvaluation> for Figures {
    fn from(e: &FmuEvaluation) -> Self {
        Figures {
            utilization: e.utilization,
            fairness: e.fairness,
            cost: e.cost,
        }
    }
}

/// One planned live migration and what it is predicted to change.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedMove {
    pub instance: String,
    /// Service host names.
    pub source: String,
    pub destination: String,
    pub destination_node: String,
    /// The CPU the instance is judged to desire, in VCPUs.
    pub desire: f64,
    pub delta_utilization: f64,
    pub delta_fairness: f64,
    pub delta_cost: f64,
}

/// Something left out of the plan and why.
#[derive(Clone, Debug, PartialEq)]
pub struct LeftOut {
    /// An instance uuid or a host name.
    pub what: String,
    pub host: String,
    pub reason: String,
}

/// A checked plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub solver: RebalanceSolver,
    pub seed: u64,
    pub base_revision: String,
    /// Why the plan was made on a newer state than the request's, if it was.
    pub replanned: Option<String>,
    pub steps: Vec<Vec<PlannedMove>>,
    pub before: Figures,
    pub after: Figures,
    /// The standard deviation of the hosts' CPU load (consumed / capacity), before and after
    /// (Watcher's `workload_balancing` efficacy indicators).
    pub load_std_dev: (f64, f64),
    pub hosts: usize,
    pub instances: usize,
    /// Instances Nova cannot live-migrate.
    pub not_movable: Vec<LeftOut>,
    /// Moves the solver wanted that no feasible order reaches or past `max_moves`.
    pub dropped: Vec<LeftOut>,
    /// Hosts of the cloud not planned on.
    pub hosts_left_out: Vec<LeftOut>,
}

impl Plan {
    pub fn moves(&self) -> usize {
        self.steps.iter().map(Vec::len).sum()
    }
}

/// What the `move` plugin chain has already decided of a plan (issue 47): moves it approved,
/// in order (a destination it changed among them), and instances it kept where they are.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decided {
    /// Instance uuid and destination (a service host, node name or compute node uuid).
    pub moves: Vec<(String, String)>,
    /// Instance uuid and why it stays.
    pub kept: Vec<(String, String)>,
}

/// Plans `request` on `state`. Moves nothing.
pub fn plan(state: &CloudState, request: &PlanRequest) -> Result<Plan, PlanError> {
    plan_decided(state, request, &Decided::default())
}

/// Plans `request` on `state` with `decided`'s moves first, in their order, each its own
/// step, and its kept instances not moved; the solver plans the rest from where those moves
/// leave the cloud, within what is left of `max_moves`. A decided move the rules refuse
/// (capacity, ratio, a closed host, a server group) is [`PlanError::MoveRefused`].
pub fn plan_decided(
    state: &CloudState,
    request: &PlanRequest,
    decided: &Decided,
) -> Result<Plan, PlanError> {
    let replanned = match &request.base_revision {
        Some(base) if *base != state.revision => {
            if !request.replan {
                return Err(PlanError::Stale {
                    plan: base.clone(),
                    current: state.revision.clone(),
                });
            }
            Some(format!(
                "the plan's base revision {base} was stale (the ledger is at {}): planned again on the current state",
                state.revision
            ))
        }
        _ => None,
    };
    let (chosen, hosts_left_out) = choose_hosts(state, request.hosts.as_deref())?;
    let model = model(state, &chosen, request);
    let limits = PlanLimits {
        max_concurrent_per_source: request.max_concurrent_per_source,
        parallel: request.parallel,
    };
    let params = FmuParams::equal(1);
    let fixed = fixed_moves(state, &model, decided, limits)?;
    let remaining = request.max_moves.saturating_sub(fixed.len());
    let (start, rules) = starting_point(&model, &fixed, decided);
    let input = RebalanceInput {
        problem: &model.problem,
        usage: &model.usage,
        names: &model.names,
        current: &start,
        rules: &rules,
        params: &params,
        resistance: request.migration_resistance,
    };
    let solver = match request.solver {
        RebalanceSolver::Gbm => Solver::Gbm(GbmParams {
            max_moves: Some(remaining),
            ..GbmParams::default()
        }),
        RebalanceSolver::Bcpu => Solver::Bcpu,
        RebalanceSolver::Bcpu2 => Solver::Bcpu2,
        RebalanceSolver::Sa => Solver::Sa(SaParams::default()),
    };
    let solved = rebalance(&input, solver, limits, request.seed).map_err(internal)?;
    let mut dropped: Vec<LeftOut> = solved
        .plan
        .dropped
        .iter()
        .map(|(m, why)| left_out_move(state, &model, m, why))
        .collect();
    let mut steps: Vec<Vec<Move>> = fixed.iter().map(|m| vec![*m]).collect();
    steps.extend(cut(&solved.plan.steps, remaining, |m| {
        dropped.push(left_out_move(
            state,
            &model,
            m,
            &format!("beyond max_moves ({})", request.max_moves),
        ));
    }));
    crate::control::replay_plan(&model.current, &steps, &model.rules, limits).map_err(|e| {
        internal(crate::control::FmuError::Invalid {
            what: "plan".into(),
            reason: format!("the replay refused it: {e}"),
        })
    })?;
    let Prediction {
        steps: planned,
        after,
        end,
    } = predict(state, &model, &params, &steps)?;
    let spread = |placement: &[usize]| -> Result<f64, PlanError> {
        let e = fmu_evaluate(&model.problem, placement, &params).map_err(internal)?;
        Ok(load_std_dev(&model.problem, placement, &e))
    };
    let load_std_dev = (spread(&model.current)?, spread(&end)?);
    Ok(Plan {
        solver: request.solver,
        seed: request.seed,
        base_revision: state.revision.clone(),
        replanned,
        steps: planned,
        before: Figures::from(
            &fmu_evaluate(&model.problem, &model.current, &params).map_err(internal)?,
        ),
        after,
        load_std_dev,
        hosts: model.hosts.len(),
        instances: model.vms.len(),
        not_movable: not_movable(state, &model, &solved.not_movable, &fixed),
        dropped,
        hosts_left_out,
    })
}

/// Where the solver starts: `fixed` carried out, and the rules with the moved instances and
/// `decided`'s kept ones not movable.
fn starting_point(model: &Model, fixed: &[Move], decided: &Decided) -> (Vec<usize>, MoveRules) {
    let mut start = model.current.clone();
    let mut rules = model.rules.clone();
    for m in fixed {
        start[m.vm] = m.to;
        rules.not_movable[m.vm] = Some("moved earlier in this plan".into());
    }
    for (instance, why) in &decided.kept {
        if let Some(vm) = model.names.iter().position(|n| n == instance) {
            rules.not_movable[vm] = Some(why.clone());
        }
    }
    (start, rules)
}

/// The instances the solver could not move, with why, but for those `fixed` moved.
fn not_movable(
    state: &CloudState,
    model: &Model,
    pinned: &[(usize, String)],
    fixed: &[Move],
) -> Vec<LeftOut> {
    pinned
        .iter()
        .filter(|(vm, _)| !fixed.iter().any(|m| m.vm == *vm))
        .map(|(vm, why)| {
            let vm = &state.vms[model.vms[*vm]];
            LeftOut {
                what: vm.uuid.clone(),
                host: state.hosts[vm.host].host.clone(),
                reason: why.clone(),
            }
        })
        .collect()
}

/// `decided`'s moves over `model`, each checked in turn against the rules from where the
/// earlier ones leave the cloud.
fn fixed_moves(
    state: &CloudState,
    model: &Model,
    decided: &Decided,
    limits: PlanLimits,
) -> Result<Vec<Move>, PlanError> {
    let mut at = model.current.clone();
    let mut fixed: Vec<Move> = Vec::with_capacity(decided.moves.len());
    for (instance, destination) in &decided.moves {
        let refused = |reason: String| PlanError::MoveRefused {
            instance: instance.clone(),
            destination: destination.clone(),
            reason,
        };
        let vm = model
            .names
            .iter()
            .position(|n| n == instance)
            .ok_or_else(|| refused("the instance is not on a host of the plan".into()))?;
        let to = model
            .hosts
            .iter()
            .position(|h| {
                let h = &state.hosts[*h];
                h.host == *destination || h.node == *destination || h.uuid == *destination
            })
            .ok_or_else(|| refused("not a host of the plan".into()))?;
        let m = Move {
            vm,
            from: at[vm],
            to,
        };
        if m.from == m.to {
            return Err(refused("the instance is there already".into()));
        }
        let steps: Vec<Vec<Move>> = fixed.iter().chain([&m]).map(|m| vec![*m]).collect();
        crate::control::replay_plan(&model.current, &steps, &model.rules, limits)
            .map_err(|e| refused(e.to_string()))?;
        at[vm] = to;
        fixed.push(m);
    }
    Ok(fixed)
}

pub(super) fn internal(e: FmuError) -> PlanError {
    PlanError::invalid("plan", format!("the planner failed: {e}"))
}

/// The first `max` moves of `steps`; every later one is handed to `dropped`. A prefix of a
/// feasible plan is feasible: each state it passes through is one the whole plan passes.
fn cut(steps: &[Vec<Move>], max: usize, mut dropped: impl FnMut(&Move)) -> Vec<Vec<Move>> {
    let mut kept = 0;
    let mut out = Vec::new();
    for step in steps {
        let mut s = Vec::new();
        for m in step {
            if kept < max {
                s.push(*m);
                kept += 1;
            } else {
                dropped(m);
            }
        }
        if !s.is_empty() {
            out.push(s);
        }
    }
    out
}

fn left_out_move(state: &CloudState, model: &Model, m: &Move, why: &str) -> LeftOut {
    LeftOut {
        what: state.vms[model.vms[m.vm]].uuid.clone(),
        host: state.hosts[model.hosts[m.from]].host.clone(),
        reason: why.to_string(),
    }
}

/// Each move's ΔU, ΔF, ΔC in the plan's order, and the figures after the plan.
fn predict(
    state: &CloudState,
    model: &Model,
    params: &FmuParams,
    steps: &[Vec<Move>],
) -> Result<Prediction, PlanError> {
    let mut placement = model.current.clone();
    let mut last =
        Figures::from(&fmu_evaluate(&model.problem, &placement, params).map_err(internal)?);
    let mut out = Vec::with_capacity(steps.len());
    for step in steps {
        let mut planned = Vec::with_capacity(step.len());
        for m in step {
            placement[m.vm] = m.to;
            let now =
                Figures::from(&fmu_evaluate(&model.problem, &placement, params).map_err(internal)?);
            let to = &state.hosts[model.hosts[m.to]];
            planned.push(PlannedMove {
                instance: model.names[m.vm].clone(),
                source: state.hosts[model.hosts[m.from]].host.clone(),
                destination: to.host.clone(),
                destination_node: to.node.clone(),
                desire: model.problem.desires[m.vm][0],
                delta_utilization: now.utilization - last.utilization,
                delta_fairness: now.fairness - last.fairness,
                delta_cost: now.cost - last.cost,
            });
            last = now;
        }
        out.push(planned);
    }
    Ok(Prediction {
        steps: out,
        after: last,
        end: placement,
    })
}

/// The plan's moves with their predicted changes, the figures after it and where it ends.
struct Prediction {
    steps: Vec<Vec<PlannedMove>>,
    after: Figures,
    end: Vec<usize>,
}

/// The population standard deviation of the hosts' CPU load fractions.
fn load_std_dev(problem: &FmuProblem, placement: &[usize], e: &FmuEvaluation) -> f64 {
    let hosts = problem.capacities.len();
    let mut consumed = vec![0.0; hosts];
    for (vm, host) in placement.iter().enumerate() {
        consumed[*host] += e.allocations[vm][0];
    }
    let loads: Vec<f64> = consumed
        .iter()
        .zip(&problem.capacities)
        .map(|(c, cap)| if cap[0] > 0.0 { c / cap[0] } else { 0.0 })
        .collect();
    let mean = loads.iter().sum::<f64>() / hosts.max(1) as f64;
    (loads.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / hosts.max(1) as f64).sqrt()
}
