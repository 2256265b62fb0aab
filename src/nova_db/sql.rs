//! Read-only connections to Nova's databases (MySQL/MariaDB, PostgreSQL, SQLite) and the
//! queries Parasol makes: the `cell_mappings` and the host aggregates (`aggregates`,
//! `aggregate_hosts`, `aggregate_metadata`) of the API database, and the
//! `services` and `compute_nodes` of a cell database, each filtered as Nova's own
//! `*_get_all*` functions filter them (`deleted = 0`; binary `nova-compute`).

use super::url::{DbUrl, Dialect};
use super::NovaDbError;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use sqlx::types::chrono::NaiveDateTime;
use sqlx::Executor;
use std::str::FromStr;
use std::time::Duration;

/// A pool on one database, of whichever engine its URL names.
#[derive(Debug)]
pub(super) enum Pool {
    MySql(MySqlPool),
    Postgres(PgPool),
    Sqlite(SqlitePool),
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct CellMappingRow {
    pub uuid: String,
    pub name: Option<String>,
    pub database_connection: Option<String>,
    pub disabled: Option<bool>,
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct ServiceRow {
    pub id: i32,
    pub uuid: Option<String>,
    pub host: Option<String>,
    pub disabled: Option<bool>,
    pub disabled_reason: Option<String>,
    pub forced_down: Option<bool>,
    pub last_seen_up: Option<NaiveDateTime>,
    pub created_at: Option<NaiveDateTime>,
    pub updated_at: Option<NaiveDateTime>,
    pub version: Option<i32>,
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct NodeRow {
    pub id: i32,
    pub uuid: Option<String>,
    pub host: Option<String>,
    pub hypervisor_hostname: Option<String>,
    pub hypervisor_type: String,
    pub hypervisor_version: i32,
    pub supported_instances: Option<String>,
    pub cpu_info: Option<String>,
    pub numa_topology: Option<String>,
    pub pci_stats: Option<String>,
    /// `host_ip` as text (PostgreSQL's `inet` with its prefix length, `10.0.0.1/32`).
    pub host_ip: Option<String>,
    /// `stats`: the compute node's JSON counters (`failed_builds`, …).
    pub stats: Option<String>,
    /// `metrics`: the node's monitor metrics as the resource tracker stores them (a JSON list
    /// of `MonitorMetric.to_dict()`).
    pub metrics: Option<String>,
    pub mapped: Option<i32>,
    pub updated_at: Option<NaiveDateTime>,
}

/// A row of the API database's `aggregates` (Nova's API tables are not soft-deleted).
#[derive(Debug, sqlx::FromRow)]
pub(super) struct AggregateRow {
    pub id: i32,
    pub uuid: Option<String>,
    pub name: Option<String>,
}

/// A row of `aggregate_hosts`: a service host in an aggregate.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct AggregateHostRow {
    pub aggregate_id: i32,
    pub host: Option<String>,
}

/// A row of `aggregate_metadata`.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct AggregateMetadataRow {
    pub aggregate_id: i32,
    pub key: String,
    pub value: String,
}

const AGGREGATES: &str = "SELECT a.id, a.uuid, a.name FROM aggregates a ORDER BY a.id";

const AGGREGATE_HOSTS: &str = "SELECT h.aggregate_id, h.host FROM aggregate_hosts h ORDER BY h.id";

// `key` is reserved in MySQL; qualified by its table it needs no quoting in any engine.
const AGGREGATE_METADATA: &str =
    "SELECT m.aggregate_id, m.key, m.value FROM aggregate_metadata m ORDER BY m.id";

const CELL_MAPPINGS: &str =
    "SELECT uuid, name, database_connection, disabled FROM cell_mappings ORDER BY id";

// `binary` is reserved in MySQL; qualified by its table it needs no quoting in any engine.
const SERVICES: &str = "SELECT s.id, s.uuid, s.host, s.disabled, s.disabled_reason, \
     s.forced_down, s.last_seen_up, s.created_at, s.updated_at, s.version \
     FROM services s WHERE s.binary = 'nova-compute' AND s.deleted = 0 ORDER BY s.id";

/// `compute_nodes`, with `host_ip` as the column (MySQL, where Nova stores a string).
const COMPUTE_NODES: &str = "SELECT cn.id, cn.uuid, cn.host, cn.hypervisor_hostname, \
     cn.hypervisor_type, cn.hypervisor_version, cn.supported_instances, cn.cpu_info, \
     cn.numa_topology, cn.pci_stats, cn.host_ip, cn.stats, cn.metrics, cn.mapped, \
     cn.updated_at \
     FROM compute_nodes cn WHERE cn.deleted = 0 ORDER BY cn.id";

/// The same with `host_ip` cast to text: PostgreSQL's column is `inet` (SQLite's a string,
/// which the cast leaves alone); MySQL has no `CAST(… AS TEXT)`.
const COMPUTE_NODES_TEXT_IP: &str = "SELECT cn.id, cn.uuid, cn.host, cn.hypervisor_hostname, \
     cn.hypervisor_type, cn.hypervisor_version, cn.supported_instances, cn.cpu_info, \
     cn.numa_topology, cn.pci_stats, CAST(cn.host_ip AS TEXT) AS host_ip, cn.stats, cn.metrics, \
     cn.mapped, cn.updated_at FROM compute_nodes cn WHERE cn.deleted = 0 ORDER BY cn.id";

/// Runs one query on whichever pool this is, decoding rows of type `$row`.
macro_rules! fetch_all {
    ($pool:expr, $row:ty, $sql:expr) => {
        match $pool {
            Pool::MySql(p) => sqlx::query_as::<_, $row>($sql).fetch_all(p).await,
            Pool::Postgres(p) => sqlx::query_as::<_, $row>($sql).fetch_all(p).await,
            Pool::Sqlite(p) => sqlx::query_as::<_, $row>($sql).fetch_all(p).await,
        }
    };
}

impl Pool {
    /// Opens a pool whose sessions are read-only, with one connection made now so that a
    /// missing or unreachable database is reported here.
    pub async fn connect(url: &DbUrl, timeout: Duration) -> Result<Pool, NovaDbError> {
        let failed = |e: sqlx::Error| NovaDbError::Connect {
            url: url.redacted(),
            message: url.scrub(&e.to_string()),
        };
        let pool = match url.dialect() {
            Dialect::MySql => {
                let options = MySqlConnectOptions::from_str(url.sqlx_url()).map_err(failed)?;
                let pool = MySqlPoolOptions::new()
                    .max_connections(2)
                    .acquire_timeout(timeout)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            conn.execute("SET SESSION TRANSACTION READ ONLY").await?;
                            Ok(())
                        })
                    });
                Pool::MySql(pool.connect_with(options).await.map_err(failed)?)
            }
            Dialect::Postgres => {
                let options = PgConnectOptions::from_str(url.sqlx_url()).map_err(failed)?;
                let pool = PgPoolOptions::new()
                    .max_connections(2)
                    .acquire_timeout(timeout)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
                                .await?;
                            Ok(())
                        })
                    });
                Pool::Postgres(pool.connect_with(options).await.map_err(failed)?)
            }
            Dialect::Sqlite => {
                let options = SqliteConnectOptions::from_str(url.sqlx_url())
                    .map_err(failed)?
                    .read_only(true)
                    .create_if_missing(false);
                let pool = SqlitePoolOptions::new()
                    .max_connections(2)
                    .acquire_timeout(timeout);
                Pool::Sqlite(pool.connect_with(options).await.map_err(failed)?)
            }
        };
        Ok(pool)
    }

    pub async fn cell_mappings(&self) -> Result<Vec<CellMappingRow>, sqlx::Error> {
        fetch_all!(self, CellMappingRow, CELL_MAPPINGS)
    }

    /// The API database's aggregates, their hosts and their metadata, read in one
    /// transaction (Nova's `AggregateList.get_all` joins them in one query). On MySQL and
    /// SQLite the three reads see one state; on PostgreSQL (read committed) a change between
    /// them may show half, and is then corrected by nova-api's cast of that change.
    pub async fn aggregates(
        &self,
    ) -> Result<
        (
            Vec<AggregateRow>,
            Vec<AggregateHostRow>,
            Vec<AggregateMetadataRow>,
        ),
        sqlx::Error,
    > {
        macro_rules! in_one_transaction {
            ($pool:expr) => {{
                let mut tx = $pool.begin().await?;
                let a = sqlx::query_as::<_, AggregateRow>(AGGREGATES)
                    .fetch_all(&mut *tx)
                    .await?;
                let h = sqlx::query_as::<_, AggregateHostRow>(AGGREGATE_HOSTS)
                    .fetch_all(&mut *tx)
                    .await?;
                let m = sqlx::query_as::<_, AggregateMetadataRow>(AGGREGATE_METADATA)
                    .fetch_all(&mut *tx)
                    .await?;
                tx.rollback().await?;
                Ok((a, h, m))
            }};
        }
        match self {
            Pool::MySql(p) => in_one_transaction!(p),
            Pool::Postgres(p) => in_one_transaction!(p),
            Pool::Sqlite(p) => in_one_transaction!(p),
        }
    }

    pub async fn services(&self) -> Result<Vec<ServiceRow>, sqlx::Error> {
        fetch_all!(self, ServiceRow, SERVICES)
    }

    pub async fn compute_nodes(&self) -> Result<Vec<NodeRow>, sqlx::Error> {
        match self {
            Pool::MySql(p) => {
                sqlx::query_as::<_, NodeRow>(COMPUTE_NODES)
                    .fetch_all(p)
                    .await
            }
            Pool::Postgres(p) => {
                sqlx::query_as::<_, NodeRow>(COMPUTE_NODES_TEXT_IP)
                    .fetch_all(p)
                    .await
            }
            Pool::Sqlite(p) => {
                sqlx::query_as::<_, NodeRow>(COMPUTE_NODES_TEXT_IP)
                    .fetch_all(p)
                    .await
            }
        }
    }

    pub async fn close(&self) {
        match self {
            Pool::MySql(p) => p.close().await,
            Pool::Postgres(p) => p.close().await,
            Pool::Sqlite(p) => p.close().await,
        }
    }
}

/// Nova's naive UTC timestamps as milliseconds since the epoch.
pub(super) fn epoch_ms(t: Option<NaiveDateTime>) -> Option<i64> {
    t.map(|t| t.and_utc().timestamp_millis())
}

#[cfg(test)]
mod tests;
