//! `GET /v1/stats`: per-backend counters, latencies, windowed view and live parameters, with
//! the broker's state, notification outcomes, the RPC server's counters and the Placement
//! sync's state (its ledger repairs included).

use crate::amqp::BrokerStatus;
use crate::notifications::Ingest;
use crate::placement::PlacementStatus;
use crate::rpc::RpcCounters;
use crate::scheduling::Scheduler;
use crate::stats::Stats;
use actix_web::{web, HttpResponse};
use serde_json::json;

pub async fn get_stats(
    scheduler: web::Data<Scheduler>,
    stats: web::Data<Stats>,
    broker: web::Data<BrokerStatus>,
    ingest: web::Data<Ingest>,
    rpc: web::Data<RpcCounters>,
    placement: web::Data<PlacementStatus>,
) -> HttpResponse {
    HttpResponse::Ok().json(json!({
        "active_backend": scheduler.backend().kind().as_str(),
        "backends": stats.backends_json(),
        "broker": broker.to_json(),
        "notifications": ingest.to_json(),
        "rpc": rpc.to_json(),
        "expired_claims": stats.expired_claims(),
        "placement": placement.to_json(),
        "hosts": hosts_json(ingest.ledger().table()),
    }))
}

/// What host registration did beside the usual: compute nodes re-created under a new uuid
/// that replaced (or retired) the old one, and host-state events older than their host's
/// newest (heartbeats only).
fn hosts_json(table: &crate::table::HostTable) -> serde_json::Value {
    let c = table.host_counters();
    json!({
        "node_replaced": c.node_replaced.get(),
        "older_events": c.older_events.get(),
    })
}
