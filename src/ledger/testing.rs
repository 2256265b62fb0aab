//! What unit tests of the layers above need of the ledger's insides (the writer held, rows
//! read as text, a refusal planted), so that no SQL and none of the ledger's fields are used
//! outside it. Tests only.

pub(crate) use super::hot::tests::{hold_writer, Panics};
use super::{Ledger, Pools};
use sqlx::SqliteConnection;

impl Ledger {
    /// SQLite's writing connection, held: writes queue behind it until the guard drops.
    pub(crate) async fn hold_writer(&self) -> tokio::sync::MutexGuard<'_, SqliteConnection> {
        match &self.pools {
            Pools::Sqlite { write, .. } => write.lock().await.unwrap(),
            Pools::Postgres(_) => panic!("a SQLite ledger"),
        }
    }

    /// SQLite's hot writer.
    pub(crate) fn hot_writer(&self) -> super::hot::HotWriter {
        self.hot.clone().expect("a SQLite ledger")
    }

    /// Hosts, inventories, allocations and message ids as text lines, in a fixed order.
    pub(crate) async fn dump_sqlite(&self) -> Vec<String> {
        let Pools::Sqlite { read, .. } = &self.pools else {
            panic!("a SQLite ledger")
        };
        let mut lines = Vec::new();
        for sql in [
            "SELECT 'host ' || id || ' ' || host || ' ' || node || ' ' || uuid || ' ' || \
             availability_zone || ' ' || up || ' ' || disabled || ' ' || forced_down || ' ' || \
             last_seen_ms || ' ' || traits || ' ' || aggregates FROM hosts ORDER BY id",
            "SELECT 'inventory ' || host_id || ' ' || resource_class || ' ' || total || ' ' || \
             reserved || ' ' || min_unit || ' ' || max_unit || ' ' || step_size || ' ' || \
             allocation_ratio || ' ' || usable || ' ' || used FROM inventories \
             ORDER BY host_id, resource_class",
            "SELECT 'allocation ' || instance_uuid || ' ' || host_id || ' ' || resources \
             FROM allocations ORDER BY instance_uuid",
            "SELECT 'message ' || sent_at || ' ' || message_id || ' ' || processed_ms \
             FROM processed_messages ORDER BY message_id, sent_at",
        ] {
            let rows: Vec<String> = sqlx::query_scalar(sql).fetch_all(read).await.unwrap();
            lines.extend(rows);
        }
        lines
    }

    /// The VCPU row of host `name` in the ledger file: (total, usable).
    pub(crate) async fn vcpu_row(&self, name: &str) -> (i64, i64) {
        let Pools::Sqlite { read, .. } = &self.pools else {
            panic!("a SQLite ledger")
        };
        sqlx::query_as(
            "SELECT total, usable FROM inventories JOIN hosts ON hosts.id = host_id \
             WHERE hosts.host = $1 AND resource_class = 'VCPU'",
        )
        .bind(name)
        .fetch_one(read)
        .await
        .unwrap()
    }

    /// Has the database refuse every new host named `host` (a trigger).
    pub(crate) async fn refuse_new_host(&self, host: &str) {
        let mut conn = self.hold_writer().await;
        sqlx::query(&format!(
            "CREATE TRIGGER refuse BEFORE INSERT ON hosts WHEN NEW.host = '{host}' \
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
        ))
        .execute(&mut *conn)
        .await
        .unwrap();
    }
}

/// Sets every VCPU row of the SQLite ledger `file` to `total` through a connection of its own
/// (another process, `sqlite3` by hand).
pub(crate) fn set_vcpu_elsewhere(file: &std::path::Path, total: i64) {
    let other = rusqlite::Connection::open(file).unwrap();
    other
        .execute(
            "UPDATE inventories SET total = ?1, usable = ?1 WHERE resource_class = 'VCPU'",
            [total],
        )
        .unwrap();
}
