//! The messages the emulated hosts and the driver send, in Nova's own shapes: Parasol's
//! `compute.host.state` event, `instance.create.end` / `instance.delete.end` with an
//! InstanceActionPayload, the oslo envelope, and the select_destinations body.

use parasol::domain::Resources;
use serde_json::{json, Value};

/// Routing key of Parasol's host-state events.
pub const HOST_STATE_KEY: &str = "parasol.host_state.info";
/// Routing key of Nova's versioned notifications.
pub const NOVA_KEY: &str = "versioned_notifications.info";

/// The emulated host's name for index `i`.
pub fn host_name(i: usize) -> String {
    format!("bench-{i:05}")
}

/// The index back from a host name, if it is one of ours.
pub fn host_index(name: &str) -> Option<usize> {
    name.strip_prefix("bench-")?.parse().ok()
}

pub fn node_uuid(host: &str) -> String {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_DNS, host.as_bytes()).to_string()
}

/// Now, as oslo writes it (`str(utcnow())`): the ledger records a message under it, so the
/// emulated hosts send the time as Nova's do rather than one constant.
fn timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
    parasol::nova::oslo_timestamp(now)
}

/// The inner message of a notification.
fn inner(event_type: &str, publisher: String, payload: Value) -> Value {
    json!({
        "message_id": uuid::Uuid::new_v4().to_string(),
        "publisher_id": publisher,
        "event_type": event_type,
        "priority": "INFO",
        "timestamp": timestamp(),
        "payload": payload,
    })
}

/// The oslo 2.0 envelope around an inner message (what goes on RabbitMQ).
pub fn envelope(inner: &Value) -> Value {
    json!({"oslo.version": "2.0", "oslo.message": inner.to_string()})
}

/// Parasol's host-state event for a host of capacity `cap`, ratios 1.
pub fn host_state(host: &str, cap: Resources) -> Value {
    let inv = |total: i64| json!({"total": total, "reserved": 0, "allocation_ratio": 1.0});
    inner(
        "compute.host.state",
        format!("parasol-host:{host}"),
        json!({
            "host": host, "node": host, "compute_node_uuid": node_uuid(host),
            "availability_zone": "nova", "up": true, "disabled": false,
            "inventory": {"VCPU": inv(cap.0[0]), "MEMORY_MB": inv(cap.0[1]), "DISK_GB": inv(cap.0[2])},
        }),
    )
}

fn flavor_fields(d: Resources) -> (i64, i64, i64) {
    (d.0[0], d.0[1], d.0[2])
}

/// A flavor name stable per demand vector.
pub fn flavor_name(d: Resources) -> String {
    let (v, m, g) = flavor_fields(d);
    format!("bench.{v}-{m}-{g}")
}

/// `instance.create.end` or `instance.delete.end` for `uuid` of `demand` on `host`.
pub fn instance_event(event_type: &str, uuid: &str, host: &str, demand: Resources) -> Value {
    let (vcpus, memory_mb, root_gb) = flavor_fields(demand);
    let flavor = json!({
        "nova_object.name": "FlavorPayload", "nova_object.namespace": "nova",
        "nova_object.version": "1.4",
        "nova_object.data": {
            "flavorid": flavor_name(demand), "name": flavor_name(demand),
            "memory_mb": memory_mb, "vcpus": vcpus, "root_gb": root_gb,
            "ephemeral_gb": 0, "swap": 0, "rxtx_factor": 1.0, "vcpu_weight": 0,
            "disabled": false, "is_public": true, "extra_specs": {}, "projects": [],
            "description": null,
        }
    });
    let state = if event_type.starts_with("instance.delete") {
        "deleted"
    } else {
        "active"
    };
    inner(
        event_type,
        format!("nova-compute:{host}"),
        json!({
            "nova_object.name": "InstanceActionPayload", "nova_object.namespace": "nova",
            "nova_object.version": "1.9",
            "nova_object.data": {
                "uuid": uuid, "host": host, "node": host, "host_name": uuid,
                "display_name": uuid, "user_id": "bench", "tenant_id": "bench",
                "availability_zone": "nova", "flavor": flavor, "state": state,
                "power_state": "running", "task_state": null, "fault": null,
                "metadata": {}, "ip_addresses": [], "block_devices": [],
            }
        }),
    )
}

/// The HTTP body of select_destinations for one instance of `demand`.
pub fn select_body(uuid: &str, demand: Resources) -> Value {
    let (vcpus, memory_mb, root_gb) = flavor_fields(demand);
    let flavor = json!({
        "nova_object.name": "Flavor", "nova_object.namespace": "nova", "nova_object.version": "1.2",
        "nova_object.data": {
            "id": 1, "name": flavor_name(demand), "flavorid": flavor_name(demand),
            "memory_mb": memory_mb, "vcpus": vcpus, "root_gb": root_gb,
            "ephemeral_gb": 0, "swap": 0,
        }
    });
    let spec = json!({
        "nova_object.name": "RequestSpec", "nova_object.namespace": "nova",
        "nova_object.version": "1.15",
        "nova_object.data": {
            "flavor": flavor, "num_instances": 1, "project_id": "bench", "user_id": "bench",
            "instance_uuid": uuid,
        },
        "nova_object.changes": ["flavor", "num_instances", "project_id", "user_id", "instance_uuid"],
    });
    json!({"spec_obj": spec, "instance_uuids": [uuid], "return_objects": true, "return_alternates": true})
}

/// The claimed host of a select_destinations reply: the first Selection's `service_host`.
pub fn chosen_host(reply: &Value) -> Option<&str> {
    reply
        .get(0)?
        .get(0)?
        .get("nova_object.data")?
        .get("service_host")?
        .as_str()
}
