//! Registering hosts and reading their state: every row read is one "query" in DESIGN's terms.

use super::{read_pool, write_pool, Ledger, LedgerError};
use crate::domain::{HostId, HostState, Inventory, Resources};
use sqlx::Row;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// A host's identity, state and inventory as a host-state event or Placement reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct HostRegistration {
    pub host: String,
    pub node: String,
    pub uuid: String,
    pub availability_zone: String,
    pub up: bool,
    pub disabled: bool,
    /// VCPU, MEMORY_MB, DISK_GB.
    pub inventory: [Inventory; 3],
}

impl HostRegistration {
    /// Refuses negative totals or reserved amounts and non-finite or negative ratios.
    pub fn validate(&self) -> Result<(), LedgerError> {
        if self.host.is_empty() || self.node.is_empty() || self.uuid.is_empty() {
            return Err(LedgerError::Invalid(
                "host, node and compute_node_uuid must not be empty".into(),
            ));
        }
        for (class, inv) in crate::domain::CLASSES.iter().zip(self.inventory.iter()) {
            if inv.total < 0 || inv.reserved < 0 {
                return Err(LedgerError::Invalid(format!(
                    "inventory {class}: total and reserved must not be negative"
                )));
            }
            if !inv.allocation_ratio.is_finite() || inv.allocation_ratio < 0.0 {
                return Err(LedgerError::Invalid(format!(
                    "inventory {class}: allocation_ratio must be a non-negative number"
                )));
            }
        }
        Ok(())
    }
}

pub(crate) const HOST_COLUMNS: &str = "id, host, node, uuid, availability_zone, up, disabled, \
    forced_down, last_seen_ms, vcpu_usable, memory_mb_usable, disk_gb_usable, vcpu_used, \
    memory_mb_used, disk_gb_used, num_instances, num_io_ops";

pub(crate) const UPSERT_HOST: &str = "INSERT INTO hosts (host, node, uuid, availability_zone, up, \
    disabled, last_seen_ms, vcpu_total, vcpu_reserved, vcpu_ratio, vcpu_usable, memory_mb_total, \
    memory_mb_reserved, memory_mb_ratio, memory_mb_usable, disk_gb_total, disk_gb_reserved, \
    disk_gb_ratio, disk_gb_usable) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, \
    $14, $15, $16, $17, $18, $19) ON CONFLICT (uuid) DO UPDATE SET \
    profile_rev = CASE WHEN hosts.host = excluded.host AND hosts.node = excluded.node \
    AND hosts.availability_zone = excluded.availability_zone \
    AND hosts.vcpu_usable = excluded.vcpu_usable \
    AND hosts.memory_mb_usable = excluded.memory_mb_usable \
    AND hosts.disk_gb_usable = excluded.disk_gb_usable THEN hosts.profile_rev \
    ELSE hosts.profile_rev + 1 END, host = excluded.host, \
    node = excluded.node, availability_zone = excluded.availability_zone, up = excluded.up, \
    disabled = excluded.disabled, last_seen_ms = excluded.last_seen_ms, \
    vcpu_total = excluded.vcpu_total, vcpu_reserved = excluded.vcpu_reserved, \
    vcpu_ratio = excluded.vcpu_ratio, vcpu_usable = excluded.vcpu_usable, \
    memory_mb_total = excluded.memory_mb_total, memory_mb_reserved = excluded.memory_mb_reserved, \
    memory_mb_ratio = excluded.memory_mb_ratio, memory_mb_usable = excluded.memory_mb_usable, \
    disk_gb_total = excluded.disk_gb_total, disk_gb_reserved = excluded.disk_gb_reserved, \
    disk_gb_ratio = excluded.disk_gb_ratio, disk_gb_usable = excluded.disk_gb_usable";

/// Binds a [`HostRegistration`] to [`UPSERT_HOST`] and executes it on `$exec`.
macro_rules! upsert_host {
    ($exec:expr, $reg:expr, $now_ms:expr) => {{
        let reg: &$crate::ledger::HostRegistration = $reg;
        let [v, m, d] = reg.inventory;
        sqlx::query($crate::ledger::hosts::UPSERT_HOST)
            .bind(&reg.host)
            .bind(&reg.node)
            .bind(&reg.uuid)
            .bind(&reg.availability_zone)
            .bind(reg.up)
            .bind(reg.disabled)
            .bind($now_ms)
            .bind(v.total)
            .bind(v.reserved)
            .bind(v.allocation_ratio)
            .bind(v.usable())
            .bind(m.total)
            .bind(m.reserved)
            .bind(m.allocation_ratio)
            .bind(m.usable())
            .bind(d.total)
            .bind(d.reserved)
            .bind(d.allocation_ratio)
            .bind(d.usable())
            .execute($exec)
            .await
    }};
}
pub(crate) use upsert_host;

/// Decodes a row selected with [`HOST_COLUMNS`].
macro_rules! host_from_row {
    ($row:expr) => {{
        let r = $row;
        HostState {
            id: HostId(r.try_get(0)?),
            host: Arc::from(r.try_get::<String, _>(1)?),
            node: Arc::from(r.try_get::<String, _>(2)?),
            uuid: Arc::from(r.try_get::<String, _>(3)?),
            availability_zone: Arc::from(r.try_get::<String, _>(4)?),
            up: r.try_get(5)?,
            disabled: r.try_get(6)?,
            forced_down: r.try_get(7)?,
            last_seen_ms: r.try_get(8)?,
            usable: Resources([r.try_get(9)?, r.try_get(10)?, r.try_get(11)?]),
            used: Resources([r.try_get(12)?, r.try_get(13)?, r.try_get(14)?]),
            num_instances: r.try_get(15)?,
            num_io_ops: r.try_get(16)?,
        }
    }};
}

/// `packed_columns!()`: the columns SQLite packs per host on the read path, what changes with
/// every claim and heartbeat. The rest (names and usable capacity) [`Profiles`] keeps between reads, checked
/// against `profile_rev` on every read.
macro_rules! packed_columns {
    () => {
        "h.id, h.profile_rev, h.up + 2 * h.disabled + 4 * h.forced_down, h.last_seen_ms, \
         h.vcpu_used, h.memory_mb_used, h.disk_gb_used, h.num_instances, h.num_io_ops"
    };
}

/// Every host, packed (the `filter` read and the cache refresh).
const READ_ALL_PACKED: &str = concat!(
    "SELECT json_group_array(json_array(",
    packed_columns!(),
    ")) FROM hosts h"
);

/// The hosts of a JSON list of ids, packed (an APSR sample).
const READ_SOME_PACKED: &str = concat!(
    "SELECT json_group_array(json_array(",
    packed_columns!(),
    ")) FROM json_each($1) j JOIN hosts h ON h.id = j.value"
);

/// One host row of `packed_columns!()`, as SQLite's `json_array` packs it.
type PackedRow = [i64; 9];

/// A sample waiting for SQLite's writer: the ids, and where its rows go.
#[derive(Debug)]
pub(crate) struct PendingSample {
    ids: Vec<i64>,
    reply: tokio::sync::oneshot::Sender<Result<Vec<PackedRow>, LedgerError>>,
}

/// Reads every queued sample with one statement over the union of their ids and hands each
/// its own rows (in its own order, repeats kept, hosts that are gone left out).
async fn read_samples(writer: super::Writer) {
    let (queued, result) = {
        let mut conn = writer.lock_owned().await;
        let queued = writer.samples.take();
        let mut all: Vec<i64> = queued.iter().flat_map(|s| s.ids.iter().copied()).collect();
        all.sort_unstable();
        all.dedup();
        let result = sqlx::query_scalar::<_, String>(READ_SOME_PACKED)
            .bind(super::json_list(all))
            .fetch_one(&mut *conn)
            .await;
        (queued, result)
    };
    let rows = result.map_err(LedgerError::from).and_then(|packed| {
        serde_json::from_str::<Vec<PackedRow>>(&packed)
            .map_err(|e| LedgerError::Invalid(format!("host rows: {e}")))
    });
    match rows {
        Ok(mut rows) => {
            rows.sort_unstable_by_key(|r| r[0]);
            for sample in queued {
                let find = |id: &i64| rows.binary_search_by_key(id, |r| r[0]).ok();
                let mine = sample
                    .ids
                    .iter()
                    .filter_map(find)
                    .map(|i| rows[i])
                    .collect();
                let _ = sample.reply.send(Ok(mine));
            }
        }
        Err(e) if queued.len() == 1 => {
            if let Some(sample) = queued.into_iter().next() {
                let _ = sample.reply.send(Err(e));
            }
        }
        Err(e) => {
            let message = e.to_string();
            for sample in queued {
                let _ = sample
                    .reply
                    .send(Err(LedgerError::Invalid(message.clone())));
            }
        }
    }
}

/// What a host's row holds beyond `packed_columns!()`, at one `profile_rev`.
#[derive(Clone, Debug)]
struct Profile {
    rev: i64,
    host: Arc<str>,
    node: Arc<str>,
    uuid: Arc<str>,
    availability_zone: Arc<str>,
    usable: Resources,
}

/// One row of [`Profiles::FETCH`].
type ProfileRow = (i64, i64, String, String, String, String, i64, i64, i64);

/// The profiles of the hosts this process has read, by host id. A profile changes only when
/// its host re-registers under other names or with other inventory, which bumps its
/// `profile_rev`; a read that finds another rev than the one kept here fetches the profile
/// again, so a kept profile is never stale.
#[derive(Clone, Debug, Default)]
pub(crate) struct Profiles(Arc<RwLock<HashMap<i64, Profile>>>);

impl Profiles {
    const FETCH: &'static str = "SELECT id, profile_rev, host, node, uuid, availability_zone, \
        vcpu_usable, memory_mb_usable, disk_gb_usable FROM hosts \
        WHERE id IN (SELECT value FROM json_each($1))";

    /// Ids of the rows whose profile is not kept at their current rev.
    fn missing(&self, rows: &[PackedRow]) -> Vec<i64> {
        let kept = self.0.read().unwrap_or_else(|e| e.into_inner());
        rows.iter()
            .filter(|r| kept.get(&r[0]).is_none_or(|p| p.rev != r[1]))
            .map(|r| r[0])
            .collect()
    }

    fn keep(&self, fetched: Vec<ProfileRow>) {
        let mut kept = self.0.write().unwrap_or_else(|e| e.into_inner());
        for (id, rev, host, node, uuid, az, v, m, d) in fetched {
            let profile = Profile {
                rev,
                host: Arc::from(host),
                node: Arc::from(node),
                uuid: Arc::from(uuid),
                availability_zone: Arc::from(az),
                usable: Resources([v, m, d]),
            };
            kept.insert(id, profile);
        }
    }

    /// Joins packed rows with their profiles, in id order; every row's profile must be kept.
    fn states(&self, mut rows: Vec<PackedRow>) -> Result<Vec<HostState>, LedgerError> {
        rows.sort_unstable_by_key(|r| r[0]);
        let kept = self.0.read().unwrap_or_else(|e| e.into_inner());
        rows.into_iter()
            .map(|r| {
                let p = kept
                    .get(&r[0])
                    .ok_or_else(|| LedgerError::Invalid(format!("host {} vanished", r[0])))?;
                Ok(HostState {
                    id: HostId(r[0]),
                    host: p.host.clone(),
                    node: p.node.clone(),
                    uuid: p.uuid.clone(),
                    availability_zone: p.availability_zone.clone(),
                    up: r[2] & 1 != 0,
                    disabled: r[2] & 2 != 0,
                    forced_down: r[2] & 4 != 0,
                    last_seen_ms: r[3],
                    usable: p.usable,
                    used: Resources([r[4], r[5], r[6]]),
                    num_instances: r[7],
                    num_io_ops: r[8],
                })
            })
            .collect()
    }
}

/// Decodes every row of `$rows` with [`host_from_row!`].
macro_rules! hosts_from_rows {
    ($rows:expr) => {{
        let mut hosts = Vec::with_capacity($rows.len());
        for row in &$rows {
            hosts.push(host_from_row!(row));
        }
        hosts
    }};
}

impl Ledger {
    /// Registers a host or updates its inventory and state; returns its id.
    pub async fn register_host(
        &self,
        reg: &HostRegistration,
        now_ms: i64,
    ) -> Result<HostId, LedgerError> {
        reg.validate()?;
        write_pool!(self, pool => { upsert_host!(pool, reg, now_ms)?; });
        self.host_id_by_uuid(&reg.uuid)
            .await?
            .ok_or_else(|| LedgerError::UnknownHost(reg.uuid.clone()))
    }

    /// Every host's current state, in id order (n queries).
    pub async fn read_hosts(&self) -> Result<Vec<HostState>, LedgerError> {
        if let super::Pools::Sqlite { read, .. } = &self.pools {
            let packed: String = sqlx::query_scalar(READ_ALL_PACKED).fetch_one(read).await?;
            return self.unpack(read, &packed).await;
        }
        let sql = format!("SELECT {HOST_COLUMNS} FROM hosts ORDER BY id");
        read_pool!(self, pool => {
            let rows = sqlx::query(&sql).fetch_all(pool).await?;
            Ok(hosts_from_rows!(rows))
        })
    }

    /// The current state of the given hosts (one query per id), in id order.
    pub async fn read_hosts_by_id(&self, ids: &[HostId]) -> Result<Vec<HostState>, LedgerError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        // One statement text whatever the sample, so it is prepared once per connection.
        match &self.pools {
            // A sample is read on the writer's connection, in turn with the writes: every
            // commit by another connection empties a reader's page cache (so a read after each
            // claim fetched every page again, ~3-6× the CPU), while the writer's own commits
            // leave its cache valid. Under load that CPU mattered more than the wait: apsr at
            // 10,000 hosts in openstack-bench made 1,395–1,488 decisions/s this way against
            // 1,283–1,356 with samples sent to the read pool whenever the writer was busy.
            // Samples that queue meanwhile are read together, as claims are committed
            // together, by a spawned (so never abandoned) task.
            super::Pools::Sqlite { read, write } => {
                let (reply, answer) = tokio::sync::oneshot::channel();
                let ids = ids.iter().map(|id| id.0).collect();
                if write.samples.push(PendingSample { ids, reply }) {
                    tokio::spawn(read_samples(write.clone()));
                }
                let rows = answer.await.map_err(|_| {
                    LedgerError::Invalid("the sample's reader task ended without an answer".into())
                })??;
                self.unpack_rows(read, rows).await
            }
            super::Pools::Postgres(pool) => {
                let sql =
                    format!("SELECT {HOST_COLUMNS} FROM hosts WHERE id = ANY($1) ORDER BY id");
                let list: Vec<i64> = ids.iter().map(|id| id.0).collect();
                let rows = sqlx::query(&sql).bind(list).fetch_all(pool).await?;
                Ok(hosts_from_rows!(rows))
            }
        }
    }

    /// Turns SQLite's packed rows into host states in id order, fetching the profiles of hosts
    /// that are new to this process or re-registered since it last read them.
    ///
    /// sqlx's SQLite driver hands rows over one at a time through its worker thread (~10 µs
    /// each); one packed value of the integers that change, joined here with the profiles
    /// kept in memory, costs SQLite well under 1 µs a host.
    async fn unpack(
        &self,
        read: &sqlx::SqlitePool,
        packed: &str,
    ) -> Result<Vec<HostState>, LedgerError> {
        let rows: Vec<PackedRow> = serde_json::from_str(packed)
            .map_err(|e| LedgerError::Invalid(format!("host rows: {e}")))?;
        self.unpack_rows(read, rows).await
    }

    /// [`Self::unpack`] of rows already decoded.
    async fn unpack_rows(
        &self,
        read: &sqlx::SqlitePool,
        rows: Vec<PackedRow>,
    ) -> Result<Vec<HostState>, LedgerError> {
        let missing = self.profiles.missing(&rows);
        if !missing.is_empty() {
            let fetched = sqlx::query_as(Profiles::FETCH)
                .bind(super::json_list(missing))
                .fetch_all(read)
                .await?;
            self.profiles.keep(fetched);
        }
        self.profiles.states(rows)
    }

    /// The ids of every host, in id order (the population APSR samples from).
    pub async fn host_ids(&self) -> Result<Vec<HostId>, LedgerError> {
        read_pool!(self, pool => {
            let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM hosts ORDER BY id")
                .fetch_all(pool)
                .await?;
            Ok(ids.into_iter().map(HostId).collect())
        })
    }

    pub async fn host_id_by_uuid(&self, uuid: &str) -> Result<Option<HostId>, LedgerError> {
        read_pool!(self, pool => {
            let id: Option<i64> = sqlx::query_scalar("SELECT id FROM hosts WHERE uuid = $1")
                .bind(uuid)
                .fetch_optional(pool)
                .await?;
            Ok(id.map(HostId))
        })
    }

    /// The id of the host with this service host name (and node, when given).
    pub async fn host_id_by_name(
        &self,
        host: &str,
        node: Option<&str>,
    ) -> Result<Option<HostId>, LedgerError> {
        read_pool!(self, pool => {
            let id: Option<i64> = sqlx::query_scalar(
                "SELECT id FROM hosts WHERE host = $1 AND (CAST($2 AS TEXT) IS NULL OR node = $2) ORDER BY id LIMIT 1",
            )
            .bind(host)
            .bind(node)
            .fetch_optional(pool)
            .await?;
            Ok(id.map(HostId))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Inventory;

    fn registration(name: &str) -> HostRegistration {
        let inv = |total| Inventory {
            total,
            reserved: 0,
            allocation_ratio: 1.0,
        };
        HostRegistration {
            host: name.into(),
            node: name.into(),
            uuid: format!("uuid-{name}"),
            availability_zone: "nova".into(),
            up: true,
            disabled: false,
            inventory: [inv(8), inv(8192), inv(80)],
        }
    }

    /// A migrated ledger on a fresh SQLite file.
    async fn sqlite_ledger() -> (Ledger, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("l.db").display());
        let ledger = Ledger::connect(&url, 2).await.unwrap();
        ledger.migrate().await.unwrap();
        (ledger, dir)
    }

    /// The SQLite ledger's writer.
    fn writer(ledger: &Ledger) -> &super::super::Writer {
        match &ledger.pools {
            super::super::Pools::Sqlite { write, .. } => write,
            super::super::Pools::Postgres(_) => unreachable!("a SQLite ledger"),
        }
    }

    #[tokio::test]
    async fn samples_queued_behind_the_writer_are_read_together_each_with_its_own_hosts() {
        let (ledger, _dir) = sqlite_ledger().await;
        let mut ids = Vec::new();
        for name in ["a", "b", "c", "d"] {
            ids.push(ledger.register_host(&registration(name), 1).await.unwrap());
        }
        let gone = HostId(ids[3].0 + 100);
        let write = writer(&ledger);
        let wanted = [
            vec![ids[2], ids[0]],
            vec![ids[1], ids[1], gone],
            vec![ids[3], ids[0], ids[1]],
        ];
        let held = write.lock().await;
        let mut reads = Vec::new();
        for sample in wanted.clone() {
            let ledger = ledger.clone();
            reads.push(tokio::spawn(async move {
                ledger.read_hosts_by_id(&sample).await
            }));
        }
        while write.samples.len() < wanted.len() {
            tokio::task::yield_now().await;
        }
        drop(held);
        let all = ledger.read_hosts().await.unwrap();
        for (read, sample) in reads.into_iter().zip(&wanted) {
            let got: Vec<HostId> = read.await.unwrap().unwrap().iter().map(|h| h.id).collect();
            // In id order, repeats kept, a host that does not exist left out.
            let mut want: Vec<HostId> = sample.iter().copied().filter(|id| *id != gone).collect();
            want.sort();
            assert_eq!(got, want);
        }
        assert_eq!(write.samples.len(), 0);
        assert_eq!(ledger.read_hosts_by_id(&ids).await.unwrap(), all);
    }

    #[tokio::test]
    async fn a_sample_is_read_on_the_writers_connection_in_turn_with_the_writes() {
        let (ledger, _dir) = sqlite_ledger().await;
        let a = ledger.register_host(&registration("a"), 1).await.unwrap();
        let b = ledger.register_host(&registration("b"), 1).await.unwrap();
        let write = writer(&ledger);
        // While someone holds the writer (a notification batch, say) the sample waits its turn.
        let held = write.lock().await;
        let ids = [b, a];
        let mut read = Box::pin(ledger.read_hosts_by_id(&ids));
        let waited = tokio::time::timeout(std::time::Duration::from_millis(200), &mut read).await;
        assert!(waited.is_err(), "the sample did not wait for the writer");
        drop(held);
        let hosts = read.await.unwrap();
        let names: Vec<&str> = hosts.iter().map(|h| &*h.host).collect();
        assert_eq!(names, ["a", "b"], "in id order");
        // The same answer as a full read from the pool.
        assert_eq!(ledger.read_hosts().await.unwrap(), hosts);
    }
}
