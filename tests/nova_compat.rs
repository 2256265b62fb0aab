//! Compatibility with Nova's own code: `tests/nova_compat/*.py` drive Parasol through
//! `nova.scheduler.rpcapi.SchedulerAPI` and Nova's objects (the `nova` package from PyPI,
//! pinned in `tests/nova_functional/requirements.txt`) against the real RabbitMQ and PostgreSQL:
//! two `parasol serve` processes share the `scheduler` queue and the ledger, a third serves a
//! slow topic (`[rpc] debug_delay_s`) for the heartbeat test. The shutdown test stops one of
//! two processes with SIGTERM while Nova's client has 64 calls out (`shutdown_driver.py`).
//!
//! The virtualenv is Nova's functional harness's, cached outside the clone in
//! `$HOME/.cache/parasol/nova-functional-venv-<hash>` and built (pip, a few minutes) only when
//! its requirements change (`support/venv.rs`'s `nova_venv`).

#[path = "support/mod.rs"]
mod support;
#[path = "support/venv.rs"]
mod venv;

use support::queue_types;
use venv::nova_venv;

use parasol_rpc_client::RpcClient;
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

/// Starts `parasol serve` with RPC on `topic`, server name `host`, each call delayed by
/// `delay` seconds, at most `prefetch` calls taken at once.
fn serve(
    dir: &Path,
    ledger: &str,
    id: &str,
    host: &str,
    topic: &str,
    calls: (f64, u16),
) -> (Child, String) {
    serve_with(dir, ledger, id, host, topic, calls, "")
}

/// [`serve`] with `amqp` (TOML lines) added to its `[amqp]` table.
fn serve_with(
    dir: &Path,
    ledger: &str,
    id: &str,
    host: &str,
    topic: &str,
    (delay, prefetch): (f64, u16),
    amqp: &str,
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
prefetch = {prefetch}
{amqp}
[rpc]
enabled = true
host = "{host}"
topic = "{topic}"
debug_delay_s = {delay:.1}
versioned_notifications = true
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

/// Registers `HOSTS` hosts of `HOST_VCPUS` VCPUs through the HTTP API at `base`.
async fn register_hosts(base: &str) {
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
            .post(format!("{base}/v1/notifications"))
            .json(&event)
            .send()
            .await
            .expect("register");
        assert!(resp.status().is_success(), "registering {host}");
    }
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
        let (child, url) = serve(dir.path(), &db.url, &id, host, t, (delay, 1000));
        children.0.push(child);
        http.push(url);
    }
    let client = RpcClient::connect(AMQP_URL, &format!("parasol_compat_{id}"))
        .await
        .expect("RabbitMQ must be running");
    for (host, t, _) in servers {
        wait_serving(&client, t, host).await;
    }
    register_hosts(&http[0]).await;
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

/// 64 concurrent calls of Nova's client.
const SHUTDOWN_CALLS: usize = 64;

async fn rpc_counts(base: &str) -> serde_json::Value {
    let stats: serde_json::Value = reqwest::get(format!("{base}/v1/stats"))
        .await
        .expect("GET /v1/stats")
        .json()
        .await
        .expect("stats JSON");
    stats["rpc"].clone()
}

fn count(counts: &serde_json::Value, outcome: &str) -> u64 {
    counts[outcome].as_u64().unwrap_or(0)
}

/// The acceptance test of issue 17's "one way to stop": SIGTERM reaches a Parasol process
/// while Nova's own client has 64 calls out on the queue two processes share. The stopping
/// process answers every call it had taken (acknowledged on receipt, as oslo.messaging does)
/// and gives back the ones it had not; the other answers the rest. Every call gets exactly
/// one answer, none is lost: the client sees 64 selections, and the two processes together
/// received and replied to 64 calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_64_nova_calls_answers_every_call_exactly_once() {
    let venv = tokio::task::spawn_blocking(nova_venv).await.expect("venv");
    let db = support::postgres_db().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let id = uuid::Uuid::new_v4().simple().to_string();
    let topic = format!("scheduler_stop_{id}");
    // The stopping process holds each call 2 s and takes at most 4 at once, so that at the
    // signal it has calls in flight and more delivered but not yet taken.
    let (stopping, stopping_http) = serve(dir.path(), &db.url, &id, "stopping", &topic, (2.0, 4));
    let (staying, staying_http) = serve(dir.path(), &db.url, &id, "staying", &topic, (0.0, 1000));
    let mut children = Processes(vec![stopping, staying]);
    let client = RpcClient::connect(AMQP_URL, &format!("parasol_compat_{id}"))
        .await
        .expect("RabbitMQ must be running");
    for host in ["stopping", "staying"] {
        wait_serving(&client, &topic, host).await;
    }
    register_hosts(&staying_http).await;
    let (base_stopping, base_staying) = (
        rpc_counts(&stopping_http).await,
        rpc_counts(&staying_http).await,
    );

    let driver = Command::new(venv.join("bin/python"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nova_compat/shutdown_driver.py"))
        .env("PARASOL_AMQP_URL", AMQP_URL)
        .env("PARASOL_EXCHANGE", format!("parasol_compat_{id}"))
        .env("PARASOL_TOPIC", &topic)
        .env("PARASOL_CALLS", SHUTDOWN_CALLS.to_string())
        .env("PARASOL_RPC_TIMEOUT_S", "60")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the driver");
    // Signal once the stopping process has taken calls (its /v1/stats counts them).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let taken =
            count(&rpc_counts(&stopping_http).await, "call") - count(&base_stopping, "call");
        if taken >= 4 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the stopping process never took a call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = children.0[0].id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status();
    assert!(killed.expect("kill").success());

    let out = tokio::task::spawn_blocking(move || driver.wait_with_output())
        .await
        .expect("join")
        .expect("driver output");
    let status = tokio::task::spawn_blocking(move || {
        let status = children.0[0].wait();
        (children, status)
    })
    .await
    .expect("join");
    let (children, stopped) = status;
    let log = std::fs::read_to_string(dir.path().join("stopping.log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "driver failed: {}\n{}\n--- stopping process\n{log}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stopped.expect("wait").success(),
        "the stopping process exited badly:\n{log}"
    );

    let outcomes: Vec<serde_json::Value> =
        serde_json::from_slice(&out.stdout).expect("the driver's JSON line");
    assert_eq!(outcomes.len(), SHUTDOWN_CALLS);
    let failed: Vec<_> = outcomes
        .iter()
        .filter(|o| o.get("error").is_some())
        .collect();
    assert!(
        failed.is_empty(),
        "calls not answered with a host: {failed:?}\n{log}"
    );

    // The stopping process' counters as it stopped, from its log line.
    let line = log
        .lines()
        .find(|l| l.contains("RPC server stopped"))
        .unwrap_or_else(|| panic!("no 'RPC server stopped' line:\n{log}"));
    let json_start = line.find("counters=").expect("counters field") + "counters=".len();
    let json_text: String = {
        let rest = &line[json_start..];
        let end = rest.find('}').expect("a JSON object") + 1;
        rest[..end].to_string()
    };
    let final_stopping: serde_json::Value = serde_json::from_str(&json_text).expect("counters");
    let final_staying = rpc_counts(&staying_http).await;
    let delta = |outcome: &str| {
        (
            count(&final_stopping, outcome) - count(&base_stopping, outcome),
            count(&final_staying, outcome) - count(&base_staying, outcome),
        )
    };
    let (calls_stopping, calls_staying) = delta("call");
    let (replies_stopping, replies_staying) = delta("reply");
    assert_eq!(
        calls_stopping + calls_staying,
        SHUTDOWN_CALLS as u64,
        "every call received once: {calls_stopping} by the stopping process, {calls_staying} by the other"
    );
    assert_eq!(
        (replies_stopping, replies_staying),
        (calls_stopping, calls_staying),
        "every call received was answered by the process that received it"
    );
    assert!(calls_stopping >= 4 && calls_staying > 0);
    assert_eq!(delta("reply_lost"), (0, 0));

    // The same counters on the staying process' /metrics.
    let metrics = reqwest::get(format!("{staying_http}/metrics"))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics text");
    let want = format!(
        "parasol_rpc_messages_total{{outcome=\"call\"}} {}",
        count(&final_staying, "call")
    );
    assert!(metrics.lines().any(|l| l == want), "{want} not in /metrics");
    // One instance placed per call, none twice.
    let hosts: serde_json::Value = reqwest::get(format!("{staying_http}/v1/hosts"))
        .await
        .expect("GET /v1/hosts")
        .json()
        .await
        .expect("hosts JSON");
    let used: i64 = hosts["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .map(|h| h["used"]["VCPU"].as_i64().unwrap_or(0))
        .sum();
    assert_eq!(used, SHUTDOWN_CALLS as i64);
    println!(
        "calls: {calls_stopping} answered by the stopping process, {calls_staying} by the other"
    );
    drop(children);
}

/// Deletes, when the test ends, every queue whose name holds the test's id (oslo's fanout
/// queue and Parasol's quorum queues among them, which no CI pattern knows).
struct QueuesOf(String);

impl Drop for QueuesOf {
    fn drop(&mut self) {
        for (name, _) in queue_types(&self.0) {
            let _ = Command::new("rabbitmqctl")
                .args(["-q", "delete_queue", &name])
                .stdout(Stdio::null())
                .status();
        }
    }
}

/// Nova with `[oslo_messaging_rabbit] rabbit_quorum_queue = true`: nova-scheduler leaves the
/// scheduler topic's queues declared as quorum queues on a durable exchange. Parasol with
/// `[amqp] queue_type = "quorum"` declares them with the same arguments (the broker refuses a
/// declaration that differs), serves Nova's own client on them, and its own durable queues are
/// quorum queues too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nova_scheduler_s_quorum_queues_are_taken_over_and_served() {
    let venv = tokio::task::spawn_blocking(nova_venv).await.expect("venv");
    let dir = tempfile::tempdir().expect("temp dir");
    let id = uuid::Uuid::new_v4().simple().to_string();
    let _queues = QueuesOf(id.clone());
    let (topic, exchange, host) = (
        format!("scheduler_{id}"),
        format!("parasol_compat_{id}"),
        "ctl1",
    );
    let nova = |mode: &'static str| {
        let (venv, topic, exchange) = (venv.clone(), topic.clone(), exchange.clone());
        tokio::task::spawn_blocking(move || {
            let out = Command::new(venv.join("bin/python"))
                .arg(
                    Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join("tests/nova_compat/quorum_takeover.py"),
                )
                .arg(mode)
                .env("PARASOL_AMQP_URL", AMQP_URL)
                .env("PARASOL_EXCHANGE", exchange)
                .env("PARASOL_TOPIC", topic)
                .env("PARASOL_RPC_HOST", host)
                .output()
                .expect("run python");
            assert!(
                out.status.success(),
                "{mode} failed: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
            serde_json::from_str::<serde_json::Value>(&line).expect("one JSON line")
        })
    };
    nova("declare").await.expect("declare");
    let topic_queues = vec![
        (topic.clone(), "quorum".to_string()),
        (format!("{topic}.{host}"), "quorum".to_string()),
    ];
    let declared: Vec<_> = queue_types(&topic)
        .into_iter()
        .filter(|(name, _)| !name.contains("_fanout_"))
        .collect();
    assert_eq!(declared, topic_queues, "as nova-scheduler declares them");

    let ledger = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let amqp =
        format!("queue_type = \"quorum\"\ndead_letter = \"parasol.dead_letter.compat_{id}\"\n");
    let (child, http) = serve_with(dir.path(), &ledger, &id, host, &topic, (0.0, 1000), &amqp);
    let children = Processes(vec![child]);
    let client = RpcClient::connect_with(AMQP_URL, &exchange, true)
        .await
        .expect("RabbitMQ must be running");
    wait_serving(&client, &topic, host).await;
    register_hosts(&http).await;
    let selected = nova("call").await.expect("call");
    let log = std::fs::read_to_string(dir.path().join(format!("{host}.log"))).unwrap_or_default();
    assert!(
        selected["host"]
            .as_str()
            .is_some_and(|h| h.starts_with("compute")),
        "{selected}\n{log}"
    );
    let after = queue_types(&id);
    for queue in topic_queues.iter().map(|(name, _)| name) {
        assert!(
            after.iter().any(|(n, k)| n == queue && k == "quorum"),
            "{queue}: {after:?}"
        );
    }
    for own in [
        "parasol.notifications.compat_",
        "parasol.dead_letter.compat_",
    ] {
        assert!(
            after
                .iter()
                .any(|(n, k)| n.starts_with(own) && k == "quorum"),
            "{own}…: {after:?}\n{log}"
        );
    }
    client.close().await;
    drop(children);
    // The durable exchanges (Nova's and the dead letters') would outlive the broker's restarts.
    let conn = parasol::amqp::connect(AMQP_URL, "parasol-compat-cleanup")
        .await
        .expect("connect");
    let ch = conn.create_channel().await.expect("channel");
    for name in [exchange, format!("parasol.dead_letter.compat_{id}")] {
        ch.exchange_delete(&name, Default::default())
            .await
            .expect("delete the exchange");
    }
    let _ = conn.close(200, "done").await;
}
