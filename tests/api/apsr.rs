//! APSR under load: decline ratio within ε and far fewer host reads than `filter`.

use super::helpers::{call_body, flavor, request_spec, settings, spawn_with, uuids};
use crate::on_both_engines;
use parasol::configuration::BackendKind;
use serde_json::{json, Value};
use std::sync::Arc;

/// 200 concurrent callers place 1-slot instances until the cluster is ~90 % full; returns the
/// backend's stats.
async fn fill_to_90_percent(engine: &str, backend: BackendKind) -> Value {
    let (mut s, db) = settings(engine, backend).await;
    s.scheduler.workers = 8;
    s.apsr = toml::from_str("epsilon = 0.05\nround_interval_s = 0.2\nmax_schedulers = 16").unwrap();
    let app = Arc::new(spawn_with(s, db).await);
    // 200 hosts x 10 slots = 2000 slots; 1800 instances = 90 %.
    for i in 0..200 {
        app.register(&format!("c{i}"), 10, 10240, 100).await;
    }
    app.rebuild_backend().await;
    let per_caller = 9;
    let calls: Vec<_> = (0..200)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let mut ok = 0;
                for _ in 0..per_caller {
                    let spec = request_spec(flavor(1, 1024, 10), 1, json!({}));
                    let status = app
                        .post("/v1/select_destinations", &call_body(spec, &uuids(1)))
                        .await
                        .status();
                    if status == 200 {
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect();
    let mut placed = 0;
    for c in calls {
        placed += c.await.unwrap();
    }
    for (host, vcpu, mem, disk) in app.used().await {
        assert!(
            vcpu <= 10 && mem <= 10240 && disk <= 100,
            "{host} oversubscribed"
        );
    }
    let stats = app.stats(backend.as_str()).await;
    assert_eq!(stats["placed"], placed, "{stats}");
    assert_eq!(
        stats["placed"].as_u64().unwrap() + stats["no_valid_host"].as_u64().unwrap(),
        1800
    );
    stats
}

async fn apsr_keeps_declines_within_epsilon_with_far_fewer_reads(engine: &str) {
    let apsr = fill_to_90_percent(engine, BackendKind::Apsr).await;
    let filter = fill_to_90_percent(engine, BackendKind::Filter).await;
    let ratio = apsr["decline_ratio"].as_f64().unwrap();
    assert!(ratio <= 0.05, "apsr decline ratio {ratio} above ε: {apsr}");
    assert_eq!(apsr["no_valid_host"], 0, "{apsr}");
    let (qa, qf) = (
        apsr["queries_per_request"].as_f64().unwrap(),
        filter["queries_per_request"].as_f64().unwrap(),
    );
    assert!(
        qa <= 0.15 * qf,
        "apsr reads {qa} hosts per request, filter {qf}"
    );
}
on_both_engines!(
    apsr_keeps_declines_within_epsilon_with_far_fewer_reads,
    super::apsr_keeps_declines_within_epsilon_with_far_fewer_reads
);

/// APSR's control round sleeps on the service's clock: nothing is re-planned until the clock
/// has moved a whole round.
async fn apsr_replans_when_its_round_elapses_on_the_clock(engine: &str) {
    use parasol::clock::{Clock, ManualClock, SystemClock};
    let (mut s, db) = settings(engine, BackendKind::Apsr).await;
    s.apsr = toml::from_str("epsilon = 0.05\nround_interval_s = 30").unwrap();
    let t0 = SystemClock.now_ms();
    let clock = ManualClock::new(t0);
    let app = super::helpers::spawn_with_clock(s, db, Arc::new(clock.clone())).await;
    let rounds = |stats: &Value| stats["params"]["history"].as_array().map_or(0, Vec::len);
    // The round's wake-up is armed on the clock, for 30 s after the start.
    let armed = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !clock.deadlines().contains(&(t0 + 30_000)) {
        assert!(std::time::Instant::now() < armed, "{:?}", clock.deadlines());
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let first = app.stats("apsr").await;
    // Short of the round's deadline: the round cannot have run.
    clock.advance_ms(29_000);
    assert!(clock.deadlines().contains(&(t0 + 30_000)));
    assert_eq!(
        rounds(&app.stats("apsr").await),
        rounds(&first),
        "no round before 30 s"
    );
    clock.advance_ms(1_000);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let stats = app.stats("apsr").await;
        if rounds(&stats) > rounds(&first) {
            let last = stats["params"]["history"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .clone();
            assert_eq!(last["round"], 1, "one round after 30 s: {stats}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no round after 30 s of the clock: {stats}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
on_both_engines!(
    apsr_replans_when_its_round_elapses_on_the_clock,
    super::apsr_replans_when_its_round_elapses_on_the_clock
);
