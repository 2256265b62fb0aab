//! `parasol serve` as operators run it: SIGHUP switches the backend mid-load without losing a
//! request or claiming twice, and an invalid file is refused while the old config keeps running;
//! a reload says what it applied and what waits for a restart; a second `serve` on the same
//! SQLite ledger is refused; a reload changes the operator's plugin chains.

use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "support/plugin_server.rs"]
mod plugin_server;
#[path = "support/service.rs"]
mod service;
use service::{free_port, ServiceProcess as Service};

fn config(port: u16, dir: &std::path::Path, backend: &str) -> String {
    format!(
        "[server]\nport = {port}\n[ledger]\nurl = \"sqlite://{}/ledger.db\"\n[scheduler]\nbackend = \"{backend}\"\nseed = 3\n\
         [amqp]\nurl = \"\"\n[apsr]\nround_interval_s = 0.2\n",
        dir.display()
    )
}

async fn start(file: &std::path::Path, port: u16) -> Service {
    start_logging(file, port, "warn", Stdio::null()).await
}

/// Starts `parasol serve` on `file` with `RUST_LOG=level` and its log on `log`, and waits
/// until it answers on `port`.
async fn start_logging(file: &std::path::Path, port: u16, level: &str, log: Stdio) -> Service {
    Service::start(file, port, level, log).await
}

fn hup(service: &Service) {
    let status = Command::new("kill")
        .args(["-HUP", &service.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

async fn stats(client: &reqwest::Client, base: &str) -> Value {
    client
        .get(format!("{base}/v1/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn active_backend(client: &reqwest::Client, base: &str) -> String {
    stats(client, base).await["active_backend"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Calls `backend` has answered so far (`/v1/stats`).
async fn backend_requests(client: &reqwest::Client, base: &str, backend: &str) -> u64 {
    stats(client, base).await["backends"][backend]["requests"]
        .as_u64()
        .unwrap_or(0)
}

fn body() -> Value {
    let flavor = json!({"nova_object.name": "Flavor", "nova_object.namespace": "nova", "nova_object.version": "1.2",
        "nova_object.data": {"name": "tiny", "vcpus": 1, "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "swap": 0}});
    json!({"spec_obj": {"nova_object.name": "RequestSpec", "nova_object.namespace": "nova", "nova_object.version": "1.15",
        "nova_object.data": {"flavor": flavor, "num_instances": 1}},
        "instance_uuids": [uuid::Uuid::new_v4().to_string()], "return_objects": true, "return_alternates": true})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sighup_switches_backend_mid_load_without_losing_or_double_claiming() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("parasol.toml");
    let port = free_port();
    std::fs::write(&file, config(port, dir.path(), "filter")).unwrap();
    let log = dir.path().join("serve.log");
    let service = start_logging(
        &file,
        port,
        "warn",
        Stdio::from(std::fs::File::create(&log).unwrap()),
    )
    .await;
    let client = reqwest::Client::new();
    for i in 0..20 {
        let event = json!({"message_id": format!("m{i}"), "event_type": "compute.host.state", "priority": "INFO",
            "payload": {"host": format!("c{i}"), "compute_node_uuid": uuid::Uuid::new_v4().to_string(),
                "inventory": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}, "DISK_GB": {"total": 40}}}});
        let r = client
            .post(format!("{}/v1/notifications", service.base()))
            .json(&event)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    // 4 callers x 50 calls for 160 slots (20 hosts x 8): some calls must get NoValidHost.
    let load: Vec<_> = (0..4)
        .map(|_| {
            let client = client.clone();
            let base = service.base();
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                for _ in 0..50 {
                    let r = client
                        .post(format!("{base}/v1/select_destinations"))
                        .json(&body())
                        .send()
                        .await;
                    statuses.push(r.map(|r| r.status().as_u16()).unwrap_or(0));
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                statuses
            })
        })
        .collect();
    // Mid-load: once filter has answered a tenth of the calls.
    let deadline = Instant::now() + Duration::from_secs(30);
    while backend_requests(&client, &service.base(), "filter").await < 20 {
        assert!(Instant::now() < deadline, "the load never reached filter");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    std::fs::write(&file, config(port, dir.path(), "apsr")).unwrap();
    hup(&service);
    let deadline = Instant::now() + Duration::from_secs(10);
    while active_backend(&client, &service.base()).await != "apsr" {
        assert!(
            Instant::now() < deadline,
            "SIGHUP did not switch the backend"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // An invalid file is refused; apsr keeps running.
    std::fs::write(&file, "[scheduler]\nbackend = \"no-such-backend\"\n").unwrap();
    hup(&service);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(&log).unwrap();
        if text.contains("new configuration refused; the old one keeps running") {
            assert!(
                text.contains("no-such-backend"),
                "the refusal names the value: {text}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the invalid file was not refused: {text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(active_backend(&client, &service.base()).await, "apsr");

    let mut ok = 0u64;
    for task in load {
        for status in task.await.unwrap() {
            assert!(
                status == 200 || status == 409,
                "a call was lost or failed: status {status}"
            );
            ok += (status == 200) as u64;
        }
    }
    let stats = stats(&client, &service.base()).await;
    let placed: u64 = ["filter", "apsr"]
        .iter()
        .map(|b| stats["backends"][b]["placed"].as_u64().unwrap_or(0))
        .sum();
    let requests: u64 = ["filter", "apsr"]
        .iter()
        .map(|b| stats["backends"][b]["requests"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(requests, 200, "{stats}");
    assert_eq!(placed, ok, "{stats}");
    assert!(
        stats["backends"]["filter"]["requests"].as_u64().unwrap() > 0,
        "the switch happened mid-load"
    );
    assert!(
        stats["backends"]["apsr"]["requests"].as_u64().unwrap() > 0,
        "the switch happened mid-load"
    );
    let hosts: Value = client
        .get(format!("{}/v1/hosts", service.base()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut used = 0;
    for h in hosts["hosts"].as_array().unwrap() {
        let v = h["used"]["VCPU"].as_i64().unwrap();
        assert!(v <= 8, "{} oversubscribed", h["host"]);
        used += v as u64;
    }
    assert_eq!(used, ok, "every placed call holds exactly one claim");
}

/// Logs written to a pipe (a journal, a file) are plain text: no terminal colour codes.
#[tokio::test]
async fn logs_to_a_pipe_carry_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let file = dir.path().join("parasol.toml");
    std::fs::write(&file, config(port, dir.path(), "filter")).unwrap();
    let mut service = start_logging(&file, port, "info", Stdio::piped()).await;
    let _ = service.child.kill();
    let stderr = service.child.stderr.take().expect("piped stderr");
    let log = std::io::read_to_string(stderr).unwrap();
    assert!(log.contains("INFO"), "an info line was logged: {log}");
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in a piped log: {log:?}"
    );
}

/// Issue 40, item 7: `[server] http_workers = 513` passed `config check`, then `serve`
/// panicked (the HTTP server's limit is 512; exit 101, no key named). Both refuse it now,
/// naming the key, and `serve` exits as on any bad configuration.
#[test]
fn config_check_refuses_what_serve_would_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("parasol.toml");
    for (toml, key) in [
        ("[server]\nhttp_workers = 513\n", "server.http_workers"),
        (
            "[server]\nshutdown_grace_s = 1e300\n",
            "server.shutdown_grace_s",
        ),
    ] {
        std::fs::write(
            &file,
            format!(
                "{toml}[ledger]\nurl = \"sqlite://{}/ledger.db\"\n[amqp]\nurl = \"\"\n",
                dir.path().display()
            ),
        )
        .unwrap();
        for args in [
            vec!["config", "check", file.to_str().unwrap()],
            vec!["--config", file.to_str().unwrap(), "serve"],
        ] {
            let log = dir.path().join("stderr.log");
            let mut child = Command::new(env!("CARGO_BIN_EXE_parasol"))
                .args(&args)
                .env("RUST_LOG", "warn")
                .env("PARASOL__SERVER__PORT", free_port().to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .expect("run parasol");
            // A serve that accepted the value would run on: a guard, not a speed bound.
            let deadline = Instant::now() + Duration::from_secs(30);
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("{args:?} accepted {toml} and kept running");
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            let stderr = std::fs::read_to_string(&log).unwrap();
            assert_eq!(status.code(), Some(1), "{args:?} on {toml}: {stderr}");
            assert!(
                stderr.contains(&format!("key `{key}`")),
                "{args:?}: {stderr}"
            );
        }
    }
}

/// Issue 40, item 8: a second `parasol serve` on the same SQLite file used to start silently
/// (two live tables drifting apart). It is refused with a message naming the file and the
/// process that holds it; the first keeps serving, and once it is gone the file is free.
#[tokio::test]
async fn a_second_serve_on_the_same_sqlite_ledger_is_refused_while_the_first_runs() {
    let dir = tempfile::tempdir().unwrap();
    let first_port = free_port();
    let first_file = dir.path().join("first.toml");
    std::fs::write(&first_file, config(first_port, dir.path(), "filter")).unwrap();
    let mut first = start(&first_file, first_port).await;
    let second_port = free_port();
    let second_file = dir.path().join("second.toml");
    std::fs::write(&second_file, config(second_port, dir.path(), "filter")).unwrap();
    let log = dir.path().join("second.log");
    let mut second = Service::spawn(
        &second_file,
        second_port,
        "warn",
        std::fs::File::create(&log).unwrap().into(),
        &[],
    );
    // It either exits or comes up (and is then killed by its Drop).
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = second.child.try_wait().unwrap() {
            break status;
        }
        let up = reqwest::get(format!("{}/healthz", second.base()))
            .await
            .is_ok();
        assert!(!up, "a second serve on the same SQLite ledger started");
        assert!(
            Instant::now() < deadline,
            "the second serve neither exited nor came up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "{stderr}");
    let ledger = dir.path().join("ledger.db");
    assert!(
        stderr.contains(&format!(
            "the SQLite ledger {} is in use by another parasol serve (pid {})",
            ledger.display(),
            first.child.id()
        )),
        "{stderr}"
    );
    // The first one still serves.
    let r = reqwest::get(format!("{}/healthz", first.base()))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Once it is gone (even killed), the ledger is free for the next one.
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let _next = start(&second_file, second_port).await;
}

/// Issue 40, item 9: a reload used to log "the rest is applied now" while authentication
/// (among others) is read only at start. The log now names the keys applied and those that
/// wait for a restart, and the service does what it says: the backend switched, the token
/// not yet asked for.
#[tokio::test]
async fn a_reload_names_what_it_applied_and_what_waits_for_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("parasol.toml");
    let port = free_port();
    std::fs::write(&file, config(port, dir.path(), "filter")).unwrap();
    let log = dir.path().join("serve.log");
    let service = start_logging(
        &file,
        port,
        "info",
        Stdio::from(std::fs::File::create(&log).unwrap()),
    )
    .await;
    let token = "0123456789abcdef0123";
    std::fs::write(
        &file,
        format!(
            "{}[auth]\nstrategy = \"token\"\ntoken = \"{token}\"\n",
            config(port, dir.path(), "apsr")
        ),
    )
    .unwrap();
    hup(&service);
    let deadline = Instant::now() + Duration::from_secs(30);
    let line = loop {
        let text = std::fs::read_to_string(&log).unwrap();
        if let Some(line) = text.lines().find(|l| l.contains("configuration reloaded")) {
            break line.to_string();
        }
        assert!(Instant::now() < deadline, "no reload logged: {text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!line.contains("the rest is applied now"), "{line}");
    assert!(line.contains("applied now: scheduler.backend;"), "{line}");
    assert!(
        line.contains("waiting for a restart (read only at start, the old values keep running): auth.strategy, auth.token"),
        "{line}"
    );
    let client = reqwest::Client::new();
    assert_eq!(active_backend(&client, &service.base()).await, "apsr");
    let hosts = client
        .get(format!("{}/v1/hosts", service.base()))
        .send()
        .await
        .unwrap();
    assert_eq!(hosts.status(), 200, "authentication changes at a restart");
}

/// The `[[plugins.chain]]` table of one plugin.
fn plugin_table(name: &str, event: &str, url: &str) -> String {
    format!("[[plugins.chain]]\nname = \"{name}\"\nevent = \"{event}\"\nurl = \"{url}\"\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sighup_replaces_the_plugin_chains_for_new_calls() {
    let plugins = plugin_server::PluginServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("parasol.toml");
    let port = free_port();
    let base_config = config(port, dir.path(), "filter");
    let deny = plugin_table("freeze", "select", &plugins.url("/select/deny"));
    std::fs::write(&file, format!("{base_config}{deny}")).unwrap();
    let service = start(&file, port).await;
    let client = reqwest::Client::new();
    let event = json!({"message_id": "h1", "event_type": "compute.host.state", "priority": "INFO",
        "payload": {"host": "c1", "compute_node_uuid": uuid::Uuid::new_v4().to_string(),
            "inventory": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}, "DISK_GB": {"total": 40}}}});
    let r = client
        .post(format!("{}/v1/notifications", service.base()))
        .json(&event)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let place = || async {
        let r = client
            .post(format!("{}/v1/select_destinations", service.base()))
            .json(&body())
            .send()
            .await
            .unwrap();
        (
            r.status().as_u16(),
            r.json::<Value>().await.unwrap_or(Value::Null),
        )
    };
    let (status, answer) = place().await;
    assert_eq!(status, 409, "{answer}");
    assert!(answer["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains(plugin_server::DENY_REASON)));
    // The file now registers an approving plugin instead: after SIGHUP new calls walk it.
    let approve = plugin_table("audit", "select", &plugins.url("/select/approve"));
    std::fs::write(&file, format!("{base_config}{approve}")).unwrap();
    hup(&service);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let chain = stats(&client, &service.base()).await["plugin_chains"]["select"].clone();
        if chain[0]["name"] == "audit" {
            assert_eq!(chain.as_array().map(Vec::len), Some(1), "{chain}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the reload never changed the chain: {chain}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, answer) = place().await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(plugins.seen("/select/approve").len(), 1);
    assert_eq!(
        plugins.seen("/select/deny").len(),
        1,
        "the old chain is not called"
    );
    // Figures of both stay: the old plugin's denial and the new one's approval.
    let figures = stats(&client, &service.base()).await["plugins"]["select"].clone();
    assert_eq!(figures["freeze"]["denials"], 1, "{figures}");
    assert_eq!(figures["audit"]["approvals"], 1, "{figures}");
    // An invalid chain is refused and the running one keeps working.
    let bad = plugin_table("broken", "select", "ftp://nowhere/");
    std::fs::write(&file, format!("{base_config}{bad}")).unwrap();
    hup(&service);
    let (status, answer) = place().await;
    assert_eq!(status, 200, "{answer}");
}

#[test]
fn config_check_refuses_a_bad_plugin_entry_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            plugin_table("p", "select", "ftp://nowhere/"),
            "plugins.chain[0].url",
        ),
        (
            plugin_table("p", "bind", "http://127.0.0.1:1/"),
            "plugins.chain[0].event",
        ),
        (
            format!(
                "{}timeout_ms = 0\n",
                plugin_table("p", "filter", "http://127.0.0.1:1/")
            ),
            "plugins.chain[0].timeout_ms",
        ),
        (
            format!(
                "{}weight = 2\n",
                plugin_table("p", "weigh", "http://127.0.0.1:1/")
            ),
            "weight",
        ),
        (
            format!(
                "{}{}",
                plugin_table("p", "filter", "http://127.0.0.1:1/"),
                plugin_table("p", "filter", "http://127.0.0.1:2/")
            ),
            "plugins.chain[1].name",
        ),
    ];
    let ledger = format!(
        "[ledger]\nurl = \"sqlite://{}/ledger.db\"\n[amqp]\nurl = \"\"\n",
        dir.path().display()
    );
    let file = dir.path().join("parasol.toml");
    for (table, key) in cases {
        std::fs::write(&file, format!("{ledger}{table}")).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_parasol"))
            .args(["config", "check", file.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{table} accepted");
        assert!(stderr.contains(key), "{table}: {stderr}");
    }
    let good = plugin_table("p", "weigh", "https://plugins.example/carbon");
    std::fs::write(&file, format!("{ledger}[plugins]\ncandidates = 8\n{good}")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_parasol"))
        .args(["config", "check", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
