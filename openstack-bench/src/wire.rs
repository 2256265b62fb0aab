//! The messages the emulated hosts and the driver send, in Nova's own shapes: Parasol's
//! `compute.host.state` event, `instance.create.end` / `instance.delete.end` with an
//! InstanceActionPayload, the oslo envelope, and the select_destinations body.

use parasol::domain::Resources;
use serde::{Deserialize, Serialize};
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

/// The inner message of a notification, serialized: written from typed fields rather than
/// through a `serde_json::Value` tree, which cost the driver about a tenth of its CPU at 2,000
/// decisions/s (BENCHMARKS.md), CPU the measured service then did not have.
#[derive(Serialize)]
struct Inner<'a, P> {
    message_id: String,
    publisher_id: String,
    event_type: &'a str,
    priority: &'static str,
    timestamp: String,
    payload: P,
}

fn inner<P: Serialize>(event_type: &str, publisher_id: String, payload: P) -> String {
    let message = Inner {
        message_id: uuid::Uuid::new_v4().to_string(),
        publisher_id,
        event_type,
        priority: "INFO",
        timestamp: timestamp(),
        payload,
    };
    serde_json::to_string(&message).expect("a notification always serializes")
}

/// A versioned Nova object around `data`.
#[derive(Serialize)]
struct NovaObject<D> {
    #[serde(rename = "nova_object.name")]
    name: &'static str,
    #[serde(rename = "nova_object.namespace")]
    namespace: &'static str,
    #[serde(rename = "nova_object.version")]
    version: &'static str,
    #[serde(rename = "nova_object.data")]
    data: D,
}

#[derive(Serialize)]
struct Inventory {
    total: i64,
    reserved: i64,
    allocation_ratio: f64,
}

#[derive(Serialize)]
struct Inventories {
    #[serde(rename = "VCPU")]
    vcpu: Inventory,
    #[serde(rename = "MEMORY_MB")]
    memory_mb: Inventory,
    #[serde(rename = "DISK_GB")]
    disk_gb: Inventory,
}

#[derive(Serialize)]
struct HostState<'a> {
    host: &'a str,
    node: &'a str,
    compute_node_uuid: String,
    availability_zone: &'static str,
    up: bool,
    disabled: bool,
    inventory: Inventories,
    /// `usage`, `instance_usage` and `instance_qos` of a host under the demand model.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    measured: Option<&'a crate::demand::Report>,
}

/// Parasol's host-state event for a host of capacity `cap`, ratios 1.
pub fn host_state(host: &str, cap: Resources) -> String {
    host_state_measured(host, cap, 1.0, None)
}

/// Parasol's host-state event for a host of capacity `cap` whose VCPU and MEMORY_MB
/// inventories have `allocation_ratio` (DISK_GB's is 1), with what it measured.
pub fn host_state_measured(
    host: &str,
    cap: Resources,
    allocation_ratio: f64,
    measured: Option<&crate::demand::Report>,
) -> String {
    let inv = |total: i64| Inventory {
        total,
        reserved: 0,
        allocation_ratio,
    };
    let payload = HostState {
        host,
        node: host,
        compute_node_uuid: node_uuid(host),
        availability_zone: "nova",
        up: true,
        disabled: false,
        inventory: Inventories {
            vcpu: inv(cap.0[0]),
            memory_mb: inv(cap.0[1]),
            disk_gb: Inventory {
                allocation_ratio: 1.0,
                ..inv(cap.0[2])
            },
        },
        measured,
    };
    inner(
        "compute.host.state",
        format!("parasol-host:{host}"),
        payload,
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

/// An empty JSON object (`{}`).
#[derive(Serialize)]
struct EmptyObject {}

#[derive(Serialize)]
struct FlavorPayload<'a> {
    flavorid: &'a str,
    name: &'a str,
    memory_mb: i64,
    vcpus: i64,
    root_gb: i64,
    ephemeral_gb: i64,
    swap: i64,
    rxtx_factor: f64,
    vcpu_weight: i64,
    disabled: bool,
    is_public: bool,
    extra_specs: EmptyObject,
    projects: [(); 0],
    description: Option<()>,
}

#[derive(Serialize)]
struct InstanceActionPayload<'a> {
    uuid: &'a str,
    host: &'a str,
    node: &'a str,
    host_name: &'a str,
    display_name: &'a str,
    user_id: &'static str,
    tenant_id: &'static str,
    availability_zone: &'static str,
    flavor: NovaObject<FlavorPayload<'a>>,
    state: &'static str,
    power_state: &'static str,
    task_state: Option<()>,
    fault: Option<()>,
    metadata: EmptyObject,
    ip_addresses: [(); 0],
    block_devices: [(); 0],
}

/// `instance.create.end` or `instance.delete.end` for `uuid` of `demand` on `host`.
pub fn instance_event(event_type: &str, uuid: &str, host: &str, demand: Resources) -> String {
    let (vcpus, memory_mb, root_gb) = flavor_fields(demand);
    let flavor_name = flavor_name(demand);
    let flavor = NovaObject {
        name: "FlavorPayload",
        namespace: "nova",
        version: "1.4",
        data: FlavorPayload {
            flavorid: &flavor_name,
            name: &flavor_name,
            memory_mb,
            vcpus,
            root_gb,
            ephemeral_gb: 0,
            swap: 0,
            rxtx_factor: 1.0,
            vcpu_weight: 0,
            disabled: false,
            is_public: true,
            extra_specs: EmptyObject {},
            projects: [],
            description: None,
        },
    };
    let state = if event_type.starts_with("instance.delete") {
        "deleted"
    } else {
        "active"
    };
    let payload = NovaObject {
        name: "InstanceActionPayload",
        namespace: "nova",
        version: "1.9",
        data: InstanceActionPayload {
            uuid,
            host,
            node: host,
            host_name: uuid,
            display_name: uuid,
            user_id: "bench",
            tenant_id: "bench",
            availability_zone: "nova",
            flavor,
            state,
            power_state: "running",
            task_state: None,
            fault: None,
            metadata: EmptyObject {},
            ip_addresses: [],
            block_devices: [],
        },
    };
    inner(event_type, format!("nova-compute:{host}"), payload)
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

/// The claimed host of a select_destinations reply's body (HTTP): the first Selection's
/// `service_host`, read without building a `serde_json::Value` of the whole reply; `Err`
/// when the body is not JSON at all.
pub fn chosen_host_in(body: &[u8]) -> Result<Option<String>, serde_json::Error> {
    match first_service_host(body) {
        Some(host) => Ok(Some(host)),
        // Another shape: read as a tree, as any JSON reply was before.
        None => serde_json::from_slice::<Value>(body).map(|v| chosen_host(&v).map(String::from)),
    }
}

fn first_service_host(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Selection<'a> {
        #[serde(rename = "nova_object.data", borrow)]
        data: SelectionData<'a>,
    }
    #[derive(Deserialize)]
    struct SelectionData<'a> {
        #[serde(borrow)]
        service_host: std::borrow::Cow<'a, str>,
    }
    let reply: Vec<Vec<Selection<'_>>> = serde_json::from_slice(body).ok()?;
    let first = reply.into_iter().next()?.into_iter().next()?;
    Some(first.data.service_host.into_owned())
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

#[cfg(test)]
mod tests {
    use super::*;
    use parasol::nova::{HostEvent, Notification};

    fn demand() -> Resources {
        let mut d = Resources::default();
        d.0[..3].copy_from_slice(&[2, 4096, 40]);
        d
    }

    #[test]
    fn instance_events_are_read_by_the_service_as_nova_s_own() {
        const UUID: &str = "178b0921-8f85-4257-88b6-2e743b5a975c";
        for (event_type, created) in [
            ("instance.create.end", true),
            ("instance.delete.end", false),
        ] {
            let text = instance_event(event_type, UUID, "bench-00042", demand());
            let value: Value = serde_json::from_str(&text).unwrap();
            let n = Notification::from_inner(&value).unwrap();
            assert_eq!(n.event_type, event_type);
            assert_eq!(n.publisher_id.as_deref(), Some("nova-compute:bench-00042"));
            match (n.event, created) {
                (
                    HostEvent::Upsert {
                        instance_uuid,
                        host,
                        demand: d,
                        flavor,
                        ..
                    },
                    true,
                ) => {
                    assert_eq!(
                        (instance_uuid.as_str(), host.as_str()),
                        (UUID, "bench-00042")
                    );
                    assert_eq!(d.0[..3], demand().0[..3]);
                    assert_eq!(flavor, "bench.2-4096-40");
                }
                (
                    HostEvent::Release {
                        instance_uuid,
                        host,
                    },
                    false,
                ) => {
                    assert_eq!(instance_uuid, UUID);
                    assert_eq!(host.as_deref(), Some("bench-00042"));
                }
                (other, _) => panic!("{event_type} read as {other:?}"),
            }
            // The envelope carries the same message as a string.
            let outer: Value =
                serde_json::from_slice(&parasol::nova::encode_envelope_str(&text)).unwrap();
            assert_eq!(outer["oslo.version"], "2.0");
            assert_eq!(outer["oslo.message"], text.as_str());
        }
    }

    #[test]
    fn host_states_are_read_by_the_service_with_their_inventory() {
        let text = host_state("bench-00007", demand());
        let n = Notification::host_state_alone(text.as_bytes()).expect("a host-state event");
        let HostEvent::HostState(state) = n.event else {
            panic!("read as {:?}", n.event);
        };
        assert_eq!(
            (state.host.as_str(), state.node.as_str()),
            ("bench-00007", "bench-00007")
        );
        assert_eq!(state.compute_node_uuid, node_uuid("bench-00007"));
        assert!(state.up && !state.disabled);
        let totals: Vec<(&str, i64)> = state
            .inventory
            .iter()
            .map(|(class, inv)| (class.as_str(), inv.total))
            .collect();
        assert_eq!(totals, [("DISK_GB", 40), ("MEMORY_MB", 4096), ("VCPU", 2)]);
    }

    #[test]
    fn a_measured_host_state_is_read_by_the_service_with_its_usage_and_signals() {
        const VM: &str = "6f1a3c2e-0b4d-4e8a-9c1f-2d3e4f5a6b7c";
        let model = crate::demand::DemandModel::paper(5, 60.0);
        let (request, profile) = (demand(), model.profile(VM));
        let report = crate::demand::measure(&model, &demand(), [(VM, &request, &profile)], 0.0);
        let text = host_state_measured("bench-00007", demand(), 1.5, Some(&report));
        let inner: Value = serde_json::from_str(&text).unwrap();
        let n = Notification::from_inner(&inner).expect("a host-state event");
        let HostEvent::HostState(state) = n.event else {
            panic!("read as {:?}", n.event);
        };
        assert_eq!(state.inventory["VCPU"].allocation_ratio, 1.5);
        assert_eq!(state.inventory["DISK_GB"].allocation_ratio, 1.0);
        assert_eq!(state.usage.unwrap()["VCPU"], report.usage["VCPU"]);
        assert_eq!(
            state.instance_usage.unwrap()[VM]["MEMORY_MB"],
            report.instance_usage[VM]["MEMORY_MB"]
        );
        let qos = &state.instance_qos.unwrap()[VM];
        assert_eq!(qos["cpu_wait"], 0.0);
        assert_eq!(qos["memory_pressure"], 0.0);
        // Without a report, none of the three blocks.
        assert!(!host_state("bench-00007", demand()).contains("usage"));
    }

    #[test]
    fn the_chosen_host_is_the_first_selection_s() {
        let selection = |host: &str| {
            json!({"nova_object.name": "Selection", "nova_object.namespace": "nova",
                   "nova_object.version": "1.1",
                   "nova_object.data": {"service_host": host, "nodename": host,
                                        "allocation_request": "{\"allocations\": {}}"}})
        };
        let reply = json!([[selection("bench-00003"), selection("bench-00009")]]).to_string();
        let host = |body: &[u8]| chosen_host_in(body).unwrap();
        assert_eq!(host(reply.as_bytes()).as_deref(), Some("bench-00003"));
        // An escaped name is read as the service wrote it.
        let escaped = reply.replace("bench-00003", "bench-0000\\u0033");
        assert_eq!(host(escaped.as_bytes()).as_deref(), Some("bench-00003"));
        // JSON without a Selection names no host; a body that is not JSON is an error.
        assert_eq!(host(b"[[]]"), None);
        assert_eq!(host(b"[]"), None);
        assert_eq!(host(b"{\"error\": 1}"), None);
        assert!(chosen_host_in(b"<html>").is_err());
    }
}
