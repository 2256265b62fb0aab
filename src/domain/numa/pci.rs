//! Nova 34's `PciDeviceStats` as the scheduler runs it (`nova/pci/stats.py`):
//! `support_requests` (a copy of the pools, every request applied in turn, one failure fails
//! all) and `apply_requests` (the same on the pools themselves, a multi-create's earlier
//! instances). A request is applied against the pools that survive, in order: the spec
//! (`pci_device_prop_match`), the NUMA policy (`required`, `legacy`, `preferred`, `socket`)
//! when guest cells are given, PFs, VDPA and remote-managed devices unless asked for,
//! Placement's providers of the request (`rp_uuid`) and live-migratability.

use super::{HostNuma, InstanceCell, PciNumaPolicy, PciPool, PciPools, PciRequest};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Spec keys Placement matches, ignored here (`ignored_spec_tags`).
const IGNORED_SPEC_TAGS: [&str; 3] = ["resource_class", "traits", "rp_uuids"];
const SRIOV_PF: &str = "type-PF";
const VDPA: &str = "vdpa";
const REMOTE_MANAGED: &str = "remote_managed";
const LIVE_MIGRATABLE: &str = "live_migratable";

/// Which providers Placement allocated each request group from (a candidate's `mappings`).
/// A flat candidate's maps no PCI request's group: Parasol passes an empty one. `None` is
/// Nova's "after the allocation": the providers are read from the request's spec.
pub type ProviderMapping = BTreeMap<String, Vec<String>>;

/// A value a pool is matched against: a spec's string (compared case-insensitively, as
/// Nova's `pci_device_prop_match`), a NUMA cell id, or None.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Want<'a> {
    Str(&'a str),
    Int(i64),
    Null,
}

fn matches(pool: &PciPool, key: &str, want: Want<'_>) -> bool {
    let have = pool.props.get(key).unwrap_or(&Value::Null);
    match (want, have) {
        (Want::Str(w), Value::String(h)) => w.to_lowercase() == h.to_lowercase(),
        (Want::Int(w), Value::Number(h)) => h.as_i64() == Some(w) || h.as_f64() == Some(w as f64),
        (Want::Int(w), Value::Bool(h)) => i64::from(*h) == w,
        (Want::Null, Value::Null) => true,
        _ => false,
    }
}

/// `pci_device_prop_match(pool, [spec])` for one spec (ignored keys left out).
fn matches_spec(pool: &PciPool, spec: &BTreeMap<String, Option<String>>) -> bool {
    spec.iter()
        .filter(|(k, _)| !IGNORED_SPEC_TAGS.contains(&k.as_str()))
        .all(|(k, v)| match v {
            Some(v) => matches(pool, k, Want::Str(v)),
            None => matches(pool, k, Want::Null),
        })
}

fn on_node(pool: &PciPool, node: Option<i64>) -> bool {
    matches(pool, "numa_node", node.map_or(Want::Null, Want::Int))
}

/// `strutils.bool_from_string` of a spec's or a pool's value (unset is false).
fn truthy(value: Option<&Value>) -> bool {
    match value {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => {
            ["1", "t", "true", "on", "y", "yes"].contains(&s.trim().to_lowercase().as_str())
        }
        Some(Value::Number(n)) => ["1"].contains(&n.to_string().as_str()),
        _ => false,
    }
}

fn spec_value<'a>(spec: &'a BTreeMap<String, Option<String>>, key: &str) -> Option<&'a str> {
    spec.get(key).and_then(|v| v.as_deref())
}

fn total(pools: &[PciPool], idx: &[usize]) -> i64 {
    idx.iter().map(|&i| pools[i].count).sum()
}

/// The providers Placement allocated `request` from (`_get_rp_uuids_for_request`), one entry
/// per device; empty when any pool may serve it.
pub fn rp_uuids_for(request: &PciRequest, mapping: Option<&ProviderMapping>) -> Vec<String> {
    if request.alias_name.is_none() {
        return Vec::new(); // a Neutron port's request
    }
    match mapping {
        Some(mapping) => {
            let Some(id) = request.request_id.as_deref() else {
                return Vec::new();
            };
            mapping
                .iter()
                .filter(|(group, _)| group.starts_with(id))
                .filter_map(|(_, rps)| rps.first().cloned())
                .collect()
        }
        _ => request
            .spec
            .first()
            .and_then(|s| spec_value(s, "rp_uuids"))
            .filter(|s| !s.is_empty())
            .map(|s| s.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
    }
}

/// `_filter_pools_for_numa_cells`: the pools with suitable NUMA affinity for the guest cells
/// `cells` (their ids are host cell ids), by the request's policy (`legacy` when unset).
fn for_numa_cells(
    pools: &[PciPool],
    idx: Vec<usize>,
    request: &PciRequest,
    cells: &[InstanceCell],
    host: Option<&HostNuma>,
) -> Vec<usize> {
    if cells.is_empty() {
        return idx;
    }
    let policy = request.numa_policy.unwrap_or(PciNumaPolicy::Legacy);
    let mut ids: Vec<Option<i64>> = cells.iter().map(|c| Some(c.id)).collect();
    let within = |ids: &[Option<i64>]| -> Vec<usize> {
        idx.iter()
            .copied()
            .filter(|&i| ids.iter().any(|id| id.is_some() && on_node(&pools[i], *id)))
            .collect()
    };
    let strict = within(&ids);
    if policy == PciNumaPolicy::Required || total(pools, &strict) >= request.count {
        return strict;
    }
    if policy == PciNumaPolicy::Socket {
        return for_socket(pools, &idx, cells, host);
    }
    ids.push(None);
    let legacy: Vec<usize> = idx
        .iter()
        .copied()
        .filter(|&i| ids.iter().any(|id| on_node(&pools[i], *id)))
        .collect();
    if policy == PciNumaPolicy::Legacy || total(pools, &legacy) >= request.count {
        return legacy;
    }
    // Preferred: every pool, those on the guest's cells (or on none) first.
    let mut all = idx;
    all.sort_by_key(|&i| !ids.contains(&pools[i].numa_node()));
    all
}

/// `_filter_pools_for_socket_affinity`: pools on a host cell of the guest cells' sockets;
/// none when some host cell has no socket.
fn for_socket(
    pools: &[PciPool],
    idx: &[usize],
    cells: &[InstanceCell],
    host: Option<&HostNuma>,
) -> Vec<usize> {
    let host_cells = host.map_or(&[][..], |h| &h.cells[..]);
    if host_cells.iter().any(|c| c.socket.is_none()) {
        return Vec::new();
    }
    let sockets: BTreeSet<Option<i64>> = cells
        .iter()
        .flat_map(|g| host_cells.iter().filter(move |h| h.id == g.id))
        .map(|h| h.socket)
        .collect();
    let nodes: Vec<i64> = host_cells
        .iter()
        .filter(|h| sockets.contains(&h.socket))
        .map(|h| h.id)
        .collect();
    idx.iter()
        .copied()
        .filter(|&i| nodes.iter().any(|n| on_node(&pools[i], Some(*n))))
        .collect()
}

/// `_filter_pools`: the pools that can serve `request`, or `None` when too few devices are
/// left after a step.
pub fn filter_pools(
    pools: &[PciPool],
    request: &PciRequest,
    cells: &[InstanceCell],
    rp_uuids: &[String],
    host: Option<&HostNuma>,
) -> Option<Vec<usize>> {
    let enough = |idx: &Vec<usize>| total(pools, idx) >= request.count;
    let idx: Vec<usize> = (0..pools.len())
        .filter(|&i| request.spec.iter().any(|s| matches_spec(&pools[i], s)))
        .collect();
    if !enough(&idx) {
        return None;
    }
    let idx = for_numa_cells(pools, idx, request, cells, host);
    if !enough(&idx) {
        return None;
    }
    let wants = |key: &str, value: &str| {
        request
            .spec
            .iter()
            .any(|s| spec_value(s, key) == Some(value))
    };
    let prop = |i: usize, key: &str| {
        pools[i]
            .props
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut idx = idx;
    if !wants("dev_type", SRIOV_PF) {
        idx.retain(|&i| prop(i, "dev_type").as_deref() != Some(SRIOV_PF));
    }
    if !enough(&idx) {
        return None;
    }
    if !wants("dev_type", VDPA) {
        idx.retain(|&i| prop(i, "dev_type").as_deref() != Some(VDPA));
    }
    let remote_asked = request.spec.iter().any(|s| {
        let v = spec_value(s, REMOTE_MANAGED).map(|v| Value::String(v.to_string()));
        truthy(v.as_ref())
    });
    if !remote_asked {
        idx.retain(|&i| !truthy(pools[i].props.get(REMOTE_MANAGED)));
    }
    if !rp_uuids.is_empty() {
        let mut wanted: BTreeMap<&str, i64> = BTreeMap::new();
        for rp in rp_uuids {
            *wanted.entry(rp.as_str()).or_default() += 1;
        }
        idx.retain(|&i| {
            prop(i, "rp_uuid").is_some_and(|rp| {
                wanted
                    .get(rp.as_str())
                    .is_some_and(|n| pools[i].count >= *n)
            })
        });
    }
    let live = |value: &str| {
        request
            .spec
            .iter()
            .all(|s| spec_value(s, LIVE_MIGRATABLE) == Some(value))
    };
    if live("true") {
        idx.retain(|&i| prop(i, LIVE_MIGRATABLE).as_deref() == Some("true"));
    } else if live("false") {
        idx.retain(|&i| prop(i, LIVE_MIGRATABLE).as_deref() == Some("false"));
    }
    enough(&idx).then_some(idx)
}

/// `_apply_request` on `pools`: false when the request cannot be served.
fn apply_one(
    pools: &mut Vec<PciPool>,
    request: &PciRequest,
    rp_uuids: &[String],
    cells: &[InstanceCell],
    host: Option<&HostNuma>,
) -> bool {
    let Some(idx) = filter_pools(pools, request, cells, rp_uuids, host) else {
        return false;
    };
    if idx.is_empty() {
        return false;
    }
    let mut emptied = Vec::new();
    if rp_uuids.is_empty() {
        let mut count = request.count;
        for i in idx {
            if pools[i].count > count {
                pools[i].count -= count;
                count = 0;
            } else {
                count -= pools[i].count;
                emptied.push(i);
            }
            if count == 0 {
                break;
            }
        }
    } else {
        let mut seen = BTreeSet::new();
        for p in pools.iter() {
            if let Some(rp) = p.props.get("rp_uuid").and_then(Value::as_str) {
                if !seen.insert(rp.to_string()) {
                    return false; // `_assert_one_pool_per_rp_uuid`
                }
            }
        }
        let mut wanted: BTreeMap<String, i64> = BTreeMap::new();
        for rp in rp_uuids {
            *wanted.entry(rp.clone()).or_default() += 1;
        }
        for i in idx {
            let rp = pools[i]
                .props
                .get("rp_uuid")
                .and_then(Value::as_str)
                .unwrap_or("");
            let n = wanted.remove(rp).unwrap_or(0);
            pools[i].count -= n;
            if pools[i].count == 0 {
                emptied.push(i);
            }
        }
    }
    emptied.sort_unstable();
    for i in emptied.into_iter().rev() {
        pools.remove(i);
    }
    true
}

impl PciPools {
    /// `apply_requests`: consumes every request from the pools; false (the pools then half
    /// consumed, as Nova leaves them) when one cannot be served.
    pub fn apply(
        &mut self,
        requests: &[PciRequest],
        mapping: Option<&ProviderMapping>,
        cells: &[InstanceCell],
        host: Option<&HostNuma>,
    ) -> bool {
        requests.iter().all(|r| {
            let rps = rp_uuids_for(r, mapping);
            apply_one(&mut self.pools, r, &rps, cells, host)
        })
    }

    /// `support_requests`: whether every request can be served, on a copy of the pools.
    pub fn supports(
        &self,
        requests: &[PciRequest],
        mapping: Option<&ProviderMapping>,
        cells: &[InstanceCell],
        host: Option<&HostNuma>,
    ) -> bool {
        self.clone().apply(requests, mapping, cells, host)
    }
}

#[cfg(test)]
mod tests;
