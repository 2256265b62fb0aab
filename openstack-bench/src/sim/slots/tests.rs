use super::*;
use crate::sim::random::{stream, Stream};
use parasol::domain::Resources;

fn one_request_hosts(n: usize) -> Vec<HostState> {
    (0..n)
        .map(|i| HostState::synthetic(i as i64, Resources::new(0, 1_000, 1_000), Resources::ZERO))
        .collect()
}

fn contexts() -> Vec<RequestContext> {
    vec![RequestContext::with_demand(
        "r",
        "f0",
        Resources::new(0, 1_000, 1_000),
    )]
}

#[test]
fn same_slot_collision_on_a_one_request_host_declines_exactly_one_chosen_at_random() {
    let ctx = contexts();
    let mut declined_position = [0usize; 2];
    for seed in 0..40 {
        let mut sim = Slots::new(
            one_request_hosts(1),
            &ctx,
            Decider::snapshot(Algorithm::FirstFit),
        );
        let results = sim
            .run_slot(
                &[0, 0],
                &mut stream(seed, Stream::Decisions),
                &mut stream(seed, Stream::ClaimOrder),
            )
            .to_vec();
        assert!(
            results.iter().all(|r| r.host == Some(0)),
            "both decided on host 0"
        );
        let declined: Vec<_> = results.iter().filter(|r| !r.placed).collect();
        assert_eq!(declined.len(), 1, "seed {seed}");
        declined_position[declined[0].position] += 1;
        assert_eq!((sim.attempts, sim.declines), (2, 1));
    }
    assert!(
        declined_position.iter().all(|n| *n > 5),
        "{declined_position:?}"
    );
}

#[test]
fn decisions_in_a_slot_never_see_that_slots_claims() {
    let ctx = contexts();
    let mut sim = Slots::new(
        one_request_hosts(2),
        &ctx,
        Decider::snapshot(Algorithm::FirstFit),
    );
    let (mut d, mut c) = (stream(1, Stream::Decisions), stream(1, Stream::ClaimOrder));
    let results = sim.run_slot(&[0, 0], &mut d, &mut c).to_vec();
    // Had the second decision seen the first claim it would have chosen host 1.
    assert!(results.iter().all(|r| r.host == Some(0)));
    assert_eq!(sim.declines, 1);
    assert_eq!(sim.hosts[1].used, Resources::ZERO);
    // The next slot starts from the resolved state and finds host 1.
    let next = sim.run_slot(&[0], &mut d, &mut c).to_vec();
    assert_eq!(next[0].host, Some(1));
    assert!(next[0].placed);
}

#[test]
fn a_request_no_host_can_take_is_one_declined_attempt_with_n_queries() {
    let ctx = contexts();
    let mut full = one_request_hosts(3);
    for h in &mut full {
        h.used = *h.usable();
    }
    let mut sim = Slots::new(full, &ctx, Decider::snapshot(Algorithm::Random));
    let results = sim
        .run_slot(
            &[0],
            &mut stream(1, Stream::Decisions),
            &mut stream(1, Stream::ClaimOrder),
        )
        .to_vec();
    assert_eq!(results[0].host, None);
    assert_eq!((sim.attempts, sim.declines, sim.queries), (1, 1, 3));
}

#[test]
fn indexed_slots_decide_as_ranking_every_host() {
    use crate::datasets::DatasetKind;
    let d = DatasetKind::Nfv.load();
    let workload = d.workload(1, &mut stream(2, Stream::Workload));
    let ctx = workload.contexts();
    for a in [
        Algorithm::Random,
        Algorithm::FirstFit,
        Algorithm::Wfr,
        Algorithm::DistFromDiag,
        Algorithm::Adaptive,
    ] {
        let mut indexed = Slots::new(d.hosts(25), &ctx, Decider::snapshot(a));
        let mut scanning = Slots::scanning(d.hosts(25), &ctx, Decider::snapshot(a));
        assert!(matches!(indexed.decider, Decider::Indexed(_)));
        let (mut d1, mut c1) = (stream(3, Stream::Decisions), stream(3, Stream::ClaimOrder));
        let (mut d2, mut c2) = (stream(3, Stream::Decisions), stream(3, Stream::ClaimOrder));
        for batch in workload.requests.chunks(7) {
            let x = indexed.run_slot(batch, &mut d1, &mut c1).to_vec();
            let y = scanning.run_slot(batch, &mut d2, &mut c2).to_vec();
            assert_eq!(x, y, "{a:?}");
        }
        assert_eq!(indexed.hosts, scanning.hosts, "{a:?}");
        assert_eq!(
            (indexed.declines, indexed.queries),
            (scanning.declines, scanning.queries)
        );
    }
}
