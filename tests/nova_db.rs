//! Reading Nova's compute-node records from cell databases that Nova's own code made and
//! filled (see `nova_db/harness.rs`), on MariaDB, PostgreSQL and SQLite, compared with what
//! nova-scheduler's own `HostManager` and servicegroup API see in the same databases.

#[path = "nova_db/harness.rs"]
mod harness;
#[path = "nova_db/scenario.rs"]
mod scenario;

use harness::{Databases, Engine};
use parasol::clock::ManualClock;
use parasol::cloud::Cloud;
use parasol::domain::{HostId, HostProfile, HostState};
use parasol::nova::Aggregate;
use parasol::nova_db::{
    load_aggregates, CellSetting, Liveness, NodeView, NovaDbError, NovaDbReader, NovaDbSettings,
    NovaDbSnapshot, SecretUrl,
};
use scenario::{scenario, uuid};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const DOWN_TIME_S: f64 = 60.0;

/// A node as `seed.py` prints nova-scheduler's view of it.
fn as_nova_sees_it(view: NodeView<'_>, now_ms: i64) -> Value {
    let (node, service) = (view.node, &view.node.service);
    let supported: Vec<Value> = node
        .supported_instances
        .iter()
        .map(|s| json!([s.arch, s.hv_type, s.vm_mode]))
        .collect();
    // Nova's `MonitorMetric.value` is an integer.
    let metrics: serde_json::Map<String, Value> = node
        .metrics
        .iter()
        .map(|m| (m.name.clone(), json!(m.value as i64)))
        .collect();
    json!({"cell_uuid": view.cell_uuid().to_string(), "host": view.service_host(), "node": node.node,
           "uuid": node.uuid.to_string(), "hypervisor_hostname": node.node,
           "hypervisor_type": node.hypervisor_type, "hypervisor_version": node.hypervisor_version,
           "supported_instances": supported, "cpu_info": node.cpu_info,
           "numa": node.has_numa_topology, "pci_pools": node.pci_pools, "metrics": metrics,
           "up": service.is_up(now_ms, DOWN_TIME_S), "disabled": service.disabled,
           "disabled_reason": service.disabled_reason, "forced_down": service.forced_down,
           "version": service.version})
}

async fn read_as_nova_does(engine: Engine) {
    let venv = tokio::task::spawn_blocking(harness::venv)
        .await
        .expect("venv");
    let db = Databases::create(engine, &["api", "cell1", "cell2"]).await;
    let (conf1, conf2) = (db.nova_conf("cell1"), db.nova_conf("cell2"));
    tokio::join!(
        harness::nova_manage(&venv, &conf1, &["api_db", "sync"]),
        harness::nova_manage(&venv, &conf1, &["db", "sync", "--local_cell"]),
        harness::nova_manage(&venv, &conf2, &["db", "sync", "--local_cell"]),
    );
    let nova = harness::seed(&venv, &conf1, db.dir.path(), &scenario(&db)).await;
    let now_ms = nova["now_ms"].as_i64().expect("now_ms");
    let settings = NovaDbSettings {
        enabled: true,
        api_database_url: SecretUrl(db.url("api")),
        database_url: SecretUrl(db.url("cell1")),
        service_down_time_s: DOWN_TIME_S,
        ..Default::default()
    };
    let reader = NovaDbReader::new(settings, Arc::new(ManualClock::new(now_ms))).expect("settings");
    let snapshot = reader.read().await.expect("the API database reads");
    assert_aggregates_load_as_nova_s(&reader, &nova).await;
    reader.close().await;

    let mut ours: Vec<Value> = snapshot
        .nodes()
        .map(|v| as_nova_sees_it(v, now_ms))
        .collect();
    ours.sort_by(|a, b| a["node"].as_str().cmp(&b["node"].as_str()));
    assert_eq!(
        Value::from(ours),
        nova["hosts"],
        "Parasol's nodes differ from nova-scheduler's"
    );
    assert_cells(&snapshot, &nova, &db);
    assert_cases(&snapshot);
    assert_named_cell_reads_the_same(&snapshot, &db, now_ms, &nova).await;
}

/// The aggregates `seed.py` made with Nova's objects, loaded into a `Cloud` as `parasol serve`
/// loads them at start, are those nova-scheduler's `HostManager` loaded; an aggregate Parasol
/// knew before (from a cast before the load) that Nova's database lacks is gone.
async fn assert_aggregates_load_as_nova_s(reader: &NovaDbReader, nova: &Value) {
    let cloud = Cloud::new();
    cloud.update_aggregates([Aggregate {
        uuid: "not-in-nova".into(),
        metadata: [("availability_zone".to_string(), "az-gone".to_string())].into(),
        hosts: vec!["cmp1".into()],
    }]);
    let loaded = load_aggregates(reader, &cloud, &CancellationToken::new()).await;
    assert!(loaded, "the API database's aggregates load");
    let ours: Vec<Value> = cloud
        .aggregates()
        .into_iter()
        .map(|a| {
            let mut hosts = a.hosts.clone();
            hosts.sort();
            json!({"uuid": a.uuid, "hosts": hosts, "metadata": a.metadata})
        })
        .collect();
    assert_eq!(nova["aggregates"].as_array().map(Vec::len), Some(5));
    assert_eq!(
        Value::from(ours),
        nova["aggregates"],
        "Parasol's aggregates differ from nova-scheduler's"
    );
    let zones = cloud.host_zones().expect("zones from the aggregates");
    let host = |name: &str| {
        HostState::new(
            HostId(1),
            Arc::new(HostProfile::new(name, name, "u", "nova", Vec::new())),
        )
    };
    assert_eq!(zones.zone_of(&host("cmp1")), "az-a");
    assert_eq!(zones.zone_of(&host("ironic-1")), "az-a");
    assert_eq!(zones.zone_of(&host("cmp6")), "az-b");
    assert_eq!(zones.zone_of(&host("cmp5")), "nova");
    let tenants = cloud.host_metadata();
    assert!(tenants.of("cmp2").expect("cmp2's metadata")["filter_tenant_id2"].contains("p2"));
}

/// `[nova_db] cells` instead of the API database's mappings: the same nodes for that cell;
/// with `api_database_url` too, only the named cell is read and the aggregates still load
/// from the API database.
async fn assert_named_cell_reads_the_same(
    discovered: &NovaDbSnapshot,
    db: &Databases,
    now_ms: i64,
    nova: &Value,
) {
    let cell1 = &discovered.cells[0];
    let settings = NovaDbSettings {
        enabled: true,
        cells: vec![CellSetting {
            uuid: cell1.cell.uuid.to_string(),
            name: "cell1".into(),
            database_url: SecretUrl(db.url("cell1")),
        }],
        ..Default::default()
    };
    for with_api in [false, true] {
        let mut settings = settings.clone();
        if with_api {
            settings.api_database_url = SecretUrl(db.url("api"));
        }
        let reader =
            NovaDbReader::new(settings, Arc::new(ManualClock::new(now_ms))).expect("settings");
        let named = reader.read().await.expect("reads");
        if with_api {
            assert_aggregates_load_as_nova_s(&reader, nova).await;
        } else {
            assert!(
                reader.read_aggregates().await.expect("no error").is_none(),
                "no API database, no aggregates"
            );
        }
        reader.close().await;
        assert!(named.failed_cells.is_empty() && named.disabled_cells.is_empty());
        let [cell] = &named.cells[..] else {
            panic!("one cell, the named one (API database too: {with_api})")
        };
        assert_eq!(
            (cell.cell.uuid, &cell.nodes),
            (cell1.cell.uuid, &cell1.nodes)
        );
    }
}

fn assert_cells(snapshot: &NovaDbSnapshot, nova: &Value, db: &Databases) {
    let cell = |name: &str| nova["cell_uuids"][name].as_str().expect(name).to_string();
    let read: Vec<String> = snapshot
        .cells
        .iter()
        .map(|c| c.cell.uuid.to_string())
        .collect();
    assert_eq!(
        read,
        [cell("cell1"), cell("cell2")],
        "cell0 skipped, disabled not read"
    );
    assert_eq!(
        snapshot.cells[1].cell.database.to_string(),
        db.url("cell2"),
        "template filled"
    );
    let disabled: Vec<String> = snapshot
        .disabled_cells
        .iter()
        .map(|c| c.uuid.to_string())
        .collect();
    assert_eq!(disabled, [cell("cell3")]);
    let [failure] = &snapshot.failed_cells[..] else {
        panic!("only the broken cell fails: {:?}", snapshot.failed_cells)
    };
    assert!(failure.cell.contains("broken") && failure.cell.contains(&cell("broken")));
    let message = failure.error.to_string();
    assert!(
        matches!(failure.error, NovaDbError::Connect { .. }),
        "{message}"
    );
    assert!(
        message.contains("broken_cell") && !message.contains("hunter2secret"),
        "{message}"
    );
}

fn assert_cases(snapshot: &NovaDbSnapshot) {
    let node = |name: &str| {
        snapshot
            .node_by_name(name)
            .unwrap_or_else(|| panic!("{name} read"))
    };
    let now = snapshot.read_at_ms;
    let libvirt = node("cmp1.example.org");
    assert_eq!((libvirt.service_host(), libvirt.node.mapped), ("cmp1", 1));
    assert_eq!(
        libvirt.node.cpu_info.as_ref().map(|c| c["model"].clone()),
        Some(json!("Nehalem"))
    );
    let by_uuid = snapshot.node(&libvirt.node.uuid).expect("found by uuid");
    assert_eq!(by_uuid.node.node, "cmp1.example.org");
    let ironic: Vec<_> = snapshot
        .nodes()
        .filter(|v| v.service_host() == "ironic-1")
        .collect();
    assert_eq!(ironic.len(), 3, "one Ironic service, three nodes");
    assert!(ironic
        .iter()
        .all(|v| v.node.node == v.node.uuid.to_string() && v.node.cpu_info.is_none()));
    assert!(ironic
        .iter()
        .all(|v| Arc::ptr_eq(&v.node.service, &ironic[0].node.service)));
    let disabled = &node("cmp2.example.org").node.service;
    assert!(disabled.disabled && disabled.is_up(now, DOWN_TIME_S));
    assert_eq!(
        disabled.disabled_reason.as_deref(),
        Some("hardware maintenance")
    );
    let forced = &node("cmp3.example.org").node.service;
    assert_eq!(forced.liveness(now, DOWN_TIME_S), Liveness::ForcedDown);
    let stale = &node("cmp4.example.org").node.service;
    assert!(
        matches!(stale.liveness(now, DOWN_TIME_S), Liveness::Stale { last_heartbeat_ms } if now - last_heartbeat_ms >= 299_000)
    );
    assert!(
        stale.is_up(now, 400.0),
        "up under a longer service_down_time"
    );
    assert!(
        snapshot.node_by_name("cmp5-old.example.org").is_none(),
        "deleted node skipped"
    );
    assert!(snapshot
        .node(&uuid("cmp5-old.example.org").parse().expect("uuid"))
        .is_none());
    assert_eq!(node("cmp5.example.org").service_host(), "cmp5");
    let cell1 = &snapshot.cells[0];
    let [orphan] = &cell1.rejected[..] else {
        panic!("one rejected node: {:?}", cell1.rejected)
    };
    assert_eq!(orphan.node.as_deref(), Some("ghost.example.org"));
    assert!(
        orphan
            .reason
            .contains("no nova-compute service on host ghost"),
        "{}",
        orphan.reason
    );
    assert_eq!(
        node("cmp6.example.org").cell_uuid(),
        snapshot.cells[1].cell.uuid
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_cells_read_as_nova_s_scheduler_reads_them() {
    read_as_nova_does(Engine::MariaDb).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_cells_read_as_nova_s_scheduler_reads_them() {
    read_as_nova_does(Engine::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_cells_read_as_nova_s_scheduler_reads_them() {
    read_as_nova_does(Engine::Sqlite).await;
}

#[tokio::test]
async fn an_api_database_that_is_missing_or_not_nova_s_is_an_error_naming_it() {
    let db = Databases::create(Engine::MariaDb, &["empty"]).await;
    let sqlite = Databases::create(Engine::Sqlite, &[]).await;
    let cases = [
        (
            "mysql+pymysql://nova:hunter2secret@127.0.0.1:3306/parasol_no_such_db",
            "Connect",
        ),
        (
            "postgresql+psycopg2://postgres:hunter2secret@127.0.0.1:5432/parasol_no_such_db",
            "Connect",
        ),
        (sqlite.url("absent").as_str(), "Connect"),
        (db.url("empty").as_str(), "Query"),
    ]
    .map(|(url, kind)| (url.to_string(), kind));
    for (url, kind) in cases {
        let settings = NovaDbSettings {
            enabled: true,
            api_database_url: SecretUrl(url.clone()),
            timeout_s: 5.0,
            ..Default::default()
        };
        let reader = NovaDbReader::new(settings, Arc::new(ManualClock::new(0))).expect("settings");
        let error = reader.read().await.expect_err(&url);
        let message = error.to_string();
        assert!(format!("{error:?}").starts_with(kind), "{url}: {error:?}");
        let db_name = url
            .rsplit('/')
            .next()
            .and_then(|t| t.split('?').next())
            .unwrap_or_default();
        assert!(message.contains(db_name), "{url}: {message}");
        assert!(!message.contains("hunter2secret"), "{message}");
        reader.close().await;
    }
}

/// Shutdown ends the reads of Nova's databases at once, although the refresh state's sender
/// is still held elsewhere (the service's health report holds one): a `serve` with
/// `[nova_db]` took its whole `shutdown_grace_s` (30 s) to stop, so a SIGTERM was met with
/// a SIGKILL by a supervisor waiting less.
#[tokio::test]
async fn the_reads_of_nova_s_databases_end_when_the_service_shuts_down() {
    let sqlite = Databases::create(Engine::Sqlite, &[]).await;
    let settings = NovaDbSettings {
        enabled: true,
        api_database_url: SecretUrl(sqlite.url("absent")),
        refresh_interval_s: 0.05,
        timeout_s: 5.0,
        ..Default::default()
    };
    let reader =
        Arc::new(NovaDbReader::new(settings, Arc::new(ManualClock::new(0))).expect("settings"));
    let state = tokio::sync::watch::Sender::new(parasol::nova_db::RefreshState::default());
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(parasol::nova_db::run_nova_db(
        reader,
        Arc::new(parasol::table::HostTable::new()),
        Arc::new(Cloud::new()),
        state.clone(),
        shutdown.clone(),
    ));
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!running.is_finished(), "the reads stopped before shutdown");
    shutdown.cancel();
    tokio::time::timeout(std::time::Duration::from_secs(10), running)
        .await
        .expect("the reads still run 10 s after shutdown")
        .expect("the reads ended without a panic");
    drop(state);
}
