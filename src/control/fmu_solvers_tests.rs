use super::super::fmu_model::fmu_cost;
use super::super::fmu_plan::{replay_plan, GroupPolicy, ServerGroup};
use super::*;

const MHZ: f64 = 2133.0;

/// HSA-18:3: three one-core hosts, six VMs each at 213 MHz placed round robin, `hot` VMs of
/// host 0 desiring `mhz`.
fn hsa(hot: usize, mhz: f64) -> (FmuProblem, Vec<usize>) {
    let mut desires = vec![vec![213.0]; 18];
    for vm in (0..18).step_by(3).take(hot) {
        desires[vm][0] = mhz;
    }
    let current: Vec<usize> = (0..18).map(|vm| vm % 3).collect();
    let problem = FmuProblem {
        capacities: vec![vec![MHZ]; 3],
        desires,
        max_alloc: vec![Some(MHZ)],
    };
    (problem, current)
}

fn plan_for(problem: &FmuProblem, current: &[usize], solver: Solver, seed: u64) -> RebalancePlan {
    let vms = current.len();
    let eval = evaluate(problem, current, &FmuParams::equal(1)).unwrap();
    let usage: Vec<f64> = eval.allocations.iter().map(|a| a[0]).collect();
    let names: Vec<String> = (0..vms).map(|vm| format!("vm{vm:03}")).collect();
    let rules = MoveRules::unconstrained(vms, problem.capacities.len());
    let input = RebalanceInput {
        problem,
        usage: &usage,
        names: &names,
        current,
        rules: &rules,
        params: &FmuParams::equal(1),
        resistance: solver.thesis_resistance(),
    };
    rebalance(&input, solver, PlanLimits::default(), seed).unwrap()
}

#[test]
fn gbm_and_sa_satisfy_every_vm_of_hsa_5_20() {
    // 4904 MHz of demand on 6399: the optimum satisfies every VM (F = 1, U = 4904/6399).
    let (problem, current) = hsa(5, 427.0);
    let optimum = fmu_cost(4904.0 / 6399.0, 1.0);
    for solver in [
        Solver::Gbm(GbmParams::default()),
        Solver::Sa(SaParams::default()),
    ] {
        let mut state = current.clone();
        let mut rounds = 0;
        while rounds < 3 {
            let plan = plan_for(&problem, &state, solver, 7 + rounds);
            state = plan.plan.apply(&state);
            rounds += 1;
            if (plan.after.cost - optimum).abs() < 1e-9 {
                break;
            }
        }
        let after = evaluate(&problem, &state, &FmuParams::equal(1)).unwrap();
        assert!(
            (after.cost - optimum).abs() < 1e-9,
            "{} cost {}",
            solver.name(),
            after.cost
        );
        assert!(rounds <= 2, "{} took {rounds} rounds", solver.name());
    }
}

#[test]
fn bcpu_balances_usage_and_resists_small_gains() {
    let (problem, current) = hsa(5, 427.0);
    let plan = plan_for(&problem, &current, Solver::Bcpu, 1);
    assert!(plan.after.cost < plan.before.cost);
    // Already balanced: every VM is within 5 % of where it is, so nothing moves.
    let (flat, spread) = hsa(0, 213.0);
    for solver in [Solver::Bcpu, Solver::Bcpu2] {
        let plan = plan_for(&flat, &spread, solver, 1);
        assert_eq!(plan.plan.moves().count(), 0, "{}", solver.name());
    }
}

#[test]
fn plans_are_reproducible_from_the_seed() {
    let (problem, current) = hsa(6, 747.0);
    for solver in [
        Solver::Gbm(GbmParams::default()),
        Solver::Sa(SaParams::default()),
    ] {
        let a = plan_for(&problem, &current, solver, 42);
        let b = plan_for(&problem, &current, solver, 42);
        assert_eq!(a.plan, b.plan, "{}", solver.name());
    }
}

#[test]
fn gbm_stops_at_max_moves() {
    let (problem, current) = hsa(6, 747.0);
    let params = GbmParams {
        max_moves: Some(1),
        ..GbmParams::default()
    };
    let plan = plan_for(&problem, &current, Solver::Gbm(params), 3);
    assert_eq!(plan.plan.moves().count(), 1);
    assert!(plan.after.cost < plan.before.cost);
}

/// Random clouds with tight ratios, groups and unmovable VMs: every solver's plan replays
/// without exceeding a ratio or breaking a group, and never moves what may not move.
#[test]
fn every_plan_replays_within_ratios_and_groups() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for case in 0..12 {
        let hosts = 4 + case % 3;
        let vms = 3 * hosts;
        let current: Vec<usize> = (0..vms).map(|vm| vm % hosts).collect();
        let problem = FmuProblem {
            capacities: vec![vec![MHZ]; hosts],
            desires: (0..vms)
                .map(|_| vec![rng.gen_range(100.0..1500.0)])
                .collect(),
            max_alloc: vec![Some(MHZ)],
        };
        let mut rules = MoveRules {
            allocation: (0..vms).map(|_| vec![rng.gen_range(1..4) as f64]).collect(),
            inventory: vec![vec![8.0]; hosts],
            ratios: vec![1.0],
            enabled: (0..hosts).map(|h| h != 1).collect(),
            groups: vec![ServerGroup {
                policy: GroupPolicy::AntiAffinity,
                members: vec![0, 1, 2],
            }],
            not_movable: vec![None; vms],
        };
        rules.not_movable[3] = Some("vGPU".into());
        let eval = evaluate(&problem, &current, &FmuParams::equal(1)).unwrap();
        let usage: Vec<f64> = eval.allocations.iter().map(|a| a[0]).collect();
        let names: Vec<String> = (0..vms).map(|vm| format!("vm{}", vms - vm)).collect();
        let input = RebalanceInput {
            problem: &problem,
            usage: &usage,
            names: &names,
            current: &current,
            rules: &rules,
            params: &FmuParams::equal(1),
            resistance: Solver::Bcpu.thesis_resistance(),
        };
        let limits = PlanLimits {
            max_concurrent_per_source: 1,
            parallel: 3,
        };
        for solver in [
            Solver::Bcpu,
            Solver::Bcpu2,
            Solver::Sa(SaParams::default()),
            Solver::Gbm(GbmParams::default()),
        ] {
            let input = RebalanceInput {
                resistance: solver.thesis_resistance(),
                ..input
            };
            let plan = rebalance(&input, solver, limits, case as u64).unwrap();
            let end = replay_plan(&current, &plan.plan.steps, &rules, limits)
                .unwrap_or_else(|e| panic!("{} case {case}: {e}", solver.name()));
            assert_eq!(end[3], current[3]);
            assert_eq!(plan.not_movable, vec![(3, "vGPU".to_string())]);
        }
    }
}

#[test]
fn sa_threshold_on_start_keeps_an_acceptable_current_state() {
    // HSA-18:3_6-35 before any move: C ≈ 0.27. A threshold above it stops SA before it
    // searches only when the threshold also applies to the current state (§3.8.2).
    let (problem, current) = hsa(6, 747.0);
    let literal = SaParams {
        cost_threshold: 0.5,
        ..SaParams::default()
    };
    let on_start = SaParams {
        threshold_on_start: true,
        ..literal
    };
    let plan = plan_for(&problem, &current, Solver::Sa(on_start), 3);
    assert_eq!(plan.plan.moves().count(), 0);
    assert_eq!(plan.after.cost, plan.before.cost);
    // The default threshold (1e-9) is below any cost here: the flag changes nothing.
    let default = plan_for(&problem, &current, Solver::Sa(SaParams::default()), 3);
    let flagged = SaParams {
        threshold_on_start: true,
        ..SaParams::default()
    };
    assert_eq!(
        plan_for(&problem, &current, Solver::Sa(flagged), 3).plan,
        default.plan
    );
    assert!(default.after.cost < default.before.cost);
}

#[test]
fn sa_without_ties_still_lowers_the_cost() {
    let (problem, current) = hsa(6, 747.0);
    for accept_ties in [true, false] {
        let params = SaParams {
            accept_ties,
            ..SaParams::default()
        };
        let plan = plan_for(&problem, &current, Solver::Sa(params), 5);
        assert!(
            plan.after.cost < plan.before.cost,
            "accept_ties {accept_ties}"
        );
    }
}
