//! The versioned notifications nova-scheduler emits around every `select_destinations`:
//! `scheduler.select_destinations.start` and `.end`, each carrying a `RequestSpecPayload` 1.1
//! built from the call's RequestSpec (`nova/notifications/objects/request_spec.py`,
//! `nova/compute/utils.py` `notify_about_scheduler_action`), published as oslo.messaging's
//! `messagingv2` driver does.
//!
//! The payload is Nova's own construction read as a function of the `spec_obj` primitive:
//! each payload field is copied from the source object's field when it is set and is `null`
//! when it is not (`populate_schema`, which turns an unset or not lazy-loadable field into
//! `None`), nested objects become their payload classes, and fields Nova's constructor never
//! sets (`image_meta`) are absent. Where Nova would lazy-load a value from its database (a
//! flavor's `description` when `projects` is set but it is not), Parasol has no database to
//! read and writes `null`.

use super::request_filters::{tenant_aggregates, zone_aggregates, CloudView, RequestFilterOptions};
use serde_json::{json, Map, Value};

/// `RequestSpecPayload`'s version in Nova 34.
pub const REQUEST_SPEC_PAYLOAD_VERSION: &str = "1.1";

/// The phase of a `select_destinations` notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Start,
    End,
}

impl Phase {
    /// `scheduler.select_destinations.<phase>`.
    pub fn event_type(self) -> &'static str {
        match self {
            Phase::Start => "scheduler.select_destinations.start",
            Phase::End => "scheduler.select_destinations.end",
        }
    }
}

/// A notification payload object: `{"nova_object.name", "nova_object.namespace",
/// "nova_object.version", "nova_object.data"}` without `nova_object.changes` (Nova resets
/// the changes of every payload before it is sent).
fn payload(name: &str, version: &str, data: Map<String, Value>) -> Value {
    json!({
        "nova_object.name": name,
        "nova_object.namespace": "nova",
        "nova_object.version": version,
        "nova_object.data": Value::Object(data),
    })
}

/// The `nova_object.data` of a versioned-object primitive (`None` for anything else: `null`,
/// an unset field, a value of another shape).
fn data(object: Option<&Value>) -> Option<&Map<String, Value>> {
    object?.get("nova_object.data")?.as_object()
}

/// Copies `fields` of `source` as `populate_schema(set_none=True)` does: the value when set,
/// else `null`.
fn schema(out: &mut Map<String, Value>, source: Option<&Map<String, Value>>, fields: &[&str]) {
    for field in fields {
        let value = source.and_then(|s| s.get(*field)).cloned();
        out.insert((*field).to_string(), value.unwrap_or(Value::Null));
    }
}

/// Python's truth of a field value: unset, `null`, `false`, `0`, `""`, `[]` and `{}` are
/// false (a versioned object is always true).
fn truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
    }
}

/// The aggregates Nova's request filters add to the RequestSpec's `requested_destination`
/// before nova-scheduler's notifications (`nova.scheduler.request_filter.process_reqspec`),
/// each entry one `require_aggregates` call (its uuids joined by commas):
/// `require_tenant_aggregate` (with `limit_tenants_to_placement_aggregate`) then
/// `map_az_to_placement_aggregate`. Nova lists an entry's uuids in its database's order,
/// Parasol in the uuids' order.
pub fn required_aggregates(
    spec_obj: &Value,
    cloud: &CloudView<'_>,
    options: &RequestFilterOptions,
) -> Vec<String> {
    let spec = data(Some(spec_obj));
    let text = |k: &str| spec.and_then(|s| s.get(k)).and_then(Value::as_str);
    let mut out = Vec::new();
    if options.limit_tenants_to_placement_aggregate {
        let tenant = tenant_aggregates(cloud, text("project_id"));
        if !tenant.is_empty() {
            out.push(tenant.join(","));
        }
    }
    if let Some(zone) = text("availability_zone").filter(|z| !z.is_empty()) {
        let zone = zone_aggregates(cloud, zone);
        if !zone.is_empty() {
            out.push(zone.join(","));
        }
    }
    out
}

/// The `RequestSpecPayload` 1.1 of a RequestSpec primitive (`spec_obj` as nova-conductor
/// sends it), as `RequestSpecPayload(request_spec).obj_to_primitive()` builds it, after
/// Nova's request filters added `required` ([`required_aggregates`]) to its destination.
pub fn request_spec_payload(spec_obj: &Value, required: &[String]) -> Value {
    let spec = data(Some(spec_obj));
    let get = |k: &str| spec.and_then(|s| s.get(k));
    let instance_uuid = get("instance_uuid").cloned().unwrap_or(Value::Null);
    let mut out = Map::new();
    schema(
        &mut out,
        spec,
        &[
            "ignore_hosts",
            "instance_uuid",
            "project_id",
            "user_id",
            "availability_zone",
            "num_instances",
            "scheduler_hints",
        ],
    );
    // `flavor` when set (even to a flavor Nova could not read further); `image` when true.
    let flavor = get("flavor").map(|f| flavor_payload(data(Some(f))));
    out.insert("flavor".into(), flavor.unwrap_or(Value::Null));
    let image = truthy(get("image")).then(|| image_payload(data(get("image"))));
    out.insert("image".into(), image.unwrap_or(Value::Null));
    let numa = match get("numa_topology") {
        Some(Value::Null) | None => Value::Null,
        Some(t) => numa_topology_payload(data(Some(t)), &instance_uuid),
    };
    out.insert("numa_topology".into(), numa);
    let pci = match get("pci_requests") {
        Some(Value::Null) | None => Value::Null,
        Some(r) => pci_requests_payload(data(Some(r)), &instance_uuid),
    };
    out.insert("pci_requests".into(), pci);
    let destination = if truthy(get("requested_destination")) {
        destination_payload(data(get("requested_destination")), required)
    } else if !required.is_empty() {
        destination_payload(None, required)
    } else {
        Value::Null
    };
    out.insert("requested_destination".into(), destination);
    let retry = truthy(get("retry")).then(|| retry_payload(data(get("retry"))));
    out.insert("retry".into(), retry.unwrap_or(Value::Null));
    // `sec_group.identifier`: the group's uuid when set, else its name (an unset list is
    // lazy-loaded as an empty one).
    let groups = objects(get("security_groups"))
        .map(|g| {
            g.get("uuid")
                .or_else(|| g.get("name"))
                .cloned()
                .unwrap_or(Value::Null)
        })
        .collect();
    out.insert("security_groups".into(), Value::Array(groups));
    let group =
        truthy(get("instance_group")).then(|| server_group_payload(data(get("instance_group"))));
    out.insert("instance_group".into(), group.unwrap_or(Value::Null));
    for key in ["force_hosts", "force_nodes"] {
        let first = get(key)
            .and_then(Value::as_array)
            .and_then(|l| l.first())
            .cloned();
        out.insert(key.into(), first.unwrap_or(Value::Null));
    }
    payload("RequestSpecPayload", REQUEST_SPEC_PAYLOAD_VERSION, out)
}

/// The elements of the list field `key` of `source` (none when unset or not a list).
fn items<'a>(source: Option<&'a Map<String, Value>>, key: &str) -> impl Iterator<Item = &'a Value> {
    source
        .and_then(|s| s.get(key))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The `nova_object.data` of each object of an object list's primitive (`objects`).
fn objects(list: Option<&Value>) -> impl Iterator<Item = &Map<String, Value>> {
    items(data(list), "objects").filter_map(|o| data(Some(o)))
}

/// `FlavorPayload` 1.4.
fn flavor_payload(flavor: Option<&Map<String, Value>>) -> Value {
    let mut out = Map::new();
    schema(
        &mut out,
        flavor,
        &[
            "flavorid",
            "memory_mb",
            "vcpus",
            "root_gb",
            "ephemeral_gb",
            "name",
            "swap",
            "rxtx_factor",
            "vcpu_weight",
            "disabled",
            "is_public",
            "extra_specs",
            "projects",
            "description",
        ],
    );
    payload("FlavorPayload", "1.4", out)
}

/// `ImageMetaPayload` 1.0 with its `ImageMetaPropsPayload` 1.20: only the properties set
/// (`populate_schema(set_none=False)`), without `hw_ephemeral_encryption_secret_uuid`, which
/// the payload class leaves out.
fn image_payload(image: Option<&Map<String, Value>>) -> Value {
    let mut out = Map::new();
    schema(
        &mut out,
        image,
        &[
            "id",
            "name",
            "status",
            "visibility",
            "protected",
            "checksum",
            "owner",
            "size",
            "virtual_size",
            "container_format",
            "disk_format",
            "created_at",
            "updated_at",
            "tags",
            "direct_url",
            "min_ram",
            "min_disk",
        ],
    );
    let mut props = data(image.and_then(|i| i.get("properties")))
        .cloned()
        .unwrap_or_default();
    props.remove("hw_ephemeral_encryption_secret_uuid");
    out.insert(
        "properties".into(),
        payload("ImageMetaPropsPayload", "1.20", props),
    );
    payload("ImageMetaPayload", "1.0", out)
}

/// A `SetOfIntegersField` as Nova writes it again: its members in ascending order (a Python
/// set of small integers iterates so).
fn integer_set(value: Option<&Value>) -> Value {
    match value {
        Some(Value::Array(items)) => {
            let mut items = items.clone();
            items.sort_by(|a, b| {
                let (a, b) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
                a.total_cmp(&b)
            });
            Value::Array(items)
        }
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

/// `InstanceNUMATopologyPayload` 1.0; its `instance_uuid` is the spec's when the topology
/// has none.
fn numa_topology_payload(topology: Option<&Map<String, Value>>, instance_uuid: &Value) -> Value {
    let mut out = Map::new();
    let uuid = topology
        .and_then(|t| t.get("instance_uuid"))
        .unwrap_or(instance_uuid);
    out.insert("instance_uuid".into(), uuid.clone());
    schema(&mut out, topology, &["emulator_threads_policy"]);
    let cells = items(topology, "cells")
        .map(|c| numa_cell_payload(data(Some(c))))
        .collect();
    out.insert("cells".into(), Value::Array(cells));
    payload("InstanceNUMATopologyPayload", "1.0", out)
}

/// `InstanceNUMACellPayload` 1.2.
fn numa_cell_payload(cell: Option<&Map<String, Value>>) -> Value {
    let mut out = Map::new();
    schema(
        &mut out,
        cell,
        &[
            "id",
            "memory",
            "pagesize",
            "cpu_pinning_raw",
            "cpu_policy",
            "cpu_thread_policy",
        ],
    );
    for set in ["cpuset", "pcpuset", "cpuset_reserved"] {
        out.insert(set.into(), integer_set(cell.and_then(|c| c.get(set))));
    }
    let topology = match cell.and_then(|c| c.get("cpu_topology")) {
        Some(Value::Null) | None => Value::Null,
        Some(t) => {
            let mut top = Map::new();
            schema(&mut top, data(Some(t)), &["sockets", "cores", "threads"]);
            payload("VirtCPUTopologyPayload", "1.0", top)
        }
    };
    out.insert("cpu_topology".into(), topology);
    payload("InstanceNUMACellPayload", "1.2", out)
}

/// `InstancePCIRequestsPayload` 1.0; its `instance_uuid` is the spec's when the requests
/// have none.
fn pci_requests_payload(requests: Option<&Map<String, Value>>, instance_uuid: &Value) -> Value {
    let mut out = Map::new();
    let uuid = requests
        .and_then(|r| r.get("instance_uuid"))
        .unwrap_or(instance_uuid);
    out.insert("instance_uuid".into(), uuid.clone());
    let each = items(requests, "requests")
        .map(|r| {
            let mut one = Map::new();
            schema(
                &mut one,
                data(Some(r)),
                &["count", "spec", "alias_name", "request_id", "numa_policy"],
            );
            payload("InstancePCIRequestPayload", "1.1", one)
        })
        .collect();
    out.insert("requests".into(), Value::Array(each));
    payload("InstancePCIRequestsPayload", "1.0", out)
}

/// `DestinationPayload` 1.0: `host`, `node` and `cell` only when set and not `null`;
/// `aggregates` with `required` appended (`Destination.require_aggregates`).
fn destination_payload(destination: Option<&Map<String, Value>>, required: &[String]) -> Value {
    let mut out = Map::new();
    let set = |k: &str| destination.and_then(|d| d.get(k)).filter(|v| !v.is_null());
    for key in ["host", "node"] {
        if let Some(v) = set(key) {
            out.insert(key.into(), v.clone());
        }
    }
    if let Some(cell) = set("cell") {
        let mut c = Map::new();
        schema(&mut c, data(Some(cell)), &["uuid", "name", "disabled"]);
        out.insert("cell".into(), payload("CellMappingPayload", "2.0", c));
    }
    schema(&mut out, destination, &["aggregates"]);
    if !required.is_empty() {
        let mut aggregates = match out.remove("aggregates") {
            Some(Value::Array(a)) => a,
            _ => Vec::new(),
        };
        aggregates.extend(required.iter().map(|a| Value::String(a.clone())));
        out.insert("aggregates".into(), Value::Array(aggregates));
    }
    payload("DestinationPayload", "1.0", out)
}

/// `SchedulerRetriesPayload` 1.0: the hypervisor hostnames of the compute nodes tried.
fn retry_payload(retry: Option<&Map<String, Value>>) -> Value {
    let mut out = Map::new();
    schema(&mut out, retry, &["num_attempts"]);
    let hosts = objects(retry.and_then(|r| r.get("hosts")))
        .map(|n| n.get("hypervisor_hostname").cloned().unwrap_or(Value::Null))
        .collect();
    out.insert("hosts".into(), Value::Array(hosts));
    payload("SchedulerRetriesPayload", "1.0", out)
}

/// `ServerGroupPayload` 1.1. `rules` is `InstanceGroup.rules`: only `max_server_per_host`,
/// as an integer written as a string (the payload's `DictOfStringsField`), or `{}`.
fn server_group_payload(group: Option<&Map<String, Value>>) -> Value {
    let mut out = Map::new();
    schema(
        &mut out,
        group,
        &[
            "uuid",
            "name",
            "user_id",
            "project_id",
            "policies",
            "members",
            "hosts",
            "policy",
        ],
    );
    let mut rules = Map::new();
    let max = group
        .and_then(|g| g.get("_rules"))
        .and_then(|r| r.get("max_server_per_host"));
    let max = match max {
        Some(Value::String(s)) => s.trim().parse::<i64>().ok(),
        Some(Value::Number(n)) => n.as_i64(),
        _ => None,
    };
    if let Some(max) = max {
        rules.insert("max_server_per_host".into(), Value::String(max.to_string()));
    }
    out.insert("rules".into(), Value::Object(rules));
    payload("ServerGroupPayload", "1.1", out)
}

/// The inner message of a notification as oslo.messaging's `messagingv2` driver sends it:
/// `message_id`, `publisher_id`, `event_type`, `priority`, `payload`, `timestamp` (oslo's
/// `str(utcnow())`), the request context flattened as `_context_<key>`, and `_unique_id`.
pub fn notification_message(
    event_type: &str,
    publisher_id: &str,
    payload: Value,
    context: &Map<String, Value>,
    timestamp: &str,
    ids: (&str, &str),
) -> Value {
    let (message_id, unique_id) = ids;
    let mut msg = Map::new();
    msg.insert("message_id".into(), Value::String(message_id.to_string()));
    msg.insert(
        "publisher_id".into(),
        Value::String(publisher_id.to_string()),
    );
    msg.insert("event_type".into(), Value::String(event_type.to_string()));
    msg.insert("priority".into(), Value::String("INFO".to_string()));
    msg.insert("payload".into(), payload);
    msg.insert("timestamp".into(), Value::String(timestamp.to_string()));
    for (k, v) in context {
        msg.insert(format!("_context_{k}"), v.clone());
    }
    msg.insert("_unique_id".into(), Value::String(unique_id.to_string()));
    Value::Object(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str, data: Value) -> Value {
        json!({"nova_object.name": name, "nova_object.namespace": "nova",
               "nova_object.version": "1.0", "nova_object.data": data,
               "nova_object.changes": ["x"]})
    }

    #[test]
    fn an_unset_field_is_null_and_the_payload_carries_no_changes() {
        let p = request_spec_payload(&obj("RequestSpec", json!({"instance_uuid": "u"})), &[]);
        let d = &p["nova_object.data"];
        assert_eq!(p["nova_object.version"], "1.1");
        assert!(p.get("nova_object.changes").is_none());
        assert_eq!(d["instance_uuid"], "u");
        for k in [
            "project_id",
            "flavor",
            "image",
            "numa_topology",
            "pci_requests",
            "retry",
        ] {
            assert_eq!(d[k], Value::Null, "{k}");
        }
        assert_eq!(d["security_groups"], json!([]));
        assert!(d.get("image_meta").is_none(), "Nova never sets image_meta");
    }

    #[test]
    fn nested_objects_become_their_payloads() {
        let spec = obj(
            "RequestSpec",
            json!({
                "instance_uuid": "u",
                "force_hosts": ["h1", "h2"],
                "pci_requests": obj("InstancePCIRequests", json!({"requests": []})),
                "security_groups": obj("SecurityGroupList", json!({"objects": [
                    obj("SecurityGroup", json!({"name": "default"})),
                    obj("SecurityGroup", json!({"name": "web", "uuid": "sg-uuid"}))]})),
                "instance_group": obj("InstanceGroup", json!({"uuid": "g", "policy": "anti-affinity",
                    "_rules": {"max_server_per_host": "3", "other": "x"}})),
                "retry": obj("SchedulerRetries", json!({"num_attempts": 2, "hosts":
                    obj("ComputeNodeList", json!({"objects": [
                        obj("ComputeNode", json!({"hypervisor_hostname": "n1"}))]}))})),
                "numa_topology": obj("InstanceNUMATopology", json!({"cells": [
                    obj("InstanceNUMACell", json!({"id": 0, "cpuset": [3, 1, 2], "memory": 512}))]})),
            }),
        );
        let d = request_spec_payload(&spec, &[])["nova_object.data"].clone();
        assert_eq!(d["force_hosts"], "h1");
        assert_eq!(d["force_nodes"], Value::Null);
        assert_eq!(d["pci_requests"]["nova_object.data"]["instance_uuid"], "u");
        assert_eq!(d["security_groups"], json!(["default", "sg-uuid"]));
        let g = &d["instance_group"]["nova_object.data"];
        assert_eq!(g["rules"], json!({"max_server_per_host": "3"}));
        assert_eq!(g["members"], Value::Null);
        assert_eq!(d["retry"]["nova_object.data"]["hosts"], json!(["n1"]));
        let cell = &d["numa_topology"]["nova_object.data"]["cells"][0]["nova_object.data"];
        assert_eq!(cell["cpuset"], json!([1, 2, 3]));
        assert_eq!(cell["pcpuset"], Value::Null);
        assert_eq!(d["numa_topology"]["nova_object.data"]["instance_uuid"], "u");
    }

    #[test]
    fn a_zone_s_aggregates_join_the_destination_as_nova_s_request_filter_adds_them() {
        use super::super::request_filters::Aggregate;
        let aggregates = [Aggregate {
            uuid: "agg-1".into(),
            metadata: [("availability_zone".to_string(), "az1".to_string())].into(),
            hosts: Vec::new(),
        }];
        let cloud = CloudView {
            aggregates: &aggregates,
            ..CloudView::default()
        };
        let options = RequestFilterOptions::default();
        let in_zone = obj("RequestSpec", json!({"availability_zone": "az1"}));
        let required = required_aggregates(&in_zone, &cloud, &options);
        assert_eq!(required, ["agg-1"]);
        let d = request_spec_payload(&in_zone, &required);
        let dest = &d["nova_object.data"]["requested_destination"];
        assert_eq!(dest["nova_object.data"], json!({"aggregates": ["agg-1"]}));
        let elsewhere = obj("RequestSpec", json!({"availability_zone": "az2"}));
        assert!(required_aggregates(&elsewhere, &cloud, &options).is_empty());
        let aimed = obj(
            "RequestSpec",
            json!({"requested_destination": obj("Destination", json!({"host": "h", "aggregates": ["x"]}))}),
        );
        let d = request_spec_payload(&aimed, &required);
        let dest = &d["nova_object.data"]["requested_destination"]["nova_object.data"];
        assert_eq!(dest, &json!({"host": "h", "aggregates": ["x", "agg-1"]}));
    }

    #[test]
    fn malformed_parts_give_nulls_not_a_panic() {
        for spec in [
            json!(null),
            json!(1),
            json!({"nova_object.data": 1}),
            json!({"nova_object.data": {"flavor": 1, "image": "x", "retry": [1],
                "numa_topology": {"nova_object.data": {"cells": 1}},
                "security_groups": {"nova_object.data": {"objects": [1, null]}},
                "force_hosts": "h"}}),
        ] {
            let p = request_spec_payload(&spec, &[]);
            assert_eq!(p["nova_object.name"], "RequestSpecPayload");
        }
    }
}
