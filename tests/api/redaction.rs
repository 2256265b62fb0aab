//! Issue 16 item 6: no URL Parasol prints (ledger, broker, Placement) shows its password, in
//! the binary's error messages or in `/healthz`.

use crate::helpers::{settings, spawn_with};
use parasol::configuration::BackendKind;
use parasol::startup::Application;
use serde_json::Value;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SECRET: &str = "s3cretPassw0rd";

/// What `parasol migrate` prints to stderr for a ledger URL, and whether it failed.
fn migrate_output(url: &str) -> String {
    // From an empty folder: no etc/parasol.toml, only the environment counts.
    let cwd = tempfile::tempdir().expect("temp dir");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_parasol"))
        .arg("migrate")
        .current_dir(cwd.path())
        .env("PARASOL__LEDGER__URL", url)
        .env_remove("PARASOL_CONFIG")
        .env_remove("RUST_LOG")
        .output()
        .expect("run parasol migrate");
    assert!(!out.status.success(), "{url} must be refused");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_refused_ledger_url_is_printed_without_its_password() {
    let cases = [
        (
            format!("mysql://nova:{SECRET}@db.example/nova"),
            "key `ledger.url` has scheme \"mysql\"",
        ),
        (
            format!("redis://:{SECRET}@cache:6379/0"),
            "key `ledger.url` has scheme \"redis\"",
        ),
        (
            format!("postgres://nova:{SECRET}@127.0.0.1:notaport/nova"),
            "",
        ),
    ];
    for (url, shown) in cases {
        let printed = migrate_output(&url);
        assert!(!printed.contains(SECRET), "{url} printed as: {printed}");
        assert!(
            printed.contains(shown),
            "{url}: {shown} missing from: {printed}"
        );
    }
}

#[tokio::test]
async fn a_refused_postgres_ledger_is_reported_without_its_password() {
    let (mut s, _db) = settings("sqlite", BackendKind::Filter).await;
    // The running PostgreSQL, a database that does not exist: refused at once.
    let server = crate::support::pg_admin_url();
    let authority = server
        .trim_start_matches("postgres://")
        .split('/')
        .next()
        .unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or(authority);
    s.ledger.url = format!("postgres://postgres:{SECRET}@{host}/parasol_no_such_db");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let err = Application::build_with(s, listener, Arc::new(parasol::clock::SystemClock))
        .await
        .err()
        .expect("no such database");
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert!(!err.to_string().contains(SECRET), "{err}");
}

/// Polls `/healthz` until `pointer` holds a string, and returns it.
async fn health_error(address: &str, pointer: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let health: Value = reqwest::get(format!("{address}/healthz"))
            .await
            .expect("healthz")
            .json()
            .await
            .expect("json");
        if let Some(error) = health.pointer(pointer).and_then(Value::as_str) {
            return error.to_string();
        }
        assert!(Instant::now() < deadline, "no {pointer} in {health}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn broker_and_placement_errors_in_healthz_hide_the_password() {
    let (mut s, db) = settings("sqlite", BackendKind::Filter).await;
    // Nothing listens on port 1: both connections fail and report why.
    s.amqp.url = format!("amqp://nova:{SECRET}@127.0.0.1:1/%2f");
    s.amqp.reconnect_min_s = 0.1;
    s.placement.enabled = true;
    s.placement.auth = parasol::placement::AuthKind::Noauth;
    s.placement.url = format!("http://admin:{SECRET}@127.0.0.1:1/placement");
    s.placement.timeout_s = 1.0;
    let app = spawn_with(s, db).await;
    let stop = app.start_background();
    let broker = health_error(&app.address, "/broker/last_error").await;
    let placement = health_error(&app.address, "/placement/last_error").await;
    stop.cancel();
    assert!(!broker.contains(SECRET), "broker: {broker}");
    assert!(!placement.contains(SECRET), "placement: {placement}");
    assert!(placement.contains("127.0.0.1:1"), "placement: {placement}");
}
