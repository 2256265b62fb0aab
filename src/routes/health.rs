//! `GET /healthz`: the ledger answers, whether the broker is connected, and whether the last
//! Placement sync succeeded (`"state": "stale"` while Placement is unreachable).

use crate::startup::AppState;
use actix_web::{web, HttpResponse};
use serde_json::json;

pub async fn healthz(state: web::Data<AppState>) -> HttpResponse {
    let ledger_ok = state.scheduler.ledger().host_ids().await.is_ok();
    let body = json!({
        "status": if ledger_ok { "ok" } else { "degraded" },
        "ledger": if ledger_ok { "ok" } else { "unreachable" },
        "backend": state.scheduler.backend().kind().as_str(),
        "broker": state.broker.to_json(),
        "placement": state.placement.to_json(),
    });
    if ledger_ok {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}
