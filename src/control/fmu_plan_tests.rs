use super::*;

/// Hosts of 10 memory units (ratio 1), VMs of 5: §3.8.5's memory example.
fn rules(vms: usize, inventory: &[f64]) -> MoveRules {
    MoveRules {
        allocation: vec![vec![5.0]; vms],
        inventory: inventory.iter().map(|m| vec![*m]).collect(),
        ratios: vec![1.0],
        enabled: vec![true; inventory.len()],
        groups: Vec::new(),
        not_movable: vec![None; vms],
    }
}

fn mv(vm: usize, from: usize, to: usize) -> Move {
    Move { vm, from, to }
}

#[test]
fn moves_wait_until_their_target_has_room() {
    // A = {v0, v1} full, B = {v2}, C empty (room for one). v2 → A needs v1 → C first.
    let rules = rules(3, &[10.0, 10.0, 5.0]);
    let current = [0, 0, 1];
    let target = [0, 2, 0];
    let plan = order_moves(&current, &target, &[2, 1], &rules, PlanLimits::default());
    assert_eq!(plan.steps, vec![vec![mv(1, 0, 2)], vec![mv(2, 1, 0)]]);
    assert!(plan.dropped.is_empty());
    assert_eq!(
        replay_plan(&current, &plan.steps, &rules, PlanLimits::default()),
        Ok(vec![0, 2, 0])
    );
    // Both at once: v1 still counts on A while it leaves, so A would hold 15.
    let together = vec![vec![mv(1, 0, 2), mv(2, 1, 0)]];
    let err = replay_plan(&current, &together, &rules, PlanLimits::default()).unwrap_err();
    assert!(matches!(err, ReplayError::Ratio { host: 0, .. }), "{err}");
}

#[test]
fn a_swap_between_two_full_hosts_has_no_feasible_order() {
    let rules = rules(4, &[10.0, 10.0]);
    let current = [0, 0, 1, 1];
    let plan = order_moves(&current, &[0, 1, 0, 1], &[], &rules, PlanLimits::default());
    assert!(plan.steps.is_empty());
    assert_eq!(plan.dropped.len(), 2);
    assert!(plan.dropped[0].1.contains("ratio"), "{}", plan.dropped[0].1);
}

#[test]
fn anti_affinity_refuses_a_shared_host_and_replay_catches_it() {
    let mut rules = rules(3, &[20.0, 20.0]);
    rules.groups.push(ServerGroup {
        policy: GroupPolicy::AntiAffinity,
        members: vec![0, 2],
    });
    let current = [0, 0, 1];
    let plan = order_moves(&current, &[0, 1, 0], &[], &rules, PlanLimits::default());
    assert_eq!(plan.steps, vec![vec![mv(1, 0, 1)]]);
    assert!(
        plan.dropped[0].1.contains("server group 0"),
        "{:?}",
        plan.dropped
    );
    let bad = vec![vec![mv(2, 1, 0)]];
    let err = replay_plan(&current, &bad, &rules, PlanLimits::default()).unwrap_err();
    assert!(matches!(err, ReplayError::Group { group: 0, .. }), "{err}");
}

#[test]
fn an_affinity_member_cannot_leave_its_group_piecemeal() {
    let mut rules = rules(2, &[20.0, 20.0]);
    rules.groups.push(ServerGroup {
        policy: GroupPolicy::Affinity,
        members: vec![0, 1],
    });
    let plan = order_moves(&[0, 0], &[1, 1], &[], &rules, PlanLimits::default());
    assert!(plan.steps.is_empty());
    assert_eq!(plan.dropped.len(), 2);
    let err = replay_plan(&[0, 0], &[vec![mv(0, 0, 1)]], &rules, PlanLimits::default());
    assert!(matches!(err, Err(ReplayError::Group { .. })));
}

#[test]
fn one_move_per_source_per_step_and_parallel_overall() {
    let rules = rules(4, &[40.0, 40.0, 40.0]);
    let current = [0, 0, 0, 1];
    let target = [2, 2, 2, 2];
    let limits = PlanLimits {
        max_concurrent_per_source: 1,
        parallel: 2,
    };
    let plan = order_moves(&current, &target, &[], &rules, limits);
    assert_eq!(plan.steps.len(), 3);
    for step in &plan.steps {
        assert!(step.len() <= 2);
        let from0 = step.iter().filter(|m| m.from == 0).count();
        assert!(from0 <= 1);
    }
    assert_eq!(
        replay_plan(&current, &plan.steps, &rules, limits),
        Ok(target.to_vec())
    );
    let two_from_a = vec![vec![mv(0, 0, 2), mv(1, 0, 2)]];
    let err = replay_plan(&current, &two_from_a, &rules, limits).unwrap_err();
    assert!(matches!(err, ReplayError::Limits { .. }), "{err}");
}

#[test]
fn unmovable_vms_and_disabled_hosts_are_refused() {
    let mut rules = rules(2, &[20.0, 20.0, 20.0]);
    rules.not_movable[0] = Some("PCI device".into());
    rules.enabled[2] = false;
    let plan = order_moves(&[0, 0], &[1, 2], &[], &rules, PlanLimits::default());
    assert!(plan.steps.is_empty());
    let reasons: Vec<&str> = plan.dropped.iter().map(|d| d.1.as_str()).collect();
    assert!(
        reasons[0].contains("PCI device") && reasons[1].contains("disabled"),
        "{reasons:?}"
    );
    for step in [vec![mv(0, 0, 1)], vec![mv(1, 0, 2)], vec![mv(1, 1, 0)]] {
        let err = replay_plan(&[0, 0], &[step], &rules, PlanLimits::default()).unwrap_err();
        assert!(matches!(err, ReplayError::BadMove { .. }), "{err}");
    }
}

#[test]
fn rules_of_the_wrong_shape_are_named() {
    let mut bad = rules(2, &[10.0]);
    bad.allocation[1] = vec![f64::NAN];
    let err = bad.validate(2, 1).unwrap_err();
    assert!(err.to_string().contains("allocation[1]"), "{err}");
    assert!(rules(2, &[10.0]).validate(3, 1).is_err());
}
