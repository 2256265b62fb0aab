//! Errors as Nova expects them: oslo.messaging failure strings and HTTP error bodies.

use serde_json::{json, Value};

/// The prefix of every NoValidHost message (`nova.exception.NoValidHost.msg_fmt`).
pub const NO_VALID_HOST_PREFIX: &str = "No valid host was found. ";

/// The message a NoValidHost with `reason` carries.
pub fn no_valid_host_message(reason: &str) -> String {
    format!("{NO_VALID_HOST_PREFIX}{reason}")
}

/// The `failure` string of a reply raising `nova.exception.NoValidHost(reason=reason)`;
/// the caller rebuilds the exception from it because `nova.exception` is an allowed module.
pub fn no_valid_host_failure(reason: &str) -> String {
    let message = no_valid_host_message(reason);
    failure_json(
        "NoValidHost",
        "nova.exception",
        &message,
        json!({"reason": reason, "code": 500}),
    )
}

/// The `failure` string of any other exception, e.g. (`UnsupportedVersion`,
/// `oslo_messaging.rpc.client`), (`NoSuchMethod`, `oslo_messaging.rpc.dispatcher`) or
/// (`ValueError`, `builtins`).
pub fn oslo_failure(class: &str, module: &str, message: &str) -> String {
    failure_json(class, module, message, json!({}))
}

fn failure_json(class: &str, module: &str, message: &str, kwargs: Value) -> String {
    let tb = vec![
        "Traceback (most recent call last):\n".to_string(),
        "  File \"parasol\", in select_destinations\n".to_string(),
        format!("{module}.{class}: {message}\n"),
    ];
    json!({
        "class": class,
        "module": module,
        "message": message,
        "tb": tb,
        "args": [message],
        "kwargs": kwargs,
    })
    .to_string()
}

/// The JSON body of an HTTP error reply: `{"error": {"class", "message", "reason"}}`.
pub fn http_error_body(class: &str, message: &str, reason: Option<&str>) -> Value {
    json!({"error": {"class": class, "message": message, "reason": reason}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_valid_host_with_an_empty_reason_keeps_nova_s_trailing_space() {
        let f: Value = serde_json::from_str(&no_valid_host_failure("")).unwrap();
        assert_eq!(f["message"], "No valid host was found. ");
        assert_eq!(f["kwargs"], json!({"reason": "", "code": 500}));
    }

    #[test]
    fn generic_failures_name_class_and_module() {
        let cases = [
            ("UnsupportedVersion", "oslo_messaging.rpc.client"),
            ("NoSuchMethod", "oslo_messaging.rpc.dispatcher"),
            ("ValueError", "builtins"),
        ];
        for (class, module) in cases {
            let f: Value = serde_json::from_str(&oslo_failure(class, module, "boom")).unwrap();
            assert_eq!(f["class"], class);
            assert_eq!(f["module"], module);
            assert_eq!(f["message"], "boom");
            assert_eq!(f["args"], json!(["boom"]));
            assert!(f["tb"].is_array());
        }
    }

    #[test]
    fn http_error_body_nests_under_error() {
        let body = http_error_body("NoValidHost", "No valid host was found. x", Some("x"));
        assert_eq!(
            body,
            json!({"error": {"class": "NoValidHost", "message": "No valid host was found. x", "reason": "x"}})
        );
    }
}
