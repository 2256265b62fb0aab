//! Nova's compute-node records in `parasol serve`: hosts registered as the Placement sync
//! registers them (host = node = provider name, uuid = compute node uuid) learn their
//! service host, cell and service state from cell databases that Nova's own code made and
//! filled (`nova_db/harness.rs`, `seed.py`), on MariaDB, PostgreSQL and SQLite; Selections through the
//! real HTTP select path name the service host and the node; a disabled or forced-down
//! service is not selected; `service.update` by service host reaches every node of it; the
//! availability zones of Nova's host aggregates, loaded from its API database at start, place
//! a zone request with no aggregate cast received.

#[path = "nova_db/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "api/helpers.rs"]
#[allow(dead_code)]
mod helpers;
mod support;

use harness::{Databases, Engine};
use helpers::{call_body, flavor, request_spec};
use parasol::clock::ManualClock;
use parasol::configuration::Settings;
use parasol::ledger::HostRegistration;
use parasol::nova_db::SecretUrl;
use parasol::startup::Application;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

fn uuid(name: &str) -> String {
    Uuid::new_v5(&Uuid::NAMESPACE_DNS, name.as_bytes()).to_string()
}

fn libvirt_node(name: &str) -> Value {
    json!({"uuid": uuid(name), "name": name, "hypervisor_type": "QEMU",
           "hypervisor_version": 8002000,
           "supported_instances": [["x86_64", "kvm", "hvm"]],
           "cpu_info": {"arch": "x86_64", "model": "Nehalem", "vendor": "Intel",
                        "topology": {"sockets": 1, "cores": 4, "threads": 2}, "features": []},
           "mapped": 1})
}

/// An Ironic node: named by its uuid, as the Ironic driver names them.
fn ironic_node(seed: &str) -> Value {
    let id = uuid(seed);
    json!({"uuid": id, "name": id, "hypervisor_type": "ironic", "hypervisor_version": 1,
           "supported_instances": [["x86_64", "baremetal", "hvm"]], "cpu_info": "", "mapped": 1})
}

/// One cell: libvirt-style `compute1` (node `compute1.example.org`), an Ironic-style service
/// `ironic` with three nodes, `compute2` disabled and `compute3` forced down; `compute1` in
/// zone `az-one` and `ironic` in zone `az-bm` (host aggregates in the API database).
fn spec(db: &Databases) -> Value {
    // compute1's monitors reported (`compute_monitors`): the resource tracker stored them.
    let mut compute1 = libvirt_node("compute1.example.org");
    compute1["metrics"] = json!({"cpu.percent": 29, "cpu.frequency": 2400});
    let services = json!([
        {"host": "compute1", "nodes": [compute1]},
        {"host": "ironic", "nodes": [ironic_node("bm1"), ironic_node("bm2"), ironic_node("bm3")]},
        {"host": "compute2", "disabled_reason": "hardware maintenance",
         "nodes": [libvirt_node("compute2.example.org")]},
        {"host": "compute3", "forced_down": true, "nodes": [libvirt_node("compute3.example.org")]},
    ]);
    json!({"cell0": db.url("cell0"), "cells": [
        {"name": "cell1", "database_connection": db.url("cell1"), "transport_url": "fake://cell1",
         "disabled": false, "services": services},
    ], "aggregates": [
        {"name": "zone-one", "metadata": {"availability_zone": "az-one"}, "hosts": ["compute1"]},
        {"name": "zone-bm", "metadata": {"availability_zone": "az-bm"}, "hosts": ["ironic"]},
    ]})
}

/// Every node as Placement names it (provider name = hypervisor_hostname).
fn providers() -> Vec<String> {
    let mut names: Vec<String> = ["compute1", "compute2", "compute3"]
        .iter()
        .map(|h| format!("{h}.example.org"))
        .collect();
    names.extend(["bm1", "bm2", "bm3"].iter().map(|s| uuid(s)));
    names
}

/// The service host Nova's records give each node.
fn service_of(node: &str) -> &'static str {
    match node {
        "compute1.example.org" => "compute1",
        "compute2.example.org" => "compute2",
        "compute3.example.org" => "compute3",
        _ => "ironic",
    }
}

struct Served {
    address: String,
    client: reqwest::Client,
    app_stop: parasol::startup::Shutdown,
    handles: parasol::startup::Handles,
    _ledger: support::TestDb,
}

impl Served {
    async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let resp = self
            .client
            .post(format!("{}{path}", self.address))
            .json(body)
            .send()
            .await
            .expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn get(&self, path: &str) -> Value {
        self.client
            .get(format!("{}{path}", self.address))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
            .json()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: not JSON: {e}"))
    }

    async fn place(&self, extra: Value) -> (u16, Value) {
        let spec = request_spec(flavor(1, 512, 10), 1, extra);
        let body = call_body(spec, &[Uuid::new_v4().to_string()]);
        self.post("/v1/select_destinations", &body).await
    }
}

/// Nova's cells on `engine`, seeded by Nova's code; a Parasol service reading them.
async fn serve(engine: Engine) -> (Served, Databases, Value) {
    let venv = tokio::task::spawn_blocking(harness::venv)
        .await
        .expect("venv");
    let db = Databases::create(engine, &["api", "cell1"]).await;
    let conf = db.nova_conf("cell1");
    tokio::join!(
        harness::nova_manage(&venv, &conf, &["api_db", "sync"]),
        harness::nova_manage(&venv, &conf, &["db", "sync", "--local_cell"]),
    );
    let nova = harness::seed(&venv, &conf, db.dir.path(), &spec(&db)).await;
    let now_ms = nova["now_ms"].as_i64().expect("now_ms");

    let ledger = support::db("sqlite").await;
    let mut settings = Settings::default();
    // No log written out per test service (the binary's tests keep the default).
    settings.ledger.wal_prewrite_mib = 0;
    settings.ledger.url = ledger.url.clone();
    settings.amqp.url = String::new();
    settings.policy.host_timeout_s = 0;
    settings.nova_db.enabled = true;
    settings.nova_db.api_database_url = SecretUrl(db.url("api"));
    settings.nova_db.database_url = SecretUrl(db.url("cell1"));
    settings.nova_db.service_down_time_s = 60.0;
    settings.nova_db.refresh_interval_s = 3600.0;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let clock = Arc::new(ManualClock::new(now_ms));
    let app = Application::build_with(settings, listener, clock)
        .await
        .expect("build app");
    // As the Placement sync registers a provider it has not seen: host = node = its name.
    let table_ledger = app.scheduler().ledger().clone();
    for name in providers() {
        let id = if name.contains('.') {
            uuid(&name)
        } else {
            name.clone()
        };
        let mut reg = HostRegistration::simple(&name, &id, 8, 16384, 200);
        // nova-api mirrors an aggregate's hosts into Placement: the provider is a member.
        reg.aggregates = nova["aggregates"]
            .as_array()
            .expect("aggregates")
            .iter()
            .filter(|a| {
                a["hosts"]
                    .as_array()
                    .expect("hosts")
                    .contains(&json!(service_of(&name)))
            })
            .map(|a| a["uuid"].as_str().expect("uuid").to_string())
            .collect();
        table_ledger
            .register_host(&reg, now_ms)
            .await
            .expect("register");
    }
    app.start_nova_db();
    let served = Served {
        address: format!("http://127.0.0.1:{}", app.port()),
        client: reqwest::Client::new(),
        app_stop: app.shutdown(),
        handles: app.handles().clone(),
        _ledger: ledger,
    };
    tokio::spawn(app.run_until_stopped());
    let table = table_ledger.table().clone();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !table.records().is_some_and(|r| r.read) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Nova's records were never read: {:?}",
            served.handles.nova_db.borrow().last_error
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (served, db, nova)
}

fn selections(body: &Value) -> Vec<(String, String, String)> {
    body.as_array()
        .expect("a list per instance")
        .iter()
        .flat_map(|per| per.as_array().expect("selections").iter())
        .map(|s| {
            let d = &s["nova_object.data"];
            let text = |k: &str| d[k].as_str().expect(k).to_string();
            (text("service_host"), text("nodename"), text("cell_uuid"))
        })
        .collect()
}

/// The monitor metrics of `compute_nodes.metrics` reach the usage table as nova-scheduler's
/// `HostState` reads them: `cpu.percent` 29 is stored as 0.29 and read back as
/// `int(0.29 * 100)` = 28, in Nova as here.
async fn assert_metrics_read_from_compute_nodes(app: &Served) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let stats = app.get("/v1/stats").await;
        if stats["usage"]["accepted"]["nova_db"].as_u64() >= Some(1) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no metrics read from compute_nodes: {stats}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let hosts = app.get("/v1/hosts").await;
    let of = |node: &str| {
        hosts["hosts"]
            .as_array()
            .expect("hosts")
            .iter()
            .find(|h| h["node"] == node)
            .map(|h| h["measured"]["metrics"].clone())
            .unwrap_or_else(|| panic!("{node} listed: {hosts}"))
    };
    let metrics = of("compute1.example.org");
    assert_eq!(metrics["source"], "nova_db", "{metrics}");
    assert_eq!(metrics["values"]["cpu.percent"]["value"], 28.0, "{metrics}");
    assert_eq!(
        metrics["values"]["cpu.frequency"]["value"], 2400.0,
        "{metrics}"
    );
    assert_eq!(
        of("compute2.example.org"),
        Value::Null,
        "no metrics stored, none read"
    );
}

async fn selections_name_the_service_host(engine: Engine) {
    let (app, _db, nova) = serve(engine).await;
    assert_metrics_read_from_compute_nodes(&app).await;
    let cell = nova["cell_uuids"]["cell1"]
        .as_str()
        .expect("cell1")
        .to_string();

    // The zones come from the aggregates in Nova's API database, loaded at start (no cast).
    let cloud = app.handles.scheduler.cloud().clone();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while cloud.aggregates().len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Nova's aggregates were never loaded: {:?}",
            cloud.aggregates()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let health = app.get("/healthz").await;
    assert_eq!(
        health["nova_db"]["aggregates_loaded"],
        json!(true),
        "{health}"
    );
    assert_eq!(health["nova_db"]["aggregates"], json!(2), "{health}");
    for _ in 0..3 {
        let (status, body) = app.place(json!({"availability_zone": "az-one"})).await;
        assert_eq!(status, 200, "{body}");
        let (host, node, _) = &selections(&body)[0];
        assert_eq!(
            (host.as_str(), node.as_str()),
            ("compute1", "compute1.example.org")
        );
        let (status, body) = app.place(json!({"availability_zone": "az-bm"})).await;
        assert_eq!(status, 200, "{body}");
        assert!(
            selections(&body).iter().all(|(h, _, _)| h == "ironic"),
            "{body}"
        );
    }
    let (status, body) = app.place(json!({"availability_zone": "az-none"})).await;
    assert_ne!(status, 200, "placed in a zone no aggregate names: {body}");

    // Every Selection (claimed host and alternates) names the service and node Nova knows;
    // the disabled and forced-down services never appear.
    let mut seen = BTreeSet::new();
    for _ in 0..6 {
        let (status, body) = app.place(json!({})).await;
        assert_eq!(status, 200, "{body}");
        for (host, node, cell_uuid) in selections(&body) {
            assert_eq!(host, service_of(&node), "service host of {node}");
            assert_eq!(cell_uuid, cell);
            assert!(
                !["compute2", "compute3"].contains(&host.as_str()),
                "{host} selected"
            );
            seen.insert((host, node));
        }
    }
    assert!(
        seen.contains(&("compute1".into(), "compute1.example.org".into())),
        "{seen:?}"
    );
    assert!(
        seen.iter().filter(|(h, _)| h == "ironic").count() >= 2,
        "{seen:?}"
    );

    // force_hosts names a service host, as Nova's API passes it.
    let (status, body) = app.place(json!({"force_hosts": ["compute1"]})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        selections(&body)[0],
        (
            "compute1".into(),
            "compute1.example.org".into(),
            cell.clone()
        )
    );
    let (status, body) = app.place(json!({"force_hosts": ["ironic"]})).await;
    assert_eq!(status, 200, "{body}");
    let (host, node, _) = &selections(&body)[0];
    assert_eq!((host.as_str(), service_of(node)), ("ironic", "ironic"));

    // A move kept in a cell (requested_destination.cell) stays there.
    let in_cell = |uuid: &str| {
        json!({"requested_destination": {
            "nova_object.name": "Destination", "nova_object.namespace": "nova",
            "nova_object.version": "1.4",
            "nova_object.data": {"cell": {
                "nova_object.name": "CellMapping", "nova_object.namespace": "nova",
                "nova_object.version": "1.1",
                "nova_object.data": {"uuid": uuid, "name": "cell", "transport_url": "none:///",
                                     "database_connection": "none:///"}}}}})
    };
    let (status, body) = app.place(in_cell(&cell)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(selections(&body)[0].2, cell);
    let (status, body) = app.place(in_cell(&Uuid::new_v4().to_string())).await;
    assert_ne!(status, 200, "placed outside the requested cell: {body}");
    assert!(
        body.to_string().contains("RequestedDestinationFilter"),
        "{body}"
    );

    // A disabled or forced-down service is refused by the ComputeFilter, with that reason.
    for down in ["compute2", "compute3"] {
        let (status, body) = app.place(json!({"force_hosts": [down]})).await;
        assert_ne!(status, 200, "{down} was selected: {body}");
        assert!(body.to_string().contains("ComputeFilter"), "{down}: {body}");
    }

    // service.update by service host applies to every node of an Ironic-style service.
    let update = json!({
        "message_id": Uuid::new_v4().to_string(),
        "publisher_id": "nova-compute:ironic",
        "event_type": "service.update",
        "priority": "INFO",
        "timestamp": "2026-11-25 21:13:16.777260",
        "payload": {
            "nova_object.name": "ServiceStatusPayload", "nova_object.namespace": "nova",
            "nova_object.version": "1.1",
            "nova_object.data": {"host": "ironic", "binary": "nova-compute", "topic": "compute",
                                 "disabled": true, "forced_down": false, "disabled_reason": "test",
                                 "report_count": 1, "last_seen_up": null, "version": 66,
                                 "availability_zone": null, "uuid": Uuid::new_v4().to_string()}
        }
    });
    let (status, body) = app.post("/v1/notifications", &update).await;
    assert!(status < 300, "service.update refused: {status} {body}");
    let ledger = app.handles.scheduler.ledger();
    let rows = ledger.load_hosts(None).await.expect("load");
    let bare_metal: Vec<String> = ["bm1", "bm2", "bm3"].iter().map(|s| uuid(s)).collect();
    let ironic: Vec<_> = rows
        .iter()
        .filter(|r| bare_metal.contains(&r.profile.uuid.to_string()))
        .collect();
    assert_eq!(ironic.len(), 3);
    assert!(
        ironic.iter().all(|r| r.disabled),
        "service.update reached every node"
    );
    let others = rows
        .iter()
        .filter(|r| !bare_metal.contains(&r.profile.uuid.to_string()));
    assert!(others.clone().all(|r| !r.disabled), "and no other node");
    assert_eq!(
        ledger.table().ids_of_service("ironic").len(),
        3,
        "the table knows the service's three nodes"
    );
    app.app_stop.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_selections_name_nova_s_service_host_and_node() {
    selections_name_the_service_host(Engine::MariaDb).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_selections_name_nova_s_service_host_and_node() {
    selections_name_the_service_host(Engine::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_selections_name_nova_s_service_host_and_node() {
    selections_name_the_service_host(Engine::Postgres).await;
}
