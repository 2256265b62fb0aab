//! Issue 16 item 7 without Keystone: the `token` strategy on every route, and the refusal to
//! serve an address that is not loopback with `strategy = "none"` (at start and in
//! `parasol config check`). The `keystone` strategy is in `tests/auth.rs`.

use crate::helpers::{host_state_event, settings, spawn_with};
use parasol::auth::Strategy;
use parasol::configuration::BackendKind;
use parasol::startup::{Application, StartupError};
use reqwest::StatusCode;
use serde_json::{json, Value};

const SECRET: &str = "a-benchmark-secret-0123456789";

async fn call(
    app: &crate::helpers::TestApp,
    post: bool,
    path: &str,
    token: Option<&str>,
) -> StatusCode {
    let url = format!("{}{path}", app.address);
    let mut request = if post {
        app.client.post(url).json(&host_state_event(
            &uuid::Uuid::new_v4().to_string(),
            "compute1",
            8,
            8192,
            100,
        ))
    } else {
        app.client.get(url)
    };
    if let Some(token) = token {
        request = request.header("X-Auth-Token", token);
    }
    request.send().await.expect("answer").status()
}

#[tokio::test]
async fn the_token_strategy_answers_every_route_by_its_token() {
    let (mut s, db) = settings("sqlite", BackendKind::Filter).await;
    s.auth.strategy = Strategy::Token;
    s.auth.token = SECRET.into();
    let app = spawn_with(s, db).await;
    let protected = [
        (true, "/v1/notifications"),
        (true, "/v1/select_destinations"),
        (false, "/v1/hosts"),
        (false, "/v1/stats"),
    ];
    for (post, path) in protected {
        for token in [None, Some("wrong"), Some(&SECRET[1..])] {
            let status = call(&app, post, path, token).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{path} {token:?}");
        }
    }
    let hosts: Value = app
        .client
        .get(format!("{}/v1/hosts", app.address))
        .header("X-Auth-Token", SECRET)
        .send()
        .await
        .expect("hosts")
        .json()
        .await
        .expect("json");
    assert_eq!(hosts["hosts"], json!([]), "refused calls changed nothing");
    for (post, path) in protected {
        let status = call(&app, post, path, Some(SECRET)).await;
        // The select body here is a notification: 400, past authentication.
        let expected = if path == "/v1/select_destinations" {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        };
        assert_eq!(status, expected, "{path} with the secret");
    }
    for path in ["/healthz", "/metrics"] {
        assert_eq!(
            call(&app, false, path, None).await,
            StatusCode::OK,
            "{path}"
        );
    }
}

#[tokio::test]
async fn no_authentication_on_a_public_address_is_refused_at_start() {
    let (mut s, _db) = settings("sqlite", BackendKind::Filter).await;
    s.server.host = "0.0.0.0".into();
    s.server.port = 0;
    let err = Application::build(s.clone())
        .await
        .err()
        .expect("refused without allow_insecure");
    assert!(matches!(err, StartupError::Auth(_)), "{err}");
    assert!(err.to_string().contains("allow_insecure"), "{err}");
    s.auth.allow_insecure = true;
    let app = Application::build(s)
        .await
        .expect("allowed when insecure is allowed");
    let shutdown = app.shutdown();
    let server = tokio::spawn(app.run_until_stopped());
    shutdown.stop().await;
    server.await.expect("join").expect("stopped cleanly");
}

#[test]
fn config_check_reports_no_authentication_on_a_public_address() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("parasol.toml");
    let check = |toml: &str| {
        std::fs::write(&file, toml).expect("write");
        std::process::Command::new(env!("CARGO_BIN_EXE_parasol"))
            .args(["config", "check"])
            .arg(&file)
            .output()
            .expect("run parasol config check")
    };
    let refused = check("[server]\nhost = \"0.0.0.0\"\n");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("auth.strategy") && stderr.contains("0.0.0.0"),
        "{stderr}"
    );
    let allowed = check("[server]\nhost = \"0.0.0.0\"\n[auth]\nallow_insecure = true\n");
    assert!(allowed.status.success(), "{allowed:?}");
    let keystone = check(
        "[server]\nhost = \"0.0.0.0\"\n[auth]\nstrategy = \"keystone\"\n\
         keystone_url = \"http://127.0.0.1:5000/v3\"\npassword = \"x\"\n",
    );
    assert!(keystone.status.success(), "{keystone:?}");
}
