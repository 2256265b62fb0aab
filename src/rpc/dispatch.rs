//! oslo.messaging's dispatcher rules for nova-scheduler's two endpoints: `SchedulerManager`
//! (no namespace, `Target(version='4.5')`) and `BaseRPCAPI` (namespace `baseapi`, 1.1).
//! An endpoint serves a message when the namespace matches and the version is compatible
//! (same major, minor ≤ its own); a compatible endpoint without the method gives
//! `NoSuchMethod`, no compatible endpoint gives `UnsupportedVersion`.

use crate::nova::{oslo_failure, Notification, RpcMessage, SelectDestinationsArgs};
use serde_json::{json, Value};

/// The version nova-scheduler's manager serves (Nova 34).
pub const SCHEDULER_VERSION: (u32, u32) = (4, 5);
/// Namespace and version of Nova's `BaseRPCAPI` endpoint.
pub const BASEAPI_NAMESPACE: &str = "baseapi";
pub const BASEAPI_VERSION: (u32, u32) = (1, 1);
/// `BaseRPCAPI.service_name` of nova-scheduler, answered by `ping`.
const SERVICE_NAME: &str = "scheduler";
/// Where oslo's dispatcher exceptions live (their `module` in a failure).
const DISPATCHER_MODULE: &str = "oslo_messaging.rpc.dispatcher";

/// What to do with a message that passed the dispatcher's checks.
#[derive(Debug)]
pub enum Action {
    /// `select_destinations` at any supported 4.x version.
    Select(Box<SelectDestinationsArgs>),
    /// An answer known at once (`ping`, `get_backdoor_port`).
    Answer(Value),
    /// `update_aggregates`: these aggregates changed (each whole, with its metadata).
    UpdateAggregates(Vec<crate::nova::Aggregate>),
    /// `delete_aggregate`: the aggregate with this uuid is gone.
    DeleteAggregate(String),
    /// One of the three instance-info casts, applied as the notification consumer does.
    InstanceInfo(Box<Notification>),
}

/// Why a message is refused: an oslo failure for a call, a dead-letter reason for a cast.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// Counter name: `unsupported_version`, `no_such_method` or `bad_arguments`.
    pub outcome: &'static str,
    pub class: &'static str,
    pub module: &'static str,
    pub message: String,
}

impl Refusal {
    /// The reply's `failure` string, as oslo's `serialize_remote_exception` writes it.
    pub fn failure(&self) -> String {
        oslo_failure(self.class, self.module, &self.message)
    }

    fn unsupported_version(msg: &RpcMessage) -> Self {
        Refusal {
            outcome: "unsupported_version",
            class: "UnsupportedVersion",
            module: DISPATCHER_MODULE,
            message: format!(
                "Endpoint does not support RPC version {}. Attempted method: {}",
                msg.version_string(),
                msg.method
            ),
        }
    }

    fn no_such_method(method: &str) -> Self {
        Refusal {
            outcome: "no_such_method",
            class: "NoSuchMethod",
            module: DISPATCHER_MODULE,
            message: format!("Endpoint does not support RPC method {method}"),
        }
    }

    fn bad_arguments(e: crate::nova::CodecError) -> Self {
        let (class, module) = e.oslo_class();
        Refusal {
            outcome: "bad_arguments",
            class,
            module,
            message: e.to_string(),
        }
    }
}

/// oslo's `version_is_compatible`: same major, requested minor at most the endpoint's.
fn compatible(endpoint: (u32, u32), requested: (u32, u32)) -> bool {
    endpoint.0 == requested.0 && requested.1 <= endpoint.1
}

/// Routes a decoded message as nova-scheduler's dispatcher would.
pub fn route(msg: &RpcMessage) -> Result<Action, Refusal> {
    match msg.namespace.as_deref() {
        None if compatible(SCHEDULER_VERSION, msg.version) => scheduler_method(msg),
        Some(BASEAPI_NAMESPACE) if compatible(BASEAPI_VERSION, msg.version) => {
            match msg.method.as_str() {
                "ping" => Ok(Action::Answer(json!({
                    "service": SERVICE_NAME,
                    "arg": msg.args.get("arg").cloned().unwrap_or(Value::Null),
                }))),
                "get_backdoor_port" => Ok(Action::Answer(Value::Null)),
                other => Err(Refusal::no_such_method(other)),
            }
        }
        _ => Err(Refusal::unsupported_version(msg)),
    }
}

fn scheduler_method(msg: &RpcMessage) -> Result<Action, Refusal> {
    match msg.method.as_str() {
        "select_destinations" => SelectDestinationsArgs::from_rpc_args(&msg.args, msg.version)
            .map(|a| Action::Select(Box::new(a)))
            .map_err(Refusal::bad_arguments),
        "update_aggregates" => crate::nova::decode_aggregates(&msg.args)
            .map(Action::UpdateAggregates)
            .map_err(Refusal::bad_arguments),
        "delete_aggregate" => msg
            .args
            .get("aggregate")
            .ok_or_else(|| crate::nova::CodecError::missing("args.aggregate"))
            .and_then(|a| crate::nova::decode_aggregate(a, "args.aggregate"))
            .map(|a| Action::DeleteAggregate(a.uuid))
            .map_err(Refusal::bad_arguments),
        "update_instance_info" | "delete_instance_info" | "sync_instance_info" => {
            Notification::from_rpc(msg)
                .map(|n| Action::InstanceInfo(Box::new(n)))
                .map_err(Refusal::bad_arguments)
        }
        other => Err(Refusal::no_such_method(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(method: &str, version: &str, namespace: Option<&str>, args: Value) -> RpcMessage {
        let mut inner = json!({"method": method, "version": version, "args": args});
        if let Some(ns) = namespace {
            inner["namespace"] = json!(ns);
        }
        RpcMessage::from_value(&inner).expect("well-formed")
    }

    #[test]
    fn versions_outside_the_endpoints_are_unsupported_and_name_the_method() {
        for (version, ns) in [
            ("4.6", None),
            ("5.0", None),
            ("3.9", None),
            ("1.2", Some("baseapi")),
            ("4.0", Some("other")),
        ] {
            let err = route(&msg("select_destinations", version, ns, json!({}))).unwrap_err();
            assert_eq!(err.class, "UnsupportedVersion", "{version} {ns:?}");
            assert_eq!(err.module, "oslo_messaging.rpc.dispatcher");
            assert_eq!(
                err.message,
                format!("Endpoint does not support RPC version {version}. Attempted method: select_destinations")
            );
        }
    }

    #[test]
    fn an_unknown_method_at_a_compatible_version_is_no_such_method() {
        for (version, ns) in [("4.5", None), ("1.0", Some("baseapi"))] {
            let err = route(&msg("frobnicate", version, ns, json!({}))).unwrap_err();
            assert_eq!(err.class, "NoSuchMethod");
            assert_eq!(
                err.message,
                "Endpoint does not support RPC method frobnicate"
            );
        }
    }

    #[test]
    fn ping_answers_like_nova_s_base_rpc_api() {
        match route(&msg(
            "ping",
            "1.0",
            Some("baseapi"),
            json!({"arg": {"x": [1]}}),
        )) {
            Ok(Action::Answer(v)) => {
                assert_eq!(v, json!({"service": "scheduler", "arg": {"x": [1]}}))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn aggregate_casts_are_accepted_and_bad_select_arguments_are_refused() {
        assert!(matches!(
            route(&msg(
                "update_aggregates",
                "4.1",
                None,
                json!({"aggregates": []})
            )),
            Ok(Action::UpdateAggregates(list)) if list.is_empty()
        ));
        let err = route(&msg(
            "select_destinations",
            "4.5",
            None,
            json!({"spec_obj": 3}),
        ))
        .unwrap_err();
        assert_eq!((err.outcome, err.class), ("bad_arguments", "ValueError"));
        assert!(err.message.contains("spec_obj"), "{}", err.message);
    }
}
