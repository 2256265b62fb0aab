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
    let (live, health) = get(&app, "/healthz").await;
    assert_eq!(live, 200, "{health}");
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["ledger"]["engine"], engine, "{health}");
    assert_eq!(health["ledger"]["writable"], true, "{health}");
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

/// The SQLite file path of a test ledger's URL.
fn sqlite_path(url: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(url.trim_start_matches("sqlite://"))
}

/// A select_destinations call for one small instance; answers the status.
async fn claim_one(app: &super::helpers::TestApp) -> u16 {
    app.place(super::helpers::flavor(1, 512, 1), 1, serde_json::json!({}))
        .await
        .0
}

/// Waits until `/readyz` answers `status`; answers its body.
async fn ready_becomes(app: &super::helpers::TestApp, want: u16) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (status, body) = get(app, "/readyz").await;
        if status == want {
            return body;
        }
        assert!(std::time::Instant::now() < deadline, "never {want}: {body}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Issue 16, item 5: the ledger file deleted under the running process. Claims used to keep
/// answering 200 into the deleted file (all lost at restart). Now every write is refused
/// (503, a real outage), `/readyz` names the reason, and nothing changes in the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_sqlite_file_refuses_writes_and_makes_the_service_not_ready() {
    let (s, db) = settings("sqlite", BackendKind::Filter).await;
    let path = sqlite_path(&db.url);
    let app = spawn_with(s, db).await;
    app.register("compute1", 8, 8192, 80).await;
    assert_eq!(claim_one(&app).await, 200);
    let before = app.used().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let body = ready_becomes(&app, 503).await;
    let reason = body["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("was removed while in use"), "{reason}");
    assert_eq!(claim_one(&app).await, 503, "a claim into a deleted file");
    let refused = app
        .post(
            "/v1/notifications",
            &super::helpers::host_state_event(
                &uuid::Uuid::new_v4().to_string(),
                "compute2",
                8,
                8192,
                80,
            ),
        )
        .await;
    assert_eq!(refused.status().as_u16(), 503);
    assert_eq!(app.used().await, before, "nothing changed in the table");
    assert!(!path.exists(), "no file was written elsewhere");
}

/// Issue 40, item 10: `/healthz` said `ok` with no ledger field while every write was refused
/// (only `/readyz` told). It still answers 200 (the process serves) but says `degraded`, with
/// the ledger not writable and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_shows_a_ledger_that_refuses_writes() {
    let (s, db) = settings("sqlite", BackendKind::Filter).await;
    let path = sqlite_path(&db.url);
    let app = spawn_with(s, db).await;
    app.register("compute1", 8, 8192, 80).await;
    let (_, health) = get(&app, "/healthz").await;
    assert_eq!(health["ledger"]["writable"], true, "{health}");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    ready_becomes(&app, 503).await;
    let (live, health) = get(&app, "/healthz").await;
    assert_eq!(live, 200, "liveness: the process serves");
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["ledger"]["engine"], "sqlite", "{health}");
    assert_eq!(health["ledger"]["writable"], false, "{health}");
    let error = health["ledger"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("was removed while in use"), "{health}");
    assert_eq!(claim_one(&app).await, 503, "what /healthz says is so");
}

/// Issue 16, item 5: the ledger file replaced by another ledger under the running process.
/// Two files' rows used to get mixed; now writes are refused and the other ledger is left as
/// it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_file_replaced_by_another_ledger_refuses_writes_and_is_not_mixed() {
    let (s, db) = settings("sqlite", BackendKind::Filter).await;
    let path = sqlite_path(&db.url);
    let app = spawn_with(s, db).await;
    app.register("compute1", 8, 8192, 80).await;
    assert_eq!(claim_one(&app).await, 200);
    // Another ledger, with a host of its own, moved over this one's path.
    let other = path.with_file_name("other.db");
    let other_url = format!("sqlite://{}", other.display());
    {
        let ledger = parasol::ledger::Ledger::open(&other_url, 2).await.unwrap();
        ledger
            .register_host(&crate::support::registration("elsewhere", 4, 4096, 40), 1)
            .await
            .unwrap();
        ledger.close().await;
    }
    // Everything in the main file, as a ledger at rest is.
    let mut conn = sqlx::SqliteConnection::connect(&other_url).await.unwrap();
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    // A second name for the other ledger's file, with no WAL beside it, to read it back.
    let witness = path.with_file_name("witness.db");
    std::fs::hard_link(&other, &witness).unwrap();
    std::fs::rename(&other, &path).unwrap();
    let body = ready_becomes(&app, 503).await;
    let reason = body["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("was replaced by another file"), "{reason}");
    assert_eq!(claim_one(&app).await, 503);
    // The file now at the path still holds only its own host, unused, and no allocation.
    let url = format!("sqlite://{}", witness.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let hosts: Vec<String> = sqlx::query_scalar("SELECT host FROM hosts")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(hosts, ["elsewhere"]);
    let allocations: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM allocations")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(allocations, 0);
}

/// Issue 16, item 5: a read-only ledger file (immutable: `chattr +i`, which binds root too).
/// The service starts (it can read), is not ready and refuses claims with 503; once the file
/// is writable again the writer reconnects by itself and the service is ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_sqlite_file_is_not_ready_until_writable_and_the_writer_reconnects() {
    let (s, db) = settings("sqlite", BackendKind::Filter).await;
    let path = sqlite_path(&db.url);
    // Made by another process, so that no file descriptor SQLite could reuse stays open here.
    let migrated = std::process::Command::new(env!("CARGO_BIN_EXE_parasol"))
        .arg("migrate")
        .env("PARASOL__LEDGER__URL", &db.url)
        .status()
        .expect("parasol migrate");
    assert!(migrated.success());
    let chattr = |flag: &str| {
        let ok = std::process::Command::new("chattr")
            .arg(flag)
            .arg(&path)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(
            ok,
            "chattr {flag} {} (needs CAP_LINUX_IMMUTABLE)",
            path.display()
        );
    };
    chattr("+i");
    // Undo even when an assertion fails, so that the temporary folder can go.
    struct Writable(std::path::PathBuf);
    impl Drop for Writable {
        fn drop(&mut self) {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(&self.0)
                .status();
        }
    }
    let _undo = Writable(path.clone());
    let app = spawn_with(s, db).await;
    let body = ready_becomes(&app, 503).await;
    let reason = body["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("readonly"), "{reason}");
    let event = |host: &str| {
        super::helpers::host_state_event(&uuid::Uuid::new_v4().to_string(), host, 8, 8192, 80)
    };
    let refused = app.post("/v1/notifications", &event("compute1")).await;
    assert_eq!(
        refused.status().as_u16(),
        503,
        "an outage, not the caller's fault"
    );
    assert!(app.used().await.is_empty());
    chattr("-i");
    ready_becomes(&app, 200).await;
    app.register("compute1", 8, 8192, 80).await;
    assert_eq!(claim_one(&app).await, 200);
    assert_eq!(app.used().await[0].1, 1);
}
