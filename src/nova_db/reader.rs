//! The reader: finds the cells (from `cell_mappings` or the settings), reads every enabled
//! cell at once as Nova's `scatter_gather_cells` does, and joins each node to its service
//! by host as `HostManager._get_host_states` does.

use super::records::{
    self, CellMapping, CellSnapshot, ComputeNodeRecord, RejectedNode, ServiceRecord,
    SkippedAggregate,
};
use super::settings::{NovaDbSettings, CELL0_UUID};
use super::snapshot::{CellFailure, NovaDbSnapshot};
use super::sql::{epoch_ms, NodeRow, Pool, ServiceRow};
use super::template::format_db_url;
use super::url::DbUrl;
use super::NovaDbError;
use crate::clock::SharedClock;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// Reads Nova's cell databases; keeps one small read-only pool per database between reads.
#[derive(Debug)]
pub struct NovaDbReader {
    settings: NovaDbSettings,
    clock: SharedClock,
    /// Pools by sqlx URL (a `parking_lot` lock, never held across an await).
    pools: Mutex<HashMap<String, Arc<Pool>>>,
}

/// The aggregates of the API database, and those Parasol cannot use.
#[derive(Debug, Default)]
pub struct AggregatesRead {
    pub aggregates: Vec<crate::nova::Aggregate>,
    pub skipped: Vec<SkippedAggregate>,
}

/// The cells found, and those whose mapping cannot be used.
#[derive(Debug, Default)]
pub struct Discovery {
    pub cells: Vec<CellMapping>,
    pub failed: Vec<CellFailure>,
}

impl NovaDbReader {
    /// A reader for validated settings (the error names the key that is wrong).
    pub fn new(settings: NovaDbSettings, clock: SharedClock) -> Result<Self, NovaDbError> {
        settings
            .validate()
            .map_err(|(key, reason)| NovaDbError::Settings { key, reason })?;
        Ok(NovaDbReader {
            settings,
            clock,
            pools: Mutex::new(HashMap::new()),
        })
    }

    pub fn settings(&self) -> &NovaDbSettings {
        &self.settings
    }

    /// The clock reads are stamped with and the refresh loop sleeps on.
    pub fn clock(&self) -> SharedClock {
        self.clock.clone()
    }

    /// The cells: the configured list, else every row of `cell_mappings` but cell0.
    pub async fn discover_cells(&self) -> Result<Discovery, NovaDbError> {
        let mut found = Discovery::default();
        if !self.settings.cells.is_empty() {
            for cell in &self.settings.cells {
                found.cells.push(CellMapping {
                    uuid: Uuid::parse_str(&cell.uuid).map_err(|e| NovaDbError::Cell {
                        cell: cell.uuid.clone(),
                        reason: e.to_string(),
                    })?,
                    name: cell.name.clone(),
                    database: DbUrl::parse(&cell.database_url.0)?,
                    disabled: false,
                });
            }
            return Ok(found);
        }
        let api = DbUrl::parse(&self.settings.api_database_url.0)?;
        let rows = self
            .bounded(&api, async {
                let pool = self.pool(&api).await?;
                pool.cell_mappings()
                    .await
                    .map_err(query_error(&api, "cell_mappings"))
            })
            .await?;
        for row in rows {
            let identity = match &row.name {
                Some(name) if !name.is_empty() => format!("{}({name})", row.uuid),
                _ => row.uuid.clone(),
            };
            let fail = |reason: String| CellFailure {
                cell: identity.clone(),
                error: NovaDbError::Cell {
                    cell: identity.clone(),
                    reason,
                },
            };
            let uuid = match Uuid::parse_str(&row.uuid) {
                Ok(uuid) if uuid == CELL0_UUID => continue,
                Ok(uuid) => uuid,
                Err(e) => {
                    found.failed.push(fail(format!("uuid is not a uuid: {e}")));
                    continue;
                }
            };
            let stored = row.database_connection.unwrap_or_default();
            let database = format_db_url(&stored, &self.settings.database_url.0)
                .map_err(|reason| NovaDbError::Cell {
                    cell: identity.clone(),
                    reason,
                })
                .and_then(|url| DbUrl::parse(&url));
            match database {
                Ok(database) => found.cells.push(CellMapping {
                    uuid,
                    name: row.name.unwrap_or_default(),
                    database,
                    disabled: row.disabled.unwrap_or(false),
                }),
                Err(error) => found.failed.push(CellFailure {
                    cell: identity.clone(),
                    error,
                }),
            }
        }
        Ok(found)
    }

    /// Nova's host aggregates (uuid, hosts, metadata) from the API database, as
    /// nova-scheduler's `HostManager._init_aggregates` reads them at start
    /// (`AggregateList.get_all`); `None` without `api_database_url`.
    pub async fn read_aggregates(&self) -> Result<Option<AggregatesRead>, NovaDbError> {
        if self.settings.api_database_url.is_empty() {
            return Ok(None);
        }
        let api = DbUrl::parse(&self.settings.api_database_url.0)?;
        let (rows, hosts, metadata) = self
            .bounded(&api, async {
                let pool = self.pool(&api).await?;
                pool.aggregates()
                    .await
                    .map_err(query_error(&api, "aggregates"))
            })
            .await?;
        let (aggregates, skipped) = records::aggregates(rows, hosts, metadata);
        Ok(Some(AggregatesRead {
            aggregates,
            skipped,
        }))
    }

    /// Reads one cell: its `nova-compute` services and compute nodes.
    pub async fn read_cell(&self, cell: &CellMapping) -> Result<CellSnapshot, NovaDbError> {
        let url = &cell.database;
        let (services, nodes) = self
            .bounded(url, async {
                let pool = self.pool(url).await?;
                let services = pool
                    .services()
                    .await
                    .map_err(query_error(url, "services"))?;
                let nodes = pool
                    .compute_nodes()
                    .await
                    .map_err(query_error(url, "compute_nodes"))?;
                Ok((services, nodes))
            })
            .await?;
        Ok(assemble(cell.clone(), services, nodes))
    }

    /// Discovers the cells and reads every enabled one; a cell that fails is reported with
    /// its error while the others are read (Nova skips such a cell with a warning). Only an
    /// unreadable API database fails the whole read.
    pub async fn read(&self) -> Result<NovaDbSnapshot, NovaDbError> {
        let began_ms = self.clock.now_ms();
        let discovery = self.discover_cells().await?;
        let (disabled, enabled): (Vec<_>, Vec<_>) =
            discovery.cells.into_iter().partition(|c| c.disabled);
        let reads = enabled.iter().map(|cell| self.read_cell(cell));
        let outcomes = futures::future::join_all(reads).await;
        let mut cells = Vec::new();
        let mut failed = discovery.failed;
        for (cell, outcome) in enabled.iter().zip(outcomes) {
            match outcome {
                Ok(snapshot) => cells.push(snapshot),
                Err(error) => failed.push(CellFailure {
                    cell: cell.identity(),
                    error,
                }),
            }
        }
        self.forget_pools_except(&enabled);
        Ok(NovaDbSnapshot::new(
            (began_ms, self.clock.now_ms()),
            cells,
            failed,
            disabled,
        ))
    }

    /// Closes every pool (each read opens what it needs again).
    pub async fn close(&self) {
        let pools: Vec<_> = self.pools.lock().drain().map(|(_, p)| p).collect();
        for pool in pools {
            pool.close().await;
        }
    }

    async fn pool(&self, url: &DbUrl) -> Result<Arc<Pool>, NovaDbError> {
        if let Some(pool) = self.pools.lock().get(url.sqlx_url()) {
            return Ok(pool.clone());
        }
        // The pool's own connect budget ends before the read's bound (`bounded`), so a
        // database that refuses connections is reported as that (sqlx retries a refused
        // connect until its budget ends), not as a read that did not answer in time.
        let pool = Arc::new(Pool::connect(url, self.timeout().mul_f64(0.8)).await?);
        let mut pools = self.pools.lock();
        Ok(pools
            .entry(url.sqlx_url().to_string())
            .or_insert(pool)
            .clone())
    }

    fn forget_pools_except(&self, cells: &[CellMapping]) {
        let api = DbUrl::parse(&self.settings.api_database_url.0).ok();
        let keep: Vec<&str> = cells
            .iter()
            .map(|c| c.database.sqlx_url())
            .chain(api.as_ref().map(DbUrl::sqlx_url))
            .collect();
        self.pools
            .lock()
            .retain(|url, _| keep.contains(&url.as_str()));
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.settings.timeout_s)
    }

    /// `work` on `url`, abandoned after `[nova_db] timeout_s`.
    async fn bounded<T>(
        &self,
        url: &DbUrl,
        work: impl Future<Output = Result<T, NovaDbError>>,
    ) -> Result<T, NovaDbError> {
        tokio::time::timeout(self.timeout(), work)
            .await
            .map_err(|_| NovaDbError::Timeout {
                url: url.redacted(),
                after_s: self.settings.timeout_s,
            })?
    }
}

fn query_error<'a>(url: &'a DbUrl, what: &'static str) -> impl Fn(sqlx::Error) -> NovaDbError + 'a {
    move |e| NovaDbError::Query {
        url: url.redacted(),
        what,
        message: url.scrub(&e.to_string()),
    }
}

/// Joins nodes to their service by host; a node Nova's `HostManager` would skip (no
/// service on its host) or that Parasol cannot use is kept aside with the reason.
fn assemble(cell: CellMapping, services: Vec<ServiceRow>, nodes: Vec<NodeRow>) -> CellSnapshot {
    let services: Vec<Arc<ServiceRecord>> = services
        .into_iter()
        .filter_map(|s| {
            Some(Arc::new(ServiceRecord {
                id: i64::from(s.id),
                uuid: s.uuid,
                host: s.host?,
                disabled: s.disabled.unwrap_or(false),
                disabled_reason: s.disabled_reason,
                forced_down: s.forced_down.unwrap_or(false),
                last_seen_up_ms: epoch_ms(s.last_seen_up),
                created_at_ms: epoch_ms(s.created_at),
                updated_at_ms: epoch_ms(s.updated_at),
                version: s.version.map_or(0, i64::from),
            }))
        })
        .collect();
    let by_host: HashMap<&str, &Arc<ServiceRecord>> =
        services.iter().map(|s| (s.host.as_str(), s)).collect();
    let mut snapshot = CellSnapshot {
        cell,
        nodes: Vec::with_capacity(nodes.len()),
        services: Vec::new(),
        rejected: Vec::new(),
    };
    for row in nodes {
        let service = row
            .host
            .as_deref()
            .and_then(|h| by_host.get(h))
            .copied()
            .cloned();
        match node(&row, service) {
            Ok(node) => snapshot.nodes.push(node),
            Err(reason) => snapshot.rejected.push(RejectedNode {
                id: i64::from(row.id),
                node: row.hypervisor_hostname,
                host: row.host,
                reason,
            }),
        }
    }
    snapshot.services = services;
    snapshot
}

/// The node's `numa_topology`; one Parasol cannot read counts as none (a request with a NUMA
/// topology passes no such host), with a warning; the node still takes other requests.
fn host_numa(row: &NodeRow, node: &str) -> Option<Arc<crate::domain::numa::HostNuma>> {
    match crate::nova::numa::host_numa(row.numa_topology.as_deref()) {
        Ok(numa) => numa.map(Arc::new),
        Err(e) => {
            tracing::warn!(node, error = %e, "numa_topology of a compute node is unreadable: no NUMA topology counted on it");
            None
        }
    }
}

/// The node's `pci_stats` pools; a column Parasol cannot read gives no pool (a PCI request
/// passes none of its hosts), with a warning.
fn host_pci(row: &NodeRow, node: &str) -> Arc<crate::domain::numa::PciPools> {
    match crate::nova::numa::pci_pools(row.pci_stats.as_deref()) {
        Ok(pools) => Arc::new(pools),
        Err(e) => {
            tracing::warn!(node, error = %e, "pci_stats of a compute node is unreadable: no PCI device counted on it");
            Arc::default()
        }
    }
}

fn node(row: &NodeRow, service: Option<Arc<ServiceRecord>>) -> Result<ComputeNodeRecord, String> {
    let host = row.host.clone().ok_or("the node has no host")?;
    let service = service.ok_or_else(|| format!("no nova-compute service on host {host}"))?;
    let node = row
        .hypervisor_hostname
        .clone()
        .ok_or("the node has no hypervisor_hostname")?;
    let uuid = row.uuid.as_deref().ok_or("the node has no uuid")?;
    let uuid = Uuid::parse_str(uuid).map_err(|e| format!("uuid `{uuid}`: {e}"))?;
    let (numa, pci) = (host_numa(row, &node), host_pci(row, &node));
    Ok(ComputeNodeRecord {
        uuid,
        node,
        host,
        hypervisor_type: row.hypervisor_type.clone(),
        hypervisor_version: i64::from(row.hypervisor_version),
        supported_instances: records::supported_instances(row.supported_instances.as_deref())?,
        cpu_info: records::cpu_info(row.cpu_info.as_deref())?,
        has_numa_topology: row.numa_topology.as_deref().is_some_and(|t| !t.is_empty()),
        pci_pools: records::pci_pools(row.pci_stats.as_deref()),
        pci_free: records::pci_free(row.pci_stats.as_deref()),
        numa,
        pci,
        host_ip: records::host_ip(row.host_ip.as_deref()),
        failed_builds: records::failed_builds(row.stats.as_deref()),
        metrics: records::monitor_metrics(row.metrics.as_deref())?,
        mapped: row.mapped.map_or(0, i64::from),
        updated_at_ms: epoch_ms(row.updated_at),
        service,
    })
}
