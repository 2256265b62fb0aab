//! `[auth] strategy = "keystone"` against the real Keystone (`tests/keystone/`): every route
//! without a token, with a wrong one, with a member's and with an admin's; a revoked token; a
//! Keystone that stops; Parasol's own credentials refused.

#[path = "keystone/mod.rs"]
mod keystone;

#[path = "support/tls_front.rs"]
mod tls_front;

use keystone::{Keystone, ADMIN_PASSWORD};
use parasol::auth::Strategy;
use parasol::clock::{Clock, ManualClock, SharedClock, SystemClock};
use parasol::configuration::Settings;
use parasol::startup::Application;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::net::TcpListener;
use std::sync::Arc;

const SERVICE_PASSWORD: &str = "parasol-service-pw";

/// Keystone with Parasol's service user (role `service` in project `service`), an operator
/// (`admin` in `demo`) and a member (`member` in `demo`), all made through the API.
struct Cloud {
    keystone: Keystone,
    bootstrap_admin: String,
    admin: String,
    member: String,
}

async fn cloud() -> Cloud {
    let keystone = Keystone::start().await;
    let root = keystone.token("admin", ADMIN_PASSWORD, "admin").await;
    let users = [
        ("parasol", SERVICE_PASSWORD, "service", "service"),
        ("operator", "operator-pw", "demo", "admin"),
        ("alice", "alice-pw", "demo", "member"),
    ];
    for (user, password, project, role) in users {
        keystone
            .user_with_role(&root, user, password, project, role)
            .await;
    }
    Cloud {
        admin: keystone.token("operator", "operator-pw", "demo").await,
        member: keystone.token("alice", "alice-pw", "demo").await,
        bootstrap_admin: root,
        keystone,
    }
}

struct Parasol {
    address: String,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

async fn parasol(keystone_url: &str, password: &str, clock: SharedClock) -> Parasol {
    parasol_trusting(keystone_url, password, clock, "").await
}

/// [`parasol`] with `[auth] cafile` set to `cafile`.
async fn parasol_trusting(
    keystone_url: &str,
    password: &str,
    clock: SharedClock,
    cafile: &str,
) -> Parasol {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut s = Settings::default();
    s.auth.keystone.cafile = cafile.to_string();
    // No log written out per test service (the binary's tests keep the default).
    s.ledger.wal_prewrite_mib = 0;
    s.ledger.url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    s.amqp.url = String::new();
    s.policy.host_timeout_s = 3600;
    s.auth.strategy = Strategy::Keystone;
    s.auth.keystone.keystone_url = keystone_url.to_string();
    s.auth.keystone.password = password.to_string();
    s.auth.cache_ttl_s = 60.0;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let app = Application::build_with(s, listener, clock)
        .await
        .expect("build");
    let address = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run_until_stopped());
    Parasol {
        address,
        http: reqwest::Client::new(),
        _dir: dir,
    }
}

fn host_event(host: &str) -> Value {
    json!({
        "message_id": uuid::Uuid::new_v4().to_string(), "event_type": "compute.host.state",
        "priority": "INFO", "publisher_id": format!("parasol-host:{host}"),
        "timestamp": "2026-11-25 21:13:16.777260",
        "payload": {"host": host, "node": host,
            "compute_node_uuid": uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_DNS, host.as_bytes()).to_string(),
            "availability_zone": "nova", "up": true, "disabled": false,
            "inventory": {"VCPU": {"total": 8, "reserved": 0, "allocation_ratio": 1.0},
                          "MEMORY_MB": {"total": 16384, "reserved": 0, "allocation_ratio": 1.0},
                          "DISK_GB": {"total": 100, "reserved": 0, "allocation_ratio": 1.0}}}})
}

fn select_body() -> Value {
    json!({"spec_obj": {"nova_object.name": "RequestSpec", "nova_object.namespace": "nova",
        "nova_object.version": "1.15", "nova_object.data": {"num_instances": 1,
            "flavor": {"nova_object.name": "Flavor", "nova_object.namespace": "nova",
                "nova_object.version": "1.2", "nova_object.data": {"name": "m1.small",
                "vcpus": 1, "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "swap": 0}}}},
        "instance_uuids": [uuid::Uuid::new_v4().to_string()],
        "return_objects": true, "return_alternates": true})
}

impl Parasol {
    async fn send(&self, method: Method, path: &str, token: Option<&str>) -> (StatusCode, Value) {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.address));
        if let Some(token) = token {
            request = request.header("X-Auth-Token", token);
        }
        request = match path {
            "/v1/notifications" => request.json(&host_event("compute1")),
            "/v1/select_destinations" => request.json(&select_body()),
            _ => request,
        };
        let response = request.send().await.expect("parasol answers");
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED {
            let challenge = response.headers().get("WWW-Authenticate").cloned();
            assert!(challenge.is_some_and(|c| c.as_bytes().starts_with(b"Keystone uri=")));
            return (status, response.json().await.unwrap_or(Value::Null));
        }
        let text = response.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn hosts(&self, token: &str) -> Value {
        let (status, hosts) = self.send(Method::GET, "/v1/hosts", Some(token)).await;
        assert_eq!(status, StatusCode::OK, "{hosts}");
        hosts
    }
}

const PROTECTED: [(Method, &str); 4] = [
    (Method::POST, "/v1/notifications"),
    (Method::POST, "/v1/select_destinations"),
    (Method::GET, "/v1/hosts"),
    (Method::GET, "/v1/stats"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_by_token_and_role() {
    let cloud = cloud().await;
    let parasol = parasol(&cloud.keystone.url, SERVICE_PASSWORD, Arc::new(SystemClock)).await;
    // Open routes: answered whatever the token (probes and scrapers carry none).
    for token in [None, Some("wrong"), Some(cloud.member.as_str())] {
        for path in ["/healthz", "/readyz", "/metrics", "/"] {
            let (status, body) = parasol.send(Method::GET, path, token).await;
            assert_eq!(status, StatusCode::OK, "{path} with {token:?}: {body}");
        }
    }
    let wrong = "gAAAAABrB9oSO_hwhj7-not-a-real-fernet-token";
    for (method, path) in PROTECTED {
        let cases = [
            (None, StatusCode::UNAUTHORIZED),
            (Some(wrong), StatusCode::UNAUTHORIZED),
            (Some(cloud.member.as_str()), StatusCode::FORBIDDEN),
        ];
        for (token, expected) in cases {
            let (status, body) = parasol.send(method.clone(), path, token).await;
            assert_eq!(status, expected, "{method} {path} {token:?}: {body}");
            assert!(body["error"]["message"].is_string(), "{body}");
        }
    }
    // Nothing the refused calls sent was applied.
    assert_eq!(parasol.hosts(&cloud.admin).await["hosts"], json!([]));
    // The admin's token passes every route, in an order where each succeeds.
    for (method, path) in PROTECTED {
        let (status, body) = parasol.send(method.clone(), path, Some(&cloud.admin)).await;
        assert_eq!(status, StatusCode::OK, "{method} {path} as admin: {body}");
    }
    let hosts = parasol.hosts(&cloud.admin).await;
    assert_eq!(hosts["hosts"][0]["host"], "compute1", "{hosts}");
    // Keystone's own bootstrap admin holds the admin role too.
    let (status, _) = parasol
        .send(Method::GET, "/v1/stats", Some(&cloud.bootstrap_admin))
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_is_refused_once_its_cache_entry_ends() {
    let cloud = cloud().await;
    let now = SystemClock.now_ms();
    let clock = ManualClock::new(now);
    let parasol = parasol(
        &cloud.keystone.url,
        SERVICE_PASSWORD,
        Arc::new(clock.clone()),
    )
    .await;
    let other = cloud
        .keystone
        .token("operator", "operator-pw", "demo")
        .await;
    parasol.hosts(&other).await;
    parasol.hosts(&cloud.admin).await;
    cloud
        .keystone
        .revoke(&cloud.bootstrap_admin, &cloud.admin)
        .await;
    // Remembered for [auth] cache_ttl_s (60 s here): still let through...
    parasol.hosts(&cloud.admin).await;
    clock.advance_ms(59_000);
    parasol.hosts(&cloud.admin).await;
    // ...and asked again once the entry ends: Keystone refuses it.
    clock.advance_ms(1_001);
    let (status, body) = parasol
        .send(Method::GET, "/v1/hosts", Some(&cloud.admin))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    parasol.hosts(&other).await;
    // A token past its expires_at (one hour, Keystone's [token] expiration here) is refused
    // though Keystone, on its own clock, still takes it.
    clock.advance_ms(3_600_000);
    let (status, body) = parasol.send(Method::GET, "/v1/hosts", Some(&other)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("expired"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_keystone_gives_503_with_the_reason_and_never_access() {
    let mut cloud = cloud().await;
    let parasol = parasol(&cloud.keystone.url, SERVICE_PASSWORD, Arc::new(SystemClock)).await;
    parasol.hosts(&cloud.admin).await;
    cloud.keystone.stop();
    for token in [cloud.member.as_str(), "never-seen-token"] {
        for (method, path) in PROTECTED {
            let (status, body) = parasol.send(method.clone(), path, Some(token)).await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{path}: {body}");
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("Keystone is unreachable"), "{message}");
        }
    }
    // A token validated before the outage stays valid until its cache entry ends.
    parasol.hosts(&cloud.admin).await;
    let (status, _) = parasol.send(Method::GET, "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_service_credentials_give_503_naming_them() {
    let cloud = cloud().await;
    let parasol = parasol(
        &cloud.keystone.url,
        "not-the-password",
        Arc::new(SystemClock),
    )
    .await;
    for token in [cloud.admin.as_str(), "wrong"] {
        let (status, body) = parasol.send(Method::GET, "/v1/hosts", Some(token)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("[auth] username, password"), "{message}");
    }
}

/// Keystone served over HTTPS with a certificate of a private CA: without `[auth] cafile` the
/// validation fails the handshake (503 naming the certificate, never access); with the CA's PEM
/// file the admin's token passes and the member's is refused for its role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keystone_behind_a_private_ca_is_reached_with_its_cafile() {
    let cloud = cloud().await;
    let backend = cloud
        .keystone
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/v3")
        .to_string();
    let front = tls_front::TlsFront::start(backend).await;
    let https = format!("{}/v3", front.base);

    let untrusting = parasol(&https, SERVICE_PASSWORD, Arc::new(SystemClock)).await;
    let (status, body) = untrusting
        .send(Method::GET, "/v1/stats", Some(&cloud.admin))
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let message = body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(message.contains("certificate"), "{body}");

    let dir = tempfile::tempdir().expect("temp dir");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &front.ca_pem).expect("write the CA");
    let trusting = parasol_trusting(
        &https,
        SERVICE_PASSWORD,
        Arc::new(SystemClock),
        &ca.display().to_string(),
    )
    .await;
    let (status, body) = trusting
        .send(Method::GET, "/v1/stats", Some(&cloud.admin))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = trusting
        .send(Method::GET, "/v1/stats", Some(&cloud.member))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}
