//! Behaviour specific to each backend on the running service.

use super::helpers::{flavor, settings, spawn_with, spawn_with_clock};
use crate::on_both_engines;
use parasol::clock::{Clock, ManualClock, SystemClock};
use parasol::configuration::BackendKind;
use parasol::domain::Resources;
use parasol::policy::Algorithm;
use serde_json::json;
use std::sync::Arc;

async fn declined_claim_moves_on_to_the_next_alternate(engine: &str) {
    let (mut s, db) = settings(engine, BackendKind::Caching).await;
    s.policy.algorithm = Algorithm::FirstFit;
    s.caching.refresh_interval_s = 3600.0;
    let app = spawn_with(s, db).await;
    app.register("c1", 4, 4096, 40).await;
    app.register("c2", 4, 4096, 40).await;
    app.rebuild_backend().await;
    // Another process fills c1 behind the cache's back.
    let ledger = app.scheduler.ledger();
    let c1 = ledger.host_id_by_name("c1", None).await.unwrap().unwrap();
    ledger
        .claim(c1, "someone-else", &Resources::new(4, 4096, 40), 1)
        .await
        .unwrap();
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body[0][0]["nova_object.data"]["service_host"], "c2");
    let stats = app.stats("caching").await;
    assert_eq!(stats["attempts"], 2);
    assert_eq!(stats["declines"], 1);
    assert_eq!(stats["decline_ratio"], 0.5);
}
on_both_engines!(
    declined_claim_moves_on_to_the_next_alternate,
    super::declined_claim_moves_on_to_the_next_alternate
);

async fn caching_declines_a_host_filled_by_another_worker_until_the_next_refresh(engine: &str) {
    let (mut s, db) = settings(engine, BackendKind::Caching).await;
    s.policy.algorithm = Algorithm::FirstFit;
    s.caching.refresh_interval_s = 60.0;
    // The refresh sleeps on this clock: only the test moves it.
    let t0 = SystemClock.now_ms();
    let clock = ManualClock::new(t0);
    let app = spawn_with_clock(s, db, Arc::new(clock.clone())).await;
    app.register("c1", 4, 4096, 40).await;
    app.register("c2", 64, 65536, 640).await;
    // Rebuilding the backend reads a first snapshot holding both hosts.
    app.rebuild_backend().await;
    let ledger = app.scheduler.ledger();
    let c1 = ledger.host_id_by_name("c1", None).await.unwrap().unwrap();
    ledger
        .claim(c1, "other-worker", &Resources::new(4, 4096, 40), 1)
        .await
        .unwrap();
    // The refresh waits for the clock alone: its wake-up is armed for the 60th second.
    let refresh_at = t0 + 60_000;
    let armed = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !clock.deadlines().contains(&refresh_at) {
        assert!(std::time::Instant::now() < armed, "{:?}", clock.deadlines());
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // Until the refresh, the cache still sees c1 empty: first_fit tries it and is declined.
    for _ in 0..2 {
        let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body[0][0]["nova_object.data"]["service_host"], "c2");
    }
    let before = app.stats("caching").await;
    assert_eq!(before["declines"], 2);
    // 59.9 s of the clock: short of the refresh's deadline, which no real time moves, so
    // the refresh cannot have run.
    clock.advance_ms(59_900);
    assert!(clock.deadlines().contains(&refresh_at));
    assert_eq!(app.stats("caching").await["queries"], before["queries"]);
    // The 60th second: the refresh reads both hosts.
    clock.advance_ms(100);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while app.stats("caching").await["queries"] == before["queries"] {
        assert!(
            std::time::Instant::now() < deadline,
            "no refresh after 60 s of the clock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (status, _) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200);
    let stats = app.stats("caching").await;
    assert_eq!(
        stats["declines"], 2,
        "after the refresh c1 is known to be full: {stats}"
    );
    assert_eq!(
        stats["queries"].as_u64().unwrap(),
        before["queries"].as_u64().unwrap() + 2,
        "a refresh reads every host once: {stats}"
    );
    assert_eq!(
        stats["claim_latency_ms"]["count"], 5,
        "every claim is timed: {stats}"
    );
}
on_both_engines!(
    caching_declines_a_host_filled_by_another_worker_until_the_next_refresh,
    super::caching_declines_a_host_filled_by_another_worker_until_the_next_refresh
);

async fn asc_shrinks_its_interval_under_a_decline_burst(engine: &str) {
    let (mut s, db) = settings(engine, BackendKind::Asc).await;
    s.policy.algorithm = Algorithm::FirstFit;
    let text = "th_decline = 0.05\nth_low = 0.03\nstart_interval_s = 0.4\nmin_interval_s = 0.05\nspeed_up_step = 0.5\nslow_down_step = 1.1";
    s.asc = toml::from_str(text).unwrap();
    // The refresh interval runs on this clock: only the test moves it.
    let t0 = SystemClock.now_ms();
    let clock = ManualClock::new(t0);
    let app = spawn_with_clock(s, db, Arc::new(clock.clone())).await;
    // Two small hosts ranked first: with max_attempts = 3 each decision is declined twice
    // by the ledger before the big host takes it.
    for i in 0..2 {
        app.register(&format!("c{i}"), 2, 2048, 20).await;
    }
    app.register("big", 512, 524288, 5120).await;
    // Rebuilding the backend reads a first snapshot holding the three hosts, and arms the
    // first interval (0.4 s of the clock).
    app.rebuild_backend().await;
    let end_of_interval = t0 + 400;
    let armed = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !clock.deadlines().contains(&end_of_interval) {
        assert!(std::time::Instant::now() < armed, "{:?}", clock.deadlines());
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // Fill the small hosts behind the cache's back: every decision is declined at least once.
    let ledger = app.scheduler.ledger();
    for i in 0..2 {
        let id = ledger
            .host_id_by_name(&format!("c{i}"), None)
            .await
            .unwrap()
            .unwrap();
        ledger
            .claim(id, &format!("other-{i}"), &Resources::new(2, 2048, 20), 1)
            .await
            .unwrap();
    }
    for _ in 0..4 {
        let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body[0][0]["nova_object.data"]["service_host"], "big");
    }
    // The interval ends: its decline ratio passed th_decline, so τ halves, once.
    clock.advance_ms(400);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let stats = loop {
        let stats = app.stats("asc").await;
        if stats["params"]["refresh_interval_s"].as_f64() != Some(0.4) {
            break stats;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the interval's end did not adapt τ: {stats}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(stats["params"]["refresh_interval_s"], 0.2, "{stats}");
    // How long the last snapshot took, for the operator (wall time).
    assert!(
        stats["params"]["snapshot_ms"]
            .as_f64()
            .is_some_and(|ms| (0.0..10_000.0).contains(&ms)),
        "{stats}"
    );
    let history = stats["params"]["interval_history"].as_array().unwrap();
    let last = history.last().expect("one adapted interval");
    assert_eq!(last["interval_ms"], 200, "{stats}");
    assert!(
        last["decline_ratio"].as_f64().is_some_and(|r| r > 0.05),
        "{stats}"
    );
    assert!(stats["decline_ratio"].as_f64().unwrap() > 0.05);
    // The next interval ends 0.2 s of the clock later.
    let next = t0 + 400 + 200;
    let armed = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !clock.deadlines().contains(&next) {
        assert!(std::time::Instant::now() < armed, "{:?}", clock.deadlines());
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
on_both_engines!(
    asc_shrinks_its_interval_under_a_decline_burst,
    super::asc_shrinks_its_interval_under_a_decline_burst
);
