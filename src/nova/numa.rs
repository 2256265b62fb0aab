//! NUMA topologies and PCI requests and pools as Nova serializes them: the RequestSpec's
//! `numa_topology` (InstanceNUMATopology 1.x), `pci_requests` (InstancePCIRequests 1.x) and
//! `network_metadata` (NetworkMetadata 1.x), and a compute node's `numa_topology`
//! (NUMATopology 1.x) and `pci_stats` (PciDevicePoolList 1.x) columns. Every field is
//! checked; a malformed one is a [`CodecError`] naming it.

use super::bounds::{check_count, check_len, MAX_NAME_BYTES};
use super::error::{CodecError, Result};
use super::object::{shown, Fields, NovaObject};
use crate::domain::numa::{
    CellOrder, CpuAllocation, CpuSet, HostCell, HostNuma, InstanceCell, InstanceNuma,
    NetworkMetadata, Pages, PciNumaPolicy, PciPool, PciPools, PciRequest, ThreadPolicy,
};
use serde_json::Value;
use std::collections::BTreeMap;

/// The largest CPU id accepted (Linux's `NR_CPUS` is at most 8,192).
pub const MAX_CPU_ID: u32 = 1 << 16;

fn cpu_id(path: &str, v: &Value) -> Result<u32> {
    match v.as_u64() {
        Some(n) if n <= u64::from(MAX_CPU_ID) => Ok(n as u32),
        _ => Err(CodecError::invalid(
            path,
            format!(
                "must be a CPU id between 0 and {MAX_CPU_ID}, got {}",
                shown(v)
            ),
        )),
    }
}

/// A set of CPU ids (a JSON list); `None` when unset or null.
fn opt_cpus(f: &Fields<'_>, key: &str) -> Result<Option<CpuSet>> {
    let Some(items) = f.opt_list(key)? else {
        return Ok(None);
    };
    let path = f.path_of(key);
    items
        .iter()
        .enumerate()
        .map(|(i, v)| cpu_id(&format!("{path}[{i}]"), v))
        .collect::<Result<CpuSet>>()
        .map(Some)
}

/// An integer that may be negative (a cell id, a page size); `None` when unset or null.
fn opt_int(f: &Fields<'_>, key: &str) -> Result<Option<i64>> {
    match f.field(key).value() {
        None => Ok(None),
        Some(v) => v
            .as_i64()
            .filter(|n| n.unsigned_abs() <= super::bounds::MAX_SIZE as u64)
            .map(Some)
            .ok_or_else(|| {
                CodecError::invalid(
                    f.path_of(key),
                    format!("must be an integer, got {}", shown(v)),
                )
            }),
    }
}

fn enum_field<T>(
    f: &Fields<'_>,
    key: &str,
    parse: fn(&str) -> Option<T>,
    known: &str,
) -> Result<Option<T>> {
    match f.opt_str(key)? {
        None => Ok(None),
        Some(text) => parse(&text).map(Some).ok_or_else(|| {
            CodecError::invalid(
                f.path_of(key),
                format!("must be one of {known}, got {text:?}"),
            )
        }),
    }
}

/// The objects of a `ListOfObjectsField` named `name`, each decoded by `read`.
fn objects<T>(
    f: &Fields<'_>,
    key: &str,
    name: &str,
    read: impl Fn(&Fields<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    let path = f.path_of(key);
    f.opt_list(key)?
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, item)| read(&NovaObject::parse(item, name, format!("{path}[{i}]"))?.data))
        .collect()
}

fn instance_cell(d: &Fields<'_>) -> Result<InstanceCell> {
    let mut pinning = BTreeMap::new();
    if let Some(raw) = d.opt_dict("cpu_pinning_raw")? {
        check_count(raw.path(), raw.map().len())?;
        for (k, v) in raw.map() {
            let path = raw.path_of(k);
            let vcpu = k
                .parse::<u64>()
                .ok()
                .filter(|n| *n <= u64::from(MAX_CPU_ID));
            let vcpu =
                vcpu.ok_or_else(|| CodecError::invalid(&path, "must be keyed by a vCPU id"))?;
            pinning.insert(vcpu as u32, cpu_id(&path, v)?);
        }
    }
    let cell = InstanceCell {
        id: opt_int(d, "id")?.ok_or_else(|| CodecError::missing(d.path_of("id")))?,
        cpuset: opt_cpus(d, "cpuset")?.unwrap_or_default(),
        pcpuset: opt_cpus(d, "pcpuset")?.unwrap_or_default(),
        memory: d.req_size("memory")?,
        pagesize: opt_int(d, "pagesize")?,
        cpu_policy: enum_field(
            d,
            "cpu_policy",
            CpuAllocation::parse,
            "dedicated, shared, mixed",
        )?,
        cpu_thread_policy: enum_field(
            d,
            "cpu_thread_policy",
            ThreadPolicy::parse,
            "prefer, isolate, require",
        )?,
        cpuset_reserved: opt_cpus(d, "cpuset_reserved")?,
        cpu_pinning: pinning,
    };
    if let Some(p) = cell.pagesize.filter(|p| *p < -3) {
        return Err(CodecError::invalid(
            d.path_of("pagesize"),
            format!("must be a size in KiB or -1 (small), -2 (large), -3 (any), got {p}"),
        ));
    }
    Ok(cell)
}

/// The RequestSpec's `numa_topology` (InstanceNUMATopology); `None` when unset or null.
pub fn instance_numa(f: &Fields<'_>, key: &str) -> Result<Option<InstanceNuma>> {
    let Some(obj) = f.opt_object(key, "InstanceNUMATopology")? else {
        return Ok(None);
    };
    let d = &obj.data;
    let cells = objects(d, "cells", "InstanceNUMACell", instance_cell)?;
    let policy = d.opt_str("emulator_threads_policy")?;
    if let Some(p) = policy
        .as_deref()
        .filter(|p| !["share", "isolate"].contains(p))
    {
        return Err(CodecError::invalid(
            d.path_of("emulator_threads_policy"),
            format!("must be share or isolate, got {p:?}"),
        ));
    }
    Ok(Some(InstanceNuma {
        cells,
        emulator_threads_policy: policy,
    }))
}

fn pci_request(d: &Fields<'_>) -> Result<PciRequest> {
    let path = d.path_of("spec");
    let mut spec = Vec::new();
    for (i, item) in d.opt_list("spec")?.into_iter().flatten().enumerate() {
        let alt = Fields::new(item, format!("{path}[{i}]"))?;
        check_count(alt.path(), alt.map().len())?;
        let mut map = BTreeMap::new();
        for (k, v) in alt.map() {
            let at = alt.path_of(k);
            check_len(&at, k, MAX_NAME_BYTES)?;
            let value = match v {
                Value::Null => None,
                Value::String(s) => {
                    check_len(&at, s, super::bounds::MAX_TEXT_BYTES)?;
                    Some(s.clone())
                }
                _ => return Err(CodecError::invalid(at, "must be a string or null")),
            };
            map.insert(k.clone(), value);
        }
        spec.push(map);
    }
    Ok(PciRequest {
        count: d.req_size("count")?,
        spec,
        alias_name: d.opt_str("alias_name")?,
        request_id: d.opt_str("request_id")?,
        requester_id: d.opt_str("requester_id")?,
        numa_policy: enum_field(
            d,
            "numa_policy",
            PciNumaPolicy::parse,
            "required, legacy, preferred, socket",
        )?,
    })
}

/// The RequestSpec's `pci_requests` (InstancePCIRequests): every request, none when unset.
pub fn pci_requests(f: &Fields<'_>, key: &str) -> Result<Vec<PciRequest>> {
    match f.opt_object(key, "InstancePCIRequests")? {
        Some(obj) => objects(&obj.data, "requests", "InstancePCIRequest", pci_request),
        None => Ok(Vec::new()),
    }
}

fn network_metadata_fields(d: &Fields<'_>) -> Result<NetworkMetadata> {
    Ok(NetworkMetadata {
        physnets: d
            .opt_str_list("physnets")?
            .unwrap_or_default()
            .into_iter()
            .collect(),
        tunneled: d.opt_bool("tunneled")?.unwrap_or(false),
    })
}

/// A `network_metadata` field (NetworkMetadata); `None` when unset or null.
pub fn network_metadata(f: &Fields<'_>, key: &str) -> Result<Option<NetworkMetadata>> {
    match f.opt_object(key, "NetworkMetadata")? {
        Some(obj) => network_metadata_fields(&obj.data).map(Some),
        None => Ok(None),
    }
}

fn pages(d: &Fields<'_>) -> Result<Pages> {
    Ok(Pages {
        size_kb: d.req_size("size_kb")?,
        total: d.req_size("total")?,
        used: d.opt_size("used")?.unwrap_or(0),
        reserved: d.opt_size("reserved")?.unwrap_or(0),
    })
}

/// A list of CPU ids in its order (for [`CellOrder`]).
fn cpu_list(f: &Fields<'_>, key: &str) -> Vec<u32> {
    let items = f.map().get(key).and_then(Value::as_array);
    items
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_u64().map(|n| n as u32))
        .collect()
}

fn host_cell(d: &Fields<'_>) -> Result<HostCell> {
    let path = d.path_of("siblings");
    let siblings = d
        .opt_list("siblings")?
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, set)| {
            let at = format!("{path}[{i}]");
            let items = set
                .as_array()
                .ok_or_else(|| CodecError::invalid(&at, "must be a list of CPU ids"))?;
            items
                .iter()
                .enumerate()
                .map(|(j, v)| cpu_id(&format!("{at}[{j}]"), v))
                .collect()
        })
        .collect::<Result<Vec<CpuSet>>>()?;
    let order = CellOrder {
        pcpuset: cpu_list(d, "pcpuset"),
        pinned_cpus: cpu_list(d, "pinned_cpus"),
        siblings: (d
            .map()
            .get("siblings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten())
        .map(|s| {
            s.as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_u64().map(|n| n as u32))
                .collect()
        })
        .collect(),
    };
    Ok(HostCell {
        id: opt_int(d, "id")?.ok_or_else(|| CodecError::missing(d.path_of("id")))?,
        cpuset: opt_cpus(d, "cpuset")?.unwrap_or_default(),
        pcpuset: opt_cpus(d, "pcpuset")?.unwrap_or_default(),
        memory: d.req_size("memory")?,
        cpu_usage: d.opt_size("cpu_usage")?.unwrap_or(0),
        memory_usage: d.opt_size("memory_usage")?.unwrap_or(0),
        pinned_cpus: opt_cpus(d, "pinned_cpus")?.unwrap_or_default(),
        siblings,
        mempages: objects(d, "mempages", "NUMAPagesTopology", pages)?,
        network_metadata: network_metadata(d, "network_metadata")?,
        socket: opt_int(d, "socket")?,
        order,
    })
}

/// A compute node's `numa_topology` column: a serialized NUMATopology; `None` when empty.
pub fn host_numa(text: Option<&str>) -> Result<Option<HostNuma>> {
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return Ok(None);
    };
    let value: Value = serde_json::from_str(text).map_err(|source| CodecError::Json {
        what: "numa_topology".into(),
        source,
    })?;
    let obj = NovaObject::parse(&value, "NUMATopology", "numa_topology")?;
    let cells = objects(&obj.data, "cells", "NUMACell", host_cell)?;
    Ok(Some(HostNuma { cells }))
}

fn pool_of(map: &serde_json::Map<String, Value>, path: &str) -> Result<PciPool> {
    let mut props = BTreeMap::new();
    let mut count = None;
    for (k, v) in map {
        check_len(path, k, MAX_NAME_BYTES)?;
        match k.as_str() {
            "count" => count = v.as_i64().filter(|n| *n >= 0),
            "tags" => {
                let tags = v
                    .as_object()
                    .ok_or_else(|| CodecError::invalid(format!("{path}.tags"), "must be a dict"))?;
                props.extend(tags.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            _ => {
                props.insert(k.clone(), v.clone());
            }
        }
    }
    let count = count.ok_or_else(|| {
        CodecError::invalid(format!("{path}.count"), "must be a non-negative integer")
    })?;
    props.entry("numa_node".into()).or_insert(Value::Null);
    Ok(PciPool { props, count })
}

/// A compute node's `pci_stats` column as Nova's `pci_device_pool.from_pci_stats` reads it:
/// a serialized PciDevicePoolList, an older list of pools or a single pool; empty text is no
/// pool, and so is text that is not JSON (Nova's reading too).
pub fn pci_pools(text: Option<&str>) -> Result<PciPools> {
    let Some(value) = text.and_then(|t| serde_json::from_str::<Value>(t).ok()) else {
        return Ok(PciPools::default());
    };
    let pools = match &value {
        Value::Object(o) if o.contains_key("nova_object.namespace") => {
            let list = NovaObject::parse(&value, "PciDevicePoolList", "pci_stats")?;
            let path = list.data.path_of("objects");
            list.data
                .opt_list("objects")?
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, p)| {
                    let at = format!("{path}[{i}]");
                    let pool = NovaObject::parse(p, "PciDevicePool", &at)?;
                    pool_of(pool.data.map(), &at)
                })
                .collect::<Result<Vec<_>>>()?
        }
        Value::Object(o) if o.is_empty() => Vec::new(),
        Value::Object(o) => vec![pool_of(o, "pci_stats")?],
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let at = format!("pci_stats[{i}]");
                let map = p
                    .as_object()
                    .ok_or_else(|| CodecError::invalid(&at, "must be a dict"))?;
                pool_of(map, &at)
            })
            .collect::<Result<Vec<_>>>()?,
        _ => Vec::new(),
    };
    Ok(PciPools::new(pools))
}

#[cfg(test)]
mod tests;
