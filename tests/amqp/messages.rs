//! Inner messages (before the oslo envelope): the captured Nova messages in
//! `tests/fixtures/wire/`, and messages built from them.

use serde_json::{json, Value};

const DELETE_END: &str = include_str!("../fixtures/wire/instance.delete.end-notification.json");
const UPDATE_INFO: &str = include_str!("../fixtures/wire/fanout-update_instance_info.json");
const DELETE_INFO: &str = include_str!("../fixtures/wire/fanout-delete_instance_info.json");
const SYNC_INFO: &str = include_str!("../fixtures/wire/fanout-sync_instance_info.json");

/// The instance every captured message is about.
pub const CAPTURED_INSTANCE: &str = "178b0921-8f85-4257-88b6-2e743b5a975c";
/// Its host.
pub const CAPTURED_HOST: &str = "compute1";

fn captured(file: &str) -> Value {
    let v: Value = serde_json::from_str(file).expect("fixture is JSON");
    v["decoded_oslo_message"].clone()
}

pub fn captured_delete_end() -> Value {
    captured(DELETE_END)
}
pub fn captured_update_instance_info() -> Value {
    captured(UPDATE_INFO)
}
pub fn captured_delete_instance_info() -> Value {
    captured(DELETE_INFO)
}
pub fn captured_sync_instance_info() -> Value {
    captured(SYNC_INFO)
}

pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

pub fn uuid_for(host: &str) -> String {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_DNS, host.as_bytes()).to_string()
}

/// Parasol's `compute.host.state` event (docs/architecture.md §7.2), ratios of 1.
pub fn host_state(
    host: &str,
    vcpu: i64,
    memory_mb: i64,
    disk_gb: i64,
    up: bool,
    disabled: bool,
) -> Value {
    json!({
        "message_id": new_id(),
        "publisher_id": format!("parasol-host:{host}"),
        "event_type": "compute.host.state",
        "priority": "INFO",
        "timestamp": "2026-11-25 21:13:16.777260",
        "payload": {
            "host": host, "node": host, "compute_node_uuid": uuid_for(host),
            "availability_zone": "nova", "up": up, "disabled": disabled,
            "inventory": {
                "VCPU": {"total": vcpu, "reserved": 0, "allocation_ratio": 1.0},
                "MEMORY_MB": {"total": memory_mb, "reserved": 0, "allocation_ratio": 1.0},
                "DISK_GB": {"total": disk_gb, "reserved": 0, "allocation_ratio": 1.0}
            },
            "usage": {"VCPU": 0.5, "MEMORY_MB": 512}
        }
    })
}

/// The captured `instance.delete.end` turned into `event_type` for `instance` on `host` with
/// a flavor of the given sizes (FlavorPayload 1.4), under a fresh message id.
pub fn instance_event(
    event_type: &str,
    instance: &str,
    host: &str,
    flavor: (i64, i64, i64),
) -> Value {
    let mut m = captured_delete_end();
    m["message_id"] = json!(new_id());
    m["event_type"] = json!(event_type);
    let data = &mut m["payload"]["nova_object.data"];
    data["uuid"] = json!(instance);
    data["host"] = json!(host);
    data["node"] = json!(host);
    let f = &mut data["flavor"]["nova_object.data"];
    f["vcpus"] = json!(flavor.0);
    f["memory_mb"] = json!(flavor.1);
    f["root_gb"] = json!(flavor.2);
    f["name"] = json!(format!("f{}-{}-{}", flavor.0, flavor.1, flavor.2));
    m
}

/// A `service.update` notification (ServiceStatusPayload 1.1) of `binary` on `host`.
pub fn service_update(host: &str, binary: &str, disabled: bool, forced_down: bool) -> Value {
    json!({
        "message_id": new_id(),
        "publisher_id": format!("nova-compute:{host}"),
        "event_type": "service.update",
        "priority": "INFO",
        "timestamp": "2026-11-25 21:13:16.777260",
        "payload": {
            "nova_object.name": "ServiceStatusPayload", "nova_object.namespace": "nova",
            "nova_object.version": "1.1",
            "nova_object.data": {
                "host": host, "binary": binary, "topic": "compute", "report_count": 3,
                "disabled": disabled, "disabled_reason": null, "availability_zone": null,
                "last_seen_up": "2026-11-25T21:13:16Z", "forced_down": forced_down,
                "version": 66, "uuid": new_id()
            }
        }
    })
}

/// A captured fanout cast under a fresh `_unique_id`.
pub fn fresh_cast(mut cast: Value) -> Value {
    cast["_unique_id"] = json!(uuid::Uuid::new_v4().simple().to_string());
    cast
}
