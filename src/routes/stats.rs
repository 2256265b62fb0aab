//! `GET /v1/stats`: per-backend counters, latencies, windowed view and live parameters, with
//! the broker's state, notification outcomes, the RPC server's counters and the Placement
//! sync's state (its ledger repairs included), the operator's plugin chains and each plugin's
//! figures.

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
        "provider_trees": trees_json(&scheduler),
        "numa_pci": numa_pci_json(&scheduler),
        "hosts": hosts_json(ingest.ledger().table()),
        "usage": usage_json(&scheduler),
        "flex": scheduler.flex().to_json(),
        "plugin_chains": scheduler.backend().plugins().describe(),
        "plugins": scheduler.stats().plugins_json(),
        "rebalance": scheduler.stats().rebalance().to_json(),
    }))
}

/// Measured usage (soft state): how many hosts have a fresh reading, only expired ones
/// (decided on their allocations) or none, and the readings taken by source and refused by
/// reason; the pollers' queries (`[usage.prometheus]`) by outcome, with the last failure.
fn usage_json(scheduler: &Scheduler) -> serde_json::Value {
    use crate::domain::{UsageRefusal, UsageSource};
    use crate::table::PollOutcome;
    let table = scheduler.ledger().table();
    let max_age_ms = scheduler.flex().max_age_ms();
    let counts = table.usage_counts(scheduler.clock().now_ms(), max_age_ms);
    let counters = table.usage_counters();
    let accepted: serde_json::Map<_, _> = UsageSource::ALL
        .iter()
        .map(|s| (s.as_str().to_string(), json!(counters.accepted(*s))))
        .collect();
    let refused: serde_json::Map<_, _> = UsageRefusal::ALL
        .iter()
        .map(|r| (r.as_str().to_string(), json!(counters.refused(*r))))
        .collect();
    let prometheus = UsageSource::Prometheus;
    json!({
        "max_age_s": max_age_ms as f64 / 1_000.0,
        "hosts": {"fresh": counts.fresh, "expired": counts.expired, "none": counts.none},
        "instances": counts.instances,
        "qos_instances": counts.qos_instances,
        "accepted": accepted,
        "refused": refused,
        "polls": {
            "prometheus": {
                "enabled": scheduler.settings().usage.prometheus.enabled(),
                "ok": counters.polls(prometheus, PollOutcome::Ok),
                "failed": counters.polls(prometheus, PollOutcome::Failed),
                "last_error": counters.last_poll_error(prometheus),
            }
        },
    })
}

/// Requests on provider trees by what became of Placement's allocation candidates
/// (docs/placement-claims.md, "Requests on provider trees").
fn trees_json(scheduler: &Scheduler) -> serde_json::Value {
    let metrics = scheduler.stats().metrics();
    let by_outcome: serde_json::Map<_, _> = crate::scheduling::CANDIDATE_OUTCOMES
        .iter()
        .map(|k| (k.to_string(), json!(metrics.placement_candidates(k).get())))
        .collect();
    serde_json::Value::Object(by_outcome)
}

/// Requests with a NUMA topology or PCI requests by outcome (docs/numa-pci.md).
fn numa_pci_json(scheduler: &Scheduler) -> serde_json::Value {
    let metrics = scheduler.stats().metrics();
    json!({
        "decided": metrics.numa_pci_requests("decided").get(),
        "refused": metrics.numa_pci_requests("refused").get(),
    })
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
