//! Encoding the answer of `select_destinations`: Selection 1.1/1.0 primitives or legacy dicts.

use super::oslo::write_json;
use super::request_spec::Limits;
use crate::domain::numa::NumaLimits;
use crate::domain::{HostState, Resources};
use serde_json::{json, Map, Value};

/// The Placement microversion Nova's allocation requests are written in.
pub const ALLOCATION_REQUEST_VERSION: &str = "1.36";

/// The Selection object version to answer with (`[scheduler] selection_version`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(try_from = "String")]
pub enum SelectionVersion {
    /// For conductors capped below Ussuri: no `availability_zone`.
    #[serde(rename = "1.0")]
    V1_0,
    /// Nova's current version.
    #[default]
    #[serde(rename = "1.1")]
    V1_1,
}

crate::choice_from_string!(SelectionVersion);

impl crate::choice::Choice for SelectionVersion {
    const ALL: &'static [Self] = &[SelectionVersion::V1_0, SelectionVersion::V1_1];
    fn as_str(self) -> &'static str {
        SelectionVersion::as_str(self)
    }
}

impl SelectionVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            SelectionVersion::V1_0 => "1.0",
            SelectionVersion::V1_1 => "1.1",
        }
    }
}

/// The allocation request of `demand` on the root provider `provider`, as Placement's
/// `GET /allocation_candidates` answers it at [`ALLOCATION_REQUEST_VERSION`] (≥ 1.34: the
/// unnumbered request group `""` mapped to the provider): the body Nova's conductor claims
/// for an alternate, and the one Parasol claims. Zero classes are left out (Placement refuses
/// allocations of 0).
pub fn allocation_request_body(provider: &str, demand: &Resources) -> Value {
    let resources: Map<String, Value> = demand
        .nonzero()
        .filter(|(_, amount)| *amount > 0)
        .map(|(c, amount)| (c.name().to_string(), json!(amount)))
        .collect();
    json!({
        "allocations": {provider: {"resources": resources}},
        "mappings": {"": [provider]},
    })
}

/// `value` as Python's `json.dumps` writes it (`", "` and `": "` separators); keys in
/// serde_json's order (sorted), which Nova, reading it back with `json.loads`, ignores.
fn write_python_json(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_python_json(out, v);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python_json(out, v);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// A Selection primitive's `nova_object.changes` (1.1 puts `availability_zone` first).
const CHANGES: [&str; 7] = [
    "compute_node_uuid",
    "limits",
    "nodename",
    "cell_uuid",
    "allocation_request",
    "service_host",
    "allocation_request_version",
];

/// One destination (chosen host or alternate) for one instance.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    pub compute_node_uuid: String,
    pub service_host: String,
    pub nodename: String,
    pub cell_uuid: String,
    pub availability_zone: Option<String>,
    /// What was (or would be) claimed on the host: the body of `allocation_request`.
    pub demand: Resources,
    /// Host limits; `None` encodes as a SchedulerLimits with every field null.
    pub limits: Option<Limits>,
    /// Placement's allocation candidate for the host, for a request on provider trees (its
    /// `mappings` name each request group's providers); `None`: the root provider's body of
    /// `demand` ([`allocation_request_body`]).
    pub allocation_request_body: Option<std::sync::Arc<Value>>,
}

impl Selection {
    /// A selection of `host` for `demand`, in cell `cell_uuid`.
    pub fn from_host(host: &HostState, demand: Resources, cell_uuid: &str) -> Self {
        Selection {
            compute_node_uuid: host.uuid().to_string(),
            service_host: host.host().to_string(),
            nodename: host.node().to_string(),
            cell_uuid: cell_uuid.to_string(),
            availability_zone: Some(host.availability_zone().to_string()),
            demand,
            limits: None,
            allocation_request_body: None,
        }
    }

    /// The `allocation_request` JSON string, [`allocation_request_body`] written as Python's
    /// `json.dumps` writes it (Nova's `Selection.from_host_state`), with the resource classes
    /// in Placement's order: the order of the request, which Nova's query string sorts
    /// (`sorted("RC:amount")`), as captured from Placement 16.0.0 in tests/fixtures/wire.
    pub fn allocation_request(&self) -> String {
        use std::fmt::Write;
        if let Some(body) = &self.allocation_request_body {
            let mut out = String::new();
            write_python_json(&mut out, body);
            return out;
        }
        // JSON strings as serde_json escapes them (`Value::String`'s Display).
        let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
        let uuid = quoted(&self.compute_node_uuid);
        let mut out = String::with_capacity(2 * uuid.len() + 96);
        let _ = write!(out, "{{\"allocations\": {{{uuid}: {{\"resources\": {{");
        let mut classes: Vec<(std::sync::Arc<str>, i64)> = self
            .demand
            .nonzero()
            .filter(|(_, amount)| *amount > 0)
            .map(|(class, amount)| (class.name(), amount))
            .collect();
        // Nova sorts "RC:amount" strings; ':' sorts after digits, so compare with it appended.
        classes.sort_by(|(a, _), (b, _)| a.bytes().chain([b':']).cmp(b.bytes().chain([b':'])));
        for (i, (class, amount)) in classes.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(out, "{sep}{}: {amount}", quoted(class));
        }
        let _ = write!(out, "}}}}}}, \"mappings\": {{\"\": [{uuid}]}}}}");
        out
    }

    /// The Selection primitive (`obj_to_primitive()`) at `version`.
    pub fn to_primitive(&self, version: SelectionVersion) -> Value {
        let mut data = Map::new();
        data.insert("compute_node_uuid".into(), json!(self.compute_node_uuid));
        data.insert("service_host".into(), json!(self.service_host));
        data.insert("nodename".into(), json!(self.nodename));
        data.insert("cell_uuid".into(), json!(self.cell_uuid));
        data.insert("limits".into(), limits_primitive(self.limits.as_ref()));
        data.insert(
            "allocation_request".into(),
            json!(self.allocation_request()),
        );
        data.insert(
            "allocation_request_version".into(),
            json!(ALLOCATION_REQUEST_VERSION),
        );
        let mut changes = CHANGES.to_vec();
        if version == SelectionVersion::V1_1 {
            data.insert("availability_zone".into(), json!(self.availability_zone));
            changes.insert(0, "availability_zone");
        }
        json!({
            "nova_object.name": "Selection",
            "nova_object.namespace": "nova",
            "nova_object.version": version.as_str(),
            "nova_object.data": data,
            "nova_object.changes": changes,
        })
    }

    /// The legacy host dict `{"host", "nodename", "limits"}` (limits as `to_dict()`: only
    /// the set ones).
    pub fn to_legacy(&self) -> Value {
        let mut limits = Map::new();
        if let Some(l) = &self.limits {
            for (key, value) in [
                ("vcpu", l.vcpu),
                ("memory_mb", l.memory_mb),
                ("disk_gb", l.disk_gb),
            ] {
                if let Some(v) = value {
                    limits.insert(key.into(), json!(v));
                }
            }
            if let Some(numa) = &l.numa_topology {
                // Nova's `Selection.to_dict` turns it into its primitive.
                limits.insert("numa_topology".into(), numa_limits_primitive(numa));
            }
        }
        json!({"host": self.service_host, "nodename": self.nodename, "limits": limits})
    }
}

/// A NUMATopologyLimits 1.1 primitive (its NetworkMetadata 1.0 only when the request had
/// networks, as `NUMATopologyFilter` sets it).
pub fn numa_limits_primitive(l: &NumaLimits) -> Value {
    let mut data = Map::new();
    data.insert("cpu_allocation_ratio".into(), json!(l.cpu_allocation_ratio));
    data.insert("ram_allocation_ratio".into(), json!(l.ram_allocation_ratio));
    let mut changes = vec!["cpu_allocation_ratio", "ram_allocation_ratio"];
    if let Some(n) = &l.network_metadata {
        let physnets: Vec<&String> = n.physnets.iter().collect();
        data.insert(
            "network_metadata".into(),
            json!({
                "nova_object.name": "NetworkMetadata",
                "nova_object.namespace": "nova",
                "nova_object.version": "1.0",
                "nova_object.data": {"physnets": physnets, "tunneled": n.tunneled},
                "nova_object.changes": ["physnets", "tunneled"],
            }),
        );
        changes.push("network_metadata");
    }
    json!({
        "nova_object.name": "NUMATopologyLimits",
        "nova_object.namespace": "nova",
        "nova_object.version": "1.1",
        "nova_object.data": data,
        "nova_object.changes": changes,
    })
}

fn limits_primitive(limits: Option<&Limits>) -> Value {
    let l = limits.cloned().unwrap_or_default();
    let numa = l.numa_topology.as_ref().map(numa_limits_primitive);
    json!({
        "nova_object.name": "SchedulerLimits",
        "nova_object.namespace": "nova",
        "nova_object.version": "1.0",
        "nova_object.data": {
            "numa_topology": numa,
            "vcpu": l.vcpu,
            "disk_gb": l.disk_gb,
            "memory_mb": l.memory_mb,
        },
        "nova_object.changes": ["numa_topology", "vcpu", "disk_gb", "memory_mb"],
    })
}

/// The `select_destinations` result with `return_objects=True`: one list per instance,
/// the chosen host first then its alternates (only the chosen host without alternates).
pub fn encode_selections(
    per_instance: &[Vec<Selection>],
    version: SelectionVersion,
    return_alternates: bool,
) -> Value {
    let keep = if return_alternates { usize::MAX } else { 1 };
    Value::Array(
        per_instance
            .iter()
            .map(|list| {
                Value::Array(
                    list.iter()
                        .take(keep)
                        .map(|s| s.to_primitive(version))
                        .collect(),
                )
            })
            .collect(),
    )
}

/// [`encode_selections`] written as text: the same JSON, byte for byte, without building the
/// value tree (a tenth of the HTTP workers' time went to building and dropping it). Keys come
/// in the order `serde_json`'s map writes them (sorted). The parts that never change (keys,
/// `nova_object.*` headers, the change lists, which must stay `CHANGES`: the byte-for-byte
/// test compares with the tree) are written as they are; only the values are escaped, by
/// `serde_json`. Written by a serializer, string escaping was half of the cost of a
/// Selection (BENCHMARKS.md).
pub struct SelectionsBody<'a> {
    pub per_instance: &'a [Vec<Selection>],
    pub version: SelectionVersion,
    pub return_alternates: bool,
}

impl SelectionsBody<'_> {
    /// The body's JSON text.
    pub fn to_json_string(&self) -> String {
        let keep = if self.return_alternates {
            usize::MAX
        } else {
            1
        };
        let mut out = Vec::with_capacity(1024 * self.per_instance.len());
        out.push(b'[');
        for (i, list) in self.per_instance.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'[');
            for (j, selection) in list.iter().take(keep).enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                write_primitive(&mut out, selection, self.version);
            }
            out.push(b']');
        }
        out.push(b']');
        // Only UTF-8 was written: the constants below and serde_json's strings.
        String::from_utf8(out).unwrap_or_default()
    }
}

/// One Selection primitive, as [`Selection::to_primitive`] writes it.
fn write_primitive(out: &mut Vec<u8>, s: &Selection, version: SelectionVersion) {
    let v1_1 = version == SelectionVersion::V1_1;
    out.extend_from_slice(if v1_1 {
        br#"{"nova_object.changes":["availability_zone","compute_node_uuid","limits","nodename","cell_uuid","allocation_request","service_host","allocation_request_version"],"nova_object.data":{"allocation_request":"#
    } else {
        br#"{"nova_object.changes":["compute_node_uuid","limits","nodename","cell_uuid","allocation_request","service_host","allocation_request_version"],"nova_object.data":{"allocation_request":"#
    });
    write_json(out, &s.allocation_request());
    out.extend_from_slice(br#","allocation_request_version":"#);
    write_json(out, ALLOCATION_REQUEST_VERSION);
    if v1_1 {
        out.extend_from_slice(br#","availability_zone":"#);
        write_json(out, &s.availability_zone);
    }
    out.extend_from_slice(br#","cell_uuid":"#);
    write_json(out, &s.cell_uuid);
    out.extend_from_slice(br#","compute_node_uuid":"#);
    write_json(out, &s.compute_node_uuid);
    out.extend_from_slice(
        br#","limits":{"nova_object.changes":["numa_topology","vcpu","disk_gb","memory_mb"],"nova_object.data":{"disk_gb":"#,
    );
    let l = s.limits.as_ref();
    write_json(out, &l.and_then(|l| l.disk_gb));
    out.extend_from_slice(br#","memory_mb":"#);
    write_json(out, &l.and_then(|l| l.memory_mb));
    out.extend_from_slice(br#","numa_topology":"#);
    match l.and_then(|l| l.numa_topology.as_ref()) {
        Some(numa) => write_json(out, &numa_limits_primitive(numa)),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(br#","vcpu":"#);
    write_json(out, &l.and_then(|l| l.vcpu));
    out.extend_from_slice(
        br#"},"nova_object.name":"SchedulerLimits","nova_object.namespace":"nova","nova_object.version":"1.0"},"nodename":"#,
    );
    write_json(out, &s.nodename);
    out.extend_from_slice(br#","service_host":"#);
    write_json(out, &s.service_host);
    out.extend_from_slice(br#"},"nova_object.name":"Selection","nova_object.namespace":"nova","nova_object.version":"#);
    write_json(out, version.as_str());
    out.push(b'}');
}

/// The `select_destinations` result with `return_objects=False`: the first selection of
/// each instance as a legacy host dict.
pub fn encode_legacy(per_instance: &[Vec<Selection>]) -> Value {
    Value::Array(
        per_instance
            .iter()
            .filter_map(|list| list.first().map(Selection::to_legacy))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selection() -> Selection {
        let host = HostState::synthetic(7, Resources::new(8, 8192, 100), Resources::ZERO);
        Selection::from_host(&host, Resources::new(2, 1024, 0), "cell")
    }

    fn numa_limits(networks: bool) -> NumaLimits {
        NumaLimits {
            cpu_allocation_ratio: 16.0,
            ram_allocation_ratio: 1.5,
            network_metadata: networks.then(|| crate::domain::numa::NetworkMetadata {
                physnets: ["foo".to_string()].into(),
                tunneled: true,
            }),
        }
    }

    /// `nova_object.changes` as a set: Nova lists a set's order.
    fn changes_sorted(mut v: Value) -> Value {
        if let Some(map) = v.as_object_mut() {
            for (key, field) in map.iter_mut() {
                if key == "nova_object.changes" {
                    let mut names: Vec<String> = serde_json::from_value(field.clone()).unwrap();
                    names.sort();
                    *field = json!(names);
                } else {
                    *field = changes_sorted(field.take());
                }
            }
        }
        v
    }

    /// The NUMATopologyLimits `NUMATopologyFilter` sets travel in the Selection's
    /// SchedulerLimits as Nova 34 writes them: `SchedulerLimits.from_dict({'numa_topology':
    /// NUMATopologyLimits(cpu_allocation_ratio=16.0, ram_allocation_ratio=1.5,
    /// network_metadata=NetworkMetadata(physnets={'foo'}, tunneled=True))
    /// ).obj_to_primitive()` (and without `network_metadata` when the request has none),
    /// and in the legacy dict as `Selection.to_dict()` puts them.
    #[test]
    fn numa_limits_are_nova_s_scheduler_limits_primitive() {
        let nova = json!({"nova_object.changes": ["numa_topology", "vcpu", "disk_gb", "memory_mb"],
            "nova_object.data": {"disk_gb": null, "memory_mb": null, "numa_topology": {
                "nova_object.changes": ["ram_allocation_ratio", "cpu_allocation_ratio", "network_metadata"],
                "nova_object.data": {"cpu_allocation_ratio": 16.0, "network_metadata": {
                    "nova_object.changes": ["physnets", "tunneled"],
                    "nova_object.data": {"physnets": ["foo"], "tunneled": true},
                    "nova_object.name": "NetworkMetadata", "nova_object.namespace": "nova",
                    "nova_object.version": "1.0"}, "ram_allocation_ratio": 1.5},
                "nova_object.name": "NUMATopologyLimits", "nova_object.namespace": "nova",
                "nova_object.version": "1.1"}, "vcpu": null},
            "nova_object.name": "SchedulerLimits", "nova_object.namespace": "nova",
            "nova_object.version": "1.0"});
        let mut s = selection();
        s.limits = Some(Limits {
            numa_topology: Some(numa_limits(true)),
            ..Limits::default()
        });
        let ours = s.to_primitive(SelectionVersion::V1_1)["nova_object.data"]["limits"].clone();
        assert_eq!(changes_sorted(ours), changes_sorted(nova.clone()));
        let legacy = s.to_legacy()["limits"].clone();
        let numa = nova["nova_object.data"]["numa_topology"].clone();
        assert_eq!(
            changes_sorted(legacy),
            changes_sorted(json!({"numa_topology": numa}))
        );
        let without = json!({"nova_object.changes": ["ram_allocation_ratio", "cpu_allocation_ratio"],
            "nova_object.data": {"cpu_allocation_ratio": 16.0, "ram_allocation_ratio": 1.5},
            "nova_object.name": "NUMATopologyLimits", "nova_object.namespace": "nova",
            "nova_object.version": "1.1"});
        assert_eq!(
            changes_sorted(numa_limits_primitive(&numa_limits(false))),
            changes_sorted(without)
        );
    }

    /// The body written straight to the serializer is the value tree's JSON, byte for byte.
    #[test]
    fn selections_body_writes_what_the_value_tree_writes() {
        let mut second = selection();
        second.availability_zone = None;
        second.service_host = "h\"1\\é\n".into();
        second.cell_uuid = "cell/ü".into();
        second.limits = Some(Limits {
            vcpu: Some(8),
            memory_mb: None,
            disk_gb: Some(40),
            numa_topology: None,
        });
        let mut third = selection();
        third.limits = Some(Limits {
            numa_topology: Some(numa_limits(true)),
            ..Limits::default()
        });
        let per_instance = vec![vec![selection(), second.clone(), third], vec![second]];
        for version in [SelectionVersion::V1_0, SelectionVersion::V1_1] {
            for return_alternates in [false, true] {
                let tree = encode_selections(&per_instance, version, return_alternates);
                let body = SelectionsBody {
                    per_instance: &per_instance,
                    version,
                    return_alternates,
                };
                assert_eq!(
                    body.to_json_string(),
                    serde_json::to_string(&tree).unwrap(),
                    "{version:?} alternates {return_alternates}"
                );
            }
        }
    }

    #[test]
    fn allocation_request_lists_classes_as_nova_s_query_string_sorts_them() {
        let mut s = selection();
        s.demand = Resources::new(1, 2048, 20);
        let ar = s.allocation_request();
        let at = |class: &str| ar.find(&format!("\"{class}\"")).unwrap();
        assert!(
            at("DISK_GB") < at("MEMORY_MB") && at("MEMORY_MB") < at("VCPU"),
            "{ar}"
        );
    }

    #[test]
    fn a_candidate_from_placement_is_the_allocation_request_as_python_writes_it() {
        let mut s = selection();
        let body = json!({"allocations": {"rp": {"resources": {"VCPU": 1}}, "child": {"resources": {"VGPU": 1}}},
                          "mappings": {"": ["rp"], "1": ["child"]}});
        s.allocation_request_body = Some(std::sync::Arc::new(body.clone()));
        let written = s.allocation_request();
        assert_eq!(
            written,
            r#"{"allocations": {"child": {"resources": {"VGPU": 1}}, "rp": {"resources": {"VCPU": 1}}}, "mappings": {"": ["rp"], "1": ["child"]}}"#
        );
        assert_eq!(serde_json::from_str::<Value>(&written).unwrap(), body);
    }

    #[test]
    fn allocation_request_leaves_out_zero_classes() {
        let ar: Value = serde_json::from_str(&selection().allocation_request()).unwrap();
        let uuid = selection().compute_node_uuid;
        assert_eq!(
            ar,
            json!({"allocations": {uuid.clone(): {"resources": {"VCPU": 2, "MEMORY_MB": 1024}}},
                   "mappings": {"": [uuid.clone()]}})
        );
        assert_eq!(
            ar,
            allocation_request_body(&uuid, &Resources::new(2, 1024, 0)),
            "the string is the body Parasol claims"
        );
    }

    #[test]
    fn selection_1_0_has_no_availability_zone() {
        let p = selection().to_primitive(SelectionVersion::V1_0);
        assert_eq!(p["nova_object.version"], "1.0");
        assert!(p["nova_object.data"].get("availability_zone").is_none());
        assert!(!p["nova_object.changes"]
            .as_array()
            .unwrap()
            .contains(&json!("availability_zone")));
    }

    #[test]
    fn alternates_are_dropped_unless_asked_for() {
        let lists = vec![vec![selection(), selection()], vec![selection()]];
        let with = encode_selections(&lists, SelectionVersion::V1_1, true);
        let without = encode_selections(&lists, SelectionVersion::V1_1, false);
        assert_eq!(with[0].as_array().unwrap().len(), 2);
        assert_eq!(without[0].as_array().unwrap().len(), 1);
        assert_eq!(without[1].as_array().unwrap().len(), 1);
    }

    #[test]
    fn legacy_answer_is_the_first_host_of_each_instance_with_set_limits_only() {
        let mut s = selection();
        s.limits = Some(Limits {
            vcpu: Some(16),
            ..Limits::default()
        });
        let legacy = encode_legacy(&[vec![s, selection()], vec![]]);
        assert_eq!(
            legacy,
            json!([{"host": "host7", "nodename": "host7", "limits": {"vcpu": 16}}])
        );
    }
}
