//! A typed decode of the one message that is most of the traffic, a well-formed
//! `compute.host.state` event: the envelope and the message read straight into borrowed
//! structs instead of two `serde_json::Value` trees. It answers only when the message is
//! valid and every check of the general decode passes; anything else (another event, a
//! missing or ill-typed field, a bound exceeded, a repeated key) is `None`, and the general
//! decode gives the answer and the error it always gave.

mod instance;

pub(super) use instance::{instance_event, instance_event_alone};

use super::{HostEvent, HostStatePayload, Notification, HOST_STATE_EVENT, MAX_ALLOCATION_RATIO};
use crate::domain::{is_valid_class_name, Inventory};
use crate::nova::bounds::{uuid, MAX_ITEMS, MAX_NAME_BYTES, MAX_SIZE};
use crate::nova::oslo::OSLO_VERSION;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::marker::PhantomData;

/// `T` read only from a JSON object (serde's derived structs also take an array).
struct Obj<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Obj)
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// Whether a key is there at all, null included (the general decode takes any `method`
/// key for an RPC cast).
#[derive(Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| Present(true))
    }
}

/// A JSON object's entries in order, repeated keys kept (refused below).
struct Entries<V>(Vec<(String, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Entries<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Vis<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Vis<V> {
            type Value = Entries<V>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<Cow<'de, str>, V>()? {
                    out.push((k.into_owned(), v));
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(Vis(PhantomData))
    }
}

#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "oslo.version", borrow)]
    version: Cow<'a, str>,
    #[serde(rename = "oslo.message", borrow)]
    message: Cow<'a, str>,
}

/// A scan of an envelope as oslo writes it: an object of exactly `oslo.version` and
/// `oslo.message`, both strings. The message is a JSON text written as a string, every quote
/// of it escaped: serde_json reads such a string escape by escape (a search and a copy per
/// escape, some seventy in a host-state event: two fifths of its decode, BENCHMARKS.md);
/// this copies the runs between escapes, in one pass. Anything else it leaves (`None`) to
/// serde_json: another shape, a key twice, a `\u` escape (oslo's inner text is ASCII: it
/// escapes the rest itself), a byte the JSON grammar refuses.
struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    fn token(&mut self, byte: u8) -> Option<()> {
        self.space();
        (self.bytes.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    /// A string literal's text: borrowed when it has no escape, else copied run by run. The
    /// runs between escapes are found by `memchr2` (a vector search), and a byte JSON refuses
    /// inside a string (a control character) by one pass over the whole literal at its end.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.token(b'"')?;
        let bytes = self.bytes;
        let start = self.at;
        // The unescaped text so far, once there was an escape, and where its next run starts.
        let mut text: Option<Vec<u8>> = None;
        let mut run = start;
        loop {
            let stop = run + memchr::memchr2(b'"', b'\\', &bytes[run..])?;
            if bytes[stop] == b'"' {
                if bytes[start..stop]
                    .iter()
                    .fold(false, |c, &b| c | (b < 0x20))
                {
                    return None;
                }
                self.at = stop + 1;
                return match text {
                    None => std::str::from_utf8(&bytes[start..stop])
                        .ok()
                        .map(Cow::Borrowed),
                    Some(mut text) => {
                        text.extend_from_slice(&bytes[run..stop]);
                        String::from_utf8(text).ok().map(Cow::Owned)
                    }
                };
            }
            // The text is never longer than what is left of the literal.
            let text = text.get_or_insert_with(|| Vec::with_capacity(bytes.len() - start));
            text.extend_from_slice(&bytes[run..stop]);
            text.push(match bytes.get(stop + 1)? {
                b'"' => b'"',
                b'\\' => b'\\',
                b'/' => b'/',
                b'b' => 0x08,
                b'f' => 0x0c,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                _ => return None,
            });
            run = stop + 2;
        }
    }

    /// The envelope's version and message.
    fn envelope(bytes: &'a [u8]) -> Option<Envelope<'a>> {
        let mut scan = Scan { bytes, at: 0 };
        let (mut version, mut message) = (None, None);
        scan.token(b'{')?;
        for i in 0..2 {
            if i > 0 {
                scan.token(b',')?;
            }
            let key = scan.string()?;
            scan.token(b':')?;
            let slot = match &*key {
                "oslo.version" => &mut version,
                "oslo.message" => &mut message,
                _ => return None,
            };
            if slot.replace(scan.string()?).is_some() {
                return None;
            }
        }
        scan.token(b'}')?;
        scan.space();
        (scan.at == bytes.len()).then_some(())?;
        Some(Envelope {
            version: version?,
            message: message?,
        })
    }
}

/// An oslo notification's message, its payload `P` (a host-state event's, an instance
/// notification's).
#[derive(serde::Deserialize)]
#[serde(bound(deserialize = "P: Deserialize<'de>"))]
struct Message<'a, P> {
    #[serde(default)]
    method: Present,
    /// Only asked of a body that may be an envelope or the message alone (HTTP).
    #[serde(rename = "oslo.message", default)]
    envelope: Present,
    #[serde(borrow)]
    event_type: Cow<'a, str>,
    #[serde(borrow)]
    message_id: Cow<'a, str>,
    #[serde(default, borrow)]
    publisher_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    timestamp: Option<Cow<'a, str>>,
    payload: Obj<P>,
}

#[derive(serde::Deserialize)]
struct Payload<'a> {
    #[serde(borrow)]
    host: Cow<'a, str>,
    #[serde(default, borrow)]
    node: Option<Cow<'a, str>>,
    #[serde(borrow)]
    compute_node_uuid: Cow<'a, str>,
    #[serde(default, borrow)]
    availability_zone: Option<Cow<'a, str>>,
    #[serde(default)]
    up: Option<bool>,
    #[serde(default)]
    disabled: Option<bool>,
    #[serde(default)]
    inventory: Option<Entries<Obj<RawInventory>>>,
    #[serde(default)]
    traits: Option<Vec<String>>,
    #[serde(default)]
    aggregates: Option<Vec<String>>,
    #[serde(default)]
    usage: Option<Entries<f64>>,
    /// Per-instance usage: left to the general decode.
    #[serde(default)]
    instance_usage: Option<serde::de::IgnoredAny>,
    /// Per-instance QoS signals: left to the general decode.
    #[serde(default)]
    instance_qos: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct RawInventory {
    total: i64,
    #[serde(default)]
    reserved: Option<i64>,
    #[serde(default)]
    min_unit: Option<i64>,
    #[serde(default)]
    max_unit: Option<i64>,
    #[serde(default)]
    step_size: Option<i64>,
    #[serde(default)]
    allocation_ratio: Option<f64>,
}

fn name(s: &str) -> Option<String> {
    (s.len() <= MAX_NAME_BYTES).then(|| s.to_string())
}

fn size(n: i64) -> Option<i64> {
    (0..=MAX_SIZE).contains(&n).then_some(n)
}

fn names(list: Option<Vec<String>>) -> Option<Vec<String>> {
    let list = list.unwrap_or_default();
    (list.len() <= MAX_ITEMS && list.iter().all(|s| s.len() <= MAX_NAME_BYTES)).then_some(list)
}

/// No key twice (the general decode keeps the last; this one leaves such a message to it),
/// and few enough keys to check that by comparing each pair.
fn distinct<V>(entries: &[(String, V)]) -> bool {
    entries.len() <= 64
        && entries
            .iter()
            .enumerate()
            .all(|(i, (k, _))| entries[..i].iter().all(|(e, _)| e != k))
}

/// Whether `body` can be a `compute.host.state` event at all.
fn names_host_state(body: &[u8]) -> bool {
    memchr::memmem::find(body, HOST_STATE_EVENT.as_bytes()).is_some()
}

/// The event, when `body` is a valid `compute.host.state` event in its envelope; `None`
/// sends it to the general decode.
pub(super) fn host_state(body: &[u8]) -> Option<Notification> {
    if !names_host_state(body) {
        return None;
    }
    let envelope = match Scan::envelope(body) {
        Some(envelope) => envelope,
        None => serde_json::from_slice::<Obj<Envelope>>(body).ok()?.0,
    };
    if envelope.version != OSLO_VERSION {
        return None;
    }
    let Obj(m) = serde_json::from_str::<Obj<Message<Payload>>>(&envelope.message).ok()?;
    host_state_message(m)
}

/// The same for the message alone, as `POST /v1/notifications` also takes it (a body with
/// an `oslo.message` or a `method` is an envelope or a cast there, and left to it).
pub(super) fn host_state_alone(body: &[u8]) -> Option<Notification> {
    if !names_host_state(body) {
        return None;
    }
    let Obj(m) = serde_json::from_slice::<Obj<Message<Payload>>>(body).ok()?;
    if m.envelope.0 {
        return None;
    }
    host_state_message(m)
}

/// A decoded message's event, when it is a valid `compute.host.state` event.
fn host_state_message(m: Message<Payload>) -> Option<Notification> {
    if m.method.0 || m.event_type != HOST_STATE_EVENT {
        return None;
    }
    let Obj(p) = m.payload;
    if p.instance_usage.is_some() || p.instance_qos.is_some() {
        return None;
    }
    let mut inventory = BTreeMap::new();
    let entries = p.inventory.map(|e| e.0).unwrap_or_default();
    if !distinct(&entries) {
        return None;
    }
    for (class, Obj(raw)) in entries {
        if !is_valid_class_name(&class) {
            return None;
        }
        let allocation_ratio = match raw.allocation_ratio {
            None => 1.0,
            Some(r) if r.is_finite() && r > 0.0 && r <= MAX_ALLOCATION_RATIO => r,
            Some(_) => return None,
        };
        let opt = |v: Option<i64>, default: i64| v.map_or(Some(default), size);
        let entry = Inventory {
            total: size(raw.total)?,
            reserved: opt(raw.reserved, 0)?,
            min_unit: opt(raw.min_unit, 1)?,
            max_unit: opt(raw.max_unit, i64::MAX)?,
            step_size: opt(raw.step_size, 1)?,
            allocation_ratio,
        };
        inventory.insert(class, entry);
    }
    let usage = match p.usage {
        None => None,
        Some(Entries(entries)) => {
            if !distinct(&entries)
                || !entries
                    .iter()
                    .all(|(_, x)| x.is_finite() && *x >= 0.0 && *x <= MAX_SIZE as f64)
            {
                return None;
            }
            Some(entries.into_iter().collect())
        }
    };
    let host = name(&p.host)?;
    let payload = HostStatePayload {
        node: match p.node {
            Some(node) => name(&node)?,
            None => host.clone(),
        },
        host,
        compute_node_uuid: uuid("payload.compute_node_uuid", &p.compute_node_uuid).ok()?,
        availability_zone: match p.availability_zone {
            Some(zone) => Some(name(&zone)?),
            None => None,
        },
        up: p.up.unwrap_or(true),
        disabled: p.disabled.unwrap_or(false),
        inventory,
        traits: names(p.traits)?,
        aggregates: names(p.aggregates)?,
        usage,
        instance_usage: None,
        instance_qos: None,
    };
    let publisher_id = match m.publisher_id {
        Some(p) if p.len() > 2 * MAX_NAME_BYTES => return None,
        other => other.map(Cow::into_owned),
    };
    Some(Notification {
        message_id: name(&m.message_id)?,
        publisher_id,
        timestamp: match m.timestamp {
            Some(t) => Some(name(&t)?),
            None => None,
        },
        event_type: HOST_STATE_EVENT.to_string(),
        event: HostEvent::HostState(payload),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::oslo::{decode_envelope, encode_envelope};
    use serde_json::{json, Value};

    fn general(body: &[u8]) -> crate::nova::error::Result<Notification> {
        Notification::from_inner(&decode_envelope(body)?)
    }

    fn event(payload: Value) -> Value {
        json!({"message_id": "m-1", "publisher_id": "parasol-host:h1",
            "event_type": HOST_STATE_EVENT, "priority": "INFO",
            "timestamp": "2026-11-25 21:13:16.777260", "payload": payload})
    }

    fn full() -> Value {
        json!({"host": "h1", "node": "n1",
            "compute_node_uuid": "6F1A2E4B-0000-4000-8000-00000000000A",
            "availability_zone": "az1", "up": false, "disabled": true,
            "inventory": {
                "VCPU": {"total": 64, "reserved": 2, "allocation_ratio": 4},
                "MEMORY_MB": {"total": 262144, "reserved": null, "min_unit": 256,
                    "max_unit": 65536, "step_size": 256, "allocation_ratio": 1.5},
                "CUSTOM_GPU": {"total": 2, "allocation_ratio": null}},
            "traits": ["HW_CPU_X86_AVX2", "CUSTOM_FAST"], "aggregates": [],
            "usage": {"VCPU": 12.5, "MEMORY_MB": 100000}, "extra": [1, {"a": null}]})
    }

    #[test]
    fn valid_host_state_events_decode_as_the_general_decode_does() {
        let minimal = json!({"host": "h2",
            "compute_node_uuid": "6f1a2e4b-0000-4000-8000-00000000000b"});
        let nulls = json!({"host": "h3", "node": null, "availability_zone": null,
            "compute_node_uuid": "6f1a2e4b-0000-4000-8000-00000000000c", "up": null,
            "disabled": null, "inventory": null, "traits": null, "aggregates": null,
            "usage": null});
        let mut escaped = full();
        escaped["host"] = json!("h\"1\u{e9}");
        let mut bare = event(minimal.clone());
        bare.as_object_mut().unwrap().remove("publisher_id");
        bare.as_object_mut().unwrap().remove("timestamp");
        for inner in [
            event(full()),
            event(minimal),
            event(nulls),
            event(escaped),
            bare,
        ] {
            let body = encode_envelope(&inner);
            let fast = host_state(&body).expect("taken by the typed decode");
            assert_eq!(fast, general(&body).unwrap(), "{inner}");
            assert_eq!(Notification::decode(&body).unwrap(), fast);
            // The message alone, as HTTP takes it, decodes the same.
            let alone = serde_json::to_vec(&inner).unwrap();
            assert_eq!(host_state_alone(&alone), Some(fast), "{inner}");
        }
    }

    #[test]
    fn a_string_literal_is_read_as_serde_json_reads_it_or_left_to_it() {
        for literal in [
            r#""""#,
            r#""plain""#,
            r#""{\"a\": \"b\"}""#,
            r#""\\\"\/\b\f\n\r\t end""#,
            "\"é \\\"ü\\\" 😀\"",
            r#""trailing \\""#,
        ] {
            let want: String = serde_json::from_str(literal).unwrap();
            let mut scan = Scan {
                bytes: literal.as_bytes(),
                at: 0,
            };
            assert_eq!(scan.string().as_deref(), Some(want.as_str()), "{literal}");
            assert_eq!(scan.at, literal.len(), "{literal}");
        }
        // Left to serde_json: a \u escape, a control character, an unknown escape, no end,
        // bytes that are not UTF-8.
        for bytes in [
            &br#""caf\u00e9""#[..],
            b"\"a\nb\"",
            br#""\x""#,
            br#""open"#,
            b"\"\xff\"",
        ] {
            let mut scan = Scan { bytes, at: 0 };
            assert_eq!(scan.string(), None, "{}", String::from_utf8_lossy(bytes));
        }
    }

    /// Decodes 20,000 copies of `body`, each changed in one to three places (a byte set,
    /// removed or added, drawn from `seed`), with `typed`; every copy it takes must be what
    /// `general` answers. Answers how many it took.
    pub(super) fn mangled_taken(
        body: &[u8],
        seed: u64,
        typed: impl Fn(&[u8]) -> Option<Notification>,
        general: impl Fn(&[u8]) -> crate::nova::error::Result<Notification>,
    ) -> usize {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        // Bytes that mean something to the scan, and some it must refuse.
        let bytes = b"\"\\{}:, ntu0/bfr\n\t\x01\x1f\xff\xc3";
        let mut taken = 0;
        for _ in 0..20_000 {
            let mut mangled = body.to_vec();
            for _ in 0..rng.gen_range(1..=3) {
                let at = rng.gen_range(0..mangled.len());
                let byte = bytes[rng.gen_range(0..bytes.len())];
                match rng.gen_range(0..3) {
                    0 => mangled[at] = byte,
                    1 => {
                        mangled.remove(at);
                    }
                    _ => mangled.insert(at, byte),
                }
            }
            if let Some(fast) = typed(&mangled) {
                taken += 1;
                let text = String::from_utf8_lossy(&mangled);
                assert_eq!(Some(fast), general(&mangled).ok(), "{text}");
            }
        }
        taken
    }

    #[test]
    fn a_mangled_envelope_is_decoded_as_the_general_decode_does_or_left_to_it() {
        let body = encode_envelope(&event(full()));
        let taken = mangled_taken(&body, 15, host_state, general);
        // Some changes leave a valid event (a changed name, added space): those are taken.
        assert!(taken > 100, "{taken} mangled envelopes taken");
    }

    #[test]
    fn an_envelope_of_another_shape_is_left_to_serde_json() {
        let ok = br#" { "oslo.message" : "{}" , "oslo.version": "2.0" } "#;
        let envelope = Scan::envelope(ok).expect("oslo's shape, keys in any order");
        assert_eq!((&*envelope.version, &*envelope.message), ("2.0", "{}"));
        for bytes in [
            &br#"{"oslo.version": "2.0"}"#[..],
            br#"{"oslo.version": "2.0", "oslo.version": "2.0"}"#,
            br#"{"oslo.version": "2.0", "oslo.message": "{}", "x": 1}"#,
            br#"{"oslo.version": 2, "oslo.message": "{}"}"#,
            br#"{"oslo.version": "2.0", "oslo.message": "{}"} x"#,
            br#"{"oslo.version": "2.0", "oslo.message": "{}""#,
            br#"{"oslo.\u0076ersion": "2.0", "oslo.message": "{}"}"#,
        ] {
            assert!(
                Scan::envelope(bytes).is_none(),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn an_envelope_written_with_any_escape_decodes_as_the_general_decode_does() {
        let mut inner = event(full());
        inner["publisher_id"] = json!("parasol-host:h1/x");
        let inner = inner.to_string();
        // The same message as another writer might escape it: the solidus escaped, letters
        // as \u escapes.
        let written = serde_json::to_string(&inner)
            .unwrap()
            .replace("h1/x", r"h1\/x")
            .replace("HW_CPU", r"\u0048W_CPU");
        assert!(written.contains(r"h1\/x") && written.contains(r"\u0048W_CPU"));
        for message in [serde_json::to_string(&inner).unwrap(), written] {
            let body = format!(r#"{{"oslo.version": "2.0", "oslo.message": {message}}}"#);
            // Scanned, or with a \u escape read by serde_json: the same either way.
            let scanned = Scan::envelope(body.as_bytes()).is_some();
            assert_eq!(scanned, !message.contains(r"\u"), "{body}");
            let fast = host_state(body.as_bytes()).expect("taken by the typed decode");
            assert_eq!(fast, general(body.as_bytes()).unwrap(), "{body}");
        }
        // A message that is not a string is left to the general decode, which refuses it.
        let body = format!(r#"{{"oslo.version": "2.0", "oslo.message": {inner}}}"#);
        assert_eq!(host_state(body.as_bytes()), None);
        assert!(general(body.as_bytes()).is_err());
    }

    #[test]
    fn a_message_alone_that_is_an_envelope_or_a_cast_is_left_to_the_general_decode() {
        let mut envelope = event(full());
        envelope["oslo.message"] = json!("{}");
        let mut cast = event(full());
        cast["method"] = json!(null);
        let mut invalid = event(full());
        invalid["payload"]["compute_node_uuid"] = json!("not a uuid");
        for (what, inner) in [("envelope", envelope), ("cast", cast), ("invalid", invalid)] {
            let body = serde_json::to_vec(&inner).unwrap();
            assert_eq!(host_state_alone(&body), None, "{what}");
        }
        assert!(host_state_alone(&serde_json::to_vec(&event(full())).unwrap()).is_some());
    }

    /// The full event in its envelope, with the value at `path` replaced by `v`.
    fn with(path: &[&str], v: Value) -> Vec<u8> {
        let mut inner = event(full());
        let (last, parents) = path.split_last().unwrap();
        let mut at = &mut inner;
        for p in parents {
            at = &mut at[*p];
        }
        at[*last] = v;
        encode_envelope(&inner)
    }

    /// Unusual bodies: what each is, the body, and whether the general decode accepts it.
    fn unusual_bodies() -> Vec<(&'static str, Vec<u8>, bool)> {
        let long = "x".repeat(MAX_NAME_BYTES + 1);
        vec![
            (
                "payload as a list",
                with(&["payload"], json!(["h1"])),
                false,
            ),
            (
                "float total",
                with(&["payload", "inventory", "VCPU", "total"], json!(64.0)),
                false,
            ),
            (
                "negative reserved",
                with(&["payload", "inventory", "VCPU", "reserved"], json!(-1)),
                false,
            ),
            (
                "total above 2^40",
                with(
                    &["payload", "inventory", "VCPU", "total"],
                    json!(MAX_SIZE + 1),
                ),
                false,
            ),
            (
                "zero ratio",
                with(
                    &["payload", "inventory", "VCPU", "allocation_ratio"],
                    json!(0),
                ),
                false,
            ),
            (
                "bad class",
                with(&["payload", "inventory", "vcpu"], json!({"total": 1})),
                false,
            ),
            (
                "lone trait string",
                with(&["payload", "traits"], json!("CUSTOM_A")),
                true,
            ),
            ("long host", with(&["payload", "host"], json!(long)), false),
            ("long message id", with(&["message_id"], json!(long)), false),
            (
                "bad uuid",
                with(&["payload", "compute_node_uuid"], json!("h1")),
                false,
            ),
            ("string up", with(&["payload", "up"], json!("yes")), false),
            (
                // Decoded by the general decode: the usage table refuses it, counted,
                // while the event's heartbeat and inventory apply.
                "negative usage",
                with(&["payload", "usage", "VCPU"], json!(-1)),
                true,
            ),
            ("a method", with(&["method"], Value::Null), false),
            (
                "other event",
                with(&["event_type"], json!("compute.host.other")),
                true,
            ),
            ("no payload", with(&["payload"], Value::Null), false),
            ("repeated key", encode_envelope(&event(full())), true),
            (
                "not JSON",
                b"{\"oslo.version\": \"2.0\", \"compute.host.state\"".to_vec(),
                false,
            ),
            (
                "version 1.0",
                json!({"oslo.version": "1.0", "oslo.message": event(full()).to_string()})
                    .to_string()
                    .into_bytes(),
                false,
            ),
        ]
    }

    #[test]
    fn anything_unusual_is_left_to_the_general_decode() {
        for (what, body, valid) in unusual_bodies() {
            if what == "repeated key" {
                // The general decode keeps the last of a repeated key; this one declines.
                let text = String::from_utf8(body).unwrap().replacen(
                    "\\\"host\\\":\\\"h1\\\"",
                    "\\\"host\\\":\\\"h0\\\",\\\"host\\\":\\\"h1\\\"",
                    1,
                );
                assert!(text.contains("h0"), "{text}");
                assert!(host_state(text.as_bytes()).is_none(), "{what}");
                assert_eq!(
                    Notification::decode(text.as_bytes()).unwrap(),
                    general(text.as_bytes()).unwrap()
                );
                continue;
            }
            assert!(host_state(&body).is_none(), "{what}");
            let decoded = Notification::decode(&body);
            assert_eq!(decoded.is_ok(), valid, "{what}: {decoded:?}");
            if let (Err(a), Err(b)) = (decoded, general(&body)) {
                assert_eq!(a.to_string(), b.to_string(), "{what}");
            }
        }
    }
}
