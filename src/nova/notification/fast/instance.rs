//! The same typed decode for the other half of the traffic: a well-formed instance
//! notification that places or releases an allocation (`instance.create.end`,
//! `instance.delete.end`, … see `UPSERT_EVENTS` and `RELEASE_EVENTS`). A build's
//! `instance.create.end` comes with every decision; read into a `serde_json::Value` tree, the
//! payload's thirty-odd fields (Nova's `InstanceActionPayload`, its `FlavorPayload` inside)
//! were built and dropped to read six of them: 6 % of the service's CPU at 10,000 hosts with
//! notifications over HTTP (BENCHMARKS.md). Here the fields the general decode reads are read
//! into borrowed structs and every other one is skipped. As for the host-state event, it
//! answers only when every check of the general decode passes (`decode_payload`,
//! `Flavor::from_fields`, `NovaObject::parse`); anything else is `None`, and the general decode
//! gives the answer and the error it always gave.

use super::super::{
    evacuated_to_publisher, HostEvent, Notification, RELEASE_EVENTS, UPSERT_EVENTS,
};
use super::{name, Obj, Scan};
use crate::nova::bounds::{uuid, MAX_ITEMS, MAX_NAME_BYTES, MAX_SIZE};
use crate::nova::object::parse_version;
use crate::nova::oslo::OSLO_VERSION;
use crate::nova::request_spec::Flavor;
use crate::nova::versions;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// A versioned object (`nova_object.*`) and the fields of its data that are read.
#[derive(serde::Deserialize)]
#[serde(bound(deserialize = "D: serde::Deserialize<'de>"))]
struct Versioned<'a, D> {
    #[serde(rename = "nova_object.name", borrow)]
    name: Cow<'a, str>,
    #[serde(rename = "nova_object.namespace", borrow)]
    namespace: Cow<'a, str>,
    #[serde(rename = "nova_object.version", borrow)]
    version: Cow<'a, str>,
    #[serde(rename = "nova_object.data")]
    data: Obj<D>,
}

impl<D> Versioned<'_, D> {
    /// What `NovaObject::parse_header` and `versions::check` accept: namespace `nova`, a
    /// "major.minor" version of at most 255 bytes, an object this codec reads at that major.
    fn known(&self) -> Option<()> {
        if self.namespace != "nova" || self.version.len() > MAX_NAME_BYTES {
            return None;
        }
        versions::check(&self.name, parse_version(&self.version)?, "").ok()
    }
}

type Payload<'a> = Versioned<'a, Instance<'a>>;
type Message<'a> = super::Message<'a, Payload<'a>>;

/// The fields of an instance payload the general decode reads; Nova's others are skipped.
#[derive(serde::Deserialize)]
struct Instance<'a> {
    #[serde(borrow)]
    uuid: Cow<'a, str>,
    #[serde(default, borrow)]
    host: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    node: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    flavor: Option<Obj<Versioned<'a, FlavorData<'a>>>>,
}

/// What `Flavor::from_fields` reads. A `flavorid` that is a number (the general decode takes
/// it) is left to the general decode.
#[derive(serde::Deserialize)]
struct FlavorData<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    flavorid: Option<Cow<'a, str>>,
    vcpus: i64,
    memory_mb: i64,
    root_gb: i64,
    #[serde(default)]
    ephemeral_gb: Option<i64>,
    #[serde(default)]
    swap: Option<i64>,
    #[serde(default)]
    extra_specs: Option<BTreeMap<String, String>>,
}

/// Whether `body` can be an instance notification of an allocation's event at all (Nova's
/// other instance notifications, `instance.update` the most frequent, go straight to the
/// general decode instead of being read twice).
fn names_instance_event(body: &[u8]) -> bool {
    UPSERT_EVENTS
        .iter()
        .chain(&RELEASE_EVENTS)
        .any(|event| memchr::memmem::find(body, event.as_bytes()).is_some())
}

/// The event, when `body` is a valid instance notification of an allocation's event in its
/// envelope; `None` sends it to the general decode.
pub(in crate::nova::notification) fn instance_event(body: &[u8]) -> Option<Notification> {
    if !names_instance_event(body) {
        return None;
    }
    let envelope = match Scan::envelope(body) {
        Some(envelope) => envelope,
        None => serde_json::from_slice::<Obj<super::Envelope>>(body).ok()?.0,
    };
    if envelope.version != OSLO_VERSION {
        return None;
    }
    let Obj(m) = serde_json::from_str::<Obj<Message>>(&envelope.message).ok()?;
    instance_message(m)
}

/// The same for the message alone, as `POST /v1/notifications` also takes it (a body with
/// an `oslo.message` or a `method` is an envelope or a cast there, and left to it).
pub(in crate::nova::notification) fn instance_event_alone(body: &[u8]) -> Option<Notification> {
    if !names_instance_event(body) {
        return None;
    }
    let Obj(m) = serde_json::from_slice::<Obj<Message>>(body).ok()?;
    if m.envelope.0 {
        return None;
    }
    instance_message(m)
}

/// A string of at most 255 bytes, or its absence; `None` when too long.
fn opt_name(s: Option<Cow<'_, str>>) -> Option<Option<String>> {
    match s {
        Some(s) => name(&s).map(Some),
        None => Some(None),
    }
}

fn size(n: i64) -> Option<i64> {
    (0..=MAX_SIZE).contains(&n).then_some(n)
}

/// `Flavor::from_fields` of a FlavorPayload's data.
fn flavor(d: FlavorData<'_>) -> Option<Flavor> {
    let extra_specs = d.extra_specs.unwrap_or_default();
    let bounded = extra_specs.len() <= MAX_ITEMS
        && extra_specs
            .iter()
            .all(|(k, v)| k.len() <= MAX_NAME_BYTES && v.len() <= MAX_NAME_BYTES);
    if !bounded {
        return None;
    }
    Some(Flavor {
        name: opt_name(d.name)?,
        flavorid: opt_name(d.flavorid)?,
        vcpus: size(d.vcpus)?,
        memory_mb: size(d.memory_mb)?,
        root_gb: size(d.root_gb)?,
        ephemeral_gb: d.ephemeral_gb.map_or(Some(0), size)?,
        swap: d.swap.map_or(Some(0), size)?,
        extra_specs,
    })
}

/// A decoded message's event, when it is a valid instance notification that places or
/// releases an allocation (`decode_payload`).
fn instance_message(m: Message) -> Option<Notification> {
    let event_type = &*m.event_type;
    let upsert = UPSERT_EVENTS.contains(&event_type);
    if m.method.0 || !(upsert || RELEASE_EVENTS.contains(&event_type)) {
        return None;
    }
    let Obj(p) = m.payload;
    p.known()?;
    let Obj(d) = p.data;
    let instance_uuid = uuid("payload.uuid", &d.uuid).ok()?;
    let mut event = if upsert {
        let Obj(f) = d.flavor?;
        if f.name != "FlavorPayload" {
            return None;
        }
        f.known()?;
        let flavor = flavor(f.data.0)?;
        HostEvent::Upsert {
            instance_uuid,
            host: name(&d.host?)?,
            node: opt_name(d.node)?,
            demand: flavor.demand(false),
            flavor: flavor.key(),
        }
    } else {
        HostEvent::Release {
            instance_uuid,
            host: opt_name(d.host)?,
        }
    };
    let publisher_id = match m.publisher_id {
        Some(p) if p.len() > 2 * MAX_NAME_BYTES => return None,
        other => other.map(Cow::into_owned),
    };
    if event_type == "instance.rebuild.end" {
        evacuated_to_publisher(&mut event, publisher_id.as_deref());
    }
    Some(Notification {
        message_id: name(&m.message_id)?,
        publisher_id,
        timestamp: opt_name(m.timestamp)?,
        event_type: event_type.to_string(),
        event,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::oslo::{decode_envelope, encode_envelope};
    use serde_json::{json, Value};

    /// The general decode of an envelope (a notification, or a cast when it has a method).
    fn general(body: &[u8]) -> crate::nova::error::Result<Notification> {
        Notification::from_message(&decode_envelope(body)?)
    }

    /// Nova's own `instance.delete.end`, as captured from Nova (tests/fixtures/wire).
    fn captured() -> Value {
        let fixture: Value = serde_json::from_str(include_str!(
            "../../../../tests/fixtures/wire/instance.delete.end-notification.json"
        ))
        .unwrap();
        fixture["decoded_oslo_message"].clone()
    }

    fn with(event_type: &str, edit: impl FnOnce(&mut Value)) -> Value {
        let mut m = captured();
        m["event_type"] = json!(event_type);
        edit(&mut m);
        m
    }

    /// Checks that the typed decode takes `inner` (in its envelope and alone) and answers
    /// what the general decode does.
    fn taken(inner: &Value) -> Notification {
        let body = encode_envelope(inner);
        let fast = instance_event(&body).unwrap_or_else(|| panic!("not taken: {inner}"));
        assert_eq!(fast, general(&body).unwrap(), "{inner}");
        assert_eq!(Notification::decode(&body).unwrap(), fast, "{inner}");
        let alone = serde_json::to_vec(inner).unwrap();
        assert_eq!(
            instance_event_alone(&alone).as_ref(),
            Some(&fast),
            "{inner}"
        );
        fast
    }

    #[test]
    fn nova_s_instance_events_decode_as_the_general_decode_does() {
        for event_type in UPSERT_EVENTS.iter().chain(&RELEASE_EVENTS) {
            taken(&with(event_type, |_| {}));
        }
        let data = "/payload/nova_object.data";
        let flavor = "/payload/nova_object.data/flavor/nova_object.data";
        type Edit = Box<dyn Fn(&mut Value)>;
        let cases: Vec<Edit> = vec![
            // Nova's other payloads of these events.
            Box::new(|m| m["payload"]["nova_object.name"] = json!("InstanceCreatePayload")),
            Box::new(|m| m["payload"]["nova_object.version"] = json!("1.21")),
            // Optional fields unset or null; extra specs; escapes; an upper-case uuid.
            Box::new(move |m| {
                let d = m.pointer_mut(data).unwrap().as_object_mut().unwrap();
                d.remove("node");
                let f = m.pointer_mut(flavor).unwrap().as_object_mut().unwrap();
                for key in ["name", "flavorid", "ephemeral_gb", "swap", "extra_specs"] {
                    f.remove(key);
                }
            }),
            Box::new(move |m| {
                let f = m.pointer_mut(flavor).unwrap();
                f["name"] = Value::Null;
                f["swap"] = json!(1025);
                f["flavorid"] = Value::Null;
                f["ephemeral_gb"] = json!(5);
                f["extra_specs"] = json!({"hw:cpu_policy": "dedicated", "quota:x": "1\"2"});
                m.pointer_mut(data).unwrap()["node"] = Value::Null;
            }),
            Box::new(move |m| {
                m.pointer_mut(data).unwrap()["host"] = json!("compute\"1\u{e9}/x");
                m.pointer_mut(data).unwrap()["uuid"] =
                    json!("178B0921-8F85-4257-88B6-2E743B5A975C");
                m["publisher_id"] = Value::Null;
                m.as_object_mut().unwrap().remove("timestamp");
            }),
            Box::new(|m| m["timestamp"] = json!("2026-11-29 12:00:00.123456")),
            Box::new(move |m| m.pointer_mut(flavor).unwrap()["swap"] = Value::Null),
        ];
        for edit in cases {
            for event_type in ["instance.create.end", "instance.delete.end"] {
                let mut inner = with(event_type, |_| {});
                edit(&mut inner);
                taken(&inner);
            }
        }
        // An evacuation's rebuild: the instance runs on the publisher's host.
        let rebuilt = taken(&with("instance.rebuild.end", |m| {
            m["publisher_id"] = json!("nova-compute:compute2");
        }));
        assert!(
            matches!(&rebuilt.event, HostEvent::Upsert { host, node: None, .. } if host == "compute2"),
            "{rebuilt:?}"
        );
        // A failed build names no host.
        let failed = taken(&with("instance.create.error", |m| {
            m.pointer_mut(data).unwrap()["host"] = Value::Null;
        }));
        assert!(matches!(
            failed.event,
            HostEvent::Release { host: None, .. }
        ));
    }

    /// An unusual event as an edit of a build's end: (what, where, the value; None removes the
    /// key, valid: the general decode takes it).
    type Edit = (&'static str, String, Option<Value>, bool);

    /// Unusual envelopes and payload objects.
    fn unusual_envelopes() -> Vec<Edit> {
        let long = json!("x".repeat(MAX_NAME_BYTES + 1));
        vec![
            ("a method", "/method".into(), Some(Value::Null), false),
            (
                "other event",
                "/event_type".into(),
                Some(json!("instance.update")),
                true,
            ),
            ("no payload", "/payload".into(), None, false),
            (
                "payload as a list",
                "/payload".into(),
                Some(json!([1])),
                false,
            ),
            (
                "unknown object",
                "/payload/nova_object.name".into(),
                Some(json!("Foo")),
                false,
            ),
            (
                "other major",
                "/payload/nova_object.version".into(),
                Some(json!("2.0")),
                false,
            ),
            (
                "bad version",
                "/payload/nova_object.version".into(),
                Some(json!("1")),
                false,
            ),
            (
                "other namespace",
                "/payload/nova_object.namespace".into(),
                Some(json!("x")),
                false,
            ),
            (
                "long message id",
                "/message_id".into(),
                Some(long.clone()),
                false,
            ),
            (
                "long timestamp",
                "/timestamp".into(),
                Some(long.clone()),
                false,
            ),
            (
                "numeric publisher",
                "/publisher_id".into(),
                Some(json!(7)),
                false,
            ),
        ]
    }

    /// Unusual instance data and flavors.
    fn unusual_data() -> Vec<Edit> {
        let long = json!("x".repeat(MAX_NAME_BYTES + 1));
        let too_many: serde_json::Map<String, Value> = (0..=MAX_ITEMS)
            .map(|i| (format!("k{i}"), json!("v")))
            .collect();
        let data = "/payload/nova_object.data";
        let flavor = "/payload/nova_object.data/flavor";
        let fdata = "/payload/nova_object.data/flavor/nova_object.data";
        vec![
            ("no data", data.to_string(), Some(Value::Null), false),
            (
                "bad uuid",
                format!("{data}/uuid"),
                Some(json!("vm1")),
                false,
            ),
            (
                "numeric uuid",
                format!("{data}/uuid"),
                Some(json!(1)),
                false,
            ),
            ("no host", format!("{data}/host"), None, false),
            (
                "long host",
                format!("{data}/host"),
                Some(long.clone()),
                false,
            ),
            (
                "long node",
                format!("{data}/node"),
                Some(long.clone()),
                false,
            ),
            ("no flavor", format!("{data}/flavor"), None, false),
            (
                "flavor of another name",
                format!("{flavor}/nova_object.name"),
                Some(json!("Flavor")),
                false,
            ),
            (
                "negative vcpus",
                format!("{fdata}/vcpus"),
                Some(json!(-1)),
                false,
            ),
            (
                "float memory",
                format!("{fdata}/memory_mb"),
                Some(json!(2048.0)),
                false,
            ),
            (
                "huge disk",
                format!("{fdata}/root_gb"),
                Some(json!(MAX_SIZE + 1)),
                false,
            ),
            ("no root_gb", format!("{fdata}/root_gb"), None, false),
            (
                "numeric flavorid",
                format!("{fdata}/flavorid"),
                Some(json!(2)),
                true,
            ),
            (
                "long flavor name",
                format!("{fdata}/name"),
                Some(long.clone()),
                false,
            ),
            (
                "numeric extra spec",
                format!("{fdata}/extra_specs"),
                Some(json!({"a": 1})),
                false,
            ),
            (
                "long extra spec",
                format!("{fdata}/extra_specs"),
                Some(json!({"a": long})),
                false,
            ),
            (
                "too many extra specs",
                format!("{fdata}/extra_specs"),
                Some(Value::Object(too_many)),
                false,
            ),
        ]
    }

    #[test]
    fn anything_unusual_is_left_to_the_general_decode() {
        let data = "/payload/nova_object.data";
        for (what, at, value, valid) in unusual_envelopes().into_iter().chain(unusual_data()) {
            let mut inner = with("instance.create.end", |_| {});
            let (parent, key) = at.rsplit_once('/').unwrap();
            let parent = inner.pointer_mut(parent).unwrap().as_object_mut().unwrap();
            match value {
                Some(v) => parent.insert(key.to_string(), v),
                None => parent.remove(key),
            };
            let body = encode_envelope(&inner);
            assert!(instance_event(&body).is_none(), "{what}");
            let alone = serde_json::to_vec(&inner).unwrap();
            assert!(instance_event_alone(&alone).is_none(), "{what} alone");
            let decoded = Notification::decode(&body);
            assert_eq!(decoded.is_ok(), valid, "{what}: {decoded:?}");
            match (decoded, general(&body)) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{what}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{what}"),
                (a, b) => panic!("{what}: {a:?} against {b:?}"),
            }
        }
        // A release reads neither host nor flavor; a repeated key is left to the general
        // decode, which keeps the last.
        let release = with("instance.delete.end", |m| {
            m.pointer_mut(data).unwrap()["host"] = Value::Null;
        });
        taken(&release);
        let text = String::from_utf8(encode_envelope(&captured())).unwrap();
        let twice = text.replacen(
            "\\\"host\\\":\\\"compute1\\\"",
            "\\\"host\\\":\\\"compute0\\\",\\\"host\\\":\\\"compute1\\\"",
            1,
        );
        assert!(twice.contains("compute0"), "{twice}");
        assert!(instance_event(twice.as_bytes()).is_none());
        assert_eq!(
            Notification::decode(twice.as_bytes()).unwrap(),
            general(twice.as_bytes()).unwrap()
        );
        // The message alone that is an envelope is left to the envelope's decode.
        let mut envelope = captured();
        envelope["oslo.message"] = json!("{}");
        assert!(instance_event_alone(&serde_json::to_vec(&envelope).unwrap()).is_none());
    }

    #[test]
    fn a_mangled_instance_event_is_decoded_as_the_general_decode_does_or_left_to_it() {
        let body = encode_envelope(&with("instance.create.end", |_| {}));
        let taken = super::super::tests::mangled_taken(&body, 29, instance_event, general);
        assert!(taken > 100, "{taken} mangled envelopes taken");
    }
}
