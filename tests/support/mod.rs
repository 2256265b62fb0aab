//! Shared test helpers: a fresh ledger per test, on a SQLite file or in its own database of
//! the running PostgreSQL (`PARASOL_TEST_PG_URL`, default `postgres://postgres@127.0.0.1:5432/test`).
#![allow(dead_code)]

use parasol::ledger::{HostRegistration, Ledger};
use sqlx::Connection;

/// Where a test's ledger lives; keeps the SQLite file's folder alive for the test.
pub struct TestDb {
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

pub fn pg_admin_url() -> String {
    std::env::var("PARASOL_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A fresh, empty SQLite file.
pub fn sqlite_db() -> TestDb {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    TestDb {
        url,
        _dir: Some(dir),
    }
}

/// A SQLite ledger at `url`, in a folder the test keeps (a mount of its own, say).
pub fn sqlite_at(url: &str) -> TestDb {
    TestDb {
        url: url.to_string(),
        _dir: None,
    }
}

/// A fresh database in the running PostgreSQL.
pub async fn postgres_db() -> TestDb {
    let admin = pg_admin_url();
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .expect("PostgreSQL must be running (`./test` starts it)");
    let name = format!("parasol_test_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("create database");
    let base = admin
        .rsplit_once('/')
        .map(|(b, _)| b.to_string())
        .unwrap_or(admin);
    TestDb {
        url: format!("{base}/{name}"),
        _dir: None,
    }
}

pub async fn db(engine: &str) -> TestDb {
    match engine {
        "sqlite" => sqlite_db(),
        _ => postgres_db().await,
    }
}

/// A migrated ledger on a fresh database of the given engine.
pub async fn ledger(engine: &str) -> (Ledger, TestDb) {
    let db = db(engine).await;
    let ledger = Ledger::open(&db.url, 8).await.expect("open");
    (ledger, db)
}

/// A host registration with the given capacity and ratios of 1.
pub fn registration(name: &str, vcpu: i64, memory_mb: i64, disk_gb: i64) -> HostRegistration {
    let uuid = format!("{:0>8}-0000-4000-8000-000000000000", name.len())
        .replace("00000000", &format!("{:0>8}", hex(name)));
    HostRegistration::simple(name, &uuid, vcpu, memory_mb, disk_gb)
}

fn hex(name: &str) -> String {
    let mut h: u32 = 2166136261;
    for b in name.bytes() {
        h = (h ^ b as u32).wrapping_mul(16777619);
    }
    format!("{h:08x}")
}

/// Declares one `#[tokio::test]` per engine running `$body(engine)`.
#[macro_export]
macro_rules! on_both_engines {
    ($name:ident, $body:path) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn on_sqlite() {
                $body("sqlite").await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn on_postgres() {
                $body("postgres").await
            }
        }
    };
}

/// The kind (`classic`, `quorum`, …) of each queue on the running RabbitMQ whose name contains
/// `part`, sorted by name (`rabbitmqctl list_queues`).
pub fn queue_types(part: &str) -> Vec<(String, String)> {
    let out = std::process::Command::new("rabbitmqctl")
        .args(["list_queues", "-q", "--no-table-headers", "name", "type"])
        .output()
        .expect("rabbitmqctl runs");
    let mut found: Vec<(String, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            Some((fields.next()?.to_string(), fields.next()?.to_string()))
        })
        .filter(|(name, _)| name.contains(part))
        .collect();
    found.sort();
    found
}

/// nova-compute's fanout `update_instance_info` from `host` for `instance`: the instance runs
/// there (`instance.host` names it), as a build's end, `finish_resize` and the periodic sync
/// say it.
pub fn update_instance_info(host: &str, instance: &str) -> serde_json::Value {
    serde_json::json!({"method": "update_instance_info",
        "_unique_id": uuid::Uuid::new_v4().simple().to_string(),
        "args": {"host_name": host, "instance_info": {
            "nova_object.name": "InstanceList", "nova_object.namespace": "nova",
            "nova_object.version": "2.6", "nova_object.data": {"objects": [{
                "nova_object.name": "Instance", "nova_object.namespace": "nova",
                "nova_object.version": "2.8",
                "nova_object.data": {"host": host, "node": host, "uuid": instance},
                "nova_object.changes": ["uuid", "host", "node"]}]},
            "nova_object.changes": ["objects"]}},
        "namespace": null, "version": "4.2"})
}
