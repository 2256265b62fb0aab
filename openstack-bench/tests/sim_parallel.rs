//! Experiment A through the public API on a small NFV setup: invariants, APSR's SLA and
//! query savings, and reproducibility.

use openstack_bench::datasets::DatasetKind;
use openstack_bench::sim::cli::PARALLEL_POLICIES;
use openstack_bench::sim::{run_parallel, ApsrSetup, ParallelCell, ParallelSetup, SimPolicy};
use parasol::policy::Algorithm;

fn cell(policy: SimPolicy, schedulers: usize, seed: u64) -> ParallelCell {
    ParallelCell {
        setup: ParallelSetup {
            dataset: DatasetKind::Nfv,
            replicas: 3,
            hosts: 84,
            arrival_rate: 20.0,
        },
        policy,
        schedulers,
        apsr: ApsrSetup::default(),
        seed,
    }
}

#[test]
fn every_request_is_one_attempt_and_declines_never_exceed_attempts() {
    for p in SimPolicy::parse_list(PARALLEL_POLICIES).unwrap() {
        let policy = p.as_str();
        let o = run_parallel(&cell(p, 10, 1));
        assert_eq!(o.attempts, 437 * 3, "{policy}");
        assert!(o.declines <= o.attempts, "{policy}");
        assert!(o.slots > 0 && o.throughput() <= 20.0 * 1.5, "{policy}");
    }
}

#[test]
fn apsr_stays_within_its_sla_and_reads_far_fewer_hosts_than_random() {
    let apsr = run_parallel(&cell(SimPolicy::Apsr, 0, 2));
    let random = run_parallel(&cell(SimPolicy::Classic(Algorithm::Random), 10, 2));
    assert!(apsr.decline_ratio() <= 0.05 + 0.02, "{apsr:?}");
    assert!(apsr.queries * 2 < random.queries, "{apsr:?} vs {random:?}");
    assert!(apsr.mean_schedulers() >= 1.0);
}

#[test]
fn first_fit_collides_more_with_more_schedulers() {
    let ff = |s| run_parallel(&cell(SimPolicy::Classic(Algorithm::FirstFit), s, 3)).decline_ratio();
    assert_eq!(ff(1), 0.0);
    assert!(ff(10) > ff(1) + 0.05);
}

#[test]
fn the_same_seed_gives_the_same_results_and_another_seed_others() {
    let p = SimPolicy::Classic(Algorithm::Wfr);
    assert_eq!(run_parallel(&cell(p, 5, 7)), run_parallel(&cell(p, 5, 7)));
    assert_eq!(
        run_parallel(&cell(SimPolicy::Apsr, 0, 7)),
        run_parallel(&cell(SimPolicy::Apsr, 0, 7))
    );
    assert_ne!(run_parallel(&cell(p, 5, 7)), run_parallel(&cell(p, 5, 8)));
}
