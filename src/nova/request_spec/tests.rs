//! Unit tests of RequestSpec decoding and of the contexts it yields.

use super::*;
use crate::domain::GroupPolicy;
use serde_json::json;

fn object(name: &str, version: &str, data: Value) -> Value {
    json!({"nova_object.name": name, "nova_object.namespace": "nova",
           "nova_object.version": version, "nova_object.data": data})
}

fn flavor(data: Value) -> Value {
    object("Flavor", "1.2", data)
}

fn spec(data: Value) -> Value {
    object("RequestSpec", "1.15", data)
}

fn small() -> Value {
    flavor(
        json!({"name": "m1.small", "vcpus": 1, "memory_mb": 2048, "root_gb": 20, "ephemeral_gb": 0, "swap": 0}),
    )
}

#[test]
fn demand_follows_nova_resources_from_request_spec() {
    // (root_gb, ephemeral_gb, swap_mb, is_bfv, want DISK_GB)
    let cases = [
        (20, 0, 0, false, 20),
        (20, 5, 0, false, 25),
        (20, 0, 1, false, 21),
        (20, 0, 1024, false, 21),
        (20, 0, 1025, false, 22),
        (20, 5, 512, true, 6),
        (0, 0, 0, true, 0),
    ];
    for (root, eph, swap, bfv, want) in cases {
        let v = spec(
            json!({"flavor": flavor(json!({"vcpus": 2, "memory_mb": 512, "root_gb": root,
                            "ephemeral_gb": eph, "swap": swap})), "is_bfv": bfv}),
        );
        let s = RequestSpec::from_primitive(&v).unwrap();
        assert_eq!(
            s.demand,
            Resources::new(2, 512, want),
            "root {root} eph {eph} swap {swap} bfv {bfv}"
        );
    }
}

#[test]
fn a_minimal_spec_tolerates_absent_fields_and_ignores_unknown_ones() {
    let s = RequestSpec::from_primitive(&spec(
        json!({"flavor": small(), "brand_new_field": {"x": 1}}),
    ))
    .unwrap();
    assert_eq!(s.num_instances, 1);
    assert_eq!(s.instance_uuid, None);
    assert!(s.force_hosts.is_empty() && s.ignore_hosts.is_empty() && s.force_nodes.is_empty());
    assert_eq!(s.requested_destination, None);
    assert_eq!(s.instance_group, None);
    assert!(!s.is_bfv);
    assert_eq!(s.flavor.key(), "m1.small");
}

#[test]
fn reads_constraints_group_and_hints() {
    let v = spec(json!({
        "flavor": small(),
        "availability_zone": "az1",
        "force_hosts": ["h1"], "force_nodes": ["n1"], "ignore_hosts": ["h2", "h3"],
        "requested_destination": object("Destination", "1.4", json!({"host": "h9", "node": null})),
        "instance_group": object("InstanceGroup", "1.10", json!({"policies": ["anti-affinity"],
            "hosts": ["h4"], "members": ["m1"], "rules": {"max_server_per_host": "2"}})),
        "scheduler_hints": {"group": ["g1"], "build_near_host_ip": "10.0.0.1", "n": 3},
    }));
    let s = RequestSpec::from_primitive(&v).unwrap();
    assert_eq!(s.availability_zone.as_deref(), Some("az1"));
    assert_eq!(s.ignore_hosts, vec!["h2", "h3"]);
    assert_eq!(
        s.requested_destination,
        Some(Destination {
            host: Some("h9".into()),
            node: None,
            cell: None,
        })
    );
    let g = s.instance_group.clone().unwrap();
    assert_eq!(
        (g.policy, g.max_server_per_host),
        (Some(GroupPolicy::AntiAffinity), Some(2))
    );
    assert_eq!(g.members, vec!["m1"]);
    assert_eq!(s.scheduler_hints["build_near_host_ip"], vec!["10.0.0.1"]);
    assert_eq!(s.scheduler_hints["n"], vec!["3"]);
    let ctx = &s.contexts(&["u1".to_string()])[0];
    assert_eq!(ctx.force_hosts, vec!["h1"]);
    assert_eq!(ctx.force_nodes, vec!["n1"]);
    let group = ctx.group.clone().unwrap();
    assert_eq!(
        (group.policy, group.hosts, group.max_server_per_host),
        (GroupPolicy::AntiAffinity, vec!["h4".to_string()], 2)
    );
}

#[test]
fn errors_name_the_field_that_is_wrong() {
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "wrong object name",
            object("Flavor", "1.2", json!({})),
            "expected a RequestSpec object, got Flavor",
        ),
        (
            "missing flavor",
            spec(json!({"num_instances": 1})),
            "spec_obj.flavor is missing",
        ),
        (
            "null flavor",
            spec(json!({"flavor": null})),
            "spec_obj.flavor is missing",
        ),
        (
            "flavor of another name",
            spec(json!({"flavor": object("ImageMeta", "1.8", json!({}))})),
            "spec_obj.flavor: expected a Flavor object",
        ),
        (
            "negative vcpus",
            spec(json!({"flavor": flavor(json!({"vcpus": -1, "memory_mb": 1, "root_gb": 1}))})),
            "spec_obj.flavor.vcpus must be a non-negative integer",
        ),
        (
            "non-integer memory_mb",
            spec(json!({"flavor": flavor(json!({"vcpus": 1, "memory_mb": 2048.5, "root_gb": 1}))})),
            "spec_obj.flavor.memory_mb must be a non-negative integer",
        ),
        (
            "string memory_mb",
            spec(json!({"flavor": flavor(json!({"vcpus": 1, "memory_mb": "2048", "root_gb": 1}))})),
            "spec_obj.flavor.memory_mb",
        ),
        (
            "missing vcpus",
            spec(json!({"flavor": flavor(json!({"memory_mb": 1, "root_gb": 1}))})),
            "spec_obj.flavor.vcpus is missing",
        ),
        (
            "negative swap",
            spec(
                json!({"flavor": flavor(json!({"vcpus": 1, "memory_mb": 1, "root_gb": 1, "swap": -5}))}),
            ),
            "spec_obj.flavor.swap",
        ),
        (
            "unknown major",
            object("RequestSpec", "2.0", json!({"flavor": small()})),
            "version 2.0 is not supported",
        ),
        (
            "zero instances",
            spec(json!({"flavor": small(), "num_instances": 0})),
            "spec_obj.num_instances must be between",
        ),
        (
            "huge instances",
            spec(json!({"flavor": small(), "num_instances": 1_000_000_000})),
            "spec_obj.num_instances",
        ),
        (
            "unknown policy",
            spec(
                json!({"flavor": small(), "instance_group": object("InstanceGroup", "1.11", json!({"policy": "nearby"}))}),
            ),
            "spec_obj.instance_group.policy is not a known policy",
        ),
        (
            "hosts not a list",
            spec(json!({"flavor": small(), "force_hosts": 3})),
            "spec_obj.force_hosts must be a list",
        ),
        (
            "not an object",
            json!([1, 2]),
            "spec_obj must be a JSON object",
        ),
        (
            "namespace",
            json!({"nova_object.name": "RequestSpec", "nova_object.namespace": "x", "nova_object.version": "1.0", "nova_object.data": {}}),
            "spec_obj.nova_object.namespace",
        ),
    ];
    for (name, value, want) in cases {
        let err = RequestSpec::from_primitive(&value)
            .expect_err(name)
            .to_string();
        assert!(
            err.contains(want),
            "{name}: {err:?} should contain {want:?}"
        );
    }
}

#[test]
fn contexts_use_given_uuids_then_the_spec_uuid_then_fresh_ones() {
    const U0: &str = "178b0921-8f85-4257-88b6-2e743b5a975c";
    let one = RequestSpec::from_primitive(&spec(json!({"flavor": small(), "instance_uuid": U0})))
        .unwrap();
    let given = one.contexts(&["a".to_string(), "b".to_string()]);
    assert_eq!(
        given
            .iter()
            .map(|c| c.instance_uuid.as_str())
            .collect::<Vec<_>>(),
        vec!["a", "b"]
    );
    assert_eq!(one.contexts(&[])[0].instance_uuid, U0);
    assert_eq!(one.contexts(&[])[0].demand, Resources::new(1, 2048, 20));
    assert_eq!(one.contexts(&[])[0].flavor, "m1.small");

    let three =
        RequestSpec::from_primitive(&spec(json!({"flavor": small(), "num_instances": 3}))).unwrap();
    let ctxs = three.contexts(&[]);
    assert_eq!(ctxs.len(), 3);
    for c in &ctxs {
        assert!(
            uuid::Uuid::parse_str(&c.instance_uuid).is_ok(),
            "{}",
            c.instance_uuid
        );
    }
    assert_ne!(ctxs[0].instance_uuid, ctxs[1].instance_uuid);
}

#[test]
fn reads_the_cell_of_the_requested_destination() {
    let cell = "5c8e0b5e-0d2b-4d0a-9a0e-6a6f4a1d2c3b";
    let mapping = object(
        "CellMapping",
        "1.1",
        json!({"uuid": cell, "name": "cell1", "transport_url": "none:///", "database_connection": "x"}),
    );
    let v = spec(json!({
        "flavor": small(),
        "requested_destination": object("Destination", "1.4",
            json!({"host": null, "node": null, "cell": mapping, "allow_cross_cell_move": false})),
    }));
    let s = RequestSpec::from_primitive(&v).unwrap();
    let dest = s.requested_destination.expect("a destination");
    assert_eq!(dest.cell.as_deref(), Some(cell));
    assert_eq!((dest.host, dest.node), (None, None));
}

/// InstanceGroup 1.11's primitive carries the rules as `_rules` (Nova's `rules` is a property
/// over that field): the anti-affinity `max_server_per_host` of a group created at API 2.64+.
#[test]
fn reads_max_server_per_host_from_the_underscored_rules_field() {
    let group = |data: Value| {
        let v = spec(json!({
            "flavor": small(),
            "instance_group": object("InstanceGroup", "1.11", data),
        }));
        RequestSpec::from_primitive(&v)
            .unwrap()
            .instance_group
            .unwrap()
            .max_server_per_host
    };
    let cases: [(&str, Value, Option<i64>); 4] = [
        (
            "_rules as Nova 1.11 sends it",
            json!({"policy": "anti-affinity", "_rules": {"max_server_per_host": "2"}}),
            Some(2),
        ),
        (
            "rules of a legacy dict",
            json!({"policy": "anti-affinity", "rules": {"max_server_per_host": 3}}),
            Some(3),
        ),
        (
            "empty _rules",
            json!({"policy": "anti-affinity", "_rules": {}}),
            None,
        ),
        ("no rules", json!({"policy": "anti-affinity"}), None),
    ];
    for (name, data, want) in cases {
        assert_eq!(group(data), want, "{name}");
    }
    let bad = spec(
        json!({"flavor": small(), "instance_group": object("InstanceGroup", "1.11",
        json!({"policy": "anti-affinity", "_rules": {"max_server_per_host": "zero"}}))}),
    );
    let err = RequestSpec::from_primitive(&bad).unwrap_err().to_string();
    assert!(
        err.contains("_rules.max_server_per_host"),
        "names the field: {err}"
    );
}
