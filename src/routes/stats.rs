//! `GET /v1/stats`: per-backend counters, latencies, windowed view and live parameters, with
//! the broker's state, notification outcomes and the RPC server's counters.

use crate::amqp::BrokerStatus;
use crate::notifications::Ingest;
use crate::rpc::RpcCounters;
use crate::scheduling::Scheduler;
use actix_web::{web, HttpResponse};
use serde_json::json;

pub async fn get_stats(
    scheduler: web::Data<Scheduler>,
    broker: web::Data<BrokerStatus>,
    ingest: web::Data<Ingest>,
    rpc: web::Data<RpcCounters>,
) -> HttpResponse {
    HttpResponse::Ok().json(json!({
        "active_backend": scheduler.backend().kind().as_str(),
        "backends": scheduler.stats().backends_json(),
        "broker": broker.to_json(),
        "notifications": ingest.to_json(),
        "rpc": rpc.to_json(),
        "expired_claims": scheduler.stats().expired_claims(),
    }))
}
