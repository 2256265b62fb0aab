//! The Prometheus registry: one counter family per event kind, labelled by backend.

use super::Counts;
use parking_lot::Mutex;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BackendLabel {
    pub backend: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.00005, 2.0, 18))
}

/// Every metric Parasol exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Mutex<Registry>,
    requests: Family<BackendLabel, Counter>,
    attempts: Family<BackendLabel, Counter>,
    declines: Family<BackendLabel, Counter>,
    placed: Family<BackendLabel, Counter>,
    no_valid_host: Family<BackendLabel, Counter>,
    queries: Family<BackendLabel, Counter>,
    latency: Family<BackendLabel, Histogram, fn() -> Histogram>,
    /// Notifications by outcome (applied, duplicate, dead_letter, unknown).
    pub notifications: Family<KindLabel, Counter>,
    /// 1 while the broker connection is up.
    pub broker_connected: Gauge,
    /// Duration of each Placement inventory sync.
    pub placement_sync_seconds: Histogram,
    /// Placement syncs that failed (the last known state was kept).
    pub placement_sync_errors: Counter,
    /// Compute hosts seen in the last successful Placement sync.
    pub placement_hosts: Gauge,
    /// Claims released because nothing confirmed them within `[scheduler] claim_ttl_s`.
    pub expired_claims: Counter,
    /// Ledger allocations repaired from Placement's, by kind (released, moved, resized).
    placement_repairs: Family<KindLabel, Counter>,
    /// Syncs run out of turn (a request found no candidate, or Placement refused a claim).
    pub placement_resyncs: Counter,
    /// Duration of each claim in Placement (`GET` and `PUT /allocations/{instance}`).
    pub placement_claim_seconds: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        let m = Metrics {
            registry: Mutex::new(Registry::with_prefix("parasol")),
            requests: Family::default(),
            attempts: Family::default(),
            declines: Family::default(),
            placed: Family::default(),
            no_valid_host: Family::default(),
            queries: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            notifications: Family::default(),
            broker_connected: Gauge::default(),
            placement_sync_seconds: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            placement_sync_errors: Counter::default(),
            placement_hosts: Gauge::default(),
            expired_claims: Counter::default(),
            placement_repairs: Family::default(),
            placement_resyncs: Counter::default(),
            placement_claim_seconds: latency_histogram(),
        };
        {
            let mut r = m.registry.lock();
            r.register(
                "requests",
                "Instances asked to be placed",
                m.requests.clone(),
            );
            r.register(
                "attempts",
                "Claims tried (including empty samples)",
                m.attempts.clone(),
            );
            r.register("declines", "Attempts that failed", m.declines.clone());
            r.register("placed", "Instances placed", m.placed.clone());
            r.register(
                "no_valid_host",
                "Instances answered with NoValidHost",
                m.no_valid_host.clone(),
            );
            r.register(
                "queries",
                "Host states read from the ledger",
                m.queries.clone(),
            );
            r.register(
                "decision_latency_seconds",
                "Time to decide and claim one call",
                m.latency.clone(),
            );
            r.register(
                "notifications",
                "Notifications by outcome",
                m.notifications.clone(),
            );
            r.register(
                "broker_connected",
                "1 while connected to RabbitMQ",
                m.broker_connected.clone(),
            );
            r.register(
                "placement_sync_duration_seconds",
                "Duration of each Placement inventory sync",
                m.placement_sync_seconds.clone(),
            );
            r.register(
                "placement_sync_errors",
                "Placement syncs that failed",
                m.placement_sync_errors.clone(),
            );
            r.register(
                "placement_hosts",
                "Compute hosts in the last Placement sync",
                m.placement_hosts.clone(),
            );
            r.register(
                "expired_claims",
                "Claims released because nothing confirmed them within claim_ttl_s",
                m.expired_claims.clone(),
            );
            r.register(
                "placement_repairs",
                "Ledger allocations repaired from Placement's, by kind",
                m.placement_repairs.clone(),
            );
            r.register(
                "placement_resyncs",
                "Placement syncs run out of turn",
                m.placement_resyncs.clone(),
            );
            r.register(
                "placement_claim_duration_seconds",
                "Duration of each claim in Placement",
                m.placement_claim_seconds.clone(),
            );
        }
        m
    }
}

/// The counters of one backend, resolved once so recording is a few atomic adds.
#[derive(Debug, Clone)]
pub(super) struct BackendMetrics {
    requests: Counter,
    attempts: Counter,
    declines: Counter,
    placed: Counter,
    no_valid_host: Counter,
    queries: Counter,
    latency: Histogram,
    pub(super) placement_claim: Histogram,
}

impl BackendMetrics {
    pub(super) fn add(&self, d: &Counts, latency_us: Option<u64>) {
        self.requests.inc_by(d.requests);
        self.attempts.inc_by(d.attempts);
        self.declines.inc_by(d.declines);
        self.placed.inc_by(d.placed);
        self.no_valid_host.inc_by(d.no_valid_host);
        self.queries.inc_by(d.queries);
        if let Some(us) = latency_us {
            self.latency.observe(us as f64 / 1e6);
        }
    }
}

impl Metrics {
    pub(super) fn backend(&self, backend: &str) -> BackendMetrics {
        let l = BackendLabel {
            backend: backend.to_string(),
        };
        BackendMetrics {
            requests: self.requests.get_or_create(&l).clone(),
            attempts: self.attempts.get_or_create(&l).clone(),
            declines: self.declines.get_or_create(&l).clone(),
            placed: self.placed.get_or_create(&l).clone(),
            no_valid_host: self.no_valid_host.get_or_create(&l).clone(),
            queries: self.queries.get_or_create(&l).clone(),
            latency: self.latency.get_or_create(&l).clone(),
            placement_claim: self.placement_claim_seconds.clone(),
        }
    }

    /// Counts a notification outcome.
    pub fn notification(&self, kind: &str) {
        self.notifications
            .get_or_create(&KindLabel {
                kind: kind.to_string(),
            })
            .inc();
    }

    /// The repair counter of one kind.
    pub fn placement_repairs(&self, kind: &str) -> Counter {
        self.placement_repairs
            .get_or_create(&KindLabel {
                kind: kind.to_string(),
            })
            .clone()
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry.lock());
        out
    }
}
