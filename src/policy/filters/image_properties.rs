//! `ImagePropertiesFilter`: the image's architecture, hypervisor type and VM mode must be one
//! of the node's `supported_instances`, its `img_hv_requested_version` must accept the node's
//! hypervisor version and its `hw_maxphysaddr_bits` fit the node's CPU (Nova 34's
//! `image_props_filter.py`), read from Nova's compute-node records (`[nova_db]`).
//!
//! A host Parasol has no records for (no `[nova_db]`, or a node not read yet) passes: Parasol
//! cannot tell what it supports, and refusing it would turn every such request into
//! NoValidHost. Where Nova raises on a malformed property (an unknown architecture name, a bad
//! version predicate), the host does not pass: the request ends in NoValidHost instead of
//! Nova's error, the server in ERROR either way.

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};
use crate::policy::config::PolicyConfig;
use std::cmp::Ordering;

/// Nova's `ImagePropertiesFilter`; runs for a rebuild too (`RUN_ON_REBUILD = True`).
#[derive(Clone, Debug, Default)]
pub struct ImagePropertiesFilter {
    /// `image_properties_default_architecture`: the architecture of an image that names none.
    default_architecture: Option<String>,
}

impl ImagePropertiesFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "ImagePropertiesFilter";

    /// The filter with `[policy] image_properties_default_architecture`.
    pub fn new(config: &PolicyConfig) -> Self {
        let arch = config.image_properties_default_architecture.trim();
        ImagePropertiesFilter {
            default_architecture: (!arch.is_empty()).then(|| arch.to_string()),
        }
    }

    /// `(architecture, hypervisor type, VM mode)` the image asks for, canonicalised as
    /// Nova's `fields.*.canonicalize` (lower case and the historical aliases).
    fn wanted(&self, req: &RequestContext) -> [Option<String>; 3] {
        let prop = |k: &str| req.image_props.as_ref().and_then(|p| p.get(k)).cloned();
        let arch = prop("hw_architecture").or_else(|| self.default_architecture.clone());
        [
            arch.map(|a| canonical_arch(&a)),
            prop("img_hv_type").map(|h| canonical_hv_type(&h)),
            prop("hw_vm_mode").map(|m| canonical_vm_mode(&m)),
        ]
    }
}

fn canonical_arch(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    match lower.as_str() {
        "i386" | "i486" | "i586" | "x86_32" | "x86_32p" => "i686".into(),
        "amd64" => "x86_64".into(),
        _ => lower,
    }
}

fn canonical_hv_type(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    if lower == "xapi" {
        "xen".into()
    } else {
        lower
    }
}

fn canonical_vm_mode(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    match lower.as_str() {
        "pv" => "xen".into(),
        "hv" | "baremetal" => "hvm".into(),
        _ => lower,
    }
}

/// A version's release numbers (`6.2.0` → `[6, 2]`: trailing zeros do not count, as in
/// `packaging.version.Version`); `None` when a part is not a number.
fn release(version: &str) -> Option<Vec<u64>> {
    let mut parts: Vec<u64> = version
        .trim()
        .trim_start_matches(['v', 'V'])
        .split('.')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    while parts.last() == Some(&0) {
        parts.pop();
    }
    Some(parts)
}

/// Nova's hypervisor version integer as its dotted form (`convert_version_to_str`: three
/// decimal digits per part, `6002000` → `6.2.0`).
fn version_of_int(mut version: i64) -> String {
    let mut parts = Vec::new();
    while version > 0 {
        parts.insert(0, (version % 1000).to_string());
        version /= 1000;
    }
    parts.join(".")
}

/// oslo's `VersionPredicate(predicate).satisfied_by(version)`: comma-separated `op version`
/// terms (`>=6.0,<7`), every one must hold; `None` when the predicate does not parse.
fn satisfied(predicate: &str, version: &str) -> Option<bool> {
    let have = release(version)?;
    for term in predicate.split(',') {
        let term = term.trim();
        let op_len = ["<=", ">=", "!=", "==", "<", ">"]
            .iter()
            .find(|op| term.starts_with(**op))?
            .len();
        let (op, want) = term.split_at(op_len);
        let want = want.trim();
        if want.is_empty() || want.contains(char::is_whitespace) {
            return None;
        }
        let ord = have.cmp(&release(want)?);
        let holds = match op {
            "<" => ord == Ordering::Less,
            "<=" => ord != Ordering::Greater,
            ">" => ord == Ordering::Greater,
            ">=" => ord != Ordering::Less,
            "==" => ord == Ordering::Equal,
            _ => ord != Ordering::Equal,
        };
        if !holds {
            return Some(false);
        }
    }
    Some(true)
}

impl Filter for ImagePropertiesFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    /// Nova's `RUN_ON_REBUILD = True`: a rebuild's new image is checked against the host.
    fn runs_on_rebuild(&self) -> bool {
        true
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        self.default_architecture.is_some() || req.image_props.is_some()
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        let wanted = self.wanted(req);
        if wanted.iter().all(Option::is_none) {
            return true;
        }
        let Some(facts) = host.profile.facts.as_ref() else {
            return true;
        };
        let prop = |k: &str| req.image_props.as_ref().and_then(|p| p.get(k));
        let version_ok = || match prop("img_hv_requested_version") {
            Some(predicate) if facts.hypervisor_version != 0 => {
                satisfied(predicate, &version_of_int(facts.hypervisor_version)).unwrap_or(false)
            }
            _ => true,
        };
        let bits_ok = || {
            let Some(required) = prop("hw_maxphysaddr_bits").and_then(|b| b.parse::<i64>().ok())
            else {
                return true;
            };
            let bits = facts
                .cpu_info
                .as_ref()
                .and_then(|c| c.get("maxphysaddr"))
                .and_then(|m| m.get("bits"))
                .and_then(serde_json::Value::as_i64)
                .filter(|b| *b != 0);
            bits.is_none_or(|bits| bits >= required)
        };
        facts.supported_instances.iter().any(|(arch, hv, mode)| {
            let offered = [arch, hv, mode];
            wanted
                .iter()
                .flatten()
                .all(|w| offered.iter().any(|o| o.as_str() == w))
                && version_ok()
                && bits_ok()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;
    use crate::domain::{ComputeFacts, HostState};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn with_facts(instances: &[(&str, &str, &str)], version: i64, bits: Option<i64>) -> HostState {
        let mut h = host(1);
        let mut profile = (*h.profile).clone();
        profile.facts = Some(Arc::new(ComputeFacts {
            hypervisor_type: "QEMU".into(),
            hypervisor_version: version,
            supported_instances: instances
                .iter()
                .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
                .collect(),
            cpu_info: bits.map(|b| serde_json::json!({"maxphysaddr": {"bits": b}})),
            has_numa_topology: false,
            pci_pools: 0,
            cell_uuid: None,
            service_version: 70,
            ..ComputeFacts::default()
        }));
        h.profile = Arc::new(profile);
        h
    }

    fn req(props: &[(&str, &str)]) -> RequestContext {
        let mut r = request();
        let map: BTreeMap<String, String> = props
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        r.image_props = (!map.is_empty()).then(|| Arc::new(map));
        r
    }

    #[test]
    fn the_image_must_match_one_supported_instance() {
        let env = FilterEnv::without_heartbeats();
        let kvm = with_facts(
            &[("x86_64", "kvm", "hvm"), ("i686", "kvm", "hvm")],
            6_002_000,
            None,
        );
        let f = ImagePropertiesFilter::default();
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);
        let cases: [Case; 11] = [
            ("no image property", &[], true),
            (
                "architecture offered",
                &[("hw_architecture", "x86_64")],
                true,
            ),
            ("alias amd64", &[("hw_architecture", "AMD64")], true),
            ("alias i386", &[("hw_architecture", "i386")], true),
            (
                "architecture not offered",
                &[("hw_architecture", "aarch64")],
                false,
            ),
            (
                "all three",
                &[
                    ("hw_architecture", "x86_64"),
                    ("img_hv_type", "kvm"),
                    ("hw_vm_mode", "hvm"),
                ],
                true,
            ),
            ("vm mode alias hv", &[("hw_vm_mode", "hv")], true),
            ("other hypervisor", &[("img_hv_type", "xen")], false),
            (
                "version satisfied",
                &[
                    ("hw_architecture", "x86_64"),
                    ("img_hv_requested_version", ">=6.0,<7"),
                ],
                true,
            ),
            (
                "version too old",
                &[
                    ("hw_architecture", "x86_64"),
                    ("img_hv_requested_version", ">=6.3"),
                ],
                false,
            ),
            (
                "bad predicate",
                &[
                    ("hw_architecture", "x86_64"),
                    ("img_hv_requested_version", "~6"),
                ],
                false,
            ),
        ];
        for (name, props, want) in cases {
            assert_eq!(f.passes(&kvm, &req(props), &env), want, "{name}");
        }
    }

    #[test]
    fn nodes_without_records_pass_and_nodes_without_instances_do_not() {
        let env = FilterEnv::without_heartbeats();
        let f = ImagePropertiesFilter::default();
        let r = req(&[("hw_architecture", "x86_64")]);
        assert!(f.passes(&host(1), &r, &env), "no records: unknown, passes");
        assert!(
            !f.passes(&with_facts(&[], 0, None), &r, &env),
            "records with nothing supported"
        );
        assert!(
            f.passes(&with_facts(&[], 0, None), &req(&[]), &env),
            "nothing asked"
        );
    }

    #[test]
    fn default_architecture_and_physical_address_bits() {
        let env = FilterEnv::without_heartbeats();
        let arm = with_facts(&[("aarch64", "qemu", "hvm")], 0, Some(40));
        let f = ImagePropertiesFilter::new(&PolicyConfig {
            image_properties_default_architecture: "x86_64".into(),
            ..PolicyConfig::default()
        });
        assert!(f.restricts(&req(&[])));
        assert!(
            !f.passes(&arm, &req(&[]), &env),
            "default architecture applies"
        );
        assert!(f.passes(&arm, &req(&[("hw_architecture", "aarch64")]), &env));
        let bits = |b: &str| req(&[("hw_architecture", "aarch64"), ("hw_maxphysaddr_bits", b)]);
        assert!(f.passes(&arm, &bits("40"), &env));
        assert!(!f.passes(&arm, &bits("42"), &env));
        let unknown_bits = with_facts(&[("aarch64", "qemu", "hvm")], 0, None);
        assert!(
            f.passes(&unknown_bits, &bits("42"), &env),
            "no maxphysaddr reported"
        );
    }

    #[test]
    fn versions_compare_as_oslo_does() {
        assert_eq!(version_of_int(6_002_000), "6.2.0");
        assert_eq!(version_of_int(1_005_003), "1.5.3");
        let cases = [
            (">=6.0", "6.2.0", Some(true)),
            ("==6.2", "6.2.0", Some(true)),
            ("!=6.2", "6.2.0", Some(false)),
            ("<6.10", "6.2.0", Some(true)),
            (">= 6.0 , < 6.2", "6.2.0", Some(false)),
            ("6.0", "6.2.0", None),
            (">=x", "6.2.0", None),
        ];
        for (predicate, version, want) in cases {
            assert_eq!(
                satisfied(predicate, version),
                want,
                "{predicate} vs {version}"
            );
        }
    }
}
