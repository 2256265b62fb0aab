//! `GET /metrics`: the Prometheus text exposition.

use crate::clock::Clock;
use crate::ledger::Ledger;
use crate::scheduling::Scheduler;
use crate::stats::Stats;
use actix_web::{web, HttpResponse};

pub async fn metrics(
    scheduler: web::Data<Scheduler>,
    ledger: web::Data<Ledger>,
    stats: web::Data<Stats>,
    clock: web::Data<dyn Clock>,
) -> HttpResponse {
    let metrics = stats.metrics();
    // Read at scrape time: the moves from the ledger (one read; kept as it was if the ledger
    // cannot answer now), the oversubscribed hosts from the live table (committed usage, see
    // `HostTable::oversubscribed`).
    if let Ok(held) = ledger.held_moves().await {
        metrics.held_moves.set(held.len() as i64);
    }
    let over = ledger.table().oversubscribed();
    metrics.oversubscribed_hosts.set(over as i64);
    let usage = ledger
        .table()
        .usage_counts(clock.now_ms(), scheduler.flex().max_age_ms());
    for (state, hosts) in [
        ("fresh", usage.fresh),
        ("expired", usage.expired),
        ("none", usage.none),
    ] {
        metrics.set_usage_hosts(state, hosts);
    }
    HttpResponse::Ok()
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .body(metrics.encode())
}
