//! `GET /v1/hosts`: every host of the live table, with its inventory, usage and marks; with
//! the Placement sync on, also Placement's usage of the host (`placement_used`) whenever it
//! differs from the ledger's.
//!
//! In host id order; `?limit=N&marker=ID` pages it (the hosts after id `marker`, at most `N`,
//! and `next_marker` when more remain), `?host=NAME` keeps the hosts whose service host or
//! node is `NAME`, `?availability_zone=AZ` those in zone `AZ`. The body is written one host at a
//! time: at 100,000 hosts the whole list as one JSON value held 1.5 GB at once for an 89 MB
//! answer.

use super::ApiError;
use crate::clock::Clock;
use crate::domain::Resources;
use crate::ledger::Ledger;
use crate::placement::PlacementStatus;
use crate::scheduling::Scheduler;
use actix_web::{web, HttpResponse};
use serde_json::{json, Map, Value};

/// Amounts by class name, every class the host has (0 included) or uses.
fn per_class(classes: &[String], v: &Resources) -> Map<String, Value> {
    classes
        .iter()
        .map(|c| {
            let amount = crate::domain::ClassId::lookup(c).map_or(0, |id| v.get(id));
            (c.clone(), json!(amount))
        })
        .collect()
}

/// `placement_used` (Placement's usage of the provider at the last sync, by class) when it
/// differs from the ledger's `used`; nothing when they agree or Placement was not read.
fn placement_view(placement: &PlacementStatus, uuid: &str, used: &Resources) -> Option<Value> {
    let usage = placement.usage(uuid)?;
    let ledger: Map<String, Value> = used
        .nonzero()
        .filter(|(_, amount)| *amount != 0)
        .map(|(c, amount)| (c.name().to_string(), json!(amount)))
        .collect();
    let theirs: Map<String, Value> = usage
        .iter()
        .filter(|(_, amount)| **amount != 0)
        .map(|(c, amount)| (c.clone(), json!(amount)))
        .collect();
    (ledger != theirs).then_some(Value::Object(theirs))
}

/// The host's measured usage (soft state, `table::usage`) per class: the reading, what was
/// claimed since, when and where from, and whether it still decides (`fresh`); the
/// instances with a reading; the node's monitor metrics (`MetricsFilter`, `MetricsWeigher`),
/// each with its time and whether it is fresh; its instances' QoS signals (Flex's
/// `instance_signals`). `null` when no source reported any.
fn measured_view(
    measured: Option<&crate::domain::MeasuredUsage>,
    now_ms: i64,
    max_age_ms: i64,
) -> Value {
    let Some(measured) = measured else {
        return Value::Null;
    };
    let classes: Map<String, Value> = measured
        .classes
        .iter()
        .map(|c| {
            (
                c.class.name().to_string(),
                json!({
                    "value": c.value,
                    "placed_since": c.placed,
                    "at_ms": c.at_ms,
                    "received_ms": c.received_ms,
                    "source": c.source,
                    "fresh": c.fresh(now_ms, max_age_ms),
                }),
            )
        })
        .collect();
    let clock = crate::domain::ReadingClock { now_ms, max_age_ms };
    let metrics = measured.metrics.as_ref().map(|set| {
        let values: Map<String, Value> = set
            .metrics
            .iter()
            .map(|m| {
                let fresh = clock.fresh(m.at_ms, set.received_ms);
                let view = json!({"value": m.value, "at_ms": m.at_ms, "fresh": fresh});
                (m.name.to_string(), view)
            })
            .collect();
        json!({"values": values, "received_ms": set.received_ms, "source": set.source})
    });
    let qos = measured.qos.as_ref().map(|report| {
        let instances: Map<String, Value> = report
            .instances
            .iter()
            .map(|i| {
                let signals: Map<String, Value> = i
                    .signals
                    .iter()
                    .map(|(s, v)| (s.as_str().to_string(), json!(v)))
                    .collect();
                (i.instance.to_string(), Value::Object(signals))
            })
            .collect();
        json!({
            "instances": instances,
            "at_ms": report.at_ms,
            "received_ms": report.received_ms,
            "source": report.source,
            "fresh": clock.fresh(report.at_ms, report.received_ms),
        })
    });
    json!({
        "classes": classes,
        "instances": measured.instances.len(),
        "metrics": metrics,
        "qos": qos,
    })
}

/// What `GET /v1/hosts` was asked for.
#[derive(Debug, Default, PartialEq)]
struct HostsQuery {
    limit: Option<usize>,
    marker: Option<i64>,
    host: Option<String>,
    availability_zone: Option<String>,
}

impl HostsQuery {
    /// The query's parameters, or a 400 naming the one at fault.
    fn parse(pairs: &[(String, String)]) -> Result<Self, ApiError> {
        let mut query = HostsQuery::default();
        let mut seen = std::collections::HashSet::new();
        for (key, value) in pairs {
            if !seen.insert(key.as_str()) {
                return Err(ApiError::bad_request(format!(
                    "query parameter `{key}` given more than once"
                )));
            }
            match key.as_str() {
                "limit" => {
                    let limit = value.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "limit: `{value}` is not a whole number of hosts, 1 or more"
                        ))
                    })?;
                    query.limit = Some(limit);
                }
                "marker" => {
                    let marker = value.parse().map_err(|_| {
                        ApiError::bad_request(format!(
                            "marker: `{value}` is not a host id (the `next_marker` of the previous page)"
                        ))
                    })?;
                    query.marker = Some(marker);
                }
                "host" => query.host = Some(value.clone()),
                "availability_zone" => query.availability_zone = Some(value.clone()),
                other => {
                    return Err(ApiError::bad_request(format!(
                        "unknown query parameter `{other}`; known: limit, marker, host, availability_zone"
                    )))
                }
            }
        }
        Ok(query)
    }

    fn keeps(&self, h: &crate::domain::HostState) -> bool {
        self.marker.is_none_or(|m| h.id.0 > m)
            && self
                .host
                .as_deref()
                .is_none_or(|n| &**h.host() == n || &**h.node() == n)
            && self
                .availability_zone
                .as_deref()
                .is_none_or(|z| &**h.availability_zone() == z)
    }
}

pub async fn list_hosts(
    scheduler: web::Data<Scheduler>,
    ledger: web::Data<Ledger>,
    clock: web::Data<dyn Clock>,
    placement: web::Data<PlacementStatus>,
    query: web::Query<Vec<(String, String)>>,
) -> Result<HttpResponse, ApiError> {
    let query = HostsQuery::parse(&query)?;
    let mut hosts =
        if query.limit.is_some() && query.host.is_none() && query.availability_zone.is_none() {
            // A page of the whole list: only its hosts are copied out of the table (at 100,000
            // hosts, copying and sorting them all took 0.2 s a page).
            let ids = ledger.host_ids().await.map_err(ApiError::unavailable)?;
            let after = query
                .marker
                .map_or(0, |m| ids.partition_point(|id| id.0 <= m));
            let table = ledger.table();
            ids[after..]
                .iter()
                .filter_map(|id| table.get(*id))
                .take(query.limit.unwrap_or(usize::MAX).saturating_add(1))
                .collect()
        } else {
            ledger.read_hosts().await.map_err(ApiError::unavailable)?
        };
    hosts.retain(|h| query.keeps(h));
    let next_marker = match query.limit {
        Some(limit) if hosts.len() > limit => {
            hosts.truncate(limit);
            hosts.last().map(|h| h.id.0)
        }
        _ => None,
    };
    let mut held: std::collections::HashMap<i64, Vec<Value>> = std::collections::HashMap::new();
    for m in ledger.held_moves().await.map_err(ApiError::unavailable)? {
        held.entry(m.host_id.0).or_default().push(json!({
            "instance_uuid": m.instance_uuid,
            "consumer": m.key,
            "resources": m.demand.to_map(),
            "started": m.started,
            "since_ms": m.since_ms,
        }));
    }
    let timeout_ms = scheduler.settings().policy.host_timeout_s as i64 * 1000;
    let now = clock.now_ms();
    let max_age_ms = scheduler.flex().max_age_ms();
    let mut view = |h: &crate::domain::HostState| {
        let p = &h.profile;
        let mut classes: Vec<String> = p
            .inventories
            .iter()
            .map(|(c, _)| c.name().to_string())
            .collect();
        for (c, _) in h.used.nonzero() {
            let name = c.name().to_string();
            if !classes.contains(&name) {
                classes.push(name);
            }
        }
        let inventories: Map<String, Value> = p
            .inventories
            .iter()
            .map(|(c, inv)| (c.name().to_string(), json!(inv)))
            .collect();
        let fresh = timeout_ms == 0 || now - h.last_seen_ms <= timeout_ms;
        json!({
            "id": h.id.0,
            "host": &**h.host(),
            "node": &**h.node(),
            "compute_node_uuid": &**h.uuid(),
            "availability_zone": &**h.availability_zone(),
            "up": h.up && fresh && !h.forced_down,
            "reported_up": h.up,
            "disabled": h.disabled,
            "forced_down": h.forced_down,
            "last_seen_ms": h.last_seen_ms,
            "inventories": inventories,
            "usable": per_class(&classes, h.usable()),
            "used": per_class(&classes, &h.used),
            "free": per_class(&classes, &h.free()),
            "pending": ledger.table().pending(h.id).map(|p| p.to_map()),
            "traits": p.traits.names(),
            "aggregates": p.aggregates.names(),
            "num_instances": h.num_instances,
            "held_moves": held.remove(&h.id.0).unwrap_or_default(),
            "placement_used": placement_view(&placement, h.uuid(), &h.used),
            "measured": measured_view(h.measured.as_deref(), now, max_age_ms),
        })
    };
    let mut body = Vec::with_capacity(64 + hosts.len() * 1_024);
    body.extend_from_slice(b"{\"hosts\":[");
    for (i, h) in hosts.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        serde_json::to_writer(&mut body, &view(h)).map_err(ApiError::internal)?;
    }
    body.push(b']');
    if let Some(marker) = next_marker {
        body.extend_from_slice(format!(",\"next_marker\":{marker}").as_bytes());
    }
    body.push(b'}');
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(body))
}
