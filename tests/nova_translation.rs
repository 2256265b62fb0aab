//! Parasol's resource request against Nova's own: `tests/nova_translation/golden.py` builds
//! RequestSpecs with Nova 34's objects, runs Nova's request filters and
//! `resources_from_request_spec` on them (a real Nova API and cell database on SQLite, with
//! compute nodes, services and aggregates), and emits each spec's primitive with Nova's
//! result. Each primitive is decoded with Parasol's codec, translated with
//! `parasol::nova::translate`, and compared field by field, for the pinned request and for
//! the PCPU fallback; a request the in-memory decision refuses must still have Nova's whole
//! query from `resources_from_request_spec`. Malformed extra specs that Nova's API refuses
//! must be codec errors naming the key. `tests/nova_request_groups.rs` compares the
//! request groups (numbered, ports, device profiles, PCI) on 259 shapes.
//!
//! `golden_against_nova_live` runs Nova in the cached virtualenv (see `support/venv.rs`);
//! `golden_against_the_committed_fixture` reads `tests/fixtures/nova_translation.json`,
//! which the live test checks against what Nova says today.

#[path = "support/venv.rs"]
mod venv;

use parasol::nova::{
    resources_from_request_spec, translate, Aggregate, CloudView, ComputeNodeRef, Refusal,
    RequestFilterOptions, RequestSpec, ResourceRequest,
};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const FIXTURE: &str = include_str!("fixtures/nova_translation.json");

/// Compares every case; returns one line per mismatch.
fn compare_all(doc: &Value) -> Vec<String> {
    let world = &doc["world"];
    let aggregates: Vec<Aggregate> =
        serde_json::from_value(world["aggregates"].clone()).expect("aggregates");
    let nodes: Vec<ComputeNodeRef> =
        serde_json::from_value(world["compute_nodes"].clone()).expect("compute nodes");
    let cases = doc["cases"].as_array().expect("cases");
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    let mut problems = Vec::new();
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let cloud = CloudView {
            aggregates: &aggregates,
            compute_nodes: &nodes,
            min_compute_service_version: case["min_compute_service_version"].as_i64(),
        };
        if let Err(p) = compare_case(case, &cloud) {
            problems.push(format!("{name}:\n    {}", p.join("\n    ")));
        }
    }
    problems.extend(malformed(doc));
    problems
}

fn compare_case(case: &Value, cloud: &CloudView<'_>) -> Result<(), Vec<String>> {
    let spec =
        RequestSpec::from_primitive(&case["spec"]).map_err(|e| vec![format!("decode: {e}")])?;
    let options: RequestFilterOptions = serde_json::from_value(case["options"].clone())
        .map_err(|e| vec![format!("options: {e}")])?;
    let nova = &case["nova"];
    let pinned = translate(&spec, &options, cloud, true);
    if let Some(word) = case["parasol_unsupported"].as_str() {
        let mut problems = match pinned {
            Err(Refusal::Unsupported(reason)) if reason.contains(word) => Vec::new(),
            other => vec![format!("want Unsupported({word}…), got {other:?}")],
        };
        // Refused by the in-memory decision, the whole request is still Nova's.
        for (pinning, key) in [(true, "request"), (false, "fallback")] {
            let want = nova[key]["querystring"].as_str().unwrap_or_default();
            match resources_from_request_spec(&spec, &options, cloud, pinning) {
                Ok(whole) if whole.to_querystring() == want => {}
                Err(Refusal::Unsupported(reason)) if reason.contains(word) => {}
                other => problems.push(format!("{key}: Nova asks {want}, Parasol {other:?}")),
            }
        }
        return if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        };
    }
    if let Some(reason) = nova.get("no_valid_host") {
        let want = Refusal::NoValidHost(reason.as_str().unwrap_or_default().to_string());
        return match pinned {
            Err(got) if got == want => Ok(()),
            other => Err(vec![format!("want {want:?}, got {other:?}")]),
        };
    }
    let mut problems = Vec::new();
    for (label, pinning, key) in [("pinned", true, "request"), ("fallback", false, "fallback")] {
        match translate(&spec, &options, cloud, pinning) {
            Ok(ours) => problems.extend(
                diff(&ours, &nova[key])
                    .into_iter()
                    .map(|d| format!("{label}: {d}")),
            ),
            Err(e) => problems.push(format!(
                "{label}: Nova asks {}, Parasol refuses: {e}",
                nova[key]["querystring"]
            )),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// Field-by-field differences between Parasol's request and Nova's.
fn diff(ours: &ResourceRequest, nova: &Value) -> Vec<String> {
    let empty = json!({});
    let group = if nova["unnumbered"].is_null() {
        &empty
    } else {
        &nova["unnumbered"]
    };
    let strings = |v: &Value| -> BTreeSet<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let normalized = |lists: Vec<Vec<String>>| -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = lists
            .into_iter()
            .map(|mut l| {
                l.sort();
                l
            })
            .collect();
        out.sort();
        out
    };
    let nova_member_of: Vec<Vec<String>> =
        serde_json::from_value(group.get("member_of").cloned().unwrap_or(json!([])))
            .unwrap_or_default();
    let nova_resources: std::collections::BTreeMap<String, u64> =
        serde_json::from_value(group.get("resources").cloned().unwrap_or(json!({})))
            .unwrap_or_default();
    let fields: Vec<(&str, String, String)> = vec![
        (
            "resources",
            format!("{:?}", ours.resources),
            format!("{nova_resources:?}"),
        ),
        (
            "required_traits",
            format!("{:?}", ours.required_traits),
            format!("{:?}", strings(&group["required_traits"])),
        ),
        (
            "forbidden_traits",
            format!("{:?}", ours.forbidden_traits),
            format!("{:?}", strings(&group["forbidden_traits"])),
        ),
        (
            "member_of",
            format!("{:?}", normalized(ours.member_of.clone())),
            format!("{:?}", normalized(nova_member_of)),
        ),
        (
            "forbidden_aggregates",
            format!("{:?}", ours.forbidden_aggregates),
            format!("{:?}", strings(&group["forbidden_aggregates"])),
        ),
        (
            "in_tree",
            format!("{:?}", ours.in_tree),
            format!("{:?}", group["in_tree"].as_str()),
        ),
        (
            "root_required",
            format!("{:?}", ours.root_required),
            format!("{:?}", strings(&nova["root_required"])),
        ),
        (
            "root_forbidden",
            format!("{:?}", ours.root_forbidden),
            format!("{:?}", strings(&nova["root_forbidden"])),
        ),
        (
            "group_policy",
            format!("{:?}", ours.group_policy),
            format!("{:?}", nova["group_policy"].as_str()),
        ),
        (
            "limit",
            format!("{:?}", ours.limit),
            format!("{:?}", nova["limit"].as_u64().map(|l| l as u32)),
        ),
        (
            "cpu_pinning_requested",
            ours.cpu_pinning_requested.to_string(),
            nova["cpu_pinning_requested"].to_string(),
        ),
        (
            "querystring",
            ours.to_querystring(),
            nova["querystring"].as_str().unwrap_or_default().to_string(),
        ),
    ];
    let mut out: Vec<String> = fields
        .into_iter()
        .filter(|(_, a, b)| a != b)
        .map(|(field, a, b)| format!("{field}: Parasol {a} ≠ Nova {b}"))
        .collect();
    if nova["numbered"].as_array().is_some_and(|n| !n.is_empty())
        || nova["same_subtree"]
            .as_array()
            .is_some_and(|s| !s.is_empty())
    {
        out.push(format!(
            "Nova has numbered groups or same_subtree that Parasol did not refuse: {}",
            nova["querystring"]
        ));
    }
    out
}

/// Every malformed extra spec Nova's API validators refuse is a codec error naming it.
fn malformed(doc: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for m in doc["malformed"].as_array().expect("malformed") {
        let (key, value) = (m["key"].as_str().unwrap_or_default(), m["value"].clone());
        if m["nova_api_error"].is_null() {
            problems.push(format!(
                "{key}={value}: Nova's API accepts it; drop it from MALFORMED"
            ));
            continue;
        }
        let spec = json!({"nova_object.name": "RequestSpec", "nova_object.namespace": "nova", "nova_object.version": "1.15",
            "nova_object.data": {"flavor": {"nova_object.name": "Flavor", "nova_object.namespace": "nova",
                "nova_object.version": "1.2", "nova_object.data": {"vcpus": 4, "memory_mb": 1, "root_gb": 1,
                "extra_specs": {key: value}}}}});
        match RequestSpec::from_primitive(&spec) {
            Err(e)
                if e.to_string()
                    .contains(&format!("spec_obj.flavor.extra_specs.{key}")) => {}
            other => problems.push(format!(
                "{key}={value}: Nova's API says {}, Parasol {other:?}",
                m["nova_api_error"]
            )),
        }
    }
    problems
}

fn assert_no_problems(problems: &[String]) {
    assert!(
        problems.is_empty(),
        "{} mismatches with Nova:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Case names with Nova's results, for comparing the fixture with a live run.
fn nova_results(doc: &Value) -> Vec<(String, String)> {
    doc["cases"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let mut result = c["nova"].clone();
            for key in ["request", "fallback"] {
                if let Some(groups) = result
                    .get_mut(key)
                    .and_then(|r| r.get_mut("unnumbered"))
                    .and_then(|g| g.get_mut("member_of"))
                {
                    if let Some(lists) = groups.as_array_mut() {
                        for l in lists.iter_mut() {
                            if let Some(items) = l.as_array_mut() {
                                items.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                            }
                        }
                    }
                }
            }
            (
                c["name"].as_str().unwrap_or_default().to_string(),
                result.to_string(),
            )
        })
        .collect()
}

#[test]
fn golden_against_the_committed_fixture() {
    let doc: Value = serde_json::from_str(FIXTURE).expect("fixture is JSON");
    assert_no_problems(&compare_all(&doc));
}

#[test]
fn golden_against_nova_live() {
    let venv = venv::nova_venv();
    let dir = tempfile::tempdir().expect("temp dir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nova_translation/golden.py");
    let out = Command::new(venv.join("bin/python"))
        .arg(&script)
        .arg(dir.path())
        .output()
        .expect("run golden.py");
    assert!(
        out.status.success(),
        "golden.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("golden.py prints JSON");
    assert_no_problems(&compare_all(&doc));
    let fixture: Value = serde_json::from_str(FIXTURE).expect("fixture is JSON");
    assert_eq!(
        nova_results(&fixture),
        nova_results(&doc),
        "tests/fixtures/nova_translation.json is stale: regenerate it (see golden.py)"
    );
}
