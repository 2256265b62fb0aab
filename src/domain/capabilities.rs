//! The flavor's extra specs against the host's own attributes: what Nova 34's
//! `ComputeCapabilitiesFilter` checks (`compute_capabilities_filter.py`, with the operators of
//! `extra_specs_ops.py`), built once per request and read per host.
//!
//! Which keys are checked, as in Nova:
//! - `capabilities:<attr>[:<key>…]`: the host state's attribute `<attr>`, then, for a JSON
//!   attribute (`cpu_info`), the keys below it;
//! - an unscoped key that names an attribute of Nova's `HostState` (`hypervisor_type`, …), as
//!   if it were `capabilities:<key>`; any other unscoped key is ignored;
//! - `hw:maxphysaddr_bits = N` as `capabilities:cpu_info:maxphysaddr:bits >= N`;
//! - every other scoped key (`hw:`, `aggregate_instance_extra_specs:`, …) is ignored.
//!
//! The value found is compared as Python's `str()` renders it. A host fails when the attribute
//! is missing or unset (Nova's `None`), when a key below a JSON attribute is missing, and when
//! Parasol does not know that attribute of the host: Parasol knows the names (`host`,
//! `nodename`, `hypervisor_hostname`, `uuid`), `num_instances`, and, from Nova's compute-node
//! records (`[nova_db]`), `hypervisor_type`, `hypervisor_version`, `cpu_info` and
//! `cell_uuid`. Nova's per-host `stats` (its fallback for an attribute it lacks) and the usage
//! figures (`free_ram_mb`, …) are not known, so a flavor asking for them places nowhere rather
//! than anywhere.

use super::extra_specs::matches;
use super::host::HostState;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// The scope of the keys this filter reads (besides unscoped attribute names).
pub const SCOPE: &str = "capabilities";

/// The attributes (and methods, which Python's `hasattr` also sees) of Nova 34's `HostState`:
/// an unscoped extra spec with one of these names is checked.
pub const HOST_STATE_ATTRIBUTES: [&str; 36] = [
    "aggregates",
    "allocation_candidates",
    "cell_uuid",
    "consume_from_request",
    "cpu_allocation_ratio",
    "cpu_info",
    "disk_allocation_ratio",
    "disk_mb_used",
    "failed_builds",
    "free_disk_mb",
    "free_ram_mb",
    "host",
    "host_ip",
    "hypervisor_hostname",
    "hypervisor_type",
    "hypervisor_version",
    "instances",
    "limits",
    "metrics",
    "nodename",
    "num_instances",
    "num_io_ops",
    "numa_topology",
    "pci_stats",
    "ram_allocation_ratio",
    "service",
    "stats",
    "supported_instances",
    "total_usable_disk_gb",
    "total_usable_ram_mb",
    "update",
    "updated",
    "uuid",
    "vcpus_total",
    "vcpus_used",
    "_lock_name",
];

/// What the filter checks for one request: `(attribute path, requirement)` per extra spec it
/// reads, in the flavor's key order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CapabilitySpecs {
    specs: Vec<(Vec<String>, String)>,
}

impl CapabilitySpecs {
    /// The specs of `extra_specs` the filter reads; `None` when there is none (every host
    /// passes then).
    pub fn new(extra_specs: &BTreeMap<String, String>) -> Option<Self> {
        let mut specs = Vec::new();
        for (key, req) in extra_specs {
            if key == "hw:maxphysaddr_bits" {
                let path = ["cpu_info", "maxphysaddr", "bits"].map(String::from);
                specs.push((path.to_vec(), format!(">= {req}")));
                continue;
            }
            let scope: Vec<&str> = key.split(':').collect();
            let path = match scope.as_slice() {
                [one] if HOST_STATE_ATTRIBUTES.contains(one) => vec![one.to_string()],
                [_] => continue,
                [first, rest @ ..] if *first == SCOPE => {
                    rest.iter().map(|s| s.to_string()).collect()
                }
                _ => continue,
            };
            specs.push((path, req.clone()));
        }
        (!specs.is_empty()).then_some(CapabilitySpecs { specs })
    }

    /// True when the host has every attribute asked for and each matches its requirement.
    pub fn host_passes(&self, host: &HostState) -> bool {
        self.specs
            .iter()
            .all(|(path, req)| capability(host, path).is_some_and(|value| matches(&value, req)))
    }
}

/// The host's attribute at `path`, as Python's `str()` renders it; `None` where Nova's
/// `_get_capabilities` gives `None` or Parasol does not know the attribute.
fn capability(host: &HostState, path: &[String]) -> Option<String> {
    let (first, below) = path.split_first()?;
    let facts = host.profile.facts.as_deref();
    let top = match first.as_str() {
        "host" => Value::String(host.host().to_string()),
        "nodename" | "hypervisor_hostname" => Value::String(host.node().to_string()),
        "uuid" => Value::String(host.uuid().to_string()),
        "num_instances" => Value::from(host.num_instances),
        "hypervisor_type" => Value::String(facts?.hypervisor_type.clone()),
        "hypervisor_version" => Value::from(facts?.hypervisor_version),
        "cell_uuid" => Value::String(facts?.cell_uuid.clone()?),
        "cpu_info" => {
            let info = facts?.cpu_info.as_ref()?;
            if below.is_empty() {
                // Nova's host state holds the JSON text.
                return Some(python_json(info));
            }
            info.clone()
        }
        _ => return None,
    };
    let mut cap = &top;
    for key in below {
        // Only a JSON object has keys below it (Nova: `dict.get`, and a JSON text is loaded
        // first); anything else has no such attribute.
        cap = match cap {
            Value::Object(map) => map.get(key)?,
            _ => return None,
        };
    }
    match cap {
        Value::Null => None,
        Value::String(s) if s.is_empty() && first == "hypervisor_type" => None,
        Value::String(s) => Some(s.clone()),
        other => Some(python_repr(other)),
    }
}

/// Python's `repr()` of the object `json.loads` makes of `v` (`str()` of a container).
fn python_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Number(n) => python_number(n),
        Value::String(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(python_repr).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{}: {}",
                        python_repr(&Value::String(k.clone())),
                        python_repr(v)
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
    }
}

/// `json.dumps(v)` with Python's default separators.
fn python_json(v: &Value) -> String {
    match v {
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(python_json).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), python_json(v)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        Value::Number(n) => python_number(n),
        other => other.to_string(),
    }
}

fn python_number(n: &serde_json::Number) -> String {
    match (n.as_i64(), n.as_u64(), n.as_f64()) {
        (Some(i), _, _) => i.to_string(),
        (_, Some(u), _) => u.to_string(),
        (_, _, Some(f)) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e16 => format!("{f:.1}"),
        (_, _, Some(f)) => f.to_string(),
        _ => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ComputeFacts, HostId, HostProfile};
    use serde_json::json;
    use std::sync::Arc;

    fn specs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn host(facts: Option<ComputeFacts>) -> HostState {
        let mut profile = HostProfile::new("host1", "node1", "uuid-1", "nova", Vec::new());
        profile.facts = facts.map(Arc::new);
        let mut h = HostState::new(HostId(1), Arc::new(profile));
        h.num_instances = 3;
        h
    }

    fn kvm() -> ComputeFacts {
        ComputeFacts {
            hypervisor_type: "QEMU".into(),
            hypervisor_version: 8002000,
            supported_instances: vec![("x86_64".into(), "kvm".into(), "hvm".into())],
            cpu_info: Some(json!({"arch": "x86_64", "vendor": "Intel",
                "features": ["vmx", "sse4.2"], "topology": {"cores": 4, "sockets": 1},
                "maxphysaddr": {"mode": "passthrough", "bits": 46}})),
            has_numa_topology: false,
            pci_pools: 0,
            cell_uuid: Some("cell-1".into()),
            service_version: 66,
            ..ComputeFacts::default()
        }
    }

    fn passes(extra: &[(&str, &str)], h: &HostState) -> bool {
        CapabilitySpecs::new(&specs(extra)).is_none_or(|s| s.host_passes(h))
    }

    #[test]
    fn only_capabilities_keys_and_host_state_attribute_names_are_read() {
        // Scoped keys of other scopes and unscoped keys that name no attribute: nothing to do.
        assert_eq!(
            CapabilitySpecs::new(&specs(&[
                ("hw:cpu_policy", "dedicated"),
                ("aggregate_instance_extra_specs:ssd", "true"),
                ("resources:VCPU", "2"),
                ("trait:HW_CPU_X86_AVX", "required"),
                ("ssd", "true"),
            ])),
            None
        );
        let s = CapabilitySpecs::new(&specs(&[
            ("capabilities:cpu_info:arch", "x86_64"),
            ("hypervisor_type", "QEMU"),
            ("hw:maxphysaddr_bits", "42"),
            ("ssd", "true"),
        ]))
        .expect("specs");
        let paths: Vec<String> = s
            .specs
            .iter()
            .map(|(p, r)| format!("{}={r}", p.join(":")))
            .collect();
        assert_eq!(
            paths,
            [
                "cpu_info:arch=x86_64",
                "cpu_info:maxphysaddr:bits=>= 42",
                "hypervisor_type=QEMU",
            ]
        );
    }

    #[test]
    fn scoped_capabilities_match_with_novas_operators() {
        let h = host(Some(kvm()));
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);
        let cases: [Case; 12] = [
            (
                "plain equality",
                &[("capabilities:hypervisor_type", "QEMU")],
                true,
            ),
            (
                "another type",
                &[("capabilities:hypervisor_type", "xen")],
                false,
            ),
            (
                "numeric >=",
                &[("capabilities:hypervisor_version", ">= 8000000")],
                true,
            ),
            (
                "numeric >= fails",
                &[("capabilities:hypervisor_version", ">= 9000000")],
                false,
            ),
            (
                "JSON below cpu_info",
                &[("capabilities:cpu_info:vendor", "s== Intel")],
                true,
            ),
            (
                "nested JSON number",
                &[("capabilities:cpu_info:topology:cores", "== 4")],
                true,
            ),
            (
                "a list as Python prints it",
                &[("capabilities:cpu_info:features", "<in> 'vmx'")],
                true,
            ),
            (
                "<or>",
                &[("capabilities:cpu_info:arch", "<or> aarch64 <or> x86_64")],
                true,
            ),
            (
                "names",
                &[
                    ("capabilities:host", "host1"),
                    ("capabilities:nodename", "node1"),
                ],
                true,
            ),
            (
                "num_instances",
                &[("capabilities:num_instances", "<= 2")],
                false,
            ),
            (
                "unscoped attribute name",
                &[("hypervisor_type", "QEMU")],
                true,
            ),
            (
                "unscoped attribute name fails",
                &[("hypervisor_type", "ironic")],
                false,
            ),
        ];
        for (name, extra, want) in cases {
            assert_eq!(passes(extra, &h), want, "{name}");
        }
    }

    #[test]
    fn maxphysaddr_bits_is_a_capability_of_the_cpu() {
        let h = host(Some(kvm()));
        assert!(passes(&[("hw:maxphysaddr_bits", "42")], &h));
        assert!(passes(&[("hw:maxphysaddr_bits", "46")], &h));
        assert!(!passes(&[("hw:maxphysaddr_bits", "48")], &h));
    }

    #[test]
    fn an_unknown_or_missing_attribute_fails_the_host() {
        let h = host(Some(kvm()));
        for (name, key) in [
            ("no such attribute", "capabilities:no_such_thing"),
            ("no such key below cpu_info", "capabilities:cpu_info:model"),
            ("below a string", "capabilities:cpu_info:arch:bits"),
            ("below a number", "capabilities:hypervisor_version:major"),
            (
                "an attribute Parasol does not know",
                "capabilities:free_ram_mb",
            ),
            ("Nova's stats", "capabilities:io_workload"),
            ("unscoped, known to Nova only", "free_ram_mb"),
        ] {
            assert!(!passes(&[(key, "1")], &h), "{name}");
        }
        // Without Nova's records, the hypervisor's attributes are unknown; the names are not.
        let bare = host(None);
        assert!(!passes(&[("capabilities:hypervisor_type", "QEMU")], &bare));
        assert!(!passes(&[("hw:maxphysaddr_bits", "1")], &bare));
        assert!(passes(&[("capabilities:host", "host1")], &bare));
    }

    #[test]
    fn python_renders_values_as_nova_compares_them() {
        assert_eq!(
            python_repr(&json!(["a", 1, 2.0, true, null])),
            "['a', 1, 2.0, True, None]"
        );
        assert_eq!(python_repr(&json!({"k": "v"})), "{'k': 'v'}");
        assert_eq!(python_json(&json!({"k": [1, "v"]})), "{\"k\": [1, \"v\"]}");
    }
}
