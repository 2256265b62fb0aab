//! Nova's records laid over the live host table: each read becomes, per compute node uuid
//! (= Placement provider uuid), the service host a Selection must name, the facts Nova's
//! filters read, the cell, and whether the service may take instances (up by its heartbeat,
//! not disabled, not forced down: what Nova's `ComputeFilter` checks). The table keeps them
//! across reloads ([`crate::table::NodeRecords`]).

use super::reader::NovaDbReader;
use super::records::Liveness;
use super::refresh::{refresh_loop, RefreshState};
use super::snapshot::NovaDbSnapshot;
use crate::cloud::Cloud;
use crate::domain::ComputeFacts;
use crate::domain::UsageSource;
use crate::table::{HostTable, NodeRecord, NodeRecords, NodeRef, UsageReading};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The records of every node of `snapshot`, the services judged at `now_ms`.
pub fn node_records(
    snapshot: &NovaDbSnapshot,
    now_ms: i64,
    service_down_time_s: f64,
) -> NodeRecords {
    let mut records = NodeRecords {
        read: true,
        began_ms: snapshot.began_ms,
        ..NodeRecords::default()
    };
    for view in snapshot.nodes() {
        let (node, service) = (view.node, &view.node.service);
        let facts = ComputeFacts {
            hypervisor_type: node.hypervisor_type.clone(),
            hypervisor_version: node.hypervisor_version,
            supported_instances: node
                .supported_instances
                .iter()
                .map(|s| (s.arch.clone(), s.hv_type.clone(), s.vm_mode.clone()))
                .collect(),
            cpu_info: node.cpu_info.clone(),
            has_numa_topology: node.has_numa_topology,
            pci_pools: node.pci_pools,
            cell_uuid: Some(view.cell_uuid().to_string()),
            service_version: service.version,
            host_ip: node.host_ip,
            failed_builds: node.failed_builds,
            pci_free: node.pci_free,
            numa: node.numa.clone(),
            pci: node.pci.clone(),
        };
        let liveness = service.liveness(now_ms, service_down_time_s);
        records.by_uuid.insert(
            node.uuid.to_string(),
            NodeRecord {
                service_host: Arc::from(view.service_host()),
                facts: Arc::new(facts),
                up: liveness == Liveness::Up,
                disabled: service.disabled,
                forced_down: service.forced_down,
            },
        );
    }
    records
}

/// Why a node may not take instances under Nova's `ComputeFilter`, if it may not.
pub fn unschedulable_reason(
    snapshot: &NovaDbSnapshot,
    uuid: &str,
    now_ms: i64,
    service_down_time_s: f64,
) -> Option<String> {
    let view = uuid::Uuid::parse_str(uuid)
        .ok()
        .and_then(|u| snapshot.node(&u));
    let Some(view) = view else {
        return Some("no compute node record in Nova's cell databases".into());
    };
    let service = &view.node.service;
    let host = &service.host;
    if service.disabled {
        let why = service
            .disabled_reason
            .as_deref()
            .unwrap_or("no reason given");
        return Some(format!("compute service {host} is disabled ({why})"));
    }
    match service.liveness(now_ms, service_down_time_s) {
        Liveness::Up => None,
        Liveness::ForcedDown => Some(format!("compute service {host} is forced down")),
        Liveness::Stale { last_heartbeat_ms } => Some(format!(
            "compute service {host} is down: last heartbeat {} s ago, service_down_time is {service_down_time_s} s",
            now_ms.saturating_sub(last_heartbeat_ms) / 1000
        )),
        Liveness::NoHeartbeat => Some(format!("compute service {host} has never reported")),
    }
}

/// Loads Nova's host aggregates from the API database into `cloud` once, as nova-scheduler's
/// `HostManager` does at start, retrying every `refresh_interval_s` until a read succeeds (or
/// `shutdown`); afterwards nova-api's casts keep them current, and a cast that arrives during
/// the read is kept over what was read ([`Cloud::load_aggregates`]). Returns whether a load
/// was made (`false` without `api_database_url`, or on shutdown first).
pub async fn load_aggregates(
    reader: &NovaDbReader,
    cloud: &Cloud,
    shutdown: &CancellationToken,
) -> bool {
    let interval_ms = (reader.settings().refresh_interval_s * 1000.0).round() as u64;
    let clock = reader.clock();
    loop {
        let casts_before = cloud.casts_applied();
        let outcome = tokio::select! {
            outcome = reader.read_aggregates() => outcome,
            () = shutdown.cancelled() => return false,
        };
        match outcome {
            Ok(None) => return false,
            Ok(Some(read)) => {
                for skipped in &read.skipped {
                    tracing::warn!(id = skipped.id, name = skipped.name.as_deref().unwrap_or(""), reason = %skipped.reason, "aggregate skipped");
                }
                let loaded = read.aggregates.len();
                let kept = cloud.load_aggregates(casts_before, read.aggregates);
                tracing::info!(
                    aggregates = loaded,
                    kept_from_casts = kept,
                    "loaded Nova's host aggregates from the API database"
                );
                return true;
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in_ms = interval_ms, "cannot load Nova's host aggregates; retrying");
            }
        }
        tokio::select! {
            () = clock.sleep_ms(interval_ms) => {}
            () = shutdown.cancelled() => return false,
        }
    }
}

/// Reads Nova's databases every `refresh_interval_s` (sooner when the table loads a host the
/// records lack) and lays each successful read over `table`, until `shutdown`. Hosts that
/// become or stop being schedulable are logged with the reason. Nova's host aggregates are
/// loaded into `cloud` once ([`load_aggregates`]).
pub async fn run_nova_db(
    reader: Arc<NovaDbReader>,
    table: Arc<HostTable>,
    cloud: Arc<Cloud>,
    state: watch::Sender<RefreshState>,
    shutdown: CancellationToken,
) {
    let aggregates = {
        let (reader, shutdown) = (reader.clone(), shutdown.clone());
        async move {
            load_aggregates(&reader, &cloud, &shutdown).await;
        }
    };
    // Until the first read, no host is schedulable (nova-scheduler needs its databases too).
    table.set_records(Arc::new(NodeRecords::default()));
    let down_time_s = reader.settings().service_down_time_s;
    let clock = reader.clock();
    let mut reads = state.subscribe();
    let wake_table = table.clone();
    let wake = move || {
        let table = wake_table.clone();
        async move { table.missing_record().await }
    };
    let refresh = refresh_loop(reader, state, wake, shutdown.clone().cancelled_owned());
    let apply = async move {
        // What was last logged of each host: its reason not to be schedulable, if any.
        let mut logged: HashMap<String, Option<String>> = HashMap::new();
        let mut previous: Option<Arc<NovaDbSnapshot>> = None;
        // Until shutdown: the state's sender outlives the refresh (the health report holds
        // one), so the reads never end by themselves.
        loop {
            tokio::select! {
                changed = reads.changed() => if changed.is_err() { break },
                () = shutdown.cancelled() => break,
            }
            let snapshot = reads.borrow_and_update().snapshot.clone();
            let Some(snapshot) = snapshot else { continue };
            if previous.as_ref().is_some_and(|p| Arc::ptr_eq(p, &snapshot)) {
                continue;
            }
            let now_ms = clock.now_ms();
            table.set_records(Arc::new(node_records(&snapshot, now_ms, down_time_s)));
            record_metrics(&table, &snapshot, now_ms);
            log_changes(&table, &mut logged, &snapshot, now_ms, down_time_s);
            previous = Some(snapshot);
        }
    };
    tokio::join!(refresh, apply, aggregates);
}

/// The monitor metrics of each node of `snapshot` that lists some, as a reading of the
/// table's soft state (`MetricsFilter`, `MetricsWeigher`): nova-scheduler reads them from the
/// same column. A reading the table refuses (a node it does not have yet, a value below 0,
/// metrics older than a `metrics.update` already taken) is counted there and logged at debug:
/// the next read offers it again.
pub fn metric_readings(snapshot: &NovaDbSnapshot) -> Vec<UsageReading> {
    snapshot
        .nodes()
        .filter(|v| !v.node.metrics.is_empty())
        .map(|v| {
            let metrics: Vec<(String, f64, Option<i64>)> = v
                .node
                .metrics
                .iter()
                .map(|m| (m.name.clone(), m.value, m.at_ms))
                .collect();
            UsageReading {
                node: NodeRef::Uuid(v.node.uuid.to_string()),
                source: UsageSource::NovaDb,
                at_ms: metrics
                    .iter()
                    .filter_map(|m| m.2)
                    .max()
                    .or(v.node.updated_at_ms),
                classes: Vec::new(),
                instances: Vec::new(),
                metrics,
                qos: Vec::new(),
            }
        })
        .collect()
}

fn record_metrics(table: &HostTable, snapshot: &NovaDbSnapshot, now_ms: i64) {
    for reading in metric_readings(snapshot) {
        if let Err(e) = table.record_usage(&reading, now_ms) {
            tracing::debug!(node = ?reading.node, reason = e.reason.as_str(), error = %e, "monitor metrics of compute_nodes not taken");
        }
    }
}

/// Logs each table host whose schedulability changed since it was last logged (every one,
/// the first time), naming the service host, the node and the reason.
fn log_changes(
    table: &HostTable,
    logged: &mut HashMap<String, Option<String>>,
    snapshot: &NovaDbSnapshot,
    now_ms: i64,
    down_time_s: f64,
) {
    for host in table.snapshot() {
        let uuid = host.uuid();
        let reason = unschedulable_reason(snapshot, uuid, now_ms, down_time_s);
        if logged.get(&**uuid) == Some(&reason) {
            continue;
        }
        match &reason {
            Some(reason) => {
                tracing::info!(node = %host.node(), service_host = %host.host(), %reason, "not schedulable (ComputeFilter)")
            }
            None => {
                tracing::info!(node = %host.node(), service_host = %host.host(), "schedulable per Nova's records")
            }
        }
        logged.insert(uuid.to_string(), reason);
    }
}
