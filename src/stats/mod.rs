//! Per-backend counters (requests, attempts, declines, placed, no_valid_host, queries),
//! latency percentiles over the whole run and a recent window, and the backends' live
//! parameters; the same counters feed `/v1/stats` and the Prometheus `/metrics`.
//!
//! # Layout
//! - `window`: the sliding window of recent counters and latencies.
//! - `metrics`: the Prometheus registry the counters live in.
//! - `plugins`: the figures of each operator plugin (docs/plugins.md).
//! - `batch`: batch placement's rounds, sizes, solve times and fallbacks (`[batch]`).
//! - `rebalance`: the FMU planner's plans, moves and refusals (`POST /v1/rebalance/plan`).

mod batch;
mod metrics;
mod plugins;
mod rebalance;
mod window;

pub use batch::{BatchFallback, BatchRound};
pub use metrics::Metrics;
pub use plugins::{BreakerState, PluginOutcome, PluginStats};
/// Re-exported so that other parts can build the metrics they register in [`Metrics`].
pub use prometheus_client;
pub use rebalance::{RebalanceRefusal, RebalanceStats};

use crate::clock::SharedClock;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use window::Window;

/// Why an attempt was declined (README "Declines by cause").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeclineCause {
    /// The ledger refused the pick: someone else took the room since the host was read.
    ClaimConflict,
    /// Placement refused the pick (409): its view had someone else's allocation there.
    PlacementConflict,
    /// A cached host that no longer fits (`caching`/`asc`'s snapshot was stale).
    StaleSnapshot,
    /// An APSR sample held no fitting host.
    EmptySample,
    /// Nothing in the cloud fits.
    NoValidHost,
}

impl DeclineCause {
    pub const ALL: [DeclineCause; 5] = [
        DeclineCause::ClaimConflict,
        DeclineCause::PlacementConflict,
        DeclineCause::StaleSnapshot,
        DeclineCause::EmptySample,
        DeclineCause::NoValidHost,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeclineCause::ClaimConflict => "claim_conflict",
            DeclineCause::PlacementConflict => "placement_conflict",
            DeclineCause::StaleSnapshot => "stale_snapshot",
            DeclineCause::EmptySample => "empty_sample",
            DeclineCause::NoValidHost => "no_valid_host",
        }
    }
}

/// The counters of one event kind, as a plain record for snapshots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub requests: u64,
    pub attempts: u64,
    pub declines: u64,
    /// Declines by [`DeclineCause`], in the order of [`DeclineCause::ALL`].
    pub by_cause: [u64; 5],
    /// Declines a fresh, serial scheduler would not have made (conflicts, stale picks, APSR's
    /// empty samples while a fitting host existed).
    pub avoidable: u64,
    pub placed: u64,
    pub no_valid_host: u64,
    /// Instances of calls that failed for another reason than NoValidHost (the ledger failed).
    pub errors: u64,
    pub queries: u64,
    /// Rankings of a snapshot answered by the sorted walk, and by the full scan (the walk
    /// could not prove the top k within its budget, or the policy is not one it walks).
    pub sorted_walks: u64,
    pub sorted_scans: u64,
    /// Of `sorted_scans`, those that did not try the walk: walks had been giving up.
    pub sorted_walks_skipped: u64,
    /// Time spent in ledger claims, in microseconds (to split decide from claim latency).
    #[serde(skip)]
    pub claim_us: u64,
}

impl Counts {
    pub fn decline_ratio(&self) -> f64 {
        ratio(self.declines, self.attempts)
    }

    /// Avoidable declines over the attempts that had a chance: every attempt less the
    /// declines no scheduler could have avoided (nothing in the cloud fits), so a request too
    /// big for any host moves neither side (README "Declines by cause").
    pub fn avoidable_decline_ratio(&self) -> f64 {
        let unavoidable = self.declines.saturating_sub(self.avoidable);
        ratio(self.avoidable, self.attempts.saturating_sub(unavoidable))
    }

    /// Counts one declined attempt with its cause; `avoidable` per README's definition.
    pub fn decline(&mut self, cause: DeclineCause, avoidable: bool) {
        self.attempts += 1;
        self.declines += 1;
        self.by_cause[cause as usize] += 1;
        if avoidable {
            self.avoidable += 1;
        }
    }

    pub fn queries_per_request(&self) -> f64 {
        ratio(self.queries, self.requests)
    }

    fn add(&mut self, o: &Counts) {
        self.requests += o.requests;
        self.attempts += o.attempts;
        self.declines += o.declines;
        for (a, b) in self.by_cause.iter_mut().zip(o.by_cause) {
            *a += b;
        }
        self.avoidable += o.avoidable;
        self.placed += o.placed;
        self.no_valid_host += o.no_valid_host;
        self.errors += o.errors;
        self.queries += o.queries;
        self.sorted_walks += o.sorted_walks;
        self.sorted_scans += o.sorted_scans;
        self.sorted_walks_skipped += o.sorted_walks_skipped;
        self.claim_us += o.claim_us;
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Statistics of one backend. Cheap to share: every recorder takes `&self`.
#[derive(Debug)]
pub struct BackendStats {
    name: String,
    clock: SharedClock,
    metrics: metrics::BackendMetrics,
    // std-like lock from parking_lot: held for a few arithmetic operations, never across await.
    inner: Mutex<Inner>,
    params: Mutex<Map<String, Value>>,
}

#[derive(Debug)]
struct Inner {
    total: Counts,
    latency_us: Histogram<u64>,
    /// Per call: latency minus the time spent in claims (filter, rank, reads).
    decide_us: Histogram<u64>,
    /// Per claim.
    claim_us: Histogram<u64>,
    window: Window,
    batch: batch::BatchTotals,
}

fn histogram() -> Histogram<u64> {
    // 1 µs … 1 h with 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("static histogram bounds are valid")
}

impl BackendStats {
    /// Records the duration of one claim in Placement.
    pub fn record_placement_claim(&self, seconds: f64) {
        self.metrics.placement_claim.observe(seconds);
    }
}

impl BackendStats {
    /// Records one finished request-level event: counters to add, and the decision latency.
    pub fn record(&self, delta: Counts, latency_us: Option<u64>) {
        self.metrics.add(&delta, latency_us);
        let now = self.clock.now_ms();
        let mut inner = self.inner.lock();
        inner.total.add(&delta);
        if let Some(us) = latency_us {
            let _ = inner.latency_us.record(us.max(1));
            let _ = inner
                .decide_us
                .record(us.saturating_sub(delta.claim_us).max(1));
        }
        inner.window.record(now, &delta, latency_us);
    }

    /// Records one solved batch (`[batch]`).
    pub fn record_batch_round(&self, round: BatchRound) {
        self.metrics.batch_round(&round);
        self.inner.lock().batch.round(round);
    }

    /// Records a call placed one instance at a time although `[batch]` asked for a batch.
    pub fn record_batch_fallback(&self, reason: BatchFallback) {
        self.metrics.batch_fallback(reason);
        self.inner.lock().batch.fallback(reason);
    }

    /// Records the duration of one ledger claim.
    pub fn record_claim(&self, us: u64) {
        self.metrics.claim(us);
        let _ = self.inner.lock().claim_us.record(us.max(1));
    }

    /// Adds host reads that are not tied to one request (a cache refresh).
    pub fn add_queries(&self, queries: u64) {
        self.record(
            Counts {
                queries,
                ..Counts::default()
            },
            None,
        );
    }

    /// Publishes a live parameter of the backend (e.g. `refresh_interval_s`).
    pub fn set_param(&self, key: &str, value: Value) {
        self.set_params([(key, value)]);
    }

    /// Sets several parameters at once: a reader of `/v1/stats` sees all of them or none.
    pub fn set_params<'a>(&self, values: impl IntoIterator<Item = (&'a str, Value)>) {
        let mut params = self.params.lock();
        for (key, value) in values {
            params.insert(key.to_string(), value);
        }
    }

    pub fn totals(&self) -> Counts {
        self.inner.lock().total
    }

    /// Counters and latencies over the recent window.
    pub fn window_totals(&self) -> Counts {
        let now = self.clock.now_ms();
        self.inner.lock().window.view(now).0
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The JSON object of docs/architecture.md §8.1 for this backend.
    pub fn to_json(&self) -> Value {
        let now = self.clock.now_ms();
        let inner = self.inner.lock();
        let (wc, wh, secs) = inner.window.view(now);
        let mut obj = counts_json(&inner.total, &inner.latency_us);
        let mut window = counts_json(&wc, &wh);
        window.insert("seconds".into(), json!(secs));
        obj.insert("window".into(), Value::Object(window));
        obj.insert("decide_latency_ms".into(), percentiles(&inner.decide_us));
        obj.insert("claim_latency_ms".into(), percentiles(&inner.claim_us));
        obj.insert("batch".into(), inner.batch.to_json());
        obj.insert("params".into(), Value::Object(self.params.lock().clone()));
        Value::Object(obj)
    }
}

/// p50/p90/p99/max in milliseconds (null when empty) and the count.
fn percentiles(h: &Histogram<u64>) -> Value {
    let pct = |q: f64| {
        if h.is_empty() {
            Value::Null
        } else {
            json!(h.value_at_quantile(q) as f64 / 1000.0)
        }
    };
    json!({"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": pct(1.0), "count": h.len()})
}

fn counts_json(c: &Counts, h: &Histogram<u64>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("requests".into(), json!(c.requests));
    m.insert("attempts".into(), json!(c.attempts));
    m.insert("declines".into(), json!(c.declines));
    m.insert("decline_ratio".into(), json!(c.decline_ratio()));
    m.insert(
        "avoidable_decline_ratio".into(),
        json!(c.avoidable_decline_ratio()),
    );
    let causes: Map<String, Value> = DeclineCause::ALL
        .iter()
        .map(|cause| {
            (
                cause.as_str().to_string(),
                json!(c.by_cause[*cause as usize]),
            )
        })
        .collect();
    m.insert("declines_by_cause".into(), Value::Object(causes));
    m.insert("placed".into(), json!(c.placed));
    m.insert("no_valid_host".into(), json!(c.no_valid_host));
    m.insert("errors".into(), json!(c.errors));
    m.insert("queries".into(), json!(c.queries));
    m.insert("queries_per_request".into(), json!(c.queries_per_request()));
    m.insert(
        "ranked_by".into(),
        json!({
            "sorted_walk": c.sorted_walks,
            "scan": c.sorted_scans,
            "scan_without_walk": c.sorted_walks_skipped,
        }),
    );
    m.insert("latency_ms".into(), percentiles(h));
    m
}

/// The statistics of every backend that has run in this process.
#[derive(Debug)]
pub struct Stats {
    clock: SharedClock,
    window_ms: i64,
    metrics: Metrics,
    backends: Mutex<BTreeMap<String, Arc<BackendStats>>>,
    plugins: plugins::PluginRegistry,
    rebalance: RebalanceStats,
    /// Claims released because nothing confirmed them within `[scheduler] claim_ttl_s`.
    expired_claims: std::sync::atomic::AtomicU64,
}

impl Stats {
    pub fn new(clock: SharedClock, window_s: u64) -> Self {
        let metrics = Metrics::default();
        let plugins = plugins::PluginRegistry::default();
        let families = plugins.families().clone();
        metrics.register(
            "plugin_calls",
            "Calls of each operator plugin by event and outcome (approved, modified, denied, \
             error, timeout, refused; skipped: a failure of an ignorable plugin, also counted \
             under its outcome, or a call an open breaker spared; dropped: a claimed notification \
             the full queue had no room for; short_circuited: a call not made, its breaker open)",
            families.calls,
        );
        metrics.register(
            "plugin_breaker_state",
            "Each operator plugin's circuit breaker: 0 closed, 1 half-open (one trial call), 2 open",
            families.breaker_state,
        );
        metrics.register(
            "plugin_breaker_trips",
            "Times each operator plugin's circuit breaker opened",
            families.breaker_trips,
        );
        metrics.register(
            "plugin_call_duration_seconds",
            "Duration of each call of an operator plugin",
            families.duration,
        );
        let rebalance = RebalanceStats::default();
        metrics.register(
            "rebalance_plans",
            "Rebalancing plans made (POST /v1/rebalance/plan; dry runs, nothing moved)",
            rebalance.plans.clone(),
        );
        metrics.register(
            "rebalance_moves_planned",
            "Live migrations in the rebalancing plans made",
            rebalance.moves.clone(),
        );
        metrics.register(
            "rebalance_replans",
            "Rebalancing plans made again because the request's base revision was stale",
            rebalance.replans.clone(),
        );
        metrics.register(
            "rebalance_refusals",
            "Rebalancing plan requests refused, by reason (invalid_request, unknown_hosts, \
             no_usage, stale_plan)",
            rebalance.refusals.clone(),
        );
        Stats {
            clock,
            window_ms: (window_s.max(1) * 1000) as i64,
            metrics,
            backends: Mutex::new(BTreeMap::new()),
            plugins,
            rebalance,
            expired_claims: Default::default(),
        }
    }

    /// The figures of plugin `name` in the chain of `event`, created on first use; they
    /// survive reloads of the chains.
    pub fn plugin(&self, event: &str, name: &str) -> Arc<PluginStats> {
        self.plugins.get(event, name)
    }

    /// The rebalancing planner's figures.
    pub fn rebalance(&self) -> &RebalanceStats {
        &self.rebalance
    }

    /// `{"<event>": {"<plugin>": {...}}}` for every plugin called or configured since start.
    pub fn plugins_json(&self) -> Value {
        self.plugins.to_json()
    }

    /// The statistics of `backend`, created on first use; they survive backend switches.
    pub fn backend(&self, backend: &str) -> Arc<BackendStats> {
        let mut map = self.backends.lock();
        map.entry(backend.to_string())
            .or_insert_with(|| {
                Arc::new(BackendStats {
                    name: backend.to_string(),
                    clock: self.clock.clone(),
                    metrics: self.metrics.backend(backend),
                    inner: Mutex::new(Inner {
                        total: Counts::default(),
                        latency_us: histogram(),
                        decide_us: histogram(),
                        claim_us: histogram(),
                        window: Window::new(self.window_ms),
                        batch: batch::BatchTotals::default(),
                    }),
                    params: Mutex::new(Map::new()),
                })
            })
            .clone()
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Counts `n` claims released by their TTL, here and on `/metrics`.
    pub fn add_expired_claims(&self, n: u64) {
        self.expired_claims
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        self.metrics.expired_claims.inc_by(n);
    }

    /// Claims released by their TTL since start (`/v1/stats`' `expired_claims`).
    pub fn expired_claims(&self) -> u64 {
        self.expired_claims
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `{"backends": {"<name>": {...}}}` for every backend seen.
    pub fn backends_json(&self) -> Map<String, Value> {
        let map = self.backends.lock().clone();
        map.iter().map(|(k, v)| (k.clone(), v.to_json())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avoidable_ratio_leaves_out_what_no_scheduler_could_place() {
        let mut c = Counts {
            attempts: 1,
            ..Counts::default()
        };
        c.decline(DeclineCause::ClaimConflict, true);
        assert_eq!((c.decline_ratio(), c.avoidable_decline_ratio()), (0.5, 0.5));
        c.decline(DeclineCause::NoValidHost, false);
        assert_eq!(c.by_cause[DeclineCause::NoValidHost as usize], 1);
        assert_eq!(c.decline_ratio(), 2.0 / 3.0);
        assert_eq!(c.avoidable_decline_ratio(), 0.5, "unmoved by nothing-fits");
        // APSR: two empty samples, then a fitting host was found: both avoidable.
        let mut apsr = Counts::default();
        apsr.decline(DeclineCause::EmptySample, false);
        apsr.decline(DeclineCause::EmptySample, false);
        apsr.attempts += 1;
        apsr.avoidable += 2;
        assert_eq!(apsr.avoidable_decline_ratio(), 2.0 / 3.0);
        assert_eq!(Counts::default().avoidable_decline_ratio(), 0.0);
    }
}
