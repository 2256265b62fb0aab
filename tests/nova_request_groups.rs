//! Golden test of Nova's whole request: `tests/nova_translation/groups.py` builds seeded
//! random RequestSpecs (and a few written by hand) with Nova 34's own objects — numbered and
//! suffixed flavor groups, `group_policy`, traits required and forbidden, image traits, the
//! CPU policies and their PCPU fallback, Neutron ports' bandwidth and packet-rate groups
//! (legacy and extended, with `same_subtree`), Cyborg device-profile groups, PCI-in-Placement
//! groups, root traits, destination aggregates — and prints each spec's primitive (what
//! crosses the RPC) with Nova's `ResourceRequest.from_request_spec(…).to_querystring()` and
//! the query nova-scheduler sends after its request filters. Parasol decodes each primitive
//! and must write the same two queries, byte for byte (Nova's are sorted, hence
//! deterministic), for the pinned request and the fallback; where Nova raises, Parasol's
//! codec must refuse the spec. The in-memory decision (`translate`) must refuse every shape
//! with a suffixed group or `same_subtree`, naming each, and take the others as they are.

#[path = "support/venv.rs"]
mod venv;

use parasol::nova::{
    resources_from_request_spec, translate, CloudView, Refusal, RequestFilterOptions, RequestSpec,
    ResourceRequest,
};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Shapes drawn at random besides the named ones; the seed is `PARASOL_SEED` or this.
const RANDOM_SHAPES: usize = 240;
const DEFAULT_SEED: u64 = 2026;

fn nova_shapes(seed: u64) -> Value {
    let venv = venv::nova_venv();
    let dir = tempfile::tempdir().expect("temp dir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nova_translation/groups.py");
    let out = Command::new(venv.join("bin/python"))
        .arg(&script)
        .arg(dir.path())
        .arg(seed.to_string())
        .arg(RANDOM_SHAPES.to_string())
        .output()
        .expect("run groups.py");
    assert!(
        out.status.success(),
        "groups.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("groups.py prints JSON")
}

/// The differences between Parasol and Nova on one shape.
fn compare(shape: &Value, cloud: &CloudView<'_>) -> Vec<String> {
    let decoded = RequestSpec::from_primitive(&shape["spec"]);
    if let Some(error) = shape["nova_error"].as_str() {
        return match decoded {
            Err(_) => Vec::new(),
            Ok(_) => vec![format!("Nova raises {error}, Parasol decodes the spec")],
        };
    }
    let spec = match decoded {
        Ok(spec) => spec,
        Err(e) => return vec![format!("Parasol refuses the spec: {e}")],
    };
    let options = RequestFilterOptions::default();
    let mut problems = Vec::new();
    for (pin, key) in [(true, "pinned"), (false, "fallback")] {
        let nova = shape["from_request_spec"][key].as_str().unwrap_or_default();
        let ours = ResourceRequest::from_request_spec(&spec, pin, options.max_placement_results);
        if ours.to_querystring() != nova {
            problems.push(format!(
                "from_request_spec {key}:\n      Nova    {nova}\n      Parasol {}",
                ours.to_querystring()
            ));
        }
        let nova = shape["scheduler"][key].as_str().unwrap_or_default();
        match resources_from_request_spec(&spec, &options, cloud, pin) {
            Ok(ours) if ours.to_querystring() == nova => {
                problems.extend(decision(&spec, &options, cloud, pin, &ours, key))
            }
            Ok(ours) => problems.push(format!(
                "scheduler {key}:\n      Nova    {nova}\n      Parasol {}",
                ours.to_querystring()
            )),
            Err(e) => problems.push(format!("scheduler {key}: Parasol refuses: {e}")),
        }
    }
    problems
}

/// The in-memory decision refuses exactly the shapes with suffixed groups or
/// `same_subtree`, naming each suffix; it takes the others unchanged.
fn decision(
    spec: &RequestSpec,
    options: &RequestFilterOptions,
    cloud: &CloudView<'_>,
    pin: bool,
    whole: &ResourceRequest,
    key: &str,
) -> Vec<String> {
    let nested = !whole.groups.is_empty() || !whole.same_subtree.is_empty();
    match (translate(spec, options, cloud, pin), nested) {
        (Ok(flat), false) if &flat == whole => Vec::new(),
        (Err(Refusal::Unsupported(reason)), true) => whole
            .groups
            .iter()
            .filter(|g| !reason.contains(&format!("request group '{}'", g.suffix())))
            .map(|g| {
                format!(
                    "translate {key}: {reason:?} does not name group {:?}",
                    g.suffix()
                )
            })
            .chain(
                (!whole.same_subtree.is_empty() && !reason.contains("same_subtree"))
                    .then(|| format!("translate {key}: {reason:?} does not name same_subtree")),
            )
            .collect(),
        (other, _) => vec![format!(
            "translate {key}: nested shape {nested}, got {other:?}"
        )],
    }
}

#[test]
fn parasol_writes_novas_query_for_every_request_shape() {
    let seed = std::env::var("PARASOL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    let doc = nova_shapes(seed);
    let cloud = CloudView {
        min_compute_service_version: doc["min_compute_service_version"].as_i64(),
        ..CloudView::default()
    };
    let shapes = doc["shapes"].as_array().expect("shapes");
    assert!(shapes.len() >= 200, "only {} shapes", shapes.len());
    let refused = shapes
        .iter()
        .filter(|s| s["nova_error"].is_string())
        .count();
    assert!(refused >= 4, "only {refused} shapes Nova refuses");
    let kinds = [
        "resources1",
        "group_policy=none",
        "group_policy=isolate",
        "same_subtree",
        "NET_BW_EGR_KILOBIT_PER_SEC",
        "NET_PACKET_RATE_KILOPACKET_PER_SEC",
        "resourcesdevice_profile_",
        "CUSTOM_PCI_8086",
        "PCPU",
        "%21HW_CPU_HYPERTHREADING",
        "root_required=CUSTOM_ROOT",
        "member_of=in",
    ];
    for kind in kinds {
        let n = shapes
            .iter()
            .filter(|s| {
                s["scheduler"]["pinned"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(kind)
            })
            .count();
        assert!(
            n > 0,
            "no shape asks {kind}: the generator lost a kind (seed {seed})"
        );
    }
    let mismatches: Vec<String> = shapes
        .iter()
        .filter_map(|s| {
            let problems = compare(s, &cloud);
            (!problems.is_empty())
                .then(|| format!("{}:\n    {}", s["name"], problems.join("\n    ")))
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "seed {seed}: {} of {} shapes differ from Nova:\n{}",
        mismatches.len(),
        shapes.len(),
        mismatches.join("\n")
    );
    eprintln!("seed {seed}: {} shapes, all equal to Nova's", shapes.len());
}
