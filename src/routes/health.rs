//! `GET /healthz`: the ledger answers, whether the broker is connected, and whether the last
//! Placement sync succeeded (`"state": "stale"` while Placement is unreachable).

use crate::amqp::BrokerStatus;
use crate::placement::PlacementStatus;
use crate::scheduling::Scheduler;
use actix_web::{web, HttpResponse};
use serde_json::json;

pub async fn healthz(
    scheduler: web::Data<Scheduler>,
    broker: web::Data<BrokerStatus>,
    placement: web::Data<PlacementStatus>,
) -> HttpResponse {
    let ledger_ok = scheduler.ledger().host_ids().await.is_ok();
    let body = json!({
        "status": if ledger_ok { "ok" } else { "degraded" },
        "ledger": if ledger_ok { "ok" } else { "unreachable" },
        "backend": scheduler.backend().kind().as_str(),
        "broker": broker.to_json(),
        "placement": placement.to_json(),
    });
    if ledger_ok {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}
