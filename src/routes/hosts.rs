//! `GET /v1/hosts`: the ledger's view of every host.

use super::ApiError;
use crate::domain::CLASSES;
use crate::startup::AppState;
use actix_web::{web, HttpResponse};
use serde_json::{json, Map, Value};

pub async fn list_hosts(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let ledger = state.scheduler.ledger();
    let hosts = ledger.read_hosts().await.map_err(ApiError::internal)?;
    let timeout_ms = state.scheduler.settings().policy.host_timeout_s as i64 * 1000;
    let now = state.scheduler.clock().now_ms();
    let list: Vec<Value> = hosts
        .iter()
        .map(|h| {
            let per_class = |v: &crate::domain::Resources| -> Map<String, Value> {
                CLASSES
                    .iter()
                    .map(|c| (c.as_str().to_string(), json!(v.get(*c))))
                    .collect()
            };
            let fresh = timeout_ms == 0 || now - h.last_seen_ms <= timeout_ms;
            json!({
                "host": &*h.host,
                "node": &*h.node,
                "compute_node_uuid": &*h.uuid,
                "availability_zone": &*h.availability_zone,
                "up": h.up && fresh && !h.forced_down,
                "reported_up": h.up,
                "disabled": h.disabled,
                "forced_down": h.forced_down,
                "last_seen_ms": h.last_seen_ms,
                "usable": per_class(&h.usable),
                "used": per_class(&h.used),
                "free": per_class(&h.free()),
                "num_instances": h.num_instances,
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "hosts": list })))
}
