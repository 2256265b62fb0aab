//! A real `openstack-placement` (16.0.0, from PyPI) served locally with noauth2 and SQLite,
//! as `tests/placement.rs` runs it; its virtualenv is cached in
//! `$HOME/.cache/parasol/placement-venv-<hash of the requirements>` (the same one).
#![allow(dead_code)]

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

#[path = "venv.rs"]
pub mod venv;

const REQUIREMENTS: &str = "openstack-placement==16.0.0\n";

/// Serves Placement's WSGI app on a free loopback port and writes the port to argv[2] (one
/// request at a time, as `tests/placement.rs` serves it: its SQLite database takes one writer).
/// The listen backlog is 128, not `socketserver`'s 5: with dozens of callers (two Parasol
/// processes, 32 callers) connections beyond 5 waiting were refused or reset.
const LAUNCHER: &str = r#"
import os, sys
from wsgiref.simple_server import make_server, WSGIRequestHandler, WSGIServer
os.environ['OS_PLACEMENT_CONFIG_DIR'] = sys.argv[1]
from placement.wsgi import api
class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass
class Backlog(WSGIServer):
    request_queue_size = 128
server = make_server('127.0.0.1', 0, api.application, server_class=Backlog, handler_class=Quiet)
with open(sys.argv[2] + '.tmp', 'w') as f:
    f.write(str(server.server_port))
os.rename(sys.argv[2] + '.tmp', sys.argv[2])
server.serve_forever()
"#;

pub fn placement_venv() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| venv::cached_venv("placement-venv", REQUIREMENTS, &[]))
}

/// A running placement-api with its own SQLite database.
pub struct PlacementServer {
    child: Option<Child>,
    pub url: String,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl PlacementServer {
    pub async fn start() -> PlacementServer {
        let python = placement_venv().join("bin/python");
        let dir = tempfile::tempdir().expect("temp dir");
        let conf = format!(
            "[api]\nauth_strategy = noauth2\n[placement_database]\n\
             connection = sqlite:///{}\nsync_on_startup = True\n",
            dir.path().join("placement.db").display()
        );
        std::fs::write(dir.path().join("placement.conf"), conf).expect("write placement.conf");
        let port_file = dir.path().join("port");
        let child = Command::new(python)
            .arg("-c")
            .arg(LAUNCHER)
            .arg(dir.path())
            .arg(&port_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start placement-api");
        let deadline = Instant::now() + Duration::from_secs(120);
        let port = loop {
            if let Ok(port) = std::fs::read_to_string(&port_file) {
                break port;
            }
            assert!(Instant::now() < deadline, "placement-api did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        PlacementServer {
            child: Some(child),
            url: format!("http://127.0.0.1:{}", port.trim()),
            http: reqwest::Client::new(),
            _dir: dir,
        }
    }

    /// The placement-api process id (while it runs), e.g. for its CPU time in `/proc`.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// One request at microversion 1.36: the status and the body (`null` when empty).
    pub async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.url))
            .header("X-Auth-Token", "admin")
            .header("OpenStack-API-Version", "placement 1.36");
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("placement answers");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// A request that must succeed.
    pub async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let (status, value) = self.request(method, path, body).await;
        assert!((200..300).contains(&status), "{path}: {status} {value}");
        value
    }

    /// A root provider with `inventories` (`{"CLASS": {"total": n, ...}}`), `traits` and
    /// `aggregates`; custom classes and traits are created first.
    pub async fn provider(
        &self,
        name: &str,
        uuid: &str,
        inventories: Value,
        traits: &[&str],
        aggregates: &[&str],
    ) {
        use reqwest::Method;
        self.call(
            Method::POST,
            "/resource_providers",
            Some(json!({"name": name, "uuid": uuid})),
        )
        .await;
        for class in inventories.as_object().expect("inventories").keys() {
            if class.starts_with("CUSTOM_") {
                self.call(Method::PUT, &format!("/resource_classes/{class}"), None)
                    .await;
            }
        }
        for t in traits.iter().filter(|t| t.starts_with("CUSTOM_")) {
            self.call(Method::PUT, &format!("/traits/{t}"), None).await;
        }
        let path = format!("/resource_providers/{uuid}/inventories");
        let generation =
            self.call(Method::GET, &path, None).await["resource_provider_generation"].clone();
        let body = json!({"resource_provider_generation": generation, "inventories": inventories});
        let generation =
            self.call(Method::PUT, &path, Some(body)).await["resource_provider_generation"].clone();
        let body = json!({"resource_provider_generation": generation, "traits": traits});
        let path = format!("/resource_providers/{uuid}/traits");
        let generation =
            self.call(Method::PUT, &path, Some(body)).await["resource_provider_generation"].clone();
        let body = json!({"resource_provider_generation": generation, "aggregates": aggregates});
        let path = format!("/resource_providers/{uuid}/aggregates");
        self.call(Method::PUT, &path, Some(body)).await;
    }

    /// `PUT /allocations/{consumer}` of a new consumer on one provider.
    pub async fn allocate(&self, consumer: &str, provider: &str, resources: Value) -> u16 {
        let body = json!({
            "allocations": {provider: {"resources": resources}},
            "project_id": "p-other", "user_id": "u-other", "consumer_generation": null,
        });
        self.request(
            reqwest::Method::PUT,
            &format!("/allocations/{consumer}"),
            Some(body),
        )
        .await
        .0
    }

    /// Replaces an existing consumer's allocations with `allocations` (`{provider:
    /// {"resources": ...}}`) under its current consumer generation, as Nova's own updates do.
    pub async fn replace_allocations(&self, consumer: &str, allocations: Value) {
        let current = self.allocations(consumer).await;
        let body = json!({
            "allocations": allocations,
            "project_id": "p0", "user_id": "u0",
            "consumer_generation": current["consumer_generation"],
        });
        let path = format!("/allocations/{consumer}");
        self.call(reqwest::Method::PUT, &path, Some(body)).await;
    }

    /// A provider's usages by class.
    pub async fn usages(&self, provider: &str) -> Value {
        let path = format!("/resource_providers/{provider}/usages");
        self.call(reqwest::Method::GET, &path, None).await["usages"].clone()
    }

    /// A consumer's allocations by provider.
    pub async fn allocations(&self, consumer: &str) -> Value {
        self.call(
            reqwest::Method::GET,
            &format!("/allocations/{consumer}"),
            None,
        )
        .await
    }

    /// Every provider's inventories, by provider uuid.
    pub async fn inventories(&self, provider: &str) -> Value {
        let path = format!("/resource_providers/{provider}/inventories");
        self.call(reqwest::Method::GET, &path, None).await["inventories"].clone()
    }
}

impl Drop for PlacementServer {
    fn drop(&mut self) {
        self.stop();
    }
}
