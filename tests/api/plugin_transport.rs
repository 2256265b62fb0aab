//! Operator plugins' failure policy and transport (docs/plugins.md §4, §3): the circuit breaker
//! on the injected clock, a plugin reached over TLS with a CA file and a bearer token, and the
//! caller's project and user passed on — against the real webhook (`support/plugin_server.rs`)
//! and a real TLS handshake (`support/tls_front.rs`).

use super::helpers::{flavor, settings, spawn_with_clock, TestApp};
use crate::plugin_server::{plugin, PluginServer, TOKEN};
use crate::tls_front::TlsFront;
use parasol::clock::{ManualClock, SharedClock};
use parasol::configuration::BackendKind;
use parasol::plugins::{PluginEvent, PluginSettings, PluginSpec};
use serde_json::{json, Value};
use std::sync::Arc;

/// A filter-backend app with `plugins` on `clock`, and two hosts.
async fn app_with(plugins: PluginSettings, clock: SharedClock) -> TestApp {
    let (mut s, db) = settings("sqlite", BackendKind::Filter).await;
    s.plugins = plugins;
    let app = spawn_with_clock(s, db, clock).await;
    app.register("big", 8, 16384, 100).await;
    app.register("small", 8, 4096, 100).await;
    app
}

async fn figures(app: &TestApp, event: &str, name: &str) -> Value {
    app.get_json("/v1/stats").await["plugins"][event][name].clone()
}

/// The value of the `/metrics` series `name` of plugin `plugin` (`None`: no such line).
fn series(metrics: &str, name: &str, plugin: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| {
            l.starts_with(&format!("{name}{{")) && l.contains(&format!("plugin=\"{plugin}\""))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn message_of(app: &TestApp) -> (u16, String) {
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    let message = body["error"]["message"].as_str().unwrap_or_default();
    (status, message.to_string())
}

/// A plugin that fails `breaker_failures` calls in a row is not called again for
/// `breaker_open_s` of the injected clock: the calls meanwhile fail at once naming the open
/// breaker (or go on without it when it is ignorable); then one trial call goes through, and
/// its success closes the breaker.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_plugin_is_spared_while_its_breaker_is_open_then_tried_again() {
    let server = PluginServer::start().await;
    server.set_failing(true);
    let clock = ManualClock::new(1_700_000_000_000);
    let plugins = PluginSettings {
        breaker_failures: 2,
        breaker_open_s: 30,
        chain: vec![plugin("gate", PluginEvent::Select, server.url("/toggle"))],
        ..PluginSettings::default()
    };
    let app = app_with(plugins, Arc::new(clock.clone())).await;
    for _ in 0..2 {
        let (status, message) = message_of(&app).await;
        assert_eq!(status, 409, "{message}");
        assert!(message.contains("answered 500"), "{message}");
    }
    assert_eq!(server.seen("/toggle").len(), 2);
    // Open: the plugin is not called, the call fails at once naming the breaker.
    let (status, message) = message_of(&app).await;
    assert_eq!(status, 409);
    assert!(
        message.contains("plugin gate (select)") && message.contains("circuit breaker is open"),
        "{message}"
    );
    assert_eq!(server.seen("/toggle").len(), 2, "not called while open");
    let f = figures(&app, "select", "gate").await;
    assert_eq!(
        (
            f["errors"].as_u64(),
            f["short_circuited"].as_u64(),
            f["trips"].as_u64()
        ),
        (Some(2), Some(1), Some(1)),
        "{f}"
    );
    assert_eq!(f["breaker"], "open");
    let metrics = app.metrics_text().await;
    assert_eq!(
        series(&metrics, "parasol_plugin_breaker_state", "gate"),
        Some(2.0)
    );
    assert_eq!(
        series(&metrics, "parasol_plugin_breaker_trips_total", "gate"),
        Some(1.0)
    );
    // Still open a moment before the cool-down ends.
    clock.advance_ms(29_999);
    assert_eq!(message_of(&app).await.0, 409);
    assert_eq!(server.seen("/toggle").len(), 2);
    // Half-open: the trial is called; it fails, so the breaker opens again.
    clock.advance_ms(1);
    let (_, message) = message_of(&app).await;
    assert!(message.contains("answered 500"), "{message}");
    assert_eq!(server.seen("/toggle").len(), 3);
    assert_eq!(figures(&app, "select", "gate").await["trips"], 2);
    assert_eq!(message_of(&app).await.0, 409);
    assert_eq!(server.seen("/toggle").len(), 3);
    // The plugin is back: the next trial succeeds and closes the breaker.
    server.set_failing(false);
    clock.advance_ms(30_000);
    let (status, message) = message_of(&app).await;
    assert_eq!(status, 200, "{message}");
    let (status, _) = message_of(&app).await;
    assert_eq!(status, 200);
    assert_eq!(server.seen("/toggle").len(), 5);
    let f = figures(&app, "select", "gate").await;
    assert_eq!(f["breaker"], "closed", "{f}");
    assert_eq!(f["approvals"], 2, "{f}");
}

/// An ignorable plugin whose breaker is open is skipped without a call: the calls go on,
/// each counted as skipped and short-circuited.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ignorable_plugin_with_an_open_breaker_is_skipped_without_a_call() {
    let server = PluginServer::start().await;
    let clock = ManualClock::new(1_700_000_000_000);
    let slow = PluginSpec {
        timeout_ms: 100,
        ignorable: true,
        ..plugin("advice", PluginEvent::Filter, server.url("/slow"))
    };
    let plugins = PluginSettings {
        breaker_failures: 1,
        chain: vec![slow],
        ..PluginSettings::default()
    };
    let app = app_with(plugins, Arc::new(clock.clone())).await;
    for _ in 0..3 {
        let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
        assert_eq!(status, 200, "{body}");
    }
    // One timeout paid, then the breaker spared the plugin.
    assert_eq!(server.seen("/slow").len(), 1);
    let f = figures(&app, "filter", "advice").await;
    assert_eq!(
        (
            f["timeouts"].as_u64(),
            f["short_circuited"].as_u64(),
            f["skipped"].as_u64(),
            f["calls"].as_u64()
        ),
        (Some(1), Some(2), Some(3), Some(1)),
        "{f}"
    );
    let metrics = app.metrics_text().await;
    assert!(
        metrics.lines().any(|l| l.contains("plugin=\"advice\"")
            && l.contains("outcome=\"short_circuited\"")
            && l.ends_with(" 2")),
        "{metrics}"
    );
}

/// Over `https://` with the CA file that signed the plugin's certificate and a bearer token
/// from a file, the plugin answers and sees the token and the caller's project and user;
/// without the CA file the handshake fails (the test CA is not in the system's trust store), and with another
/// token the plugin refuses: each a NoValidHost naming the plugin.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_plugin_over_tls_with_a_ca_file_gets_the_token_and_the_caller() {
    let server = PluginServer::start().await;
    let front = TlsFront::start(server.base.trim_start_matches("http://").to_string()).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &front.ca_pem).expect("write the CA");
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).expect("write the token");
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "not-the-token").expect("write the token");
    let path = |p: &std::path::Path| Some(p.display().to_string());
    let spec = |ca_file, token_file| PluginSpec {
        ca_file,
        token_file,
        ..plugin(
            "tls",
            PluginEvent::Select,
            front.url("/auth/select/maintenance"),
        )
    };
    let clock: SharedClock = Arc::new(parasol::clock::SystemClock);
    let with = |spec: PluginSpec| PluginSettings {
        chain: vec![spec],
        ..PluginSettings::default()
    };
    let app = app_with(with(spec(path(&ca), path(&token))), clock.clone()).await;
    let (status, body) = app
        .place(
            flavor(1, 512, 1),
            1,
            json!({"project_id": "tenant-x", "user_id": "alice"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let seen = server.headers("/auth/select/maintenance");
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0],
        json!({"authorization": format!("Bearer {TOKEN}"), "x-project-id": "tenant-x",
               "x-user-id": "alice"})
    );
    // It was the plugin's answer that counted: tenant-x's call was modified.
    assert_eq!(figures(&app, "select", "tls").await["modifications"], 1);
    let chains = &app.get_json("/v1/stats").await["plugin_chains"]["select"][0];
    assert_eq!(chains["bearer_token"], true, "{chains}");
    assert!(
        !chains.to_string().contains(TOKEN),
        "the token is never shown"
    );

    let app = app_with(with(spec(None, path(&token))), clock.clone()).await;
    let (status, message) = message_of(&app).await;
    assert_eq!(status, 409, "{message}");
    assert!(
        message.contains("plugin tls (select)") && message.contains("certificate"),
        "{message}"
    );
    assert_eq!(
        server.headers("/auth/select/maintenance").len(),
        1,
        "no request got through"
    );

    let app = app_with(with(spec(path(&ca), path(&wrong))), clock).await;
    let (status, message) = message_of(&app).await;
    assert_eq!(status, 409, "{message}");
    assert!(message.contains("answered 401"), "{message}");
}

/// A plugin behind a TLS front that asks for a client certificate (mutual TLS): with
/// `cert_file` and `key_file` the handshake passes and the plugin answers; without them the
/// handshake is refused, no request reaches the plugin, and the call is a NoValidHost naming
/// it. `/v1/stats` shows the certificate's file, never the key's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_plugin_that_asks_for_a_client_certificate_gets_the_configured_one() {
    let server = PluginServer::start().await;
    let front = TlsFront::start_mutual(server.base.trim_start_matches("http://").to_string()).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        Some(path.display().to_string())
    };
    let ca = write("ca.pem", &front.ca_pem);
    let cert = write("client.pem", &front.client_cert_pem);
    let key = write("client.key", &front.client_key_pem);
    let spec = |cert_file: &Option<String>, key_file: &Option<String>| PluginSpec {
        ca_file: ca.clone(),
        cert_file: cert_file.clone(),
        key_file: key_file.clone(),
        ..plugin(
            "mtls",
            PluginEvent::Select,
            front.url("/select/maintenance"),
        )
    };
    let with = |spec: PluginSpec| PluginSettings {
        chain: vec![spec],
        ..PluginSettings::default()
    };
    let clock: SharedClock = Arc::new(parasol::clock::SystemClock);

    let app = app_with(with(spec(&cert, &key)), clock.clone()).await;
    let (status, body) = app
        .place(flavor(1, 512, 1), 1, json!({"project_id": "tenant-x"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(server.seen("/select/maintenance").len(), 1);
    assert_eq!(figures(&app, "select", "mtls").await["modifications"], 1);
    let chains = &app.get_json("/v1/stats").await["plugin_chains"]["select"][0];
    assert_eq!(chains["cert_file"], json!(cert), "{chains}");
    assert!(
        !chains.to_string().contains("client.key"),
        "the key's file is not shown: {chains}"
    );

    let app = app_with(with(spec(&None, &None)), clock).await;
    let (status, message) = message_of(&app).await;
    assert_eq!(status, 409, "{message}");
    assert!(message.contains("plugin mtls (select)"), "{message}");
    assert_eq!(
        server.seen("/select/maintenance").len(),
        1,
        "no request got through without the certificate"
    );
}
