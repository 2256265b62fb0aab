//! oslo.messaging's rabbit-driver framing: the 2.0 envelope, RPC calls/casts and replies.

use super::error::{CodecError, Result};
use super::object::parse_version;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// The only envelope version oslo.messaging writes.
pub const OSLO_VERSION: &str = "2.0";

/// The outer body `{"oslo.version": "2.0", "oslo.message": "<json string>"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OsloEnvelope {
    #[serde(rename = "oslo.version")]
    pub version: String,
    #[serde(rename = "oslo.message")]
    pub message: String,
}

/// Unwraps an envelope and parses its inner JSON object.
pub fn decode_envelope(body: &[u8]) -> Result<Value> {
    // Nearly every body is a well-formed envelope: read it without building the outer tree
    // (anything else takes the long way, which says what is wrong).
    if let Ok(envelope) = serde_json::from_slice::<OsloEnvelope>(body) {
        if envelope.version == OSLO_VERSION {
            return parse_message(&envelope.message);
        }
    }
    let outer: Value = serde_json::from_slice(body).map_err(|source| CodecError::Json {
        what: "message body".to_string(),
        source,
    })?;
    open_envelope(&outer)
}

/// [`decode_envelope`] of a body already parsed.
pub fn open_envelope(outer: &Value) -> Result<Value> {
    match outer.get("oslo.version") {
        Some(Value::String(v)) if v == OSLO_VERSION => {}
        Some(other) => {
            return Err(CodecError::Envelope(format!(
                "oslo.version must be \"2.0\", got {other}"
            )))
        }
        None => return Err(CodecError::Envelope("oslo.version is missing".to_string())),
    }
    match outer.get("oslo.message") {
        Some(Value::String(s)) => parse_message(s),
        Some(_) => Err(CodecError::Envelope(
            "oslo.message must be a JSON string".to_string(),
        )),
        None => Err(CodecError::Envelope("oslo.message is missing".to_string())),
    }
}

/// Parses the envelope's `oslo.message` string, which must hold a JSON object.
fn parse_message(inner: &str) -> Result<Value> {
    let message: Value = serde_json::from_str(inner).map_err(|source| CodecError::Json {
        what: "oslo.message".to_string(),
        source,
    })?;
    if !message.is_object() {
        return Err(CodecError::Envelope(
            "oslo.message must hold a JSON object".to_string(),
        ));
    }
    Ok(message)
}

/// Wraps an inner message in a 2.0 envelope, ready to publish.
pub fn encode_envelope(inner: &Value) -> Vec<u8> {
    json!({"oslo.version": OSLO_VERSION, "oslo.message": inner.to_string()})
        .to_string()
        .into_bytes()
}

/// An RPC call (with `_msg_id`/`_reply_q`) or cast, as the server receives it.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcMessage {
    pub method: String,
    /// The `args` object (empty when absent).
    pub args: Value,
    /// `version` as (major, minor); oslo's default `1.0` when absent.
    pub version: (u32, u32),
    pub namespace: Option<String>,
    pub msg_id: Option<String>,
    pub reply_q: Option<String>,
    /// `_timeout` in seconds (the call-monitor timeout: heartbeat every half of it).
    pub timeout: Option<f64>,
    pub unique_id: Option<String>,
    /// The flattened request context, keys without their `_context_` prefix.
    pub context: Map<String, Value>,
}

impl RpcMessage {
    /// Unwraps the envelope and decodes the call.
    pub fn decode(body: &[u8]) -> Result<Self> {
        Self::from_inner(decode_envelope(body)?)
    }

    /// Decodes an inner message already taken out of its envelope.
    pub fn from_value(inner: &Value) -> Result<Self> {
        Self::from_inner(inner.clone())
    }

    /// [`RpcMessage::from_value`] taking the message, whose `args` and context it keeps.
    pub fn from_inner(inner: Value) -> Result<Self> {
        let Value::Object(mut map) = inner else {
            return Err(CodecError::invalid("oslo.message", "must be a JSON object"));
        };
        let method = text(&map, "method")?.ok_or_else(|| CodecError::missing("method"))?;
        let version = match text(&map, "version")? {
            None => (1, 0),
            Some(v) => parse_version(&v).ok_or_else(|| {
                CodecError::invalid("version", format!("must be \"major.minor\", got {v:?}"))
            })?,
        };
        let args = match map.remove("args") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v,
            Some(_) => return Err(CodecError::invalid("args", "must be a JSON object")),
        };
        let timeout = match map.get("_timeout") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_f64()
                    .filter(|t| t.is_finite() && *t >= 0.0 && *t <= super::bounds::MAX_SIZE as f64)
                    .ok_or_else(|| {
                        CodecError::invalid(
                            "_timeout",
                            format!(
                                "must be a non-negative number of at most {}",
                                super::bounds::MAX_SIZE
                            ),
                        )
                    })?,
            ),
        };
        let namespace = text(&map, "namespace")?;
        let msg_id = text(&map, "_msg_id")?;
        let reply_q = text(&map, "_reply_q")?;
        let unique_id = text(&map, "_unique_id")?;
        let context = map
            .into_iter()
            .filter_map(|(k, v)| k.strip_prefix("_context_").map(|k| (k.to_string(), v)))
            .collect();
        Ok(RpcMessage {
            method,
            args,
            version,
            namespace,
            msg_id,
            reply_q,
            timeout,
            unique_id,
            context,
        })
    }

    /// True for a call that expects a reply.
    pub fn is_call(&self) -> bool {
        self.msg_id.is_some() && self.reply_q.is_some()
    }

    /// `version` written back as `"major.minor"`.
    pub fn version_string(&self) -> String {
        format!("{}.{}", self.version.0, self.version.1)
    }
}

/// A string field of the inner message: absent or null is `None`, at most a name's length.
fn text(map: &Map<String, Value>, key: &str) -> Result<Option<String>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            super::bounds::check_len(key, s, super::bounds::MAX_NAME_BYTES)?;
            Ok(Some(s.clone()))
        }
        Some(_) => Err(CodecError::invalid(key, "must be a string")),
    }
}

/// A reply to a call, sent to the default exchange with routing key `_reply_q`.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The result as JSON text (`null` for failures and heartbeats).
    pub result: String,
    /// A failure string from [`super::no_valid_host_failure`] or [`super::oslo_failure`].
    pub failure: Option<String>,
    /// False only for heartbeats.
    pub ending: bool,
    pub msg_id: String,
    pub unique_id: String,
}

impl Reply {
    /// The final reply carrying `result`.
    pub fn result(msg_id: &str, result: &Value) -> Self {
        Self::written(msg_id, result.to_string())
    }

    /// The final reply carrying a result already written as JSON text (a scheduling answer
    /// is written straight from its selections, without a value tree).
    pub fn written(msg_id: &str, result: String) -> Self {
        Self::new(msg_id, result, None, true)
    }

    /// The final reply carrying a failure string.
    pub fn failure(msg_id: &str, failure: String) -> Self {
        Self::new(msg_id, "null".to_string(), Some(failure), true)
    }

    /// The call-monitor heartbeat: `result` and `failure` null, `ending` false.
    pub fn heartbeat(msg_id: &str) -> Self {
        Self::new(msg_id, "null".to_string(), None, false)
    }

    fn new(msg_id: &str, result: String, failure: Option<String>, ending: bool) -> Self {
        Reply {
            result,
            failure,
            ending,
            msg_id: msg_id.to_string(),
            unique_id: uuid::Uuid::new_v4().simple().to_string(),
        }
    }

    /// The inner reply message.
    pub fn to_value(&self) -> Value {
        json!({
            "result": serde_json::from_str::<Value>(&self.result).unwrap_or(Value::Null),
            "failure": self.failure,
            "ending": self.ending,
            "_msg_id": self.msg_id,
            "_unique_id": self.unique_id,
        })
    }

    /// The reply wrapped in its envelope: [`encode_envelope`] of [`Reply::to_value`], byte
    /// for byte, written without the value tree (keys in serde_json's order).
    pub fn to_body(&self) -> Vec<u8> {
        let mut inner = Vec::with_capacity(self.result.len() + 160);
        inner.extend_from_slice(b"{\"_msg_id\":");
        write_json(&mut inner, &self.msg_id);
        inner.extend_from_slice(b",\"_unique_id\":");
        write_json(&mut inner, &self.unique_id);
        inner.extend_from_slice(b",\"ending\":");
        write_json(&mut inner, &self.ending);
        inner.extend_from_slice(b",\"failure\":");
        write_json(&mut inner, &self.failure);
        inner.extend_from_slice(b",\"result\":");
        inner.extend_from_slice(self.result.as_bytes());
        inner.push(b'}');
        // Every part is UTF-8: the strings were, and JSON writes nothing else.
        encode_envelope_str(&String::from_utf8(inner).unwrap_or_default())
    }
}

/// Wraps an inner message already written as JSON text in a 2.0 envelope: [`encode_envelope`]
/// without the value tree.
pub fn encode_envelope_str(inner: &str) -> Vec<u8> {
    serde_json::to_vec(&EnvelopeOut {
        message: inner,
        version: OSLO_VERSION,
    })
    .unwrap_or_default()
}

/// Writes a string, bool, integer or option as JSON (which cannot fail into memory).
pub(super) fn write_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let _ = serde_json::to_writer(out, value);
}

/// The envelope as written, keys in the order serde_json's map gives them.
#[derive(Serialize)]
struct EnvelopeOut<'a> {
    #[serde(rename = "oslo.message")]
    message: &'a str,
    #[serde(rename = "oslo.version")]
    version: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_envelopes_say_what_is_wrong() {
        let cases: [(&[u8], &str); 6] = [
            (b"not json", "message body"),
            (br#"{"oslo.message": "{}"}"#, "oslo.version is missing"),
            (
                br#"{"oslo.version": "1.0", "oslo.message": "{}"}"#,
                "oslo.version must be",
            ),
            (
                br#"{"oslo.version": "2.0", "oslo.message": {}}"#,
                "oslo.message must be a JSON string",
            ),
            (
                br#"{"oslo.version": "2.0", "oslo.message": "{nope"}"#,
                "oslo.message is not valid JSON",
            ),
            (
                br#"{"oslo.version": "2.0", "oslo.message": "[1]"}"#,
                "must hold a JSON object",
            ),
        ];
        for (body, want) in cases {
            let err = decode_envelope(body).unwrap_err().to_string();
            assert!(err.contains(want), "{err} should contain {want}");
        }
    }

    #[test]
    fn a_reply_body_is_the_envelope_of_its_value_byte_for_byte() {
        let result = json!([[{"nova_object.name": "Selection", "x": "a \"quoted\" é"}]]);
        let mut replies = [
            Reply::result("id-1", &result),
            Reply::failure(
                "id-2",
                crate::nova::oslo_failure("ValueError", "builtins", "bad \"spec\""),
            ),
            Reply::heartbeat("id-3"),
        ];
        for reply in &mut replies {
            reply.unique_id = "00000000000000000000000000000abc".into();
            assert_eq!(
                String::from_utf8(reply.to_body()).unwrap(),
                String::from_utf8(encode_envelope(&reply.to_value())).unwrap()
            );
        }
    }

    #[test]
    fn envelope_round_trips() {
        let inner = json!({"method": "ping", "args": {"arg": 1}});
        assert_eq!(decode_envelope(&encode_envelope(&inner)).unwrap(), inner);
    }

    #[test]
    fn a_message_without_version_defaults_to_1_0_and_bad_versions_are_errors() {
        let m = RpcMessage::from_value(&json!({"method": "ping", "namespace": "baseapi"})).unwrap();
        assert_eq!(m.version, (1, 0));
        assert!(!m.is_call());
        let err = RpcMessage::from_value(&json!({"method": "x", "version": "four"})).unwrap_err();
        assert!(err.to_string().contains("version"), "{err}");
        let err = RpcMessage::from_value(&json!({"args": {}})).unwrap_err();
        assert!(err.to_string().contains("method"), "{err}");
    }
}
