//! Every decoder returns a `Result` rather than panicking, whatever a captured message is
//! mutated into.

use super::*;
use serde_json::{json, Value};

const CAPTURES: [&str; 5] = [
    include_str!("../../tests/fixtures/wire/select_destinations-call.json"),
    include_str!("../../tests/fixtures/wire/fanout-update_instance_info.json"),
    include_str!("../../tests/fixtures/wire/fanout-delete_instance_info.json"),
    include_str!("../../tests/fixtures/wire/fanout-sync_instance_info.json"),
    include_str!("../../tests/fixtures/wire/instance.delete.end-notification.json"),
];

/// JSON pointers of every value inside `v`.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m.iter().for_each(|(k, c)| {
            pointers(
                c,
                format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                out,
            )
        }),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, c)| pointers(c, format!("{at}/{i}"), out)),
        _ => {}
    }
    out.push(at);
}

fn decode_everything(body: &[u8]) {
    let _ = Notification::decode(body);
    if let Ok(msg) = RpcMessage::decode(body) {
        for version in [(4, 0), (4, 3), (4, 5), (4, 99), (5, 0)] {
            if let Ok(args) = SelectDestinationsArgs::from_rpc_args(&msg.args, version) {
                let _ = args.spec.contexts(&args.instance_uuids);
            }
        }
    }
}

#[test]
fn no_mutation_of_a_captured_message_makes_a_decoder_panic() {
    let replacements = [
        json!(null),
        json!(-1),
        json!(i64::MAX),
        json!(u64::MAX),
        json!(1e308),
        json!(0.5),
        json!("x"),
        json!(""),
        json!([]),
        json!([null]),
        json!({}),
        json!(true),
    ];
    for capture in CAPTURES {
        let inner = serde_json::from_str::<Value>(capture).unwrap()["decoded_oslo_message"].clone();
        let mut all = Vec::new();
        pointers(&inner, String::new(), &mut all);
        for pointer in &all {
            for replacement in &replacements {
                let mut msg = inner.clone();
                match msg.pointer_mut(pointer) {
                    Some(slot) => *slot = replacement.clone(),
                    None => continue,
                }
                decode_everything(&encode_envelope(&msg));
            }
        }
    }
    for body in [
        &b""[..],
        b"null",
        b"{}",
        b"\xff\xfe",
        b"{\"oslo.version\": \"2.0\", \"oslo.message\": \"null\"}",
    ] {
        decode_everything(body);
    }
}
