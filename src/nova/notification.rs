//! Host-state inputs: Nova versioned notifications, Parasol's `compute.host.state` event and
//! nova-compute's fanout casts, decoded into one typed [`HostEvent`].

use super::bounds::{check_count, MAX_NAME_BYTES, MAX_SIZE};
use super::error::{CodecError, Result};
use super::object::{FieldValue, Fields, NovaObject};
use super::oslo::{decode_envelope, open_envelope, RpcMessage};
use super::request_spec::Flavor;
use crate::domain::{is_valid_class_name, Inventory, Resources};
use serde_json::Value;
use std::collections::BTreeMap;

/// Parasol's own event type carrying a host's inventory (docs/architecture.md §7.2).
pub const HOST_STATE_EVENT: &str = "compute.host.state";

/// Events that (re)place an instance's allocation on its payload's host. Not
/// `instance.evacuate`: nova-api sends it when an evacuation starts, with the instance still
/// on the failed source host; the destination's `instance.rebuild.end` ends the move.
const UPSERT_EVENTS: [&str; 7] = [
    "instance.create.end",
    "instance.resize_finish.end",
    "instance.resize_confirm.end",
    "instance.resize_revert.end",
    "instance.live_migration_post_dest.end",
    "instance.unshelve.end",
    "instance.rebuild.end",
];

/// The largest allocation ratio accepted (usable capacity stays below 2^56).
pub const MAX_ALLOCATION_RATIO: f64 = 65_536.0;

/// Events after which an instance holds nothing on any host.
const RELEASE_EVENTS: [&str; 3] = [
    "instance.create.error",
    "instance.delete.end",
    "instance.shelve_offload.end",
];

/// Steps of a live migration that move no allocation by themselves (docs: `ledger::moves`):
/// the destination took the instance, the source let it go, or the move was undone.
const MOVE_STEP_EVENTS: [(&str, MoveStep); 4] = [
    ("instance.live_migration_pre.end", MoveStep::Started),
    ("instance.live_migration_post.end", MoveStep::Ended),
    ("instance.live_migration_rollback.end", MoveStep::RolledBack),
    ("instance.live_migration_abort.end", MoveStep::Aborted),
];

/// Failures after which Nova has undone an operation's allocations in Placement (or left
/// them, which the check finds): the conductor's live or cold migration, evacuation or build
/// that failed after the scheduler claimed (`set_vm_state_and_notify`, after its task's
/// rollback moved the instance's allocations back), a resize or cold migration whose
/// `prep_resize` failed on its destination (`_revert_allocation`, then
/// `_reschedule_resize_or_reraise`), and an evacuation's rebuild that failed on its
/// destination (`delete_allocation_for_evacuated_instance`). None of them says what Placement
/// now holds: Parasol asks Placement for the instance's allocations
/// (`placement::check_failed`).
const FAILED_EVENTS: [&str; 5] = [
    "compute_task.migrate_server.error",
    "compute_task.rebuild_server.error",
    "compute_task.build_instances.error",
    "instance.resize.error",
    "instance.rebuild.error",
];

/// A step of a move that a notification tells without placing the instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoveStep {
    /// The destination took the instance (`instance.live_migration_pre.end`).
    Started,
    /// The source let it go (`instance.live_migration_post.end`).
    Ended,
    /// The move was undone: the instance stays on its source
    /// (`instance.live_migration_rollback.end`).
    RolledBack,
    /// An operator aborted the move (`instance.live_migration_abort.end`). A migration still
    /// queued on its source is dropped there and then (nova-compute's `live_migration_abort`
    /// reverts its allocations, with no rollback notification); one that started rolls back
    /// with its own `instance.live_migration_rollback.end`, or may still complete.
    Aborted,
}

/// The payload of a `compute.host.state` event.
#[derive(Clone, Debug, PartialEq)]
pub struct HostStatePayload {
    pub host: String,
    /// Defaults to `host`.
    pub node: String,
    pub compute_node_uuid: String,
    pub availability_zone: Option<String>,
    /// Defaults to true.
    pub up: bool,
    /// Defaults to false.
    pub disabled: bool,
    /// Inventory by resource class name (Placement's standard classes and `CUSTOM_*`).
    pub inventory: BTreeMap<String, Inventory>,
    /// Placement traits of the host (optional).
    pub traits: Vec<String>,
    /// Placement aggregate uuids the host is a member of (optional).
    pub aggregates: Vec<String>,
    /// Measured usage per class, when reported (`table::usage` judges the values).
    pub usage: Option<BTreeMap<String, f64>>,
    /// Measured usage per instance uuid and class (`instance_usage`), when reported: the
    /// host's whole list of instances.
    pub instance_usage: Option<BTreeMap<String, BTreeMap<String, f64>>>,
    /// QoS signals per instance uuid (`instance_qos`: `cpu_wait`, `memory_pressure`, each a
    /// share of the last interval), when reported: the host's whole list of instances.
    pub instance_qos: Option<BTreeMap<String, BTreeMap<String, f64>>>,
}

/// Nova's `metrics.update` (`MetricsPayload` 1.0, sent by nova-compute with
/// `[DEFAULT] compute_monitors`): the node's monitor metrics, integers.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricsPayload {
    /// The nova-compute service's host.
    pub host: String,
    pub nodename: String,
    pub metrics: Vec<Metric>,
}

/// One `MetricPayload`: `cpu.percent`, `cpu.user.time`, … with its value and time.
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    pub name: String,
    pub value: f64,
    /// Its `timestamp` as milliseconds since the epoch, when it is a time.
    pub at_ms: Option<i64>,
}

/// Nova's versioned notification of a node's monitor metrics.
pub const METRICS_UPDATE_EVENT: &str = "metrics.update";

impl MetricsPayload {
    fn from_payload(payload: &Value) -> Result<Self> {
        let p = NovaObject::parse(payload, "MetricsPayload", "payload")?.data;
        let path = p.path_of("metrics");
        let list = match p.required("metrics")? {
            Value::Array(list) => list,
            _ => return Err(CodecError::invalid(path, "must be a list")),
        };
        check_count(&path, list.len())?;
        let mut metrics = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            let m = NovaObject::parse(item, "MetricPayload", format!("{path}[{i}]"))?.data;
            let value = m
                .required("value")?
                .as_f64()
                .ok_or_else(|| CodecError::invalid(m.path_of("value"), "must be a number"))?;
            metrics.push(Metric {
                name: m.req_str("name")?,
                value,
                at_ms: m.opt_str("timestamp")?.as_deref().and_then(time_ms),
            });
        }
        Ok(MetricsPayload {
            host: p.req_str("host")?,
            nodename: p.req_str("nodename")?,
            metrics,
        })
    }

    /// The metric `name`, when sent.
    pub fn metric(&self, name: &str) -> Option<&Metric> {
        self.metrics.iter().find(|m| m.name == name)
    }
}

/// A time as oslo and Nova write them ("2026-11-27 18:00:00.123456", the same with a `T`,
/// or ISO 8601 with an offset or `Z`) as milliseconds since the epoch (UTC).
pub fn time_ms(t: &str) -> Option<i64> {
    use chrono::{DateTime, NaiveDateTime};
    let t = t.trim();
    ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(t, f).ok())
        .map(|at| at.and_utc().timestamp_millis())
        .or_else(|| {
            DateTime::parse_from_rfc3339(t)
                .ok()
                .map(|at| at.timestamp_millis())
        })
}

impl HostStatePayload {
    fn from_fields(p: &Fields<'_>) -> Result<Self> {
        let host = p.req_str("host")?;
        let mut inventory = BTreeMap::new();
        if let Some(inv) = p.opt_dict("inventory")? {
            check_count(inv.path(), inv.map().len())?;
            for (name, value) in inv.map() {
                if !is_valid_class_name(name) {
                    return Err(CodecError::invalid(
                        inv.path_of(name),
                        "is not a resource class (a standard class or CUSTOM_[A-Z0-9_]+)",
                    ));
                }
                let f = Fields::new(value, inv.path_of(name))?;
                let allocation_ratio = match f.field("allocation_ratio") {
                    FieldValue::Set(v) => v
                        .as_f64()
                        .filter(|r| r.is_finite() && *r > 0.0 && *r <= MAX_ALLOCATION_RATIO)
                        .ok_or_else(|| {
                            CodecError::invalid(
                                f.path_of("allocation_ratio"),
                                format!(
                                    "must be a positive number of at most {MAX_ALLOCATION_RATIO}"
                                ),
                            )
                        })?,
                    _ => 1.0,
                };
                let total = f.req_size("total")?;
                let entry = Inventory {
                    total,
                    reserved: f.opt_size("reserved")?.unwrap_or(0),
                    min_unit: f.opt_size("min_unit")?.unwrap_or(1),
                    max_unit: f.opt_size("max_unit")?.unwrap_or(i64::MAX),
                    step_size: f.opt_size("step_size")?.unwrap_or(1),
                    allocation_ratio,
                };
                inventory.insert(name.clone(), entry);
            }
        }
        let usage = match p.opt_dict("usage")? {
            None => None,
            Some(u) => Some(usage_block(&u)?),
        };
        let instance_usage = per_instance(p, "instance_usage")?;
        let instance_qos = per_instance(p, "instance_qos")?;
        Ok(HostStatePayload {
            node: p.opt_str("node")?.unwrap_or_else(|| host.clone()),
            host,
            compute_node_uuid: p.req_uuid("compute_node_uuid")?,
            availability_zone: p.opt_str("availability_zone")?,
            up: p.opt_bool("up")?.unwrap_or(true),
            disabled: p.opt_bool("disabled")?.unwrap_or(false),
            inventory,
            traits: p.opt_str_list("traits")?.unwrap_or_default(),
            aggregates: p.opt_str_list("aggregates")?.unwrap_or_default(),
            usage,
            instance_usage,
            instance_qos,
        })
    }
}

/// A per-instance block (`instance_usage`, `instance_qos`): numbers by name, per instance
/// uuid.
fn per_instance(
    p: &Fields<'_>,
    key: &str,
) -> Result<Option<BTreeMap<String, BTreeMap<String, f64>>>> {
    let Some(list) = p.opt_dict(key)? else {
        return Ok(None);
    };
    check_count(list.path(), list.map().len())?;
    list.map()
        .iter()
        .map(|(instance, values)| {
            let path = list.path_of(instance);
            let uuid = super::bounds::uuid(&path, instance)?;
            Ok((uuid, usage_block(&Fields::new(values, path)?)?))
        })
        .collect::<Result<BTreeMap<_, _>>>()
        .map(Some)
}

/// A `usage` block: amounts by class name.
fn usage_block(u: &Fields<'_>) -> Result<BTreeMap<String, f64>> {
    check_count(u.path(), u.map().len())?;
    u.map()
        .iter()
        .map(|(name, v)| {
            // A number; its range is the usage table's to judge (a negative
            // or too large reading is refused there, counted, while the event's
            // heartbeat and inventory still apply).
            v.as_f64()
                .filter(|x| x.is_finite() && x.abs() <= MAX_SIZE as f64)
                .map(|x| (name.clone(), x))
                .ok_or_else(|| {
                    CodecError::invalid(
                        u.path_of(name),
                        format!("must be a number of at most {MAX_SIZE} in magnitude"),
                    )
                })
        })
        .collect()
}

/// What a notification or fanout cast means for the scheduler's view of hosts.
#[derive(Clone, Debug, PartialEq)]
pub enum HostEvent {
    /// A host's inventory and status (`compute.host.state`).
    HostState(HostStatePayload),
    /// A node's monitor metrics (Nova's `metrics.update`): measured usage, no ledger state.
    Metrics(MetricsPayload),
    /// The instance now holds `demand` on `host` (create, resize, move, unshelve, rebuild).
    Upsert {
        instance_uuid: String,
        host: String,
        node: Option<String>,
        demand: Resources,
        /// Flavor name (or id).
        flavor: String,
    },
    /// A step of the instance's move (see [`MoveStep`]).
    Move {
        instance_uuid: String,
        step: MoveStep,
    },
    /// The instance holds nothing any more (delete, failed create, shelve-offload).
    Release {
        instance_uuid: String,
        host: Option<String>,
    },
    /// A nova-compute service was enabled/disabled or forced down (`service.update`).
    ServiceUpdate {
        host: String,
        disabled: bool,
        forced_down: bool,
    },
    /// A nova-compute service was created (`service.create`): its compute node and resource
    /// provider follow within its start, before it takes any build. Nova's scheduler reads
    /// both on every call; Parasol waits for them on the next call (see
    /// [`crate::table::HostTable::announce_service`]).
    ServiceCreate { host: String },
    /// A nova-compute service was deleted (`service.delete`): a node it announced will not
    /// come.
    ServiceDelete { host: String },
    /// Fanout `update_instance_info`: these instances run on `host` (the listed instances
    /// whose own `host` names another service are left out: after a live migration the
    /// source's nova-compute sends the instance, already on the destination, under its own
    /// name).
    UpdateInstanceInfo {
        host: String,
        instance_uuids: Vec<String>,
    },
    /// Fanout `delete_instance_info`: the instance left `host`.
    DeleteInstanceInfo { host: String, instance_uuid: String },
    /// Fanout `sync_instance_info`: exactly these instances run on `host`.
    SyncInstanceInfo {
        host: String,
        instance_uuids: Vec<String>,
    },
    /// nova-api's fanout `update_aggregates` / `delete_aggregate` to every scheduler: not
    /// host state of the ledger, but the aggregates the request filters and zones read.
    Aggregates(AggregateCast),
    /// An operation on the instance failed after the scheduler claimed for it (one of
    /// [`FAILED_EVENTS`]): what Placement holds of it now decides what its claim becomes.
    Failed { instance_uuid: String },
    /// Anything else (including `service.update` of services other than nova-compute).
    Unknown { event_type: String },
}

/// An aggregate cast of nova-api (`SchedulerAPI.update_aggregates` and `.delete_aggregate`
/// are fanout casts: they reach the scheduler fanout queue, not the topic queue).
#[derive(Clone, Debug, PartialEq)]
pub enum AggregateCast {
    /// These aggregates changed (each whole: metadata and hosts).
    Update(Vec<super::request_filters::Aggregate>),
    /// The aggregate of this uuid is gone.
    Delete(String),
}

/// A decoded host-state input, with the id it is deduplicated on.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    /// `message_id` of a notification, `_unique_id` of a fanout cast.
    pub message_id: String,
    /// `event_type`, or the RPC method of a fanout cast.
    pub event_type: String,
    pub publisher_id: Option<String>,
    pub timestamp: Option<String>,
    pub event: HostEvent,
}

/// The longest envelope timestamp a message is recorded under (oslo's is 26 characters;
/// ISO 8601 with an offset 32). See [`Notification::sent_at`].
const MAX_SENT_AT_BYTES: usize = 32;

/// A UTC time (microseconds since the epoch) in oslo's envelope format, `str(utcnow())`:
/// "2026-11-27 18:00:00.123456". Strings of this format sort as the times they write.
pub fn oslo_timestamp(unix_us: i64) -> String {
    use chrono::{DateTime, Utc};
    // Beyond chrono's range (±262,000 years) the nearest time it can write.
    let at = DateTime::<Utc>::from_timestamp_micros(unix_us).unwrap_or(if unix_us < 0 {
        DateTime::<Utc>::MIN_UTC
    } else {
        DateTime::<Utc>::MAX_UTC
    });
    at.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
}

impl Notification {
    /// What the ledger records the message under, with its id (`processed_messages`, migration
    /// 0011): the envelope's `timestamp` as sent, which a redelivery repeats and which sorts in
    /// time order, so that the ids are recorded at the right edge of the table. "" for a
    /// message without one (a fanout cast) or with one not of oslo's shape (not "YYYY-...",
    /// or longer than any time format): those sort before every time and age by the time
    /// they were applied instead.
    pub fn sent_at(&self) -> &str {
        match self.timestamp.as_deref() {
            Some(t)
                if t.len() <= MAX_SENT_AT_BYTES
                    && t.len() > 5
                    && t.as_bytes()[..4].iter().all(u8::is_ascii_digit)
                    && t.as_bytes()[4] == b'-' =>
            {
                t
            }
            _ => "",
        }
    }

    /// The envelope's `timestamp` as milliseconds since the epoch (UTC), when it is a time:
    /// oslo's `str(utcnow())` ("2026-11-27 18:00:00.123456"), the same with a `T`, or ISO 8601
    /// with an offset. The order of a host's host-state events (`HostTable::event_order`).
    pub fn sent_ms(&self) -> Option<i64> {
        time_ms(self.timestamp.as_deref()?)
    }

    /// Unwraps the envelope and decodes either a notification (`event_type`) or a fanout
    /// cast (`method`).
    pub fn decode(body: &[u8]) -> Result<Self> {
        if let Some(n) = fast::host_state(body).or_else(|| fast::instance_event(body)) {
            return Ok(n);
        }
        Self::from_message(&decode_envelope(body)?)
    }

    /// A valid `compute.host.state` event sent without its envelope (as `POST
    /// /v1/notifications` takes it), decoded straight from `body`; `None` for anything else,
    /// which [`Notification::from_inner`] (or the envelope's or a cast's decode) answers.
    pub fn host_state_alone(body: &[u8]) -> Option<Self> {
        fast::host_state_alone(body)
    }

    /// A valid `compute.host.state` event or instance notification of an allocation's event
    /// (a build's `instance.create.end`, a deletion's `instance.delete.end`, …) sent without
    /// its envelope, decoded straight from `body`; `None` for anything else, as
    /// [`Notification::host_state_alone`].
    pub fn typed_alone(body: &[u8]) -> Option<Self> {
        fast::host_state_alone(body).or_else(|| fast::instance_event_alone(body))
    }

    /// [`Notification::decode`] of an envelope already parsed.
    pub fn from_envelope(outer: &Value) -> Result<Self> {
        Self::from_message(&open_envelope(outer)?)
    }

    /// A notification or fanout cast out of its envelope.
    fn from_message(inner: &Value) -> Result<Self> {
        if inner.get("method").is_some() {
            Self::from_rpc(&RpcMessage::from_value(inner)?)
        } else {
            Self::from_inner(inner)
        }
    }

    /// Decodes a versioned notification (or a `compute.host.state` event) out of its envelope.
    pub fn from_inner(inner: &Value) -> Result<Self> {
        let n = Fields::new(inner, "")?;
        let event_type = n.req_str("event_type")?;
        let publisher_id = n.opt_text("publisher_id", 2 * MAX_NAME_BYTES)?;
        let mut event = decode_payload(&event_type, n.required("payload")?)?;
        if event_type == "instance.rebuild.end" {
            evacuated_to_publisher(&mut event, publisher_id.as_deref());
        }
        Ok(Notification {
            message_id: n.req_str("message_id")?,
            publisher_id,
            timestamp: n.opt_str("timestamp")?,
            event_type,
            event,
        })
    }

    /// Decodes one of nova-compute's fanout casts to the schedulers.
    pub fn from_rpc(msg: &RpcMessage) -> Result<Self> {
        let a = Fields::new(&msg.args, "args")?;
        let event = match msg.method.as_str() {
            "update_instance_info" => {
                let host = a.req_str("host_name")?;
                let instance_uuids = instance_list_uuids(&a, &host)?;
                HostEvent::UpdateInstanceInfo {
                    host,
                    instance_uuids,
                }
            }
            "delete_instance_info" => HostEvent::DeleteInstanceInfo {
                host: a.req_str("host_name")?,
                instance_uuid: a.req_uuid("instance_uuid")?,
            },
            "sync_instance_info" => HostEvent::SyncInstanceInfo {
                host: a.req_str("host_name")?,
                instance_uuids: a
                    .opt_uuid_list("instance_uuids")?
                    .ok_or_else(|| CodecError::missing(a.path_of("instance_uuids")))?,
            },
            "update_aggregates" => HostEvent::Aggregates(AggregateCast::Update(
                super::aggregate::decode_aggregates(&msg.args)?,
            )),
            "delete_aggregate" => {
                let aggregate = a.required("aggregate")?;
                HostEvent::Aggregates(AggregateCast::Delete(
                    super::aggregate::decode_aggregate(aggregate, &a.path_of("aggregate"))?.uuid,
                ))
            }
            other => HostEvent::Unknown {
                event_type: other.to_string(),
            },
        };
        Ok(Notification {
            message_id: msg
                .unique_id
                .clone()
                .ok_or_else(|| CodecError::missing("_unique_id"))?,
            event_type: msg.method.clone(),
            publisher_id: None,
            timestamp: None,
            event,
        })
    }
}

/// An evacuation's `instance.rebuild.end` comes from the destination's nova-compute with the
/// instance still naming the failed source (Nova sets the instance's host and node in
/// `finish_evacuation`, after the notification): the instance runs on the publisher's host
/// (`nova-compute:<host>`), on a node the payload does not tell.
fn evacuated_to_publisher(event: &mut HostEvent, publisher_id: Option<&str>) {
    let Some(publisher) = publisher_id.and_then(|p| p.strip_prefix("nova-compute:")) else {
        return;
    };
    if let HostEvent::Upsert { host, node, .. } = event {
        if !publisher.is_empty() && host != publisher {
            *host = publisher.to_string();
            *node = None;
        }
    }
}

fn decode_payload(event_type: &str, payload: &Value) -> Result<HostEvent> {
    if event_type == HOST_STATE_EVENT {
        return HostStatePayload::from_fields(&Fields::new(payload, "payload")?)
            .map(HostEvent::HostState);
    }
    if event_type == METRICS_UPDATE_EVENT {
        return MetricsPayload::from_payload(payload).map(HostEvent::Metrics);
    }
    if FAILED_EVENTS.contains(&event_type) {
        let p = NovaObject::parse_any(payload, "payload")?.data;
        // `ComputeTaskPayload` names it `instance_uuid`, an instance action's payload `uuid`.
        let key = if event_type.starts_with("compute_task.") {
            "instance_uuid"
        } else {
            "uuid"
        };
        return Ok(HostEvent::Failed {
            instance_uuid: p.req_uuid(key)?,
        });
    }
    let upsert = UPSERT_EVENTS.contains(&event_type);
    let release = RELEASE_EVENTS.contains(&event_type);
    let move_step = MOVE_STEP_EVENTS
        .iter()
        .find(|(name, _)| *name == event_type)
        .map(|(_, step)| *step);
    let service = matches!(
        event_type,
        "service.update" | "service.create" | "service.delete"
    );
    if !upsert && !release && !service && move_step.is_none() {
        return Ok(HostEvent::Unknown {
            event_type: event_type.to_string(),
        });
    }
    let p = NovaObject::parse_any(payload, "payload")?.data;
    if service {
        if p.opt_str("binary")?.is_some_and(|b| b != "nova-compute") {
            return Ok(HostEvent::Unknown {
                event_type: event_type.to_string(),
            });
        }
        if event_type == "service.create" {
            return Ok(HostEvent::ServiceCreate {
                host: p.req_str("host")?,
            });
        }
        if event_type == "service.delete" {
            return Ok(HostEvent::ServiceDelete {
                host: p.req_str("host")?,
            });
        }
        return Ok(HostEvent::ServiceUpdate {
            host: p.req_str("host")?,
            disabled: p.opt_bool("disabled")?.unwrap_or(false),
            forced_down: p.opt_bool("forced_down")?.unwrap_or(false),
        });
    }
    let instance_uuid = p.req_uuid("uuid")?;
    if let Some(step) = move_step {
        return Ok(HostEvent::Move {
            instance_uuid,
            step,
        });
    }
    if release {
        return Ok(HostEvent::Release {
            instance_uuid,
            host: p.opt_str("host")?,
        });
    }
    let flavor = match p.opt_object("flavor", "FlavorPayload")? {
        Some(f) => Flavor::from_fields(&f.data)?,
        None => return Err(CodecError::missing(p.path_of("flavor"))),
    };
    Ok(HostEvent::Upsert {
        instance_uuid,
        host: p.req_str("host")?,
        node: p.opt_str("node")?,
        demand: flavor.demand(false),
        flavor: flavor.key(),
    })
}

/// The uuids of the Instance objects in `args.instance_info` (an InstanceList).
fn instance_list_uuids(a: &Fields<'_>, service_host: &str) -> Result<Vec<String>> {
    let list = a
        .opt_object("instance_info", "InstanceList")?
        .ok_or_else(|| CodecError::missing(a.path_of("instance_info")))?;
    let objects_path = list.data.path_of("objects");
    let Some(objects) = list.data.opt_list("objects")? else {
        return Ok(Vec::new());
    };
    let mut uuids = Vec::with_capacity(objects.len());
    for (i, item) in objects.iter().enumerate() {
        let instance = NovaObject::parse(item, "Instance", format!("{objects_path}[{i}]"))?;
        let uuid = instance.data.req_uuid("uuid")?;
        match instance.data.opt_str("host")? {
            Some(own) if own != service_host => {
                tracing::debug!(instance = %uuid, %service_host, host = %own, "update_instance_info names an instance of another host; left out");
            }
            _ => uuids.push(uuid),
        }
    }
    Ok(uuids)
}

mod fast;
#[cfg(test)]
mod tests;
