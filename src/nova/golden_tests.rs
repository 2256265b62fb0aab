//! Golden tests against the Nova 34 wire messages captured in `tests/fixtures/wire/`.

use super::*;
use crate::domain::{HostState, Resources};
use serde_json::{json, Value};
use std::sync::Arc;

const CALL: &str = include_str!("../../tests/fixtures/wire/select_destinations-call.json");
const SUCCESS: &str =
    include_str!("../../tests/fixtures/wire/select_destinations-reply-success.json");
const NO_VALID_HOST: &str =
    include_str!("../../tests/fixtures/wire/select_destinations-reply-novalidhost.json");
const HEARTBEAT: &str =
    include_str!("../../tests/fixtures/wire/select_destinations-reply-heartbeat.json");
const UPDATE: &str = include_str!("../../tests/fixtures/wire/fanout-update_instance_info.json");
const DELETE: &str = include_str!("../../tests/fixtures/wire/fanout-delete_instance_info.json");
const SYNC: &str = include_str!("../../tests/fixtures/wire/fanout-sync_instance_info.json");
const DELETE_END: &str =
    include_str!("../../tests/fixtures/wire/instance.delete.end-notification.json");

const INSTANCE: &str = "178b0921-8f85-4257-88b6-2e743b5a975c";
const NODE_UUID: &str = "6f1a2e4b-6b3b-4c8b-9c16-3b8c1f0a9c11";
const CELL_UUID: &str = "8a2d5e4c-6a0f-4f31-9f67-6d2b6a0e7c21";

/// The decoded inner message of a capture.
fn inner(capture: &str) -> Value {
    let v: Value = serde_json::from_str(capture).expect("fixture is JSON");
    v["decoded_oslo_message"].clone()
}

/// The capture as it travels: the inner message re-wrapped in its envelope.
fn body(capture: &str) -> Vec<u8> {
    encode_envelope(&inner(capture))
}

fn decoded_call() -> (RpcMessage, SelectDestinationsArgs) {
    let msg = RpcMessage::decode(&body(CALL)).unwrap();
    let args = SelectDestinationsArgs::from_rpc_args(&msg.args, msg.version).unwrap();
    (msg, args)
}

#[test]
fn decodes_the_captured_select_destinations_call_envelope() {
    let (msg, _) = decoded_call();
    assert_eq!(msg.method, "select_destinations");
    assert_eq!(msg.version, (4, 5));
    assert_eq!(msg.namespace, None);
    assert_eq!(
        msg.msg_id.as_deref(),
        Some("aa2078e5484d4466becb55e90827174a")
    );
    assert_eq!(
        msg.reply_q.as_deref(),
        Some("reply_8623121de0bb437a94594d8b75673fca")
    );
    assert_eq!(msg.timeout, Some(60.0));
    assert_eq!(
        msg.unique_id.as_deref(),
        Some("34d24c28aa104ae2a318d8b3f637f221")
    );
    assert_eq!(
        msg.context["request_id"],
        "req-5b6c791d-5709-4f36-8fbe-c3e02869e35d"
    );
    assert_eq!(msg.context["roles"], json!(["admin", "member", "reader"]));
    assert!(msg.is_call());
}

#[test]
fn decodes_request_spec_1_15_from_the_captured_call() {
    let (_, args) = decoded_call();
    assert!(args.return_objects && args.return_alternates);
    assert_eq!(args.instance_uuids, vec![INSTANCE]);
    let spec = &args.spec;
    assert_eq!(spec.version, (1, 15));
    assert_eq!(spec.demand, Resources::new(1, 2048, 20));
    assert_eq!(spec.flavor.name.as_deref(), Some("m1.small"));
    assert_eq!(spec.flavor.flavorid.as_deref(), Some("2"));
    assert_eq!(spec.instance_uuid.as_deref(), Some(INSTANCE));
    assert_eq!(spec.num_instances, 1);
    assert_eq!(spec.availability_zone, None);
    assert_eq!(
        spec.project_id.as_deref(),
        Some("6f70656e737461636b20342065766572")
    );
    assert_eq!(
        spec.image_id.as_deref(),
        Some("155d900f-4e14-4e4c-a73d-069cbf4541e6")
    );
    assert_eq!(spec.limits, Some(Limits::default()));
    assert!(!spec.is_bfv && spec.scheduler_hints.is_empty() && spec.instance_group.is_none());
    let ctxs = spec.contexts(&args.instance_uuids);
    assert_eq!(ctxs.len(), 1);
    assert_eq!(
        (ctxs[0].instance_uuid.as_str(), ctxs[0].demand),
        (INSTANCE, Resources::new(1, 2048, 20))
    );
}

#[test]
fn the_captured_args_decode_the_same_at_every_4_x_shape_and_over_http() {
    let (_, at_4_5) = decoded_call();
    let args = inner(CALL)["args"].clone();
    let http = SelectDestinationsArgs::from_http_body(args.to_string().as_bytes()).unwrap();
    assert_eq!(http, at_4_5);

    let mut at_4_4 = args.clone();
    let m = at_4_4.as_object_mut().unwrap();
    m.remove("return_objects");
    m.remove("return_alternates");
    let d = SelectDestinationsArgs::from_rpc_args(&at_4_4, (4, 4)).unwrap();
    assert!(!d.return_objects && !d.return_alternates);
    assert_eq!(d.instance_uuids, vec![INSTANCE]);

    let mut at_4_3 = at_4_4.clone();
    at_4_3.as_object_mut().unwrap().remove("instance_uuids");
    let d = SelectDestinationsArgs::from_rpc_args(&at_4_3, (4, 3)).unwrap();
    assert!(d.instance_uuids.is_empty());
    assert_eq!(d.spec.contexts(&[])[0].instance_uuid, INSTANCE);

    let flavor = args["spec_obj"]["nova_object.data"]["flavor"].clone();
    let legacy = json!({"request_spec": {"instance_type": flavor, "num_instances": 1,
                        "instance_properties": {"uuid": INSTANCE}, "instance_uuids": [INSTANCE]},
                        "filter_properties": {"ignore_hosts": null}});
    let d = SelectDestinationsArgs::from_rpc_args(&legacy, (4, 0)).unwrap();
    assert_eq!(
        (d.spec.demand, d.instance_uuids),
        (Resources::new(1, 2048, 20), vec![INSTANCE.to_string()])
    );
}

fn captured_selection() -> Selection {
    let (_, args) = decoded_call();
    let mut host = HostState::synthetic(1, Resources::new(4, 8192, 100), Resources::ZERO);
    let p = host.profile_mut();
    p.host = Arc::from("compute1");
    p.node = Arc::from("compute1");
    p.uuid = Arc::from(NODE_UUID);
    p.availability_zone = Arc::from("nova");
    Selection::from_host(&host, args.spec.demand, CELL_UUID)
}

/// `v` with every `nova_object.changes` list sorted: Nova writes it from a set (its order
/// follows Python's string hashing) and reads it as a set, so its order carries nothing.
fn changes_as_sets(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                if let Some(Value::Array(changes)) = m.get_mut("nova_object.changes") {
                    changes.sort_by_key(|c| c.to_string());
                }
                m.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

/// The `_msg_id` and `_unique_id` of a captured reply.
fn reply_ids(captured: &Value) -> (String, String) {
    let id = |k: &str| captured[k].as_str().unwrap().to_string();
    (id("_msg_id"), id("_unique_id"))
}

#[test]
fn encoding_the_same_selection_reproduces_the_captured_success_result() {
    let captured = inner(SUCCESS);
    let result = encode_selections(&[vec![captured_selection()]], SelectionVersion::V1_1, true);
    assert_eq!(
        changes_as_sets(result.clone()),
        changes_as_sets(captured["result"].clone())
    );
    let (msg_id, unique_id) = reply_ids(&captured);
    // The reply answers the captured call.
    assert_eq!(msg_id, inner(CALL)["_msg_id"]);
    let mut reply = Reply::result(&msg_id, &result);
    reply.unique_id = unique_id;
    assert_eq!(
        changes_as_sets(reply.to_value()),
        changes_as_sets(captured.clone())
    );
    // The embedded string itself is byte-identical to what Nova (Python json.dumps) wrote.
    assert_eq!(
        captured_selection().allocation_request(),
        captured["result"][0][0]["nova_object.data"]["allocation_request"]
    );
}

#[test]
fn the_no_valid_host_failure_matches_the_captured_one_except_the_traceback() {
    let captured = inner(NO_VALID_HOST);
    let want_failure = captured["failure"].as_str().unwrap();
    let ours = no_valid_host_failure("There are not enough hosts available.");
    let strip_tb = |s: &str| {
        let mut v: Value = serde_json::from_str(s).unwrap();
        assert!(v["tb"].is_array());
        v.as_object_mut().unwrap().remove("tb");
        v
    };
    assert_eq!(strip_tb(&ours), strip_tb(want_failure));
    let (msg_id, unique_id) = reply_ids(&captured);
    let mut reply = Reply::failure(&msg_id, ours);
    reply.unique_id = unique_id;
    let mut got = reply.to_value();
    let mut want = captured.clone();
    got["failure"] = Value::Null;
    want["failure"] = Value::Null;
    assert_eq!(got, want);
}

#[test]
fn the_heartbeat_matches_the_captured_one() {
    let (msg_id, unique_id) = reply_ids(&inner(HEARTBEAT));
    let mut hb = Reply::heartbeat(&msg_id);
    hb.unique_id = unique_id;
    assert_eq!(hb.to_value(), inner(HEARTBEAT));
    assert_eq!(decode_envelope(&hb.to_body()).unwrap(), inner(HEARTBEAT));
}

#[test]
fn the_three_captured_fanout_casts_decode() {
    let cases = [
        (
            UPDATE,
            "85fcd2f2d526423eae481f9183575f0d",
            HostEvent::UpdateInstanceInfo {
                host: "compute1".into(),
                instance_uuids: vec![INSTANCE.into()],
            },
        ),
        (
            DELETE,
            "684a78f718fa4906b9d00763e21ca726",
            HostEvent::DeleteInstanceInfo {
                host: "compute1".into(),
                instance_uuid: INSTANCE.into(),
            },
        ),
        (
            SYNC,
            "d2b1983dd7b7493b8c90939de095d391",
            HostEvent::SyncInstanceInfo {
                host: "compute1".into(),
                instance_uuids: vec![INSTANCE.into()],
            },
        ),
    ];
    for (capture, id, event) in cases {
        let n = Notification::decode(&body(capture)).unwrap();
        assert_eq!(RpcMessage::decode(&body(capture)).unwrap().version, (4, 2));
        assert_eq!((n.message_id.as_str(), &n.event), (id, &event));
    }
}

#[test]
fn the_captured_delete_notification_releases_the_instance() {
    let n = Notification::decode(&body(DELETE_END)).unwrap();
    assert_eq!(n.message_id, "55ffa25e-c1a8-4bd3-bb1e-f32750d5e290");
    assert_eq!(n.event_type, "instance.delete.end");
    assert_eq!(n.publisher_id.as_deref(), Some("nova-compute:compute1"));
    assert_eq!(
        n.event,
        HostEvent::Release {
            instance_uuid: INSTANCE.into(),
            host: Some("compute1".into())
        }
    );
}

#[test]
fn the_captured_payload_as_a_create_end_upserts_the_flavor_demand() {
    let mut msg = inner(DELETE_END);
    msg["event_type"] = json!("instance.create.end");
    let n = Notification::from_inner(&msg).unwrap();
    let want = HostEvent::Upsert {
        instance_uuid: INSTANCE.into(),
        host: "compute1".into(),
        node: Some("compute1".into()),
        demand: Resources::new(1, 2048, 20),
        flavor: "m1.small".into(),
    };
    assert_eq!(n.event, want);
}

#[test]
fn broken_copies_of_the_captured_call_fail_naming_the_field() {
    const SPEC: &str = "/args/spec_obj";
    const FLAVOR: &str = "/args/spec_obj/nova_object.data/flavor/nova_object.data";
    // (what is broken, JSON pointer, new value or None to remove it, expected message part)
    let cases: Vec<(&str, String, Option<Value>, &str)> = vec![
        (
            "wrong object name",
            format!("{SPEC}/nova_object.name"),
            Some(json!("Instance")),
            "expected a RequestSpec object, got Instance",
        ),
        (
            "missing flavor",
            format!("{SPEC}/nova_object.data/flavor"),
            None,
            "args.spec_obj.flavor is missing",
        ),
        (
            "negative vcpus",
            format!("{FLAVOR}/vcpus"),
            Some(json!(-1)),
            "args.spec_obj.flavor.vcpus must be a non-negative integer",
        ),
        (
            "non-integer memory_mb",
            format!("{FLAVOR}/memory_mb"),
            Some(json!(2048.5)),
            "args.spec_obj.flavor.memory_mb must be a non-negative integer",
        ),
        (
            "unknown spec major",
            format!("{SPEC}/nova_object.version"),
            Some(json!("2.0")),
            "version 2.0 is not supported",
        ),
        (
            "unknown rpc major",
            "/version".to_string(),
            Some(json!("5.0")),
            "select_destinations: version 5.0 is not supported",
        ),
    ];
    for (name, pointer, value, want) in cases {
        let mut msg = inner(CALL);
        match value {
            Some(v) => *msg.pointer_mut(&pointer).unwrap() = v,
            None => {
                let (parent, key) = pointer.rsplit_once('/').unwrap();
                msg.pointer_mut(parent)
                    .unwrap()
                    .as_object_mut()
                    .unwrap()
                    .remove(key);
            }
        }
        let err = RpcMessage::decode(&encode_envelope(&msg))
            .and_then(|m| SelectDestinationsArgs::from_rpc_args(&m.args, m.version))
            .expect_err(name)
            .to_string();
        assert!(
            err.contains(want),
            "{name}: {err:?} should contain {want:?}"
        );
    }
    let bad_envelope = json!({"oslo.version": "2.0", "oslo.message": inner(CALL)}).to_string();
    let err = RpcMessage::decode(bad_envelope.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(err.contains("oslo.message must be a JSON string"), "{err}");
    let err = SelectDestinationsArgs::from_http_body(b"{\"spec_obj\":")
        .unwrap_err()
        .to_string();
    assert!(err.contains("request body is not valid JSON"), "{err}");
}
