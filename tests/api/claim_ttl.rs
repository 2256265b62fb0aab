//! Issue 16, item 4: a claim that nothing confirms within `[scheduler] claim_ttl_s` is
//! released and counted (`expired_claims` in /v1/stats and /metrics), on the injected clock;
//! a process that died in the middle of a multi-create leaves nothing claimed once restarted
//! past the TTL.

use super::helpers::{call_body, flavor, request_spec, settings, spawn_with_clock, uuids, TestApp};
use crate::on_both_engines;
use parasol::clock::{Clock, ManualClock};
use parasol::configuration::BackendKind;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DELETE_END: &str = include_str!("../fixtures/wire/instance.delete.end-notification.json");
const T0: i64 = 1_800_000_000_000;
const TTL_S: u64 = 600;

/// Nova's `instance.create.end` for `instance` on `host` (the captured wire form, edited).
pub fn create_end(instance: &str, host: &str, f: (i64, i64, i64)) -> Value {
    let captured: Value = serde_json::from_str(DELETE_END).unwrap();
    let mut m = captured["decoded_oslo_message"].clone();
    m["message_id"] = json!(uuid::Uuid::new_v4().to_string());
    m["event_type"] = json!("instance.create.end");
    let data = &mut m["payload"]["nova_object.data"];
    data["uuid"] = json!(instance);
    data["host"] = json!(host);
    data["node"] = json!(host);
    let fl = &mut data["flavor"]["nova_object.data"];
    fl["vcpus"] = json!(f.0);
    fl["memory_mb"] = json!(f.1);
    fl["root_gb"] = json!(f.2);
    m
}

async fn wait_for(what: &str, app: &TestApp, mut done: impl FnMut(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats = app.get_json("/v1/stats").await;
        if done(&stats) {
            return stats;
        }
        assert!(Instant::now() < deadline, "{what}: {stats}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn unconfirmed_claims_are_released_after_the_ttl_and_counted(engine: &str) {
    let (mut s, db) = settings(engine, BackendKind::Filter).await;
    s.scheduler.claim_ttl_s = TTL_S;
    let clock = ManualClock::new(T0);
    let app = spawn_with_clock(s, db, Arc::new(clock.clone())).await;
    app.register("compute1", 16, 16384, 160).await;
    // A multi-create of three; Nova confirms one build only.
    let ids = uuids(3);
    let resp = app
        .post(
            "/v1/select_destinations",
            &call_body(request_spec(flavor(2, 1024, 10), 3, json!({})), &ids),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let out: Value = app
        .post(
            "/v1/notifications",
            &create_end(&ids[0], "compute1", (2, 1024, 10)),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(out["outcome"], "applied", "{out}");
    assert_eq!(app.used().await[0].1, 6);
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(parasol::ledger::run_claim_expiry(
        app.scheduler.ledger().clone(),
        Arc::new(clock.clone()),
        TTL_S,
        app.scheduler.stats().clone(),
        stop.clone(),
    ));
    // Just before the TTL nothing goes (a sweep at that moment, as the task runs it).
    clock.advance_ms(TTL_S as i64 * 1000 - 1);
    let swept = app
        .scheduler
        .ledger()
        .sweep_expired_claims(clock.now_ms(), TTL_S * 1000)
        .await
        .unwrap();
    assert!(swept.is_empty(), "{swept:?}");
    assert_eq!(app.get_json("/v1/stats").await["expired_claims"], 0);
    assert_eq!(app.used().await[0].1, 6);
    // Past it, the two unconfirmed claims are released; the confirmed one stays.
    // The sweeper sleeps on the clock: moved a sweep interval at a time until it has run.
    let interval = parasol::ledger::sweep_interval_ms(TTL_S * 1000) as i64;
    clock.advance_ms(interval + 1);
    wait_for("two claims expire", &app, |s| {
        clock.advance_ms(interval);
        s["expired_claims"] == 2
    })
    .await;
    assert_eq!(
        app.used().await,
        vec![("compute1".to_string(), 2, 1024, 10)]
    );
    let ledger = app.scheduler.ledger();
    assert_eq!(ledger.allocation_count().await.unwrap(), 1);
    assert!(ledger.allocation(&ids[0]).await.unwrap().unwrap().confirmed);
    assert_eq!(
        app.metric("parasol_expired_claims_total").await.as_deref(),
        Some("2")
    );
    // Much later, the confirmed allocation is still there.
    clock.advance_ms(10 * TTL_S as i64 * 1000);
    let swept = ledger
        .sweep_expired_claims(clock.now_ms(), TTL_S * 1000)
        .await
        .unwrap();
    assert!(swept.is_empty(), "{swept:?}");
    assert_eq!(ledger.allocation_count().await.unwrap(), 1);
    stop.cancel();
}
on_both_engines!(
    unconfirmed_claims_are_released_after_the_ttl_and_counted,
    super::unconfirmed_claims_are_released_after_the_ttl_and_counted
);

/// A process stopped with two claims committed and never answered (made here directly on the
/// ledger, as a multi-create cut short leaves them). Restarted past the TTL, the service
/// releases them at once, before any call. The real crash, SIGKILL in the middle of a
/// multi-create, is `tests/sigkill.rs`.
async fn claims_a_stopped_process_left_unanswered_expire_after_restart_and_the_ttl(engine: &str) {
    let (mut s, db) = settings(engine, BackendKind::Filter).await;
    s.scheduler.claim_ttl_s = TTL_S;
    let clock = ManualClock::new(T0);
    let first = spawn_with_clock(s.clone(), db, Arc::new(clock.clone())).await;
    first.register("compute1", 16, 16384, 160).await;
    let ledger = first.scheduler.ledger().clone();
    let host = ledger.table().by_name("compute1", None).unwrap().id;
    let demand = parasol::domain::Resources::new(2, 1024, 10);
    for id in uuids(2) {
        let made = ledger.claim(host, &id, &demand, T0).await.unwrap();
        assert_eq!(made, parasol::ledger::ClaimOutcome::Claimed);
    }
    first.shutdown.stop().await;
    let db = first._db;
    // The restart, one TTL later.
    clock.advance_ms(TTL_S as i64 * 1000 + 1);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let app = parasol::startup::Application::build_with(s, listener, Arc::new(clock.clone()))
        .await
        .unwrap();
    app.start_claim_expiry();
    let ledger = app.scheduler().ledger().clone();
    let stats = app.scheduler().stats().clone();
    let shutdown = app.shutdown();
    tokio::spawn(app.run_until_stopped());
    // The sweep counts what it released after its transaction commits: wait for the count,
    // which comes last, then read the ledger it follows.
    let deadline = Instant::now() + Duration::from_secs(20);
    while stats.expired_claims() < 2 {
        assert!(
            Instant::now() < deadline,
            "the crash's claims never expired (ledger holds {})",
            ledger.allocation_count().await.unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(stats.expired_claims(), 2);
    assert_eq!(ledger.allocation_count().await.unwrap(), 0);
    let h = ledger.read_hosts().await.unwrap();
    assert!(h[0].used.is_zero(), "{:?}", h[0].used);
    shutdown.stop().await;
    drop(db);
}
on_both_engines!(
    claims_a_stopped_process_left_unanswered_expire_after_restart_and_the_ttl,
    super::claims_a_stopped_process_left_unanswered_expire_after_restart_and_the_ttl
);
