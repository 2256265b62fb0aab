use super::scenarios::{build, MHZ};
use super::*;

fn bed(built: &scenarios::Built) -> Testbed {
    Testbed {
        mhz: MHZ,
        hosts: built.hosts,
        placement: built.placement.clone(),
        duration_s: built.duration_s,
        scheduler_start_s: built.scheduler_start_s,
        sample_s: 20,
        average_s: 60,
        migration_s: 2,
        search_s: 0,
        migration_mhz: 640.0,
        noise: 0.05,
        noise_period_s: 2,
        limits: PlanLimits {
            max_concurrent_per_source: 1,
            parallel: 2,
        },
        max_rounds: None,
        resistance: None,
        oracle_desire: false,
    }
}

fn outcome(scenario: &str, solver: Option<Solver>) -> Outcome {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let built = build(scenario, &mut rng).unwrap();
    run_testbed(&bed(&built), built.workload.as_ref(), solver, &mut rng).unwrap()
}

#[test]
fn without_a_scheduler_the_hot_spot_stays() {
    let null = outcome("HSA-18:3_5-20", None);
    assert_eq!(null.migrations(), 0);
    // Five 427 MHz VMs and one 213 MHz VM share host 0: the five stay hungry.
    assert_eq!(null.samples.last().unwrap().2, 5);
}

#[test]
fn gbm_relieves_hsa_5_20_with_fewer_migrations_than_bcpu() {
    let gbm = outcome("HSA-18:3_5-20", Some(Solver::Gbm(GbmParams::default())));
    let bcpu = outcome("HSA-18:3_5-20", Some(Solver::Bcpu));
    assert_eq!(gbm.samples.last().unwrap().2, 0, "{gbm:?}");
    assert!(gbm.migrations() > 0 && gbm.migrations() < bcpu.migrations());
    // Nothing moves before the scheduler starts at 260 s.
    assert!(gbm.rounds.iter().all(|r| r.at_s >= 260));
}

#[test]
fn gpcw_spreads_120_vms_six_per_host() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let built = build("GPCW-MD", &mut rng).unwrap();
    assert_eq!(built.placement.len(), 120);
    for h in 0..20 {
        assert_eq!(built.placement.iter().filter(|p| **p == h).count(), 6);
    }
    assert!(build("GPCW-XX", &mut rng).is_err());
}

fn outcome_on(scenario: &str, solver: Solver, tweak: impl Fn(&mut Testbed)) -> Outcome {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let built = build(scenario, &mut rng).unwrap();
    let mut testbed = bed(&built);
    tweak(&mut testbed);
    run_testbed(&testbed, built.workload.as_ref(), Some(solver), &mut rng).unwrap()
}

#[test]
fn max_rounds_stops_the_scheduler_after_its_first_round_with_moves() {
    let sa = Solver::Sa(SaParams::default());
    let free = outcome_on("HSA-18:3_6-35", sa, |_| {});
    assert!(free.rounds.len() > 1, "{free:?}");
    let once = outcome_on("HSA-18:3_6-35", sa, |b| b.max_rounds = Some(1));
    assert_eq!(once.rounds, free.rounds[..1]);
    assert!(once.rounds[0].cost_after < once.rounds[0].cost_before);
}

#[test]
fn a_search_delay_postpones_the_next_round() {
    let gbm = Solver::Gbm(GbmParams::default());
    let instant = outcome_on("HSA-18:3_5-20", gbm, |_| {});
    assert_eq!(instant.rounds[1].at_s, 340, "{instant:?}");
    // Migrations start 30 s after the 260 s sample, so the minute of averages after them
    // ends after 340 s.
    let slow = outcome_on("HSA-18:3_5-20", gbm, |b| b.search_s = 30);
    assert_eq!(slow.rounds[0].at_s, 260);
    assert!(slow.rounds[1].at_s >= 360, "{slow:?}");
}
