//! What Parasol learns from a cell: its compute services and compute nodes, with the facts
//! Nova's filters read (`HostState._update_from_compute_node`) and the liveness Nova's DB
//! `servicegroup` driver judges.

use super::sql::{AggregateHostRow, AggregateMetadataRow, AggregateRow};
use super::url::DbUrl;
use crate::nova::Aggregate;
use serde_json::Value;
use std::sync::Arc;
use uuid::Uuid;

/// A cell as `cell_mappings` (or `[nova_db] cells`) describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellMapping {
    /// The `cell_uuid` a Selection must carry for nova-conductor to find the cell.
    pub uuid: Uuid,
    pub name: String,
    pub database: DbUrl,
    /// A disabled cell takes no new instances (Nova's `HostManager.enabled_cells`).
    pub disabled: bool,
}

impl CellMapping {
    /// `uuid(name)`, as Nova's `CellMapping.identity`.
    pub fn identity(&self) -> String {
        if self.name.is_empty() {
            self.uuid.to_string()
        } else {
            format!("{}({})", self.uuid, self.name)
        }
    }
}

/// One `[arch, hv_type, vm_mode]` entry of `supported_instances` (Nova's `HVSpec`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SupportedInstance {
    pub arch: String,
    pub hv_type: String,
    pub vm_mode: String,
}

/// A `nova-compute` row of `services` (not deleted).
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceRecord {
    pub id: i64,
    pub uuid: Option<String>,
    /// The service host: `CONF.host` of that nova-compute, where the conductor sends builds.
    pub host: String,
    pub disabled: bool,
    pub disabled_reason: Option<String>,
    pub forced_down: bool,
    /// Milliseconds since the epoch (UTC, as Nova stores them) of the last heartbeat.
    pub last_seen_up_ms: Option<i64>,
    pub created_at_ms: Option<i64>,
    pub updated_at_ms: Option<i64>,
    /// The service version (`nova.objects.service.SERVICE_VERSION` of that compute).
    pub version: i64,
}

/// Whether a service is up, and why not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    Up,
    /// `forced_down` was set (`openstack compute service set --down`).
    ForcedDown,
    /// The last heartbeat is more than `service_down_time` away from now.
    Stale {
        last_heartbeat_ms: i64,
    },
    /// Neither `last_seen_up` nor `created_at` is set.
    NoHeartbeat,
}

impl ServiceRecord {
    /// Nova's `servicegroup.API.service_is_up` with the DB driver: forced down is down;
    /// otherwise the last heartbeat (`last_seen_up`, or `created_at` before the first one)
    /// must be within `service_down_time_s` of `now_ms`, either side.
    pub fn liveness(&self, now_ms: i64, service_down_time_s: f64) -> Liveness {
        if self.forced_down {
            return Liveness::ForcedDown;
        }
        let Some(last) = self.last_seen_up_ms.or(self.created_at_ms) else {
            return Liveness::NoHeartbeat;
        };
        let elapsed_s = now_ms.abs_diff(last) as f64 / 1000.0;
        if elapsed_s <= service_down_time_s {
            Liveness::Up
        } else {
            Liveness::Stale {
                last_heartbeat_ms: last,
            }
        }
    }

    pub fn is_up(&self, now_ms: i64, service_down_time_s: f64) -> bool {
        self.liveness(now_ms, service_down_time_s) == Liveness::Up
    }
}

/// A `compute_nodes` row (not deleted) with the service it belongs to.
#[derive(Clone, Debug, PartialEq)]
pub struct ComputeNodeRecord {
    /// The node's uuid: Placement's resource provider uuid.
    pub uuid: Uuid,
    /// `hypervisor_hostname`: Placement's resource provider name, a Selection's `nodename`.
    pub node: String,
    /// The service host, a Selection's `service_host`.
    pub host: String,
    pub hypervisor_type: String,
    pub hypervisor_version: i64,
    pub supported_instances: Vec<SupportedInstance>,
    /// `cpu_info` decoded; `None` when empty (Ironic and VMware report none).
    pub cpu_info: Option<Value>,
    pub has_numa_topology: bool,
    /// PCI device pools in `pci_stats` (0: no PCI devices to pass through).
    pub pci_pools: usize,
    /// Free PCI devices over the pools (`PCIWeigher`).
    pub pci_free: i64,
    /// `numa_topology` decoded (`NUMATopologyFilter`); `None` when empty or unreadable.
    pub numa: Option<Arc<crate::domain::numa::HostNuma>>,
    /// `pci_stats` decoded (`PciPassthroughFilter`); no pool when unreadable.
    pub pci: Arc<crate::domain::numa::PciPools>,
    /// `host_ip`, when it is a valid address (`SimpleCIDRAffinityFilter`).
    pub host_ip: Option<std::net::IpAddr>,
    /// `stats["failed_builds"]` (`BuildFailureWeigher`), 0 when absent.
    pub failed_builds: i64,
    /// The node's monitor metrics (`metrics`), as nova-scheduler's `HostState` holds them
    /// (`MetricsFilter`, `MetricsWeigher`).
    pub metrics: Vec<NodeMetric>,
    /// Whether `nova-manage cell_v2 discover_hosts` has mapped the node.
    pub mapped: i64,
    pub updated_at_ms: Option<i64>,
    pub service: Arc<ServiceRecord>,
}

/// One monitor metric of a node's `metrics` column.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeMetric {
    pub name: String,
    pub value: f64,
    /// Its `timestamp`, ms since the epoch (UTC); `None` when absent or unreadable.
    pub at_ms: Option<i64>,
}

/// The metrics whose value the resource tracker stores divided by 100 and
/// `MonitorMetricList.from_json` multiplies back (Nova's `FIELDS_REQUIRING_CONVERSION`).
const STORED_AS_FRACTION: [&str; 5] = [
    "cpu.user.percent",
    "cpu.kernel.percent",
    "cpu.idle.percent",
    "cpu.iowait.percent",
    "cpu.percent",
];

/// `metrics` as nova-scheduler reads it (`MonitorMetricList.from_json`): a JSON list of
/// `{name, value, timestamp, source}`, the percentages stored as fractions brought back to
/// percent and every value an integer, so that a value is the one `metrics.update` notifies. An entry without a numeric
/// `value` (`numa.membw.current`'s per-cell values) weighs nothing in Nova's `MetricsWeigher`
/// and is left out; text that is not such a list is none, and says why.
pub(super) fn monitor_metrics(text: Option<&str>) -> Result<Vec<NodeMetric>, String> {
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return Ok(Vec::new());
    };
    let entries: Vec<Value> =
        serde_json::from_str(text).map_err(|e| format!("metrics is not a JSON list: {e}"))?;
    let mut metrics = Vec::with_capacity(entries.len());
    for entry in &entries {
        let Some(name) = entry.get("name").and_then(Value::as_str) else {
            return Err(format!("metrics entry {entry} has no name"));
        };
        let Some(value) = entry.get("value").and_then(Value::as_f64) else {
            continue;
        };
        // `MonitorMetric.value` is an `IntegerField`: Nova coerces with `int()`, truncating
        // (0.29 stored is 28 read back, as in Nova).
        let value = if STORED_AS_FRACTION.contains(&name) {
            (value * 100.0).trunc()
        } else {
            value.trunc()
        };
        let at_ms = entry
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(strtime_ms);
        metrics.push(NodeMetric {
            name: name.to_string(),
            value,
            at_ms,
        });
    }
    Ok(metrics)
}

/// Nova's `utils.strtime` (`%Y-%m-%dT%H:%M:%S.%f`, UTC) in ms since the epoch; an offset,
/// if one is written, is honoured.
fn strtime_ms(text: &str) -> Option<i64> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Some(t.timestamp_millis());
    }
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|t| t.and_utc().timestamp_millis())
}

/// A compute node Nova's scheduler would not consider either, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedNode {
    pub id: i64,
    pub node: Option<String>,
    pub host: Option<String>,
    pub reason: String,
}

/// Everything read from one cell database.
#[derive(Clone, Debug)]
pub struct CellSnapshot {
    pub cell: CellMapping,
    /// Compute nodes ordered by row id.
    pub nodes: Vec<ComputeNodeRecord>,
    /// Every `nova-compute` service, with or without nodes.
    pub services: Vec<Arc<ServiceRecord>>,
    pub rejected: Vec<RejectedNode>,
}

/// `supported_instances` as Nova's `ComputeNode._from_db_object` decodes it: empty is none,
/// otherwise a JSON list of `[arch, hv_type, vm_mode]`.
pub(super) fn supported_instances(text: Option<&str>) -> Result<Vec<SupportedInstance>, String> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(Vec::new());
    };
    let specs: Vec<Vec<Value>> = serde_json::from_str(text)
        .map_err(|e| format!("supported_instances is not a list of lists: {e}"))?;
    specs
        .iter()
        .map(|spec| match spec.as_slice() {
            [Value::String(arch), Value::String(hv), Value::String(mode), ..] => {
                Ok(SupportedInstance {
                    arch: arch.clone(),
                    hv_type: hv.clone(),
                    vm_mode: mode.clone(),
                })
            }
            _ => Err(format!(
                "supported_instances entry {} is not [arch, hv_type, vm_mode]",
                Value::from(spec.clone())
            )),
        })
        .collect()
}

/// `cpu_info` decoded; empty (as the resource tracker stores "none") is `None`.
pub(super) fn cpu_info(text: Option<&str>) -> Result<Option<Value>, String> {
    match text.filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(text) => serde_json::from_str(text)
            .map(Some)
            .map_err(|e| format!("cpu_info is not JSON: {e}")),
    }
}

/// The number of PCI device pools, as Nova's `pci_device_pool.from_pci_stats` reads
/// `pci_stats`: a serialized `PciDevicePoolList`, an older list of pools or a single pool;
/// text that is not JSON counts as none, as in Nova.
pub(super) fn pci_pools(text: Option<&str>) -> usize {
    let Some(value) = text.and_then(|t| serde_json::from_str::<Value>(t).ok()) else {
        return 0;
    };
    match &value {
        Value::Object(o) if o.contains_key("nova_object.namespace") => value
            .pointer("/nova_object.data/objects")
            .and_then(Value::as_array)
            .map_or(0, Vec::len),
        Value::Object(o) => usize::from(!o.is_empty()),
        Value::Array(pools) => pools.len(),
        _ => 0,
    }
}

/// The free PCI devices of `pci_stats`: the sum of the pools' `count` (Nova's `PCIWeigher`
/// sums `pool['count']`), 0 for text that is not JSON.
pub(super) fn pci_free(text: Option<&str>) -> i64 {
    let Some(value) = text.and_then(|t| serde_json::from_str::<Value>(t).ok()) else {
        return 0;
    };
    let count = |pool: &Value| {
        pool.pointer("/nova_object.data/count")
            .or_else(|| pool.get("count"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    match &value {
        Value::Object(o) if o.contains_key("nova_object.namespace") => value
            .pointer("/nova_object.data/objects")
            .and_then(Value::as_array)
            .map_or(0, |pools| pools.iter().map(count).sum()),
        Value::Object(_) => count(&value),
        Value::Array(pools) => pools.iter().map(count).sum(),
        _ => 0,
    }
}

/// `host_ip` as Nova's column holds it (PostgreSQL's `inet` cast to text carries a full
/// prefix length, `/32` or `/128`); `None` when empty or not an address.
pub(super) fn host_ip(text: Option<&str>) -> Option<std::net::IpAddr> {
    let t = text?.trim();
    let addr = t.split_once('/').map_or(t, |(a, _)| a);
    addr.parse().ok()
}

/// `stats["failed_builds"]`: Nova's compute stores the counters as strings in a JSON object
/// (`int(self.stats.get('failed_builds', 0))`); anything unreadable is 0.
pub(super) fn failed_builds(stats: Option<&str>) -> i64 {
    let Some(value) = stats.and_then(|t| serde_json::from_str::<Value>(t).ok()) else {
        return 0;
    };
    match value.get("failed_builds") {
        Some(Value::String(s)) => s.trim().parse().unwrap_or(0),
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

/// An aggregate row Parasol cannot use, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedAggregate {
    pub id: i64,
    pub name: Option<String>,
    pub reason: String,
}

/// The aggregates of the API database as Nova's `AggregateList.get_all` gives them: each
/// with the hosts of `aggregate_hosts` and the key/value pairs of `aggregate_metadata`
/// (`availability_zone` among them) that name its id. An aggregate with no uuid (Nova gives
/// one on its next load and saves it; Parasol only reads) is set aside with the reason; rows
/// of hosts or metadata whose aggregate is not listed, and hosts with no name, are ignored.
pub(super) fn aggregates(
    rows: Vec<AggregateRow>,
    hosts: Vec<AggregateHostRow>,
    metadata: Vec<AggregateMetadataRow>,
) -> (Vec<Aggregate>, Vec<SkippedAggregate>) {
    let mut skipped = Vec::new();
    let mut by_id: std::collections::BTreeMap<i32, Aggregate> = std::collections::BTreeMap::new();
    for row in rows {
        match row.uuid.filter(|u| !u.is_empty()) {
            Some(uuid) => {
                by_id.insert(
                    row.id,
                    Aggregate {
                        uuid,
                        ..Aggregate::default()
                    },
                );
            }
            None => skipped.push(SkippedAggregate {
                id: i64::from(row.id),
                name: row.name,
                reason: "the aggregate has no uuid yet".into(),
            }),
        }
    }
    for host in hosts {
        if let (Some(aggregate), Some(name)) = (by_id.get_mut(&host.aggregate_id), host.host) {
            if !aggregate.hosts.contains(&name) {
                aggregate.hosts.push(name);
            }
        }
    }
    for pair in metadata {
        if let Some(aggregate) = by_id.get_mut(&pair.aggregate_id) {
            aggregate.metadata.insert(pair.key, pair.value);
        }
    }
    (by_id.into_values().collect(), skipped)
}

#[cfg(test)]
mod tests;
