//! The FMU instance a plan is solved on (docs/fmu.md §8.1): the hosts chosen (named, or every
//! host with fresh usage), each VM's measured CPU use and desire (raised to its VCPUs when
//! §3.6 finds it hungry), and the move rules (usable capacity less others' holdings, open
//! hosts, movable instances, the caller's server groups).

use super::planner::LeftOut;
use super::request::{PlanError, PlanRequest};
use super::state::{CloudState, PlanHost};
use crate::control::{detect_hungry, FmuProblem, GroupPolicy, MoveRules, ServerGroup};
use crate::domain::ClassId;
use std::collections::HashMap;

/// §3.6's tolerance: a host at 95 % of its CPUs, and its VMs within 95 % of the largest
/// allocation there, are hungry.
const HUNGRY_TOLERANCE: f64 = 0.95;

/// The FMU instance over the chosen hosts.
pub(super) struct Model {
    /// Indices into the state's hosts.
    pub(super) hosts: Vec<usize>,
    /// Indices into the state's vms.
    pub(super) vms: Vec<usize>,
    pub(super) problem: FmuProblem,
    pub(super) usage: Vec<f64>,
    pub(super) names: Vec<String>,
    pub(super) current: Vec<usize>,
    pub(super) rules: MoveRules,
}

/// The hosts to plan on (indices into the state) and those of the cloud left out.
pub(super) fn choose_hosts(
    state: &CloudState,
    named: Option<&[String]>,
) -> Result<(Vec<usize>, Vec<LeftOut>), PlanError> {
    let Some(named) = named else {
        let (with, without): (Vec<usize>, Vec<usize>) =
            (0..state.hosts.len()).partition(|h| state.hosts[*h].has_usage());
        if with.is_empty() {
            let all: Vec<String> = state.hosts.iter().map(|h| h.host.clone()).collect();
            return Err(PlanError::NoUsage(if all.is_empty() {
                vec!["(the table has no hosts)".into()]
            } else {
                all
            }));
        }
        let left = without
            .into_iter()
            .map(|h| LeftOut {
                what: state.hosts[h].host.clone(),
                host: state.hosts[h].host.clone(),
                reason: "no fresh measured CPU usage".into(),
            })
            .collect();
        return Ok((with, left));
    };
    let find = |name: &str| -> Option<usize> {
        state
            .hosts
            .iter()
            .position(|h| h.host == name || h.node == name || h.uuid == name)
    };
    let unknown: Vec<String> = named
        .iter()
        .filter(|n| find(n).is_none())
        .cloned()
        .collect();
    if !unknown.is_empty() {
        return Err(PlanError::UnknownHosts(unknown));
    }
    let mut chosen: Vec<usize> = named.iter().filter_map(|n| find(n)).collect();
    chosen.sort_unstable();
    chosen.dedup();
    let no_usage: Vec<String> = chosen
        .iter()
        .filter(|h| !state.hosts[**h].has_usage())
        .map(|h| state.hosts[*h].host.clone())
        .collect();
    if !no_usage.is_empty() {
        return Err(PlanError::NoUsage(no_usage));
    }
    Ok((chosen, Vec::new()))
}

/// Measured CPU use of each VM of `host` (`vms`: the state's indices): its own reading, or the
/// host's reading less the instances' readings, shared by VCPU allocation among the others.
fn measured(host: &PlanHost, vms: &[(usize, &str, f64)]) -> Vec<f64> {
    let read: f64 = vms
        .iter()
        .filter_map(|(_, uuid, _)| host.instance_busy.get(*uuid))
        .sum();
    let rest = (host.cpu_busy.unwrap_or(read) - read).max(0.0);
    let unread_vcpus: f64 = vms
        .iter()
        .filter(|(_, uuid, _)| !host.instance_busy.contains_key(*uuid))
        .map(|(_, _, vcpus)| vcpus)
        .sum();
    vms.iter()
        .map(|(_, uuid, vcpus)| match host.instance_busy.get(*uuid) {
            Some(v) => *v,
            None if unread_vcpus > 0.0 => rest * vcpus / unread_vcpus,
            None => 0.0,
        })
        .collect()
}

pub(super) fn model(state: &CloudState, chosen: &[usize], request: &PlanRequest) -> Model {
    let slot: HashMap<usize, usize> = chosen.iter().enumerate().map(|(i, h)| (*h, i)).collect();
    let vms: Vec<usize> = (0..state.vms.len())
        .filter(|v| slot.contains_key(&state.vms[*v].host))
        .collect();
    let mut classes: Vec<ClassId> = Vec::new();
    for v in &vms {
        for (class, _) in state.vms[*v].allocation.nonzero() {
            if !classes.contains(&class) {
                classes.push(class);
            }
        }
    }
    let current: Vec<usize> = vms.iter().map(|v| slot[&state.vms[*v].host]).collect();
    let mut usage = vec![0.0; vms.len()];
    let mut desires = vec![vec![0.0]; vms.len()];
    for (i, h) in chosen.iter().enumerate() {
        let host = &state.hosts[*h];
        let on: Vec<(usize, &str, f64)> = (0..vms.len())
            .filter(|j| current[*j] == i)
            .map(|j| {
                let vm = &state.vms[vms[j]];
                (j, vm.uuid.as_str(), vm.allocation.vcpu() as f64)
            })
            .collect();
        let busy = measured(host, &on);
        let hungry = detect_hungry(host.cpus, &busy, HUNGRY_TOLERANCE);
        for (((j, _, vcpus), used), hungry) in on.iter().zip(&busy).zip(hungry) {
            usage[*j] = *used;
            desires[*j][0] = if hungry { used.max(*vcpus) } else { *used };
        }
    }
    let rules = MoveRules {
        allocation: vms
            .iter()
            .map(|v| {
                let a = &state.vms[*v].allocation;
                classes.iter().map(|c| a.get(*c) as f64).collect()
            })
            .collect(),
        inventory: chosen
            .iter()
            .map(|h| {
                let host = &state.hosts[*h];
                classes
                    .iter()
                    .map(|c| (host.usable.get(*c) - host.held_by_others.get(*c)).max(0) as f64)
                    .collect()
            })
            .collect(),
        ratios: vec![1.0; classes.len()],
        enabled: chosen
            .iter()
            .map(|h| state.hosts[*h].closed.is_none())
            .collect(),
        groups: groups(state, &vms, request),
        not_movable: vms
            .iter()
            .map(|v| {
                let vm = &state.vms[*v];
                vm.pinned.clone().or_else(|| {
                    request
                        .not_movable
                        .iter()
                        .find(|(uuid, _)| *uuid == vm.uuid)
                        .map(|(_, why)| why.clone())
                })
            })
            .collect(),
    };
    Model {
        hosts: chosen.to_vec(),
        problem: FmuProblem {
            capacities: chosen.iter().map(|h| vec![state.hosts[*h].cpus]).collect(),
            desires,
            max_alloc: vec![None],
        },
        usage,
        names: vms.iter().map(|v| state.vms[*v].uuid.clone()).collect(),
        current,
        rules,
        vms,
    }
}

fn groups(state: &CloudState, vms: &[usize], request: &PlanRequest) -> Vec<ServerGroup> {
    let index: HashMap<&str, usize> = vms
        .iter()
        .enumerate()
        .map(|(i, v)| (state.vms[*v].uuid.as_str(), i))
        .collect();
    request
        .server_groups
        .iter()
        .map(|g| ServerGroup {
            policy: if g.anti_affinity {
                GroupPolicy::AntiAffinity
            } else {
                GroupPolicy::Affinity
            },
            members: g
                .members
                .iter()
                .filter_map(|m| index.get(m.as_str()).copied())
                .collect(),
        })
        .filter(|g| g.members.len() > 1)
        .collect()
}
