//! `spawn_app`: a Parasol service on port 0 with a fresh ledger, and request builders.

use crate::support::{self, TestDb};
use parasol::clock::{SharedClock, SystemClock};
use parasol::configuration::{BackendKind, Settings};
use parasol::scheduling::Scheduler;
use parasol::startup::{Application, Handles, Shutdown};
use serde_json::{json, Value};
use std::net::TcpListener;
use std::sync::Arc;

pub struct TestApp {
    pub address: String,
    pub client: reqwest::Client,
    pub scheduler: Arc<Scheduler>,
    /// Used by the suites that start background parts (tests/rpc.rs).
    #[allow(dead_code)]
    pub handles: Handles,
    #[allow(dead_code)]
    pub shutdown: Shutdown,
    /// Keeps the test database (or SQLite file) alive as long as the app.
    pub _db: TestDb,
}

/// Default test settings: the given engine and backend, a fixed seed.
pub async fn settings(engine: &str, backend: BackendKind) -> (Settings, TestDb) {
    let db = support::db(engine).await;
    let mut s = Settings::default();
    s.ledger.url = db.url.clone();
    s.scheduler.backend = backend;
    s.scheduler.seed = Some(7);
    s.amqp.url = String::new();
    // No log written out per test app (the binary's tests keep the default).
    s.ledger.wal_prewrite_mib = 0;
    // Test hosts never heartbeat: keep them up however slow a loaded machine makes a test.
    s.policy.host_timeout_s = 3600;
    (s, db)
}

pub async fn spawn_app(engine: &str) -> TestApp {
    let (s, db) = settings(engine, BackendKind::Filter).await;
    spawn_with(s, db).await
}

pub async fn spawn_with(settings: Settings, db: TestDb) -> TestApp {
    spawn_with_clock(settings, db, Arc::new(SystemClock)).await
}

/// The same on a clock of the test's choosing (every scheduler interval sleeps on it).
pub async fn spawn_with_clock(settings: Settings, db: TestDb, clock: SharedClock) -> TestApp {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let app = Application::build_with(settings, listener, clock)
        .await
        .expect("build app");
    let address = format!("http://127.0.0.1:{}", app.port());
    let scheduler = app.scheduler().clone();
    let handles = app.handles().clone();
    let shutdown = app.shutdown();
    tokio::spawn(app.run_until_stopped());
    TestApp {
        address,
        client: reqwest::Client::new(),
        scheduler,
        handles,
        shutdown,
        _db: db,
    }
}

impl TestApp {
    /// Starts the notification consumer and the Placement sync (when configured) until the
    /// returned token is cancelled.
    #[allow(dead_code)]
    pub fn start_background(&self) -> tokio_util::sync::CancellationToken {
        let stop = tokio_util::sync::CancellationToken::new();
        let h = &self.handles;
        if !h.settings.amqp.url.is_empty() {
            tokio::spawn(parasol::amqp::run_notification_consumer(
                h.ingest.clone(),
                h.broker.clone(),
                h.settings.amqp.clone(),
                stop.clone(),
            ));
        }
        tokio::spawn(parasol::placement::run_sync(
            h.settings.placement.clone(),
            h.sync_deps(),
            stop.clone(),
        ));
        stop
    }
}

/// A Parasol host-state event (docs/architecture.md §7.2) for a host with ratios of 1.
pub fn host_state_event(
    message_id: &str,
    host: &str,
    vcpu: i64,
    memory_mb: i64,
    disk_gb: i64,
) -> Value {
    json!({
        "message_id": message_id,
        "publisher_id": format!("parasol-host:{host}"),
        "event_type": "compute.host.state",
        "priority": "INFO",
        "timestamp": "2026-11-25 21:13:16.777260",
        "payload": {
            "host": host, "node": host,
            "compute_node_uuid": uuid_for(host),
            "availability_zone": "nova", "up": true, "disabled": false,
            "inventory": {
                "VCPU": {"total": vcpu, "reserved": 0, "allocation_ratio": 1.0},
                "MEMORY_MB": {"total": memory_mb, "reserved": 0, "allocation_ratio": 1.0},
                "DISK_GB": {"total": disk_gb, "reserved": 0, "allocation_ratio": 1.0}
            }
        }
    })
}

/// A stable uuid per host name.
pub fn uuid_for(host: &str) -> String {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_DNS, host.as_bytes()).to_string()
}

/// A Flavor primitive.
pub fn flavor(vcpus: i64, memory_mb: i64, root_gb: i64) -> Value {
    json!({
        "nova_object.name": "Flavor", "nova_object.namespace": "nova", "nova_object.version": "1.2",
        "nova_object.data": {
            "id": 1, "name": format!("f{vcpus}-{memory_mb}-{root_gb}"), "flavorid": "1",
            "memory_mb": memory_mb, "vcpus": vcpus, "root_gb": root_gb, "ephemeral_gb": 0, "swap": 0
        }
    })
}

/// A RequestSpec 1.15 primitive with the given data fields merged over the defaults.
pub fn request_spec(flavor: Value, num_instances: usize, extra: Value) -> Value {
    let mut data = json!({"flavor": flavor, "num_instances": num_instances, "project_id": "p", "user_id": "u"});
    if let (Some(d), Some(e)) = (data.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            d.insert(k.clone(), v.clone());
        }
    }
    json!({"nova_object.name": "RequestSpec", "nova_object.namespace": "nova", "nova_object.version": "1.15", "nova_object.data": data})
}

/// The HTTP body of a call for `uuids` with objects and alternates.
pub fn call_body(spec: Value, uuids: &[String]) -> Value {
    json!({"spec_obj": spec, "instance_uuids": uuids, "return_objects": true, "return_alternates": true})
}

/// The hosts of the first instance's Selections in a select_destinations answer (the HTTP
/// body or the RPC result), the chosen one first.
pub fn hosts_of(answer: &Value) -> Vec<String> {
    answer[0]
        .as_array()
        .map(|sels| {
            sels.iter()
                .map(|s| {
                    s["nova_object.data"]["service_host"]
                        .as_str()
                        .unwrap_or("?")
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn uuids(n: usize) -> Vec<String> {
    (0..n).map(|_| uuid::Uuid::new_v4().to_string()).collect()
}

impl TestApp {
    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.address))
            .json(body)
            .send()
            .await
            .expect("request")
    }

    pub async fn post_raw(&self, path: &str, body: &'static str) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.address))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request")
    }

    pub async fn get_json(&self, path: &str) -> Value {
        self.client
            .get(format!("{}{path}", self.address))
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json")
    }

    pub async fn register(&self, host: &str, vcpu: i64, memory_mb: i64, disk_gb: i64) {
        let id = uuid::Uuid::new_v4().to_string();
        let resp = self
            .post(
                "/v1/notifications",
                &host_state_event(&id, host, vcpu, memory_mb, disk_gb),
            )
            .await;
        assert_eq!(
            resp.status(),
            200,
            "registering {host}: {}",
            resp.text().await.unwrap_or_default()
        );
    }

    /// Calls select_destinations for `n` instances of `flavor`; returns status and body.
    pub async fn place(&self, flavor: Value, n: usize, extra: Value) -> (u16, Value) {
        let ids = uuids(n);
        let resp = self
            .post(
                "/v1/select_destinations",
                &call_body(request_spec(flavor, n, extra), &ids),
            )
            .await;
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// `used` per host name from `/v1/hosts`.
    pub async fn used(&self) -> Vec<(String, i64, i64, i64)> {
        let hosts = self.get_json("/v1/hosts").await;
        hosts["hosts"]
            .as_array()
            .expect("hosts")
            .iter()
            .map(|h| {
                let u = &h["used"];
                (
                    h["host"].as_str().unwrap_or_default().to_string(),
                    u["VCPU"].as_i64().unwrap_or(-1),
                    u["MEMORY_MB"].as_i64().unwrap_or(-1),
                    u["DISK_GB"].as_i64().unwrap_or(-1),
                )
            })
            .collect()
    }

    /// The `/metrics` text.
    pub async fn metrics_text(&self) -> String {
        self.client
            .get(format!("{}/metrics", self.address))
            .send()
            .await
            .expect("GET /metrics")
            .text()
            .await
            .expect("body")
    }

    /// The value of an unlabelled metric in `/metrics`, as written.
    pub async fn metric(&self, name: &str) -> Option<String> {
        self.metrics_text()
            .await
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")).map(str::to_string))
    }

    /// Rebuilds the backend from the current settings: a snapshot backend then reads the
    /// table as it is now (its refresh interval need not pass).
    pub async fn rebuild_backend(&self) {
        self.scheduler
            .reconfigure(self.scheduler.settings())
            .await
            .expect("rebuild the backend");
    }

    pub async fn stats(&self, backend: &str) -> Value {
        self.get_json("/v1/stats").await["backends"][backend].clone()
    }
}

/// `resp` is a `status` whose JSON error's message contains `needle`.
pub async fn expect_error(resp: reqwest::Response, status: u16, needle: &str) {
    assert_eq!(resp.status().as_u16(), status);
    let body: Value = resp.json().await.expect("JSON error body");
    let message = body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(message.contains(needle), "{needle:?} not in {message:?}");
}
