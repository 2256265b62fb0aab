//! What a rebalancing move may do (docs/fmu.md §5): the flavor's allocation fits the target
//! under the allocation ratios, server-group rules hold, the target is enabled, the instance is
//! movable. [`order_moves`] turns a target placement into steps in which every intermediate
//! state is feasible, counting a moving VM on both hosts (Nova holds the source until the
//! move completes); [`replay_plan`] checks any plan step by step, independently.

use std::collections::HashMap;

use serde::Serialize;
use thiserror::Error;

use super::fmu_model::{invalid, FmuError};

/// A server group's policy, as Nova names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum GroupPolicy {
    /// All members on one host.
    Affinity,
    /// No two members on one host.
    AntiAffinity,
}

/// A server group over VM indices.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerGroup {
    /// The policy.
    pub policy: GroupPolicy,
    /// Member VM indices.
    pub members: Vec<usize>,
}

/// The hard constraints on moves. Allocation dimensions are the caller's (VCPU, MEMORY_MB,
/// DISK_GB for Placement), one ratio per dimension.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MoveRules {
    /// allocation[vm][dimension]: what the flavor claims.
    pub allocation: Vec<Vec<f64>>,
    /// inventory[host][dimension]: physical totals, before ratios.
    pub inventory: Vec<Vec<f64>>,
    /// The allocation ratio of each dimension.
    pub ratios: Vec<f64>,
    /// Whether each host may receive VMs (up and enabled).
    pub enabled: Vec<bool>,
    /// Server groups.
    pub groups: Vec<ServerGroup>,
    /// Why each VM cannot be moved (`None` when it can).
    pub not_movable: Vec<Option<String>>,
}

impl MoveRules {
    /// Rules with no limits beyond the hosts' count: every VM movable, every host enabled.
    pub fn unconstrained(vms: usize, hosts: usize) -> Self {
        MoveRules {
            allocation: vec![Vec::new(); vms],
            inventory: vec![Vec::new(); hosts],
            ratios: Vec::new(),
            enabled: vec![true; hosts],
            groups: Vec::new(),
            not_movable: vec![None; vms],
        }
    }

    /// Checks shapes against `vms` and `hosts`, naming the first bad entry.
    pub fn validate(&self, vms: usize, hosts: usize) -> Result<(), FmuError> {
        let dims = self.ratios.len();
        if self.allocation.len() != vms || self.not_movable.len() != vms {
            return Err(invalid(
                "rules",
                format!("allocation/not_movable need {vms} VMs"),
            ));
        }
        if self.inventory.len() != hosts || self.enabled.len() != hosts {
            return Err(invalid(
                "rules",
                format!("inventory/enabled need {hosts} hosts"),
            ));
        }
        if self.ratios.iter().any(|r| !r.is_finite() || *r <= 0.0) {
            return Err(invalid("ratios", "each must be finite and > 0"));
        }
        for (what, rows) in [
            ("allocation", &self.allocation),
            ("inventory", &self.inventory),
        ] {
            if let Some(i) = rows
                .iter()
                .position(|row| row.len() != dims || row.iter().any(|v| !v.is_finite() || *v < 0.0))
            {
                return Err(invalid(
                    format!("{what}[{i}]"),
                    format!("needs {dims} finite values ≥ 0"),
                ));
            }
        }
        for (g, group) in self.groups.iter().enumerate() {
            if let Some(m) = group.members.iter().find(|m| **m >= vms) {
                return Err(invalid(format!("groups[{g}]"), format!("no VM {m}")));
            }
        }
        Ok(())
    }

    fn capacity(&self, host: usize, dim: usize) -> f64 {
        self.inventory[host][dim] * self.ratios[dim]
    }
}

/// Where each VM is (two hosts while it moves) and what each host holds, under [`MoveRules`].
#[derive(Clone, Debug)]
pub struct Occupancy<'a> {
    rules: &'a MoveRules,
    used: Vec<Vec<f64>>,
    positions: Vec<Vec<usize>>,
    groups_of: HashMap<usize, Vec<usize>>,
}

impl<'a> Occupancy<'a> {
    /// Empty hosts; `place` VMs into them.
    pub fn empty(rules: &'a MoveRules, vms: usize) -> Self {
        let mut groups_of: HashMap<usize, Vec<usize>> = HashMap::new();
        for (g, group) in rules.groups.iter().enumerate() {
            for m in &group.members {
                groups_of.entry(*m).or_default().push(g);
            }
        }
        Occupancy {
            rules,
            used: vec![vec![0.0; rules.ratios.len()]; rules.inventory.len()],
            positions: vec![Vec::new(); vms],
            groups_of,
        }
    }

    /// Hosts filled as `assignment` says (no check: the current state is what it is).
    pub fn from_assignment(rules: &'a MoveRules, assignment: &[usize]) -> Self {
        let mut occupancy = Occupancy::empty(rules, assignment.len());
        for (vm, host) in assignment.iter().enumerate() {
            occupancy.place(vm, *host);
        }
        occupancy
    }

    /// Counts `vm` on `host` (in addition to wherever it already is).
    pub fn place(&mut self, vm: usize, host: usize) {
        for (dim, used) in self.used[host].iter_mut().enumerate() {
            *used += self.rules.allocation[vm][dim];
        }
        self.positions[vm].push(host);
    }

    /// Stops counting `vm` on `host`.
    pub fn release(&mut self, vm: usize, host: usize) {
        for (dim, used) in self.used[host].iter_mut().enumerate() {
            *used -= self.rules.allocation[vm][dim];
        }
        self.positions[vm].retain(|h| *h != host);
    }

    /// Why `vm` may not (also) be counted on `host` now, or `None` when it may.
    pub fn refusal(&self, vm: usize, host: usize) -> Option<String> {
        Some(match self.first_refusal(vm, host)? {
            Refusal::Disabled => format!("host {host} is disabled"),
            Refusal::Ratio(dim) => format!("dimension {dim} would exceed its ratio on host {host}"),
            Refusal::Group(g) => format!("server group {g} ({:?})", self.rules.groups[g].policy),
        })
    }

    /// Whether `vm` may (also) be counted on `host` now: [`Self::refusal`] without its words,
    /// for the solvers' inner loops.
    pub fn fits(&self, vm: usize, host: usize) -> bool {
        self.first_refusal(vm, host).is_none()
    }

    fn first_refusal(&self, vm: usize, host: usize) -> Option<Refusal> {
        if !self.rules.enabled[host] {
            return Some(Refusal::Disabled);
        }
        for dim in 0..self.rules.ratios.len() {
            let need = self.used[host][dim] + self.rules.allocation[vm][dim];
            if need > self.rules.capacity(host, dim) + 1e-9 {
                return Some(Refusal::Ratio(dim));
            }
        }
        for g in self.groups_of.get(&vm).into_iter().flatten() {
            let group = &self.rules.groups[*g];
            let others = group.members.iter().filter(|m| **m != vm);
            let broken = match group.policy {
                GroupPolicy::AntiAffinity => {
                    others.clone().any(|m| self.positions[*m].contains(&host))
                }
                GroupPolicy::Affinity => others
                    .clone()
                    .any(|m| self.positions[*m].iter().any(|h| *h != host)),
            };
            if broken {
                return Some(Refusal::Group(*g));
            }
        }
        None
    }

    /// What `host` holds of each dimension.
    pub fn used(&self, host: usize) -> &[f64] {
        &self.used[host]
    }
}

/// The first rule a placement breaks ([`Occupancy::refusal`] words it).
#[derive(Clone, Copy, Debug)]
enum Refusal {
    Disabled,
    Ratio(usize),
    Group(usize),
}

/// One live migration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Move {
    /// The VM index.
    pub vm: usize,
    /// Its host before the move.
    pub from: usize,
    /// Its host after.
    pub to: usize,
}

/// How many moves run at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PlanLimits {
    /// Moves out of one source host per step (Nova's `max_concurrent_live_migrations`, 1).
    pub max_concurrent_per_source: usize,
    /// Moves per step across the cloud.
    pub parallel: usize,
}

impl Default for PlanLimits {
    fn default() -> Self {
        PlanLimits {
            max_concurrent_per_source: 1,
            parallel: 4,
        }
    }
}

/// Moves in steps; every move of a step runs at once.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OrderedPlan {
    /// The steps, in order.
    pub steps: Vec<Vec<Move>>,
    /// Moves of the target that no feasible order reaches, with why.
    pub dropped: Vec<(Move, String)>,
}

impl OrderedPlan {
    /// All moves in order.
    pub fn moves(&self) -> impl Iterator<Item = &Move> {
        self.steps.iter().flatten()
    }

    /// The placement after the plan.
    pub fn apply(&self, current: &[usize]) -> Vec<usize> {
        let mut placement = current.to_vec();
        for m in self.moves() {
            placement[m.vm] = m.to;
        }
        placement
    }
}

/// Orders the moves from `current` to `target` (in the order the solver listed them in
/// `preference`, others after) into feasible steps. Moves that cannot be ordered are dropped
/// with the reason the first refusal gave; the plan then ends in a feasible state short of
/// `target`.
pub fn order_moves(
    current: &[usize],
    target: &[usize],
    preference: &[usize],
    rules: &MoveRules,
    limits: PlanLimits,
) -> OrderedPlan {
    let mut pending: Vec<Move> = Vec::new();
    let mut seen = vec![false; current.len()];
    for vm in preference.iter().copied().chain(0..current.len()) {
        if vm < current.len() && !seen[vm] && current[vm] != target[vm] {
            seen[vm] = true;
            pending.push(Move {
                vm,
                from: current[vm],
                to: target[vm],
            });
        }
    }
    let mut occupancy = Occupancy::from_assignment(rules, current);
    let mut plan = OrderedPlan::default();
    while !pending.is_empty() {
        let mut step = Vec::new();
        let mut per_source: HashMap<usize, usize> = HashMap::new();
        let mut last_refusal = HashMap::new();
        pending.retain(|m| {
            if step.len() >= limits.parallel.max(1) {
                return true;
            }
            if let Some(reason) = &rules.not_movable[m.vm] {
                last_refusal.insert(m.vm, format!("not movable: {reason}"));
                return true;
            }
            let out = per_source.entry(m.from).or_insert(0);
            if *out >= limits.max_concurrent_per_source.max(1) {
                return true;
            }
            match occupancy.refusal(m.vm, m.to) {
                Some(reason) => {
                    last_refusal.insert(m.vm, reason);
                    true
                }
                None => {
                    occupancy.place(m.vm, m.to);
                    *out += 1;
                    step.push(*m);
                    false
                }
            }
        });
        if step.is_empty() {
            plan.dropped = pending
                .drain(..)
                .map(|m| {
                    let why = last_refusal.remove(&m.vm).unwrap_or_default();
                    (m, format!("no feasible order: {why}"))
                })
                .collect();
            break;
        }
        for m in &step {
            occupancy.release(m.vm, m.from);
        }
        plan.steps.push(step);
    }
    plan
}

/// The first thing a plan does wrong, by step.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum ReplayError {
    /// The step moves more VMs than `parallel` or more out of one host than allowed.
    #[error("step {step}: {what}")]
    Limits { step: usize, what: String },
    /// The move does not start where the VM is, or the VM may not move.
    #[error("step {step}: VM {vm}: {what}")]
    BadMove {
        step: usize,
        vm: usize,
        what: String,
    },
    /// A host exceeds an allocation ratio while the step runs or after it.
    #[error("step {step}: host {host} exceeds the ratio of dimension {dim} ({used} > {capacity})")]
    Ratio {
        step: usize,
        host: usize,
        dim: usize,
        used: f64,
        capacity: f64,
    },
    /// A server group is broken while the step runs or after it.
    #[error("step {step}: server group {group} ({policy:?}) broken")]
    Group {
        step: usize,
        group: usize,
        policy: GroupPolicy,
    },
}

/// Replays `steps` from `current`, counting each moving VM on both hosts during its step, and
/// checks limits, movability, the destinations' ratios and the touched groups; returns the
/// final placement.
pub fn replay_plan(
    current: &[usize],
    steps: &[Vec<Move>],
    rules: &MoveRules,
    limits: PlanLimits,
) -> Result<Vec<usize>, ReplayError> {
    let mut placement: Vec<Vec<usize>> = current.iter().map(|h| vec![*h]).collect();
    let dims = rules.ratios.len();
    for (s, step) in steps.iter().enumerate() {
        if step.len() > limits.parallel.max(1) {
            return Err(ReplayError::Limits {
                step: s,
                what: format!("{} moves > parallel {}", step.len(), limits.parallel),
            });
        }
        let mut out: HashMap<usize, usize> = HashMap::new();
        for m in step {
            let bad = |what: &str| ReplayError::BadMove {
                step: s,
                vm: m.vm,
                what: what.to_string(),
            };
            if m.vm >= placement.len() || placement[m.vm] != [m.from] {
                return Err(bad("does not start where the VM is (or moves twice)"));
            }
            if rules.not_movable[m.vm].is_some() {
                return Err(bad("is not movable"));
            }
            if m.to >= rules.enabled.len() || !rules.enabled[m.to] || m.to == m.from {
                return Err(bad("target is unknown, disabled or the source"));
            }
            let n = out.entry(m.from).or_insert(0);
            *n += 1;
            if *n > limits.max_concurrent_per_source.max(1) {
                return Err(ReplayError::Limits {
                    step: s,
                    what: format!("host {} sends more than allowed", m.from),
                });
            }
        }
        for m in step {
            placement[m.vm].push(m.to);
        }
        check_state(s, &placement, step, rules, dims)?;
        for m in step {
            placement[m.vm] = vec![m.to];
        }
        check_state(s, &placement, step, rules, dims)?;
    }
    Ok(placement.into_iter().map(|p| p[0]).collect())
}

fn check_state(
    step: usize,
    placement: &[Vec<usize>],
    moves: &[Move],
    rules: &MoveRules,
    dims: usize,
) -> Result<(), ReplayError> {
    for host in moves.iter().map(|m| m.to) {
        for dim in 0..dims {
            let used: f64 = (0..placement.len())
                .filter(|vm| placement[*vm].contains(&host))
                .map(|vm| rules.allocation[vm][dim])
                .sum();
            let capacity = rules.capacity(host, dim);
            if used > capacity + 1e-9 {
                return Err(ReplayError::Ratio {
                    step,
                    host,
                    dim,
                    used,
                    capacity,
                });
            }
        }
    }
    for (g, group) in rules.groups.iter().enumerate() {
        if !group
            .members
            .iter()
            .any(|vm| moves.iter().any(|m| m.vm == *vm))
        {
            continue;
        }
        let mut hosts: Vec<usize> = group
            .members
            .iter()
            .flat_map(|vm| placement[*vm].iter().copied())
            .collect();
        let total = hosts.len();
        hosts.sort_unstable();
        hosts.dedup();
        let broken = match group.policy {
            GroupPolicy::Affinity => hosts.len() > 1,
            GroupPolicy::AntiAffinity => hosts.len() < total,
        };
        if broken {
            return Err(ReplayError::Group {
                step,
                group: g,
                policy: group.policy,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "fmu_plan_tests.rs"]
mod tests;
