//! `/readyz`: ready only when the ledger takes a write now, the broker is connected (when
//! configured) and Placement synced (when enabled); otherwise 503 naming the reason.
//! `/healthz` is liveness: 200 while the process serves.

use super::helpers::{settings, spawn_with};
use parasol::configuration::BackendKind;
use serde_json::Value;
use sqlx::Connection;

async fn get(app: &super::helpers::TestApp, path: &str) -> (u16, Value) {
    let r = app
        .client
        .get(format!("{}{path}", app.address))
        .send()
        .await
        .expect("request");
    (r.status().as_u16(), r.json().await.expect("json"))
}

async fn ready_when_the_ledger_takes_writes(engine: &str) {
    let (s, db) = settings(engine, BackendKind::Filter).await;
    let app = spawn_with(s, db).await;
    let (status, body) = get(&app, "/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "ready");
    assert_eq!(body["checks"]["ledger"]["ok"], true);
    assert!(
        body["checks"].get("broker").is_none(),
        "no broker configured"
    );
}
crate::on_both_engines!(
    ready_when_the_ledger_takes_writes,
    super::ready_when_the_ledger_takes_writes
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_write_lock_makes_the_service_not_ready_until_it_is_released() {
    let (s, db) = settings("sqlite", BackendKind::Filter).await;
    let url = db.url.clone();
    let app = spawn_with(s, db).await;
    // Another process holds SQLite's write lock.
    let mut other = sqlx::SqliteConnection::connect(&url).await.expect("open");
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .expect("take the write lock");
    let (status, body) = get(&app, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "not_ready");
    let reason = body["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("ledger: "), "{reason}");
    let (live, _) = get(&app, "/healthz").await;
    assert_eq!(live, 200, "still alive");
    sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
    // The timed-out probe finishes on its own; the next one succeeds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (status, body) = get(&app, "/readyz").await;
        if status == 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never ready again: {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_broker_and_placement_are_named_in_the_reason() {
    let (mut s, db) = settings("sqlite", BackendKind::Filter).await;
    s.amqp.url = "amqp://guest:guest@127.0.0.1:1/%2f".into();
    s.amqp.reconnect_min_s = 0.05;
    s.placement.enabled = true;
    s.placement.auth = parasol::placement::AuthKind::Noauth;
    s.placement.url = "http://127.0.0.1:1/placement".into();
    s.placement.timeout_s = 0.5;
    let app = spawn_with(s, db).await;
    let stop = app.start_background();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let body = loop {
        let (status, body) = get(&app, "/readyz").await;
        assert_eq!(status, 503, "{body}");
        if body["checks"]["placement"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("the last sync failed"))
        {
            break body;
        }
        assert!(std::time::Instant::now() < deadline, "{body}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(body["checks"]["ledger"]["ok"], true);
    assert_eq!(body["checks"]["broker"]["ok"], false);
    let reason = body["reason"].as_str().unwrap();
    assert!(reason.contains("broker: not connected"), "{reason}");
    assert!(
        reason.contains("placement: the last sync failed"),
        "{reason}"
    );
    stop.cancel();
}
