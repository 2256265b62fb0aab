//! Compatibility with Nova's own code: `tests/nova_compat/*.py` drive Parasol through
//! `nova.scheduler.rpcapi.SchedulerAPI` and Nova's objects (the `nova` package from PyPI,
//! pinned in `tests/nova_compat/requirements.txt`) against the real RabbitMQ and PostgreSQL:
//! two `parasol serve` processes share the `scheduler` queue and the ledger, a third serves a
//! slow topic (`[rpc] debug_delay_s`) for the heartbeat test.
//!
//! The virtualenv is cached outside the clone in
//! `$HOME/.cache/parasol/nova-venv-<hash of requirements.txt>` and built (pip, a few minutes)
//! only when that file changes.

#[path = "support/nova_venv.rs"]
mod nova_venv;
#[path = "support/mod.rs"]
mod support;

use nova_venv::nova_venv;

use parasol::rpc::RpcClient;
use serde_json::json;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
const HOSTS: usize = 12;
const HOST_VCPUS: i64 = 8;
const SLOW_DELAY_S: f64 = 5.0;

/// Kills the `parasol serve` children when the test ends, however it ends.
struct Processes(Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts `parasol serve` with RPC on `topic`, server name `host`.
fn serve(
    dir: &Path,
    ledger: &str,
    id: &str,
    host: &str,
    topic: &str,
    delay: f64,
) -> (Child, String) {
    let port = free_port();
    let config = format!(
        r#"[server]
host = "127.0.0.1"
port = {port}
http_workers = 1
[ledger]
url = "{ledger}"
[scheduler]
backend = "filter"
seed = 7
[amqp]
url = "{AMQP_URL}"
exchange = "parasol_compat_{id}"
queue = "parasol.notifications.compat_{id}"
[rpc]
enabled = true
host = "{host}"
topic = "{topic}"
debug_delay_s = {delay:.1}
"#
    );
    let path = dir.join(format!("{host}.toml"));
    std::fs::write(&path, config).expect("config");
    let log = std::fs::File::create(dir.join(format!("{host}.log"))).expect("log");
    let child = Command::new(env!("CARGO_BIN_EXE_parasol"))
        .arg("--config")
        .arg(&path)
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn parasol");
    (child, format!("http://127.0.0.1:{port}"))
}

/// Waits until the server named `host` answers a ping on its own queue `<topic>.<host>`.
async fn wait_serving(client: &RpcClient, topic: &str, host: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let m = client.call_message("ping", json!({"arg": 1}), "1.1", Some("baseapi"), None);
        let queue = format!("{topic}.{host}");
        if client
            .call_with(&queue, &m, Duration::from_millis(500))
            .await
            .is_ok()
        {
            return;
        }
    }
    panic!("parasol {host} never served RPC");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nova_s_own_client_is_served_by_two_parasol_processes() {
    let venv = tokio::task::spawn_blocking(nova_venv).await.expect("venv");
    let db = support::postgres_db().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (topic, slow_topic) = (format!("scheduler_{id}"), format!("scheduler_slow_{id}"));
    let servers = [
        ("p1", &topic, 0.0),
        ("p2", &topic, 0.0),
        ("slow", &slow_topic, SLOW_DELAY_S),
    ];
    let mut children = Processes(Vec::new());
    let mut http = Vec::new();
    for (host, t, delay) in servers {
        let (child, url) = serve(dir.path(), &db.url, &id, host, t, delay);
        children.0.push(child);
        http.push(url);
    }
    let client = RpcClient::connect(AMQP_URL, &format!("parasol_compat_{id}"))
        .await
        .expect("RabbitMQ must be running");
    for (host, t, _) in servers {
        wait_serving(&client, t, host).await;
    }
    let web = reqwest::Client::new();
    for i in 0..HOSTS {
        let host = format!("compute{i:02}");
        let event = json!({"message_id": uuid::Uuid::new_v4().to_string(), "publisher_id": format!("parasol-host:{host}"),
            "event_type": "compute.host.state", "priority": "INFO", "timestamp": "2026-11-25 21:13:16.777260",
            "payload": {"host": host, "node": host, "compute_node_uuid": uuid::Uuid::new_v4().to_string(),
                "availability_zone": "nova", "up": true, "disabled": false,
                "inventory": {"VCPU": {"total": HOST_VCPUS, "reserved": 0, "allocation_ratio": 1.0},
                              "MEMORY_MB": {"total": 65536, "reserved": 0, "allocation_ratio": 1.0},
                              "DISK_GB": {"total": 1000, "reserved": 0, "allocation_ratio": 1.0}}}});
        let resp = web
            .post(format!("{}/v1/notifications", http[0]))
            .json(&event)
            .send()
            .await
            .expect("register");
        assert!(resp.status().is_success(), "registering {host}");
    }
    let out = tokio::task::spawn_blocking(move || {
        Command::new(venv.join("bin/python"))
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"])
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nova_compat"))
            .env("PARASOL_AMQP_URL", AMQP_URL)
            .env("PARASOL_EXCHANGE", format!("parasol_compat_{id}"))
            .env("PARASOL_TOPIC", &topic)
            .env("PARASOL_SLOW_TOPIC", &slow_topic)
            .env("PARASOL_SLOW_DELAY_S", SLOW_DELAY_S.to_string())
            .env("PARASOL_HTTP", http.join(","))
            .env("PARASOL_HOSTS", HOSTS.to_string())
            .env("PARASOL_HOST_VCPUS", HOST_VCPUS.to_string())
            .output()
            .expect("run pytest")
    })
    .await
    .expect("pytest");
    let logs: String = ["p1", "p2", "slow"]
        .iter()
        .map(|h| {
            let text =
                std::fs::read_to_string(dir.path().join(format!("{h}.log"))).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            format!(
                "--- parasol {h} (last lines)\n{}\n",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )
        })
        .collect();
    assert!(
        out.status.success(),
        "pytest failed ({}):\n{}\n{}\n{logs}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{}", String::from_utf8_lossy(&out.stdout));
    drop(children);
}
