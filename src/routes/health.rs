//! `GET /healthz` (liveness: the process serves; always 200, with what it knows of its parts)
//! and `GET /readyz` (readiness: 503 naming the reason unless the ledger takes a write now,
//! the broker is connected when `[amqp] url` is set, and the last Placement sync succeeded
//! when `[placement] enabled`).

use crate::amqp::BrokerStatus;
use crate::clock::Clock;
use crate::cloud::Cloud;
use crate::ledger::Ledger;
use crate::placement::PlacementStatus;
use crate::scheduling::Scheduler;
use actix_web::{web, HttpResponse};
use serde_json::{json, Value};
use std::time::Duration;

/// How long the ledger's write probe may take before the service counts as not ready.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long `/healthz` waits for the ledger's write probe: shorter than `/readyz`'s, as a
/// liveness check answers quickly whatever the ledger does.
const LIVENESS_PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Liveness: 200 while the process serves, with the state of each part. `status` is
/// `degraded` while the ledger refuses writes (every claim and notification then gets 503).
pub async fn healthz(
    scheduler: web::Data<Scheduler>,
    ledger: web::Data<Ledger>,
    clock: web::Data<dyn Clock>,
    cloud: web::Data<Cloud>,
    broker: web::Data<BrokerStatus>,
    placement: web::Data<PlacementStatus>,
) -> HttpResponse {
    let probe = ledger
        .probe_write(clock.now_ms(), LIVENESS_PROBE_TIMEOUT)
        .await;
    let engine = match ledger.engine() {
        crate::ledger::Engine::Sqlite => "sqlite",
        crate::ledger::Engine::Postgres => "postgres",
    };
    let (status, ledger_state) = match probe {
        Ok(()) => ("ok", json!({"engine": engine, "writable": true})),
        Err(e) => (
            "degraded",
            json!({
                "engine": engine,
                "writable": false,
                "error": crate::redact::redact_urls(&e.to_string()),
            }),
        ),
    };
    HttpResponse::Ok().json(json!({
        "status": status,
        "ledger": ledger_state,
        "backend": scheduler.backend().kind().as_str(),
        "hosts": ledger.table().len(),
        "broker": broker.to_json(),
        "placement": placement.to_json(),
        "nova_db": ledger.table().records().map(|r| json!({
            "read": r.read,
            "nodes": r.by_uuid.len(),
            "aggregates_loaded": cloud.aggregates_loaded(),
            "aggregates": cloud.aggregate_count(),
        })),
    }))
}

pub async fn readyz(
    scheduler: web::Data<Scheduler>,
    ledger: web::Data<Ledger>,
    clock: web::Data<dyn Clock>,
    broker: web::Data<BrokerStatus>,
    placement: web::Data<PlacementStatus>,
) -> HttpResponse {
    let settings = scheduler.settings();
    let mut checks = serde_json::Map::new();
    let mut reasons: Vec<String> = Vec::new();
    let mut check = |name: &str, failure: Option<String>| {
        let value = match &failure {
            None => json!({"ok": true}),
            Some(why) => json!({"ok": false, "reason": why}),
        };
        if let Some(why) = failure {
            reasons.push(format!("{name}: {why}"));
        }
        checks.insert(name.to_string(), value);
    };
    let now = clock.now_ms();
    let ledger = ledger.probe_write(now, PROBE_TIMEOUT).await;
    check(
        "ledger",
        ledger
            .err()
            .map(|e| crate::redact::redact_urls(&e.to_string())),
    );
    if !settings.amqp.url.is_empty() {
        let failure = (!broker.is_connected()).then(|| {
            let last = broker.to_json()["last_error"].clone();
            match last {
                Value::String(e) => format!("not connected: {e}"),
                _ => "not connected".to_string(),
            }
        });
        check("broker", failure);
    }
    if settings.placement.enabled {
        let failure =
            placement
                .is_stale()
                .then(|| match placement.to_json()["last_error"].clone() {
                    Value::String(e) => format!("the last sync failed: {e}"),
                    _ => "no successful sync yet".to_string(),
                });
        check("placement", failure);
    }
    let body = json!({
        "status": if reasons.is_empty() { "ready" } else { "not_ready" },
        "reason": (!reasons.is_empty()).then(|| reasons.join("; ")),
        "checks": checks,
    });
    if reasons.is_empty() {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}
