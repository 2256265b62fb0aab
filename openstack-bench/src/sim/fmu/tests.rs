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
        migration_mhz: 640.0,
        noise: 0.05,
        noise_period_s: 2,
        limits: PlanLimits {
            max_concurrent_per_source: 1,
            parallel: 2,
        },
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
