//! Unit tests of notification decoding: host state, service updates and malformed inputs.

use super::*;
use crate::nova::oslo::encode_envelope;
use serde_json::json;

const NODE: &str = "6f1a2e4b-6b3b-4c8b-9c16-3b8c1f0a9c11";
const I1: &str = "178b0921-8f85-4257-88b6-2e743b5a975c";

fn payload_object(name: &str, data: Value) -> Value {
    let version = if name.starts_with("Instance") && !name.ends_with("Payload") {
        "2.0"
    } else {
        "1.0"
    };
    json!({"nova_object.name": name, "nova_object.namespace": "nova",
           "nova_object.version": version, "nova_object.data": data})
}

fn notification(event_type: &str, payload: Value) -> Value {
    json!({"message_id": "m1", "publisher_id": "p", "event_type": event_type,
           "priority": "INFO", "payload": payload, "timestamp": "2026-11-25 21:13:16.777260"})
}

fn host_state() -> Value {
    notification(
        HOST_STATE_EVENT,
        json!({"host": "compute1", "node": "compute1", "compute_node_uuid": NODE,
               "availability_zone": "nova", "up": true, "disabled": false,
               "inventory": {"VCPU": {"total": 64, "reserved": 0, "allocation_ratio": 4.0},
                             "MEMORY_MB": {"total": 262144, "reserved": 512, "allocation_ratio": 1.0},
                             "DISK_GB": {"total": 2000, "reserved": 0, "allocation_ratio": 1.0},
                             "PCPU": {"total": 8}},
               "usage": {"VCPU": 12.5, "MEMORY_MB": 100000}, "extra": 1}),
    )
}

#[test]
fn decodes_the_design_s_host_state_example() {
    let n = Notification::decode(&encode_envelope(&host_state())).unwrap();
    assert_eq!(n.message_id, "m1");
    let HostEvent::HostState(p) = n.event else {
        panic!("not a host state: {:?}", n.event)
    };
    assert_eq!(
        (
            p.host.as_str(),
            p.node.as_str(),
            p.compute_node_uuid.as_str()
        ),
        ("compute1", "compute1", NODE)
    );
    assert_eq!(p.availability_zone.as_deref(), Some("nova"));
    assert!(p.up && !p.disabled);
    assert_eq!(p.inventory.len(), 4, "every class, PCPU included");
    let usable: Vec<(&str, i64)> = p
        .inventory
        .iter()
        .map(|(c, inv)| (c.as_str(), inv.usable()))
        .collect();
    assert_eq!(
        usable,
        [
            ("DISK_GB", 2000),
            ("MEMORY_MB", 261632),
            ("PCPU", 8),
            ("VCPU", 256)
        ]
    );
    let usage = p.usage.unwrap();
    assert_eq!((usage["VCPU"], usage.get("DISK_GB")), (12.5, None));
}

#[test]
fn host_state_defaults_node_up_disabled_and_ratio() {
    let v = notification(
        HOST_STATE_EVENT,
        json!({"host": "h", "compute_node_uuid": NODE,
                         "inventory": {"VCPU": {"total": 4}}}),
    );
    let HostEvent::HostState(p) = Notification::from_inner(&v).unwrap().event else {
        panic!("not a host state")
    };
    assert_eq!(p.node, "h");
    assert!(p.up && !p.disabled && p.usage.is_none());
    assert_eq!(p.inventory["VCPU"], Inventory::of(4));
}

#[test]
fn service_update_of_a_compute_service_becomes_a_service_update() {
    let v = notification(
        "service.update",
        payload_object(
            "ServiceStatusPayload",
            json!({"host": "compute1", "binary": "nova-compute", "disabled": true, "forced_down": false}),
        ),
    );
    let want = HostEvent::ServiceUpdate {
        host: "compute1".into(),
        disabled: true,
        forced_down: false,
    };
    assert_eq!(Notification::from_inner(&v).unwrap().event, want);
    let other = notification(
        "service.update",
        payload_object(
            "ServiceStatusPayload",
            json!({"host": "compute1", "binary": "nova-conductor", "disabled": true}),
        ),
    );
    let event = Notification::from_inner(&other).unwrap().event;
    assert_eq!(
        event,
        HostEvent::Unknown {
            event_type: "service.update".into()
        }
    );
}

#[test]
fn failed_operations_name_their_instance_and_other_errors_are_unknown() {
    let vm = "9a9a9a9a-0000-4000-8000-000000000001";
    for method in ["migrate_server", "rebuild_server", "build_instances"] {
        let n = notification(
            &format!("compute_task.{method}.error"),
            payload_object(
                "ComputeTaskPayload",
                json!({"instance_uuid": vm, "state": "active", "reason": null}),
            ),
        );
        assert_eq!(
            Notification::from_inner(&n).unwrap().event,
            HostEvent::Failed {
                instance_uuid: vm.into()
            },
            "{method}"
        );
    }
    for (event, payload) in [
        ("instance.rebuild.error", "InstanceActionRebuildPayload"),
        ("instance.resize.error", "InstanceActionPayload"),
    ] {
        let n = notification(
            event,
            payload_object(payload, json!({"uuid": vm, "host": "compute2"})),
        );
        assert_eq!(
            Notification::from_inner(&n).unwrap().event,
            HostEvent::Failed {
                instance_uuid: vm.into()
            },
            "{event}"
        );
    }
    // The instance is what makes it actionable: a payload without it is refused.
    let nameless = notification(
        "compute_task.migrate_server.error",
        payload_object("ComputeTaskPayload", json!({"state": "active"})),
    );
    let err = Notification::from_inner(&nameless).unwrap_err().to_string();
    assert!(err.contains("instance_uuid"), "{err}");
    let other = notification(
        "compute.exception",
        payload_object("ComputeTaskPayload", json!({"instance_uuid": vm})),
    );
    assert_eq!(
        Notification::from_inner(&other).unwrap().event,
        HostEvent::Unknown {
            event_type: "compute.exception".into()
        }
    );
}

#[test]
fn service_create_and_delete_of_a_compute_service_are_decoded_and_others_are_unknown() {
    let create = |binary: &str| {
        notification(
            "service.create",
            payload_object(
                "ServiceStatusPayload",
                json!({"host": "compute2", "binary": binary, "disabled": false, "forced_down": false}),
            ),
        )
    };
    assert_eq!(
        Notification::from_inner(&create("nova-compute"))
            .unwrap()
            .event,
        HostEvent::ServiceCreate {
            host: "compute2".into()
        }
    );
    assert_eq!(
        Notification::from_inner(&create("nova-scheduler"))
            .unwrap()
            .event,
        HostEvent::Unknown {
            event_type: "service.create".into()
        }
    );
    let deleted = notification(
        "service.delete",
        payload_object(
            "ServiceStatusPayload",
            json!({"host": "compute2", "binary": "nova-compute"}),
        ),
    );
    assert_eq!(
        Notification::from_inner(&deleted).unwrap().event,
        HostEvent::ServiceDelete {
            host: "compute2".into()
        }
    );
    let nameless = notification(
        "service.create",
        payload_object("ServiceStatusPayload", json!({"binary": "nova-compute"})),
    );
    let err = Notification::from_inner(&nameless).unwrap_err().to_string();
    assert!(err.contains("host"), "{err}");
}

#[test]
fn every_usage_event_maps_to_upsert_or_release_and_others_to_unknown() {
    let data = json!({"uuid": I1, "host": "h1", "node": "n1", "flavor": payload_object("FlavorPayload",
                      json!({"name": "tiny", "vcpus": 1, "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "swap": 0}))});
    let payload = payload_object("InstanceActionPayload", data);
    for event_type in UPSERT_EVENTS {
        let event = Notification::from_inner(&notification(event_type, payload.clone()))
            .unwrap()
            .event;
        assert!(
            matches!(event, HostEvent::Upsert { ref host, demand, .. } if host == "h1" && demand == Resources::new(1, 512, 1)),
            "{event_type}: {event:?}"
        );
    }
    for event_type in RELEASE_EVENTS {
        let event = Notification::from_inner(&notification(event_type, payload.clone()))
            .unwrap()
            .event;
        assert_eq!(
            event,
            HostEvent::Release {
                instance_uuid: I1.into(),
                host: Some("h1".into())
            },
            "{event_type}"
        );
    }
    let event = Notification::from_inner(&notification("instance.pause.end", json!("anything")))
        .unwrap()
        .event;
    assert_eq!(
        event,
        HostEvent::Unknown {
            event_type: "instance.pause.end".into()
        }
    );
}

/// Malformed notifications: what each lacks or gets wrong, the notification, and what its
/// error must say.
fn malformed_notifications() -> Vec<(&'static str, Value, &'static str)> {
    let flavor = |vcpus: i64| {
        payload_object(
            "FlavorPayload",
            json!({"vcpus": vcpus, "memory_mb": 1, "root_gb": 1}),
        )
    };
    vec![
        (
            "no uuid",
            notification(
                "instance.create.end",
                payload_object(
                    "InstanceCreatePayload",
                    json!({"host": "h", "flavor": flavor(1)}),
                ),
            ),
            "payload.uuid is missing",
        ),
        (
            "no host",
            notification(
                "instance.create.end",
                payload_object(
                    "InstanceCreatePayload",
                    json!({"uuid": I1, "flavor": flavor(1)}),
                ),
            ),
            "payload.host is missing",
        ),
        (
            "no flavor",
            notification(
                "instance.create.end",
                payload_object("InstanceCreatePayload", json!({"uuid": I1, "host": "h"})),
            ),
            "payload.flavor is missing",
        ),
        (
            "negative size",
            notification(
                "instance.create.end",
                payload_object(
                    "InstanceCreatePayload",
                    json!({"uuid": I1, "host": "h", "flavor": flavor(-2)}),
                ),
            ),
            "payload.flavor.vcpus must be a non-negative integer",
        ),
        (
            "no message id",
            json!({"event_type": "x", "payload": {}}),
            "message_id is missing",
        ),
        (
            "no payload",
            json!({"message_id": "m", "event_type": "x"}),
            "payload is missing",
        ),
        (
            "host state without host",
            notification(HOST_STATE_EVENT, json!({"compute_node_uuid": NODE})),
            "payload.host is missing",
        ),
        (
            "host state without uuid",
            notification(HOST_STATE_EVENT, json!({"host": "h"})),
            "payload.compute_node_uuid is missing",
        ),
        (
            "negative total",
            notification(
                HOST_STATE_EVENT,
                json!({"host": "h", "compute_node_uuid": NODE, "inventory": {"VCPU": {"total": -1}}}),
            ),
            "payload.inventory.VCPU.total",
        ),
        (
            "zero ratio",
            notification(
                HOST_STATE_EVENT,
                json!({"host": "h", "compute_node_uuid": NODE, "inventory": {"VCPU": {"total": 1, "allocation_ratio": 0}}}),
            ),
            "payload.inventory.VCPU.allocation_ratio",
        ),
        (
            "usage not a number",
            notification(
                HOST_STATE_EVENT,
                json!({"host": "h", "compute_node_uuid": NODE, "usage": {"VCPU": "1"}}),
            ),
            "payload.usage.VCPU",
        ),
    ]
}

#[test]
fn malformed_notifications_name_what_is_wrong() {
    for (name, value, want) in malformed_notifications() {
        let err = Notification::from_inner(&value)
            .expect_err(name)
            .to_string();
        assert!(
            err.contains(want),
            "{name}: {err:?} should contain {want:?}"
        );
    }
}

#[test]
fn malformed_fanouts_name_what_is_wrong() {
    let cast = |method: &str, args: Value| json!({"method": method, "args": args, "version": "4.2", "_unique_id": "u"});
    let cases = [
        (
            cast("delete_instance_info", json!({"host_name": "h"})),
            "args.instance_uuid is missing",
        ),
        (
            cast("sync_instance_info", json!({"instance_uuids": []})),
            "args.host_name is missing",
        ),
        (
            cast("update_instance_info", json!({"host_name": "h"})),
            "args.instance_info is missing",
        ),
        (
            cast(
                "update_instance_info",
                json!({"host_name": "h", "instance_info": payload_object("InstanceList",
            json!({"objects": [payload_object("Instance", json!({"host": "h"}))]}))}),
            ),
            "args.instance_info.objects[0].uuid is missing",
        ),
        (
            json!({"method": "sync_instance_info", "args": {"host_name": "h", "instance_uuids": []}}),
            "_unique_id is missing",
        ),
    ];
    for (value, want) in cases {
        let err = Notification::decode(&encode_envelope(&value))
            .expect_err(want)
            .to_string();
        assert!(err.contains(want), "{err:?} should contain {want:?}");
    }
    let ping = Notification::decode(&encode_envelope(&cast("ping", json!({})))).unwrap();
    assert_eq!(
        ping.event,
        HostEvent::Unknown {
            event_type: "ping".into()
        }
    );
}

#[test]
fn nova_api_s_aggregate_fanouts_become_aggregate_casts() {
    let cast = |method: &str, args: Value| json!({"method": method, "args": args, "version": "4.1", "_unique_id": "u"});
    let aggregate = |uuid: &str| {
        payload_object(
            "Aggregate",
            json!({"id": 1, "uuid": uuid, "name": "zone2", "hosts": ["host2"],
                   "metadata": {"availability_zone": "zone2"}}),
        )
    };
    let update = Notification::decode(&encode_envelope(&cast(
        "update_aggregates",
        json!({"aggregates": [aggregate(NODE)]}),
    )))
    .unwrap();
    assert_eq!(update.message_id, "u");
    let HostEvent::Aggregates(AggregateCast::Update(aggs)) = &update.event else {
        panic!("{:?}", update.event);
    };
    assert_eq!(aggs.len(), 1);
    assert_eq!(aggs[0].uuid, NODE);
    assert_eq!(aggs[0].hosts, ["host2"]);
    assert_eq!(aggs[0].metadata["availability_zone"], "zone2");
    let delete = Notification::decode(&encode_envelope(&cast(
        "delete_aggregate",
        json!({"aggregate": aggregate(NODE)}),
    )))
    .unwrap();
    assert_eq!(
        delete.event,
        HostEvent::Aggregates(AggregateCast::Delete(NODE.into()))
    );
    for (value, want) in [
        (
            cast("update_aggregates", json!({})),
            "args.aggregates is missing",
        ),
        (
            cast("delete_aggregate", json!({})),
            "args.aggregate is missing",
        ),
        (
            cast("delete_aggregate", json!({"aggregate": {"x": 1}})),
            "args.aggregate",
        ),
    ] {
        let err = Notification::decode(&encode_envelope(&value))
            .expect_err(want)
            .to_string();
        assert!(err.contains(want), "{err:?} should contain {want:?}");
    }
}

/// nova-compute's `_post_live_migration` sends `update_instance_info` from the source host
/// with the instance already on the destination: that instance is not reported as running
/// on the source.
#[test]
fn update_instance_info_leaves_out_instances_of_another_host() {
    const I2: &str = "278b0921-8f85-4257-88b6-2e743b5a975c";
    let cast = json!({"method": "update_instance_info", "version": "4.2", "_unique_id": "u",
    "args": {"host_name": "src", "instance_info": payload_object("InstanceList", json!({
        "objects": [
            payload_object("Instance", json!({"uuid": I1, "host": "dst"})),
            payload_object("Instance", json!({"uuid": I2, "host": "src"})),
            payload_object("Instance", json!({"uuid": NODE})),
        ]}))}});
    let n = Notification::decode(&encode_envelope(&cast)).unwrap();
    assert_eq!(
        n.event,
        HostEvent::UpdateInstanceInfo {
            host: "src".into(),
            instance_uuids: vec![I2.to_string(), NODE.to_string()],
        }
    );
}

/// Nova sets an evacuated instance's host in `finish_evacuation`, after the destination's
/// `instance.rebuild.end`: the payload names the failed source, the publisher the destination.
#[test]
fn an_evacuations_rebuild_end_places_the_instance_on_the_publishers_host() {
    let flavor = payload_object(
        "FlavorPayload",
        json!({"flavorid": "1", "name": "f",
        "vcpus": 1, "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "swap": 0}),
    );
    let rebuild_end = |publisher: &str| {
        let mut n = notification(
            "instance.rebuild.end",
            payload_object(
                "InstanceActionRebuildPayload",
                json!({"uuid": I1, "host": "src", "node": "src-node", "flavor": flavor}),
            ),
        );
        n["publisher_id"] = json!(publisher);
        Notification::from_inner(&n).unwrap().event
    };
    let on = |event: HostEvent| match event {
        HostEvent::Upsert { host, node, .. } => (host, node),
        other => panic!("{other:?}"),
    };
    let cases = [
        ("nova-compute:dst", ("dst".to_string(), None)),
        (
            "nova-compute:src",
            ("src".to_string(), Some("src-node".to_string())),
        ),
        (
            "nova-api:api1",
            ("src".to_string(), Some("src-node".to_string())),
        ),
    ];
    for (publisher, want) in cases {
        assert_eq!(on(rebuild_end(publisher)), want, "{publisher}");
    }
}

#[test]
fn oslo_timestamps_write_utc_times_and_sort_as_them() {
    use super::oslo_timestamp;
    assert_eq!(oslo_timestamp(0), "1970-01-01 00:00:00.000000");
    // 2026-11-27 18:00:00.123456 UTC, a leap day, and a second before the epoch.
    assert_eq!(
        oslo_timestamp(1_795_802_400_123_456),
        "2026-11-27 18:00:00.123456"
    );
    assert_eq!(
        oslo_timestamp(1_709_164_800_000_001),
        "2024-02-29 00:00:00.000001"
    );
    assert_eq!(oslo_timestamp(-1_000_000), "1969-12-31 23:59:59.000000");
    let times = [
        0i64,
        999_999,
        1_000_000,
        86_399_999_999,
        1_795_802_400_123_456,
    ];
    let texts: Vec<String> = times.iter().map(|&t| oslo_timestamp(t)).collect();
    assert!(texts.windows(2).all(|w| w[0] < w[1]), "{texts:?}");
}

#[test]
fn a_message_is_recorded_under_its_oslo_timestamp_or_none() {
    let with = |timestamp: Option<&str>| Notification {
        message_id: "m".into(),
        event_type: "e".into(),
        publisher_id: None,
        timestamp: timestamp.map(str::to_string),
        event: HostEvent::Unknown {
            event_type: "e".into(),
        },
    };
    let ts = "2026-11-27 18:00:00.123456";
    assert_eq!(with(Some(ts)).sent_at(), ts);
    assert_eq!(
        with(Some("2026-11-27T18:00:00+00:00")).sent_at(),
        "2026-11-27T18:00:00+00:00"
    );
    let long = "2026-".repeat(20);
    for odd in [
        None,
        Some(""),
        Some("yesterday"),
        Some("20261127"),
        Some(long.as_str()),
    ] {
        assert_eq!(with(odd).sent_at(), "", "{odd:?}");
    }
}

/// The shape of Nova's `metrics-update.json` sample (the real payload, made by Nova's own
/// objects, is decoded in `tests/api/flex.rs`).
fn metrics_update(value: Value) -> Value {
    let metric = |name: &str, value: Value| {
        json!({"nova_object.name": "MetricPayload", "nova_object.namespace": "nova",
               "nova_object.version": "1.0",
               "nova_object.data": {"name": name, "value": value, "numa_membw_values": null,
                                    "timestamp": "2026-12-02T07:50:00Z",
                                    "source": "fake.FakeDriver"}})
    };
    notification(
        "metrics.update",
        json!({"nova_object.name": "MetricsPayload", "nova_object.namespace": "nova",
               "nova_object.version": "1.0",
               "nova_object.data": {"host": "compute", "host_ip": "10.0.0.2",
                                    "nodename": "fake-mini",
                                    "metrics": [metric("cpu.frequency", json!(800)),
                                                metric("cpu.percent", value)]}}),
    )
}

#[test]
fn metrics_update_decodes_each_metric_with_its_time() {
    let n = Notification::from_inner(&metrics_update(json!(7))).unwrap();
    let HostEvent::Metrics(p) = n.event else {
        panic!("not metrics: {:?}", n.event)
    };
    assert_eq!(
        (p.host.as_str(), p.nodename.as_str()),
        ("compute", "fake-mini")
    );
    assert_eq!(p.metrics.len(), 2);
    let cpu = p.metric("cpu.percent").unwrap();
    assert_eq!(cpu.value, 7.0);
    assert_eq!(cpu.at_ms, crate::nova::time_ms("2026-12-02 07:50:00"));
    assert!(cpu.at_ms.is_some());
    // A value that is no number is a decode error naming the field.
    let err = Notification::from_inner(&metrics_update(json!("x"))).unwrap_err();
    assert!(
        err.to_string().contains("payload.metrics[1].value"),
        "{err}"
    );
}

#[test]
fn instance_usage_is_decoded_per_instance_uuid() {
    let mut v = host_state();
    v["payload"]["instance_usage"] = json!({I1: {"VCPU": 0.5, "MEMORY_MB": -1}});
    let HostEvent::HostState(p) = Notification::from_inner(&v).unwrap().event else {
        panic!("not a host state")
    };
    // Values are the usage table's to judge: a negative one decodes.
    assert_eq!(p.instance_usage.unwrap()[I1]["MEMORY_MB"], -1.0);
    v["payload"]["instance_usage"] = json!({"not-a-uuid": {"VCPU": 0.5}});
    let err = Notification::from_inner(&v).unwrap_err().to_string();
    assert!(err.contains("payload.instance_usage.not-a-uuid"), "{err}");
}

#[test]
fn instance_qos_is_decoded_per_instance_uuid() {
    let mut v = host_state();
    v["payload"]["instance_qos"] = json!({I1: {"cpu_wait": 0.25, "memory_pressure": 2}});
    let HostEvent::HostState(p) = Notification::from_inner(&v).unwrap().event else {
        panic!("not a host state")
    };
    // Names and ranges are the usage table's to judge: a share above 1 decodes.
    let qos = p.instance_qos.unwrap();
    assert_eq!(qos[I1]["cpu_wait"], 0.25);
    assert_eq!(qos[I1]["memory_pressure"], 2.0);
    assert_eq!(p.instance_usage, None);
    v["payload"]["instance_qos"] = json!({I1: {"cpu_wait": "high"}});
    let err = Notification::from_inner(&v).unwrap_err().to_string();
    assert!(err.contains("payload.instance_qos"), "{err}");
    v["payload"]["instance_qos"] = json!({"not-a-uuid": {"cpu_wait": 0.5}});
    let err = Notification::from_inner(&v).unwrap_err().to_string();
    assert!(err.contains("payload.instance_qos.not-a-uuid"), "{err}");
}
