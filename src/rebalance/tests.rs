//! The planner on synthetic states: a hot host relieved, the cut at `max_moves`, instances and
//! hosts left out with their reasons, and every refusal naming what is wrong.

use super::*;
use crate::configuration::{RebalanceSettings, RebalanceSolver};
use crate::domain::{
    ClassId, ClassUsage, HostId, HostProfile, HostState, InstanceUsage, Inventory, MeasuredUsage,
    Resources, UsageSource,
};
use crate::ledger::StoredAllocation;
use std::sync::Arc;

const NOW: i64 = 1_000_000;

/// A host of 2 VCPUs at ratio 2 (4 usable; 16 GB, 100 GB) with `busy` VCPUs measured now
/// and per instance.
fn host(id: i64, busy: Option<f64>, instances: &[(&str, f64)]) -> HostState {
    let name = format!("host{id}");
    let uuid = format!("00000000-0000-4000-8000-{id:012}");
    let inventories = vec![
        (ClassId::VCPU, Inventory::of(2).with(0, 2.0)),
        (ClassId::MEMORY_MB, Inventory::of(16_384)),
        (ClassId::DISK_GB, Inventory::of(100)),
    ];
    let profile = HostProfile::new(&name, &name, &uuid, "nova", inventories);
    let mut h = HostState::new(HostId(id), Arc::new(profile));
    h.last_seen_ms = NOW;
    if busy.is_some() || !instances.is_empty() {
        let mut m = MeasuredUsage::default();
        if let Some(value) = busy {
            m.set(ClassUsage {
                class: ClassId::VCPU,
                value,
                at_ms: NOW,
                received_ms: NOW,
                source: UsageSource::HostState,
                placed: 0,
            });
        }
        m.instances = instances
            .iter()
            .map(|(uuid, v)| InstanceUsage {
                instance: Arc::from(*uuid),
                at_ms: NOW,
                source: UsageSource::HostState,
                classes: vec![(ClassId::VCPU, *v)],
            })
            .collect();
        h.measured = Some(Arc::new(m));
    }
    h
}

fn allocation(uuid: &str, host: i64, demand: Resources) -> StoredAllocation {
    StoredAllocation {
        instance_uuid: uuid.into(),
        host_id: HostId(host),
        demand,
        resources_json: serde_json::to_string(&demand.to_map()).unwrap(),
        created_ms: 0,
        imported: false,
        instance: true,
    }
}

/// Host 1 runs vm1..vm4 (1 VCPU each) on its 2 VCPUs, each getting half (hungry); hosts 2
/// and 3 are idle; the allocations are counted on their hosts.
fn hot_cloud() -> (Vec<HostState>, Vec<StoredAllocation>) {
    let small = Resources::new(1, 1_024, 10);
    let vms = ["vm1", "vm2", "vm3", "vm4"];
    let mut hot = host(1, Some(2.0), &vms.map(|v| (v, 0.5)));
    hot.used = small.times(4);
    let allocations = vms.iter().map(|v| allocation(v, 1, small)).collect();
    (
        vec![hot, host(2, Some(0.0), &[]), host(3, Some(0.0), &[])],
        allocations,
    )
}

fn state(hosts: &[HostState], allocations: &[StoredAllocation]) -> CloudState {
    CloudState::build(Sources {
        hosts,
        allocations,
        held_moves: &[],
        now_ms: NOW,
        max_age_ms: 60_000,
        host_timeout_ms: 60_000,
    })
}

fn request(body: serde_json::Value) -> PlanRequest {
    PlanRequest::parse(&body, None, &RebalanceSettings::default()).unwrap()
}

#[test]
fn gbm_moves_hungry_vms_off_the_hot_host_and_each_move_lowers_the_cost() {
    let (hosts, allocations) = hot_cloud();
    let cloud = state(&hosts, &allocations);
    let plan = plan(&cloud, &request(serde_json::json!({}))).unwrap();
    assert_eq!(plan.solver, RebalanceSolver::Gbm);
    assert!(plan.moves() >= 1, "{plan:?}");
    assert!(plan.after.cost < plan.before.cost, "{plan:?}");
    for m in plan.steps.iter().flatten() {
        assert_eq!(m.source, "host1");
        assert_ne!(m.destination, "host1");
        assert!(m.delta_cost < 0.0, "{m:?}");
    }
    // One move out of host 1 per step ([rebalance] max_concurrent_per_source = 1).
    assert!(plan.steps.iter().all(|s| s.len() == 1), "{plan:?}");
    let sum: f64 = plan.steps.iter().flatten().map(|m| m.delta_cost).sum();
    assert!((plan.before.cost + sum - plan.after.cost).abs() < 1e-9);
    assert_eq!(plan.base_revision, cloud.revision);
    assert!(plan.load_std_dev.1 < plan.load_std_dev.0);
}

#[test]
fn a_plan_is_cut_at_max_moves_and_the_rest_is_named() {
    let (hosts, allocations) = hot_cloud();
    let cloud = state(&hosts, &allocations);
    let full = plan(&cloud, &request(serde_json::json!({"solver": "bcpu"}))).unwrap();
    assert!(full.moves() >= 2, "{full:?}");
    let cut = plan(
        &cloud,
        &request(serde_json::json!({"solver": "bcpu", "max_moves": 1})),
    )
    .unwrap();
    assert_eq!(cut.moves(), 1);
    assert_eq!(cut.dropped.len(), full.moves() - 1);
    assert!(cut.dropped[0].reason.contains("max_moves"), "{cut:?}");
}

#[test]
fn pinned_and_moving_instances_and_closed_hosts_are_left_out_with_reasons() {
    let (mut hosts, mut allocations) = hot_cloud();
    let vgpu = ClassId::intern("VGPU").unwrap();
    let mut demand = Resources::new(1, 1_024, 10);
    demand.set(vgpu, 1);
    allocations[0].demand = demand;
    hosts[1].disabled = true;
    hosts[2].last_seen_ms = NOW - 120_000;
    let held = [crate::ledger::HeldMove {
        instance_uuid: "vm2".into(),
        key: "vm2#source".into(),
        host_id: HostId(1),
        demand: Resources::new(1, 1_024, 10),
        started: false,
        since_ms: NOW,
    }];
    let cloud = CloudState::build(Sources {
        hosts: &hosts,
        allocations: &allocations,
        held_moves: &held,
        now_ms: NOW,
        max_age_ms: 60_000,
        host_timeout_ms: 60_000,
    });
    assert_eq!(cloud.hosts[1].closed.as_deref(), Some("disabled"));
    assert_eq!(cloud.hosts[2].closed.as_deref(), Some("down"));
    let plan = plan(&cloud, &request(serde_json::json!({"solver": "bcpu"}))).unwrap();
    assert_eq!(plan.moves(), 0, "no host may receive: {plan:?}");
    let reasons: Vec<(&str, &str)> = plan
        .not_movable
        .iter()
        .map(|l| (l.what.as_str(), l.reason.as_str()))
        .collect();
    assert!(
        reasons.contains(&("vm1", "vGPU (VGPU) cannot be live-migrated")),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&("vm2", "a move of it is in progress")),
        "{reasons:?}"
    );
}

#[test]
fn unknown_hosts_and_hosts_without_usage_are_refused_by_name() {
    let (mut hosts, allocations) = hot_cloud();
    hosts.push(host(4, None, &[]));
    let cloud = state(&hosts, &allocations);
    let err = plan(
        &cloud,
        &request(serde_json::json!({"hosts": ["host1", "nohost"]})),
    );
    assert_eq!(err, Err(PlanError::UnknownHosts(vec!["nohost".into()])));
    let err = plan(
        &cloud,
        &request(serde_json::json!({"hosts": ["host1", "host4"]})),
    );
    assert_eq!(err, Err(PlanError::NoUsage(vec!["host4".into()])));
    // The whole cloud: host 4 is left out, named.
    let whole = plan(&cloud, &request(serde_json::json!({}))).unwrap();
    assert_eq!(whole.hosts, 3);
    assert_eq!(whole.hosts_left_out[0].what, "host4");
    let silent = state(&[host(4, None, &[]), host(5, None, &[])], &[]);
    let err = plan(&silent, &request(serde_json::json!({}))).unwrap_err();
    assert_eq!(
        err,
        PlanError::NoUsage(vec!["host4".into(), "host5".into()])
    );
}

#[test]
fn a_stale_base_revision_is_refused_or_planned_again() {
    let (hosts, allocations) = hot_cloud();
    let before = state(&hosts, &allocations);
    let mut moved = allocations.clone();
    moved[3].host_id = HostId(2);
    let after = state(&hosts, &moved);
    assert_ne!(before.revision, after.revision);
    let body = serde_json::json!({"base_revision": before.revision});
    assert_eq!(
        plan(&after, &request(body.clone())),
        Err(PlanError::Stale {
            plan: before.revision.clone(),
            current: after.revision.clone()
        })
    );
    let mut replan = request(body);
    replan.replan = true;
    let again = plan(&after, &replan).unwrap();
    assert!(again.replanned.unwrap().contains(&before.revision));
    assert_eq!(again.base_revision, after.revision);
    // The same state gives the same revision.
    assert_eq!(state(&hosts, &allocations).revision, before.revision);
}

#[test]
fn watcher_actions_carry_the_migrate_parameters_in_plan_order() {
    let (hosts, allocations) = hot_cloud();
    let plan = plan(
        &state(&hosts, &allocations),
        &request(serde_json::json!({})),
    )
    .unwrap();
    let watcher = watcher_json(&plan);
    let actions = watcher["actions"].as_array().unwrap();
    assert_eq!(actions.len(), plan.moves());
    let first = &plan.steps[0][0];
    assert_eq!(actions[0]["action_type"], "migrate");
    assert_eq!(
        actions[0]["input_parameters"],
        serde_json::json!({"migration_type": "live", "resource_id": first.instance,
            "source_node": first.source, "destination_node": first.destination})
    );
    assert_eq!(watcher["goal"], WATCHER_GOAL);
    let text = render_text(&plan_json(&plan));
    assert!(
        text.contains(&first.instance) && text.contains("ΔC"),
        "{text}"
    );
}

/// What the `move` chain decided comes first, in order, each its own step; its kept instances
/// are listed with the reason and never moved; the solver plans the rest within what is left
/// of `max_moves`; a decided move the rules refuse is `MoveRefused`, naming why.
#[test]
fn decided_moves_come_first_kept_instances_stay_and_refused_moves_are_named() {
    let (hosts, allocations) = hot_cloud();
    let cloud = state(&hosts, &allocations);
    let decided = Decided {
        moves: vec![("vm2".into(), "host3".into())],
        kept: vec![(
            "vm1".into(),
            "denied by plugin freeze: change window".into(),
        )],
    };
    let body = serde_json::json!({"max_moves": 2});
    let plan = plan_decided(&cloud, &request(body.clone()), &decided).unwrap();
    let moves: Vec<&PlannedMove> = plan.steps.iter().flatten().collect();
    assert_eq!(
        (moves[0].instance.as_str(), moves[0].destination.as_str()),
        ("vm2", "host3")
    );
    assert_eq!(
        plan.steps[0].len(),
        1,
        "a decided move is a step of its own"
    );
    assert!(moves.len() <= 2, "{plan:?}");
    assert!(moves.iter().all(|m| m.instance != "vm1"), "{plan:?}");
    assert!(
        moves[1..].iter().all(|m| m.instance != "vm2"),
        "decided once: {plan:?}"
    );
    let kept = plan
        .not_movable
        .iter()
        .find(|l| l.what == "vm1")
        .expect("vm1 listed");
    assert!(kept.reason.contains("freeze"), "{kept:?}");
    assert!(
        plan.not_movable.iter().all(|l| l.what != "vm2"),
        "a decided move is not listed as not movable: {plan:?}"
    );
    // host2 holds 4 VCPUs at ratio 2: a fifth 1-VCPU instance is refused.
    let mut full = hosts.clone();
    full[1].used = Resources::new(4, 4_096, 40);
    let busy = state(&full, &allocations);
    let refused = plan_decided(
        &busy,
        &request(body),
        &Decided {
            moves: vec![("vm3".into(), "host2".into())],
            kept: Vec::new(),
        },
    )
    .unwrap_err();
    let PlanError::MoveRefused {
        instance,
        destination,
        reason,
    } = &refused
    else {
        panic!("{refused:?}")
    };
    assert_eq!((instance.as_str(), destination.as_str()), ("vm3", "host2"));
    assert!(!reason.is_empty(), "{refused}");
}
