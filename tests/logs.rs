//! `parasol serve` as systemd runs it: JSON log lines carrying Nova's request id and the
//! instance uuids (over HTTP and over Nova's RPC on the real RabbitMQ), and the sd_notify
//! protocol on a datagram socket this test opens as `NOTIFY_SOCKET`: `READY=1` once serving,
//! `RELOADING=1` + `MONOTONIC_USEC` then `READY=1` around SIGHUP, `STOPPING=1` on SIGTERM. A
//! reload logs the file it read, and a backend switch only when the backend changed.

use parasol_rpc_client::RpcClient;
use serde_json::{json, Value};
use std::io::Read;
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

#[path = "support/service.rs"]
mod service;
use service::{free_port, ServiceProcess};

/// The service and the broker names it declared, removed when the test ends however it ends.
struct Service {
    process: ServiceProcess,
    id: String,
}

impl Drop for Service {
    fn drop(&mut self) {
        self.process.kill();
        let id = self.id.clone();
        let cleanup = std::thread::spawn(move || {
            futures::executor::block_on(async {
                let conn = lapin::Connection::connect(AMQP_URL, Default::default()).await?;
                let ch = conn.create_channel().await?;
                for q in [
                    format!("scheduler_{id}"),
                    format!("scheduler_{id}.logs-{id}"),
                    format!("parasol.notifications.logs_{id}"),
                    format!("parasol.dead_letter.logs_{id}"),
                ] {
                    ch.queue_delete(&q, Default::default()).await?;
                }
                for e in [
                    format!("parasol_logs_{id}"),
                    format!("parasol.dead_letter.logs_{id}"),
                    format!("scheduler_fanout_logs_{id}"),
                ] {
                    ch.exchange_delete(&e, Default::default()).await?;
                }
                conn.close(200, "test done").await
            })
        });
        let _ = cleanup.join();
    }
}

/// The next datagram on the notify socket, as text, within 30 s.
fn next_notification(socket: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let n = socket.recv(&mut buf).expect("a notification within 30 s");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn flavor(vcpus: i64) -> Value {
    json!({"nova_object.name": "Flavor", "nova_object.namespace": "nova", "nova_object.version": "1.2",
        "nova_object.data": {"name": "f", "vcpus": vcpus, "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "swap": 0}})
}

fn select_args(uuid: &str, vcpus: i64) -> Value {
    json!({"spec_obj": {"nova_object.name": "RequestSpec", "nova_object.namespace": "nova",
        "nova_object.version": "1.15", "nova_object.data": {"flavor": flavor(vcpus), "num_instances": 1}},
        "instance_uuids": [uuid], "return_objects": true, "return_alternates": true})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_request_ids_and_systemd_hears_ready_reloading_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let port = free_port();
    let file = dir.path().join("parasol.toml");
    let config = |backend: &str| {
        format!(
            "[server]\nport = {port}\n[ledger]\nurl = \"sqlite://{d}/ledger.db\"\n\
             [scheduler]\nbackend = \"{backend}\"\nseed = 1\n[log]\nformat = \"json\"\n\
             [amqp]\nurl = \"{AMQP_URL}\"\nexchange = \"parasol_logs_{id}\"\n\
             queue = \"parasol.notifications.logs_{id}\"\ndead_letter = \"parasol.dead_letter.logs_{id}\"\n\
             fanout_exchange = \"scheduler_fanout_logs_{id}\"\n\
             [rpc]\nenabled = true\ntopic = \"scheduler_{id}\"\nhost = \"logs-{id}\"\n",
            d = dir.path().display()
        )
    };
    std::fs::write(&file, config("filter")).unwrap();
    let notify_path = dir.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).expect("bind the notify socket");
    let notify_env = notify_path.to_str().expect("a UTF-8 path");
    let process = ServiceProcess::spawn(
        &file,
        port,
        "info,parasol=debug",
        Stdio::piped(),
        &[("NOTIFY_SOCKET", notify_env)],
    );
    let mut service = Service {
        process,
        id: id.clone(),
    };

    let ready = next_notification(&notify);
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    // READY=1 means serving: the first request after it is answered.
    let health = http
        .get(format!("{base}/healthz"))
        .send()
        .await
        .expect("serving after READY=1");
    assert_eq!(health.status(), 200);

    let event = json!({"message_id": "m1", "event_type": "compute.host.state", "priority": "INFO",
        "payload": {"host": "c1", "compute_node_uuid": uuid::Uuid::new_v4().to_string(),
            "inventory": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}, "DISK_GB": {"total": 40}}}});
    let r = http
        .post(format!("{base}/v1/notifications"))
        .json(&event)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Over HTTP, with Nova's request id header: placed (a debug line in the span).
    let http_uuid = uuid::Uuid::new_v4().to_string();
    let http_request_id = format!("req-{}", uuid::Uuid::new_v4());
    let r = http
        .post(format!("{base}/v1/select_destinations"))
        .header("X-OpenStack-Request-ID", &http_request_id)
        .json(&select_args(&http_uuid, 1))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["x-openstack-request-id"],
        http_request_id.as_str()
    );
    // Over RPC, with the request id in Nova's context: too big, so NoValidHost (an info line).
    let client = RpcClient::connect(AMQP_URL, &format!("parasol_logs_{id}"))
        .await
        .expect("RabbitMQ must be running (`./test` starts it)");
    let rpc_uuid = uuid::Uuid::new_v4().to_string();
    let mut message = client.call_message(
        "select_destinations",
        select_args(&rpc_uuid, 64),
        "4.5",
        None,
        None,
    );
    let rpc_request_id = message["_context_request_id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    let reply = loop {
        match client
            .call_with(&format!("scheduler_{id}"), &message, Duration::from_secs(5))
            .await
        {
            Ok(reply) => break reply,
            Err(e) => assert!(Instant::now() < deadline, "no RPC answer: {e}"),
        }
        message["_msg_id"] = json!(uuid::Uuid::new_v4().simple().to_string());
        message["_unique_id"] = json!(uuid::Uuid::new_v4().simple().to_string());
    };
    let failure = reply
        .failure
        .as_ref()
        .map(|f| f.to_string())
        .unwrap_or_default();
    assert!(failure.contains("NoValidHost"), "{reply:?}");
    client.close().await;

    // SIGHUP with a new backend: RELOADING=1 with the monotonic clock, then READY=1.
    std::fs::write(&file, config("apsr")).unwrap();
    let pid = service.process.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    let reloading = next_notification(&notify);
    let lines: Vec<&str> = reloading.lines().collect();
    assert!(lines.contains(&"RELOADING=1"), "{reloading:?}");
    let usec = lines
        .iter()
        .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
        .unwrap_or_else(|| panic!("no MONOTONIC_USEC in {reloading:?}"));
    assert!(usec.parse::<u64>().unwrap() > 0, "{usec}");
    let ready = next_notification(&notify);
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    // The same file again: reloaded, but no backend switch is logged.
    assert!(Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    for want in ["RELOADING=1", "READY=1"] {
        let got = next_notification(&notify);
        assert!(got.lines().any(|l| l == want), "{want}: {got:?}");
    }

    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let stopping = next_notification(&notify);
    assert!(stopping.lines().any(|l| l == "STOPPING=1"), "{stopping:?}");
    let _ = service.process.child.wait();
    let mut log = String::new();
    service
        .process
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();

    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect();
    assert!(lines.len() > 5, "{log}");
    for line in &lines {
        for key in ["timestamp", "level", "message"] {
            assert!(line.get(key).is_some(), "no {key}: {line}");
        }
    }
    let find = |request_id: &str, uuid: &str, message: &str| {
        lines.iter().any(|l| {
            l["request_id"] == request_id
                && l["instance_uuids"]
                    .as_str()
                    .is_some_and(|u| u.contains(uuid))
                && l["message"] == message
        })
    };
    assert!(find(&http_request_id, &http_uuid, "placed"), "{log}");
    assert!(
        find(&rpc_request_id, &rpc_uuid, "no host passed the filters"),
        "{log}"
    );
    let reloads: Vec<&Value> = lines
        .iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("configuration reloaded; applied now: "))
        })
        .collect();
    assert_eq!(reloads.len(), 2, "{log}");
    for reloaded in reloads {
        assert_eq!(reloaded["source"], file.display().to_string());
    }
    let switches: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"] == "backend switched")
        .collect();
    assert_eq!(switches.len(), 1, "only the real switch is logged: {log}");
    assert_eq!(
        (&switches[0]["from"], &switches[0]["to"]),
        (&json!("filter"), &json!("apsr"))
    );
}

/// A normal stop is not an error: SIGTERM to a service consuming notifications and serving
/// Nova's RPC on the real RabbitMQ, after it answered a call, logs no ERROR line (lapin logged
/// `Connection error … invalid channel state: Closing` at every stop).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_sigterm_logs_no_error() {
    let dir = tempfile::tempdir().unwrap();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let port = free_port();
    let file = dir.path().join("parasol.toml");
    std::fs::write(
        &file,
        format!(
            "[server]\nport = {port}\n[ledger]\nurl = \"sqlite://{d}/ledger.db\"\n\
             [log]\nformat = \"json\"\n\
             [amqp]\nurl = \"{AMQP_URL}\"\nexchange = \"parasol_logs_{id}\"\n\
             queue = \"parasol.notifications.logs_{id}\"\ndead_letter = \"parasol.dead_letter.logs_{id}\"\n\
             fanout_exchange = \"scheduler_fanout_logs_{id}\"\n\
             [rpc]\nenabled = true\ntopic = \"scheduler_{id}\"\nhost = \"logs-{id}\"\n",
            d = dir.path().display()
        ),
    )
    .unwrap();
    let notify_path = dir.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).expect("bind the notify socket");
    let notify_env = notify_path.to_str().expect("a UTF-8 path");
    let process = ServiceProcess::spawn(
        &file,
        port,
        "info",
        Stdio::piped(),
        &[("NOTIFY_SOCKET", notify_env)],
    );
    let mut service = Service { process, id };
    let ready = next_notification(&notify);
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");

    // Both consumers up: the notification consumer (readiness: the broker is connected) and the
    // RPC server (it answered a call).
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while reqwest::get(format!("{base}/readyz"))
        .await
        .unwrap()
        .status()
        != 200
    {
        assert!(Instant::now() < deadline, "not ready within 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let client = RpcClient::connect(AMQP_URL, &format!("parasol_logs_{}", service.id))
        .await
        .expect("RabbitMQ must be running (`./test` starts it)");
    let mut message = client.call_message(
        "select_destinations",
        select_args(&uuid::Uuid::new_v4().to_string(), 1),
        "4.5",
        None,
        None,
    );
    // A call sent before the RPC server declared its queue is dropped by the broker: sent
    // again until answered.
    let reply = loop {
        match client
            .call_with(
                &format!("scheduler_{}", service.id),
                &message,
                Duration::from_secs(5),
            )
            .await
        {
            Ok(reply) => break reply,
            Err(e) => assert!(Instant::now() < deadline, "no RPC answer: {e}"),
        }
        message["_msg_id"] = json!(uuid::Uuid::new_v4().simple().to_string());
        message["_unique_id"] = json!(uuid::Uuid::new_v4().simple().to_string());
    };
    assert!(
        reply.failure.is_some(),
        "no host, so NoValidHost: {reply:?}"
    );
    client.close().await;

    let pid = service.process.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = service.process.child.wait().unwrap();
    assert!(status.success(), "{status}");
    let mut log = String::new();
    service
        .process
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect();
    assert!(
        lines.iter().any(|l| l["message"] == "RPC server stopped"),
        "the RPC server stopped as asked: {log}"
    );
    let errors: Vec<&Value> = lines.iter().filter(|l| l["level"] == "ERROR").collect();
    assert!(errors.is_empty(), "a clean stop logged errors: {errors:#?}");
}
