//! Regression tests of issue 16 item 6: nested object versions, repeated instance uuids,
//! and the bounds on every size, count, string and id, in select_destinations bodies and
//! in notifications.

use super::*;
use serde_json::{json, Value};

const A: &str = "178b0921-8f85-4257-88b6-2e743b5a975c";
const NODE: &str = "6f1a2e4b-6b3b-4c8b-9c16-3b8c1f0a9c11";

fn object(name: &str, version: &str, data: Value) -> Value {
    json!({"nova_object.name": name, "nova_object.namespace": "nova",
           "nova_object.version": version, "nova_object.data": data})
}

fn flavor(version: &str) -> Value {
    object(
        "Flavor",
        version,
        json!({"vcpus": 1, "memory_mb": 64, "root_gb": 1}),
    )
}

/// A select_destinations body whose spec data gets `more`, with `uuids`.
fn body(more: Value, uuids: Value) -> Vec<u8> {
    let mut data = json!({"flavor": flavor("1.2")});
    for (k, v) in more.as_object().unwrap() {
        data[k] = v.clone();
    }
    json!({"spec_obj": object("RequestSpec", "1.15", data), "instance_uuids": uuids})
        .to_string()
        .into_bytes()
}

fn select_error(more: Value, uuids: Value) -> String {
    SelectDestinationsArgs::from_http_body(&body(more, uuids))
        .expect_err("must be refused")
        .to_string()
}

fn notification(event_type: &str, payload: Value) -> Value {
    json!({"message_id": "m1", "event_type": event_type, "payload": payload})
}

fn create_end(uuid: &str, host: &str, flavor_version: &str) -> Value {
    let flavor = object(
        "FlavorPayload",
        flavor_version,
        json!({"vcpus": 1, "memory_mb": 64, "root_gb": 1}),
    );
    notification(
        "instance.create.end",
        object(
            "InstanceCreatePayload",
            "1.13",
            json!({"uuid": uuid, "host": host, "flavor": flavor}),
        ),
    )
}

fn host_state(host: &str, uuid: &str, total: i64) -> Value {
    notification(
        HOST_STATE_EVENT,
        json!({"host": host, "compute_node_uuid": uuid, "inventory": {"VCPU": {"total": total}}}),
    )
}

fn notification_error(v: &Value) -> String {
    Notification::from_inner(v)
        .expect_err("must be refused")
        .to_string()
}

#[test]
fn issue_16_a_nested_flavor_of_version_9_0_is_refused_like_the_outer_spec() {
    let err = select_error(json!({"flavor": flavor("9.0")}), json!([A]));
    assert!(
        err.contains("spec_obj.flavor (Flavor): version 9.0 is not supported (expected 1.x)"),
        "{err}"
    );
    let nested = [
        (
            "requested_destination",
            object("Destination", "2.0", json!({})),
        ),
        ("image", object("ImageMeta", "3.1", json!({}))),
        ("instance_group", object("InstanceGroup", "9.0", json!({}))),
        ("limits", object("SchedulerLimits", "2.0", json!({}))),
        (
            "request_level_params",
            object("RequestLevelParams", "5.0", json!({})),
        ),
    ];
    for (key, value) in nested {
        let err = select_error(json!({ key: value }), json!([A]));
        assert!(
            err.contains(&format!("spec_obj.{key} (")) && err.contains("is not supported"),
            "{key}: {err}"
        );
    }
    let err = select_error(
        json!({"requested_resources": [object("RequestGroup", "7.0", json!({}))]}),
        json!([A]),
    );
    assert!(
        err.contains("spec_obj.requested_resources[0] (RequestGroup): version 7.0"),
        "{err}"
    );
    let err = notification_error(&create_end(A, "h", "9.0"));
    assert!(
        err.contains("payload.flavor (FlavorPayload): version 9.0 is not supported"),
        "{err}"
    );
}

#[test]
fn issue_16_a_repeated_instance_uuid_is_refused_over_http_and_rpc() {
    let err = select_error(json!({}), json!([A, A.to_uppercase()]));
    assert!(
        err.starts_with("instance_uuids[1] repeats instance_uuids[0]"),
        "{err}"
    );
    let args: Value = serde_json::from_slice(&body(json!({}), json!([A, A]))).unwrap();
    let err = SelectDestinationsArgs::from_rpc_args(&args, (4, 5))
        .unwrap_err()
        .to_string();
    assert!(err.contains("args.instance_uuids[1] repeats"), "{err}");
    let legacy = json!({"request_spec": {"instance_type": {"vcpus": 1, "memory_mb": 1, "root_gb": 1},
        "instance_uuids": [A, A]}});
    let err = SelectDestinationsArgs::from_rpc_args(&legacy, (4, 0))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("request_spec.instance_uuids[1] repeats"),
        "{err}"
    );
}

#[test]
fn issue_16_instance_uuids_must_be_uuids_and_few_enough() {
    let cases = [
        (json!(["not-a-uuid"]), "instance_uuids[0] must be a UUID"),
        (
            json!(["x".repeat(100_000)]),
            "instance_uuids[0] must be at most 255 bytes",
        ),
        (json!(vec![A; 10_001]), "must have at most 10000 entries"),
    ];
    for (uuids, want) in cases {
        let err = select_error(json!({}), uuids);
        assert!(err.contains(want), "{err} should contain {want}");
    }
    let ok = SelectDestinationsArgs::from_http_body(&body(json!({}), json!([A.to_uppercase()])))
        .unwrap();
    assert_eq!(
        ok.instance_uuids,
        vec![A],
        "kept lowercased: one instance, one key"
    );
}

#[test]
fn issue_16_oversized_strings_sizes_and_lists_in_select_bodies_are_refused() {
    let big = "h".repeat(200_000);
    let cases = [
        (
            json!({"force_hosts": [big.clone()]}),
            "spec_obj.force_hosts[0] must be at most 255 bytes, got 200000",
        ),
        (
            json!({"availability_zone": big.clone()}),
            "spec_obj.availability_zone must be at most 255 bytes",
        ),
        (
            json!({"project_id": "p".repeat(100_000)}),
            "spec_obj.project_id must be at most 255 bytes",
        ),
        (
            json!({"instance_uuid": "i".repeat(100_000)}),
            "spec_obj.instance_uuid must be a UUID",
        ),
        (
            json!({"flavor": object("Flavor", "1.2", json!({"vcpus": i64::MAX, "memory_mb": 1, "root_gb": 1}))}),
            "spec_obj.flavor.vcpus must be at most 1099511627776 (2^40)",
        ),
        (
            json!({"flavor": object("Flavor", "1.2", json!({"vcpus": 1, "memory_mb": 1, "root_gb": 1,
            "extra_specs": {"resources:VCPU": "1099511627777"}}))}),
            "more than 1099511627776",
        ),
        (
            json!({"flavor": object("Flavor", "1.2", json!({"vcpus": 1, "memory_mb": 1, "root_gb": 1,
            "name": big.clone()}))}),
            "spec_obj.flavor.name must be at most 255 bytes",
        ),
        (
            json!({"scheduler_hints": {"query": "q".repeat(70_000)}}),
            "spec_obj.scheduler_hints.query must be at most 65536 bytes",
        ),
        (
            json!({"ignore_hosts": vec!["h"; 10_001]}),
            "spec_obj.ignore_hosts must have at most 10000 entries",
        ),
        (
            json!({"requested_destination": object("Destination", "1.4", json!({"host": big}))}),
            "spec_obj.requested_destination.host must be at most 255 bytes",
        ),
    ];
    for (more, want) in cases {
        let err = select_error(more, json!([A]));
        assert!(err.contains(want), "{err:.200} should contain {want}");
    }
}

#[test]
fn issue_16_oversized_hosts_ids_and_sizes_in_notifications_are_refused() {
    let big = "h".repeat(200_000);
    let cases = [
        (
            host_state(&big, NODE, 8),
            "payload.host must be at most 255 bytes, got 200000",
        ),
        (
            host_state("h", &"u".repeat(100_000), 8),
            "payload.compute_node_uuid must be a UUID",
        ),
        (
            host_state("h", "uuid-h", 8),
            "payload.compute_node_uuid must be a UUID",
        ),
        (
            host_state("h", NODE, 1 << 41),
            "payload.inventory.VCPU.total must be at most",
        ),
        (
            create_end(&"i".repeat(100_000), "h", "1.4"),
            "payload.uuid must be a UUID",
        ),
        (
            create_end(A, &big, "1.4"),
            "payload.host must be at most 255 bytes",
        ),
        (
            json!({"message_id": "m".repeat(100_000), "event_type": "x", "payload": {}}),
            "message_id must be at most 255 bytes",
        ),
    ];
    for (v, want) in cases {
        let err = notification_error(&v);
        assert!(err.contains(want), "{err:.200} should contain {want}");
    }
    let ratio = notification(
        HOST_STATE_EVENT,
        json!({"host": "h", "compute_node_uuid": NODE,
        "inventory": {"VCPU": {"total": 8, "allocation_ratio": 1e300}}}),
    );
    assert!(notification_error(&ratio)
        .contains("allocation_ratio must be a positive number of at most 65536"));
    let fanout = json!({"method": "sync_instance_info", "_unique_id": "u", "args": {"host_name": "h",
        "instance_uuids": ["x".repeat(100_000)]}});
    let err = Notification::from_rpc(&RpcMessage::from_value(&fanout).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("args.instance_uuids[0] must be at most 255 bytes"),
        "{err}"
    );
}

/// Found by `tests/fuzz.rs` (seed 16): a call-monitor `_timeout` of 1e308 made the RPC
/// server's heartbeat period overflow `Duration` and the call's task panic without a reply.
#[test]
fn issue_16_an_rpc_timeout_beyond_the_size_bound_is_refused_naming_it() {
    for timeout in [
        json!(1e308),
        json!(-1),
        json!("60"),
        json!((1i64 << 40) + 1),
    ] {
        let m = json!({"method": "select_destinations", "args": {}, "version": "4.5",
            "_msg_id": "m", "_reply_q": "q", "_timeout": timeout});
        let err = RpcMessage::from_value(&m).unwrap_err().to_string();
        assert!(err.contains("_timeout"), "{timeout}: {err}");
    }
    let m = json!({"method": "ping", "args": {}, "_timeout": 60});
    assert_eq!(RpcMessage::from_value(&m).unwrap().timeout, Some(60.0));
}
