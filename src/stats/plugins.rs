//! Per-plugin figures (docs/plugins.md §6): for each plugin of each event chain, the calls and
//! what came of them — approved, modified, denied, error, timeout, refused — the failures
//! skipped because the plugin is `ignorable`, the `claimed` notifications dropped because its
//! queue was full, the latency of its calls, and its circuit breaker (state, trips, calls it
//! spared). The same counters feed `/v1/stats` (`plugins`) and `/metrics`
//! (`parasol_plugin_calls_total`, `parasol_plugin_call_duration_seconds`,
//! `parasol_plugin_breaker_state`, `parasol_plugin_breaker_trips_total`).

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram as PromHistogram};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// What one call of a plugin came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PluginOutcome {
    /// The plugin let the request (or the candidates) through unchanged.
    Approved,
    /// It added constraints (`select`), removed hosts (`filter`) or gave weights (`weigh`).
    Modified,
    /// It denied the request (`select`) or removed every candidate (`filter`).
    Denied,
    /// It could not be reached, answered an error status or a body that is not its schema.
    Error,
    /// It did not answer within its `timeout_ms`.
    Timeout,
    /// It answered a change it may not make (a `select` plugin changing the flavor, a
    /// `filter` plugin naming a host it was not offered, …).
    Refused,
}

impl PluginOutcome {
    pub const ALL: [PluginOutcome; 6] = [
        PluginOutcome::Approved,
        PluginOutcome::Modified,
        PluginOutcome::Denied,
        PluginOutcome::Error,
        PluginOutcome::Timeout,
        PluginOutcome::Refused,
    ];

    /// The name in `/v1/stats` (plural) and the `outcome` label of `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginOutcome::Approved => "approved",
            PluginOutcome::Modified => "modified",
            PluginOutcome::Denied => "denied",
            PluginOutcome::Error => "error",
            PluginOutcome::Timeout => "timeout",
            PluginOutcome::Refused => "refused",
        }
    }

    fn json_key(self) -> &'static str {
        match self {
            PluginOutcome::Approved => "approvals",
            PluginOutcome::Modified => "modifications",
            PluginOutcome::Denied => "denials",
            PluginOutcome::Error => "errors",
            PluginOutcome::Timeout => "timeouts",
            PluginOutcome::Refused => "refused",
        }
    }

    /// Whether the plugin failed (the call then skips it or fails, per `ignorable`).
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            PluginOutcome::Error | PluginOutcome::Timeout | PluginOutcome::Refused
        )
    }
}

/// Where a plugin's circuit breaker stands (docs/plugins.md §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go to the plugin.
    Closed = 0,
    /// The cool-down has passed: one trial call goes to the plugin, the others are spared.
    HalfOpen = 1,
    /// Too many failures in a row: the plugin is not called until its cool-down has passed.
    Open = 2,
}

impl BreakerState {
    /// The name in `/v1/stats`; `/metrics` has the number (0, 1, 2).
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::HalfOpen => "half_open",
            BreakerState::Open => "open",
        }
    }

    fn from_u8(v: u8) -> BreakerState {
        match v {
            1 => BreakerState::HalfOpen,
            2 => BreakerState::Open,
            _ => BreakerState::Closed,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct PluginLabel {
    plugin: String,
    event: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OutcomeLabel {
    plugin: String,
    event: String,
    /// A [`PluginOutcome`] name, `skipped` (a failure of an ignorable plugin, or a call its
    /// open breaker spared), `dropped` (a `claimed` notification the full queue had no room
    /// for) or `short_circuited` (a call not made because its breaker was open).
    outcome: &'static str,
}

type Histograms = Family<PluginLabel, PromHistogram, fn() -> PromHistogram>;

/// 100 µs … 13 s, doubling: a plugin on loopback answers in a fraction of a millisecond, a
/// remote one or a timed-out one in up to its `timeout_ms`.
fn call_histogram() -> PromHistogram {
    PromHistogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// The Prometheus families of every plugin, registered once with the service's metrics.
#[derive(Clone, Debug)]
pub(super) struct PluginFamilies {
    pub(super) calls: Family<OutcomeLabel, Counter>,
    pub(super) duration: Histograms,
    pub(super) breaker_state: Family<PluginLabel, Gauge>,
    pub(super) breaker_trips: Family<PluginLabel, Counter>,
}

impl Default for PluginFamilies {
    fn default() -> Self {
        PluginFamilies {
            calls: Family::default(),
            duration: Family::new_with_constructor(call_histogram),
            breaker_state: Family::default(),
            breaker_trips: Family::default(),
        }
    }
}

/// The figures of one plugin in one event's chain. Every recorder takes `&self`.
#[derive(Debug)]
pub struct PluginStats {
    outcomes: [AtomicU64; PluginOutcome::ALL.len()],
    skipped: AtomicU64,
    dropped: AtomicU64,
    short_circuits: AtomicU64,
    trips: AtomicU64,
    breaker: AtomicU8,
    // parking_lot's lock: held for one histogram record, never across an await.
    latency_us: Mutex<Histogram<u64>>,
    counters: [Counter; PluginOutcome::ALL.len()],
    skipped_counter: Counter,
    dropped_counter: Counter,
    short_circuit_counter: Counter,
    trips_counter: Counter,
    breaker_gauge: Gauge,
    duration: PromHistogram,
}

impl PluginStats {
    /// Records one call: its outcome, whether the call went on without the plugin (a failure
    /// of an `ignorable` one), and how long it took.
    pub fn record(&self, outcome: PluginOutcome, skipped: bool, micros: u64) {
        let i = outcome as usize;
        self.outcomes[i].fetch_add(1, Ordering::Relaxed);
        self.counters[i].inc();
        if skipped {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            self.skipped_counter.inc();
        }
        let _ = self.latency_us.lock().record(micros.max(1));
        self.duration.observe(micros as f64 / 1e6);
    }

    /// Calls of this outcome so far.
    pub fn count(&self, outcome: PluginOutcome) -> u64 {
        self.outcomes[outcome as usize].load(Ordering::Relaxed)
    }

    /// Counts a notification this plugin was not told: its queue was full.
    pub fn record_drop(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        self.dropped_counter.inc();
    }

    /// Notifications dropped before this plugin was told.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Failures the call went on without.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// Counts a call not made because the breaker was open; `skipped` when the call went on
    /// without the plugin (an ignorable one).
    pub fn record_short_circuit(&self, skipped: bool) {
        self.short_circuits.fetch_add(1, Ordering::Relaxed);
        self.short_circuit_counter.inc();
        if skipped {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            self.skipped_counter.inc();
        }
    }

    /// Calls not made because the breaker was open.
    pub fn short_circuits(&self) -> u64 {
        self.short_circuits.load(Ordering::Relaxed)
    }

    /// Sets the breaker's state; a move to `Open` from another state is a trip.
    pub fn set_breaker(&self, state: BreakerState) {
        let before = self.breaker.swap(state as u8, Ordering::Relaxed);
        self.breaker_gauge.set(state as i64);
        if state == BreakerState::Open && before != BreakerState::Open as u8 {
            self.trips.fetch_add(1, Ordering::Relaxed);
            self.trips_counter.inc();
        }
    }

    /// The breaker's state.
    pub fn breaker(&self) -> BreakerState {
        BreakerState::from_u8(self.breaker.load(Ordering::Relaxed))
    }

    /// Times the breaker opened.
    pub fn trips(&self) -> u64 {
        self.trips.load(Ordering::Relaxed)
    }

    /// `{"calls", "approvals", "modifications", "denials", "errors", "timeouts", "refused",
    /// "skipped", "dropped", "short_circuited", "breaker", "trips", "latency_ms": {p50, p90,
    /// p99, max, count}}`.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        let calls: u64 = PluginOutcome::ALL.iter().map(|o| self.count(*o)).sum();
        m.insert("calls".into(), json!(calls));
        for o in PluginOutcome::ALL {
            m.insert(o.json_key().into(), json!(self.count(o)));
        }
        m.insert("skipped".into(), json!(self.skipped()));
        m.insert("dropped".into(), json!(self.dropped()));
        m.insert("short_circuited".into(), json!(self.short_circuits()));
        m.insert("breaker".into(), json!(self.breaker().as_str()));
        m.insert("trips".into(), json!(self.trips()));
        m.insert(
            "latency_ms".into(),
            super::percentiles(&self.latency_us.lock()),
        );
        Value::Object(m)
    }
}

/// Every plugin seen since start, by event then name; they survive reloads.
#[derive(Debug, Default)]
pub(super) struct PluginRegistry {
    families: PluginFamilies,
    plugins: Mutex<BTreeMap<(String, String), Arc<PluginStats>>>,
}

impl PluginRegistry {
    pub(super) fn families(&self) -> &PluginFamilies {
        &self.families
    }

    pub(super) fn get(&self, event: &str, name: &str) -> Arc<PluginStats> {
        let mut map = self.plugins.lock();
        map.entry((event.to_string(), name.to_string()))
            .or_insert_with(|| {
                let label = |outcome| OutcomeLabel {
                    plugin: name.to_string(),
                    event: event.to_string(),
                    outcome,
                };
                let plugin = PluginLabel {
                    plugin: name.to_string(),
                    event: event.to_string(),
                };
                // Each series is cloned out of its family's read guard inside `count`, so no
                // guard is held when the next `get_or_create` may need the write lock.
                let count = |outcome| self.families.calls.get_or_create(&label(outcome)).clone();
                let duration = self.families.duration.get_or_create(&plugin).clone();
                Arc::new(PluginStats {
                    outcomes: Default::default(),
                    skipped: AtomicU64::new(0),
                    dropped: AtomicU64::new(0),
                    short_circuits: AtomicU64::new(0),
                    trips: AtomicU64::new(0),
                    breaker: AtomicU8::new(BreakerState::Closed as u8),
                    latency_us: Mutex::new(super::histogram()),
                    counters: PluginOutcome::ALL.map(|o| count(o.as_str())),
                    skipped_counter: count("skipped"),
                    dropped_counter: count("dropped"),
                    short_circuit_counter: count("short_circuited"),
                    trips_counter: self.families.breaker_trips.get_or_create(&plugin).clone(),
                    breaker_gauge: self.families.breaker_state.get_or_create(&plugin).clone(),
                    duration,
                })
            })
            .clone()
    }

    /// `{"<event>": {"<plugin>": {...}}}`.
    pub(super) fn to_json(&self) -> Value {
        let map = self.plugins.lock().clone();
        let mut out: Map<String, Value> = Map::new();
        for ((event, name), stats) in map {
            let entry = out
                .entry(event)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(names) = entry {
                names.insert(name, stats.to_json());
            }
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_s_outcomes_skips_and_latency_are_counted_per_event_and_name() {
        let registry = PluginRegistry::default();
        let select = registry.get("select", "tenant");
        select.record(PluginOutcome::Approved, false, 120);
        select.record(PluginOutcome::Timeout, true, 50_000);
        assert!(Arc::ptr_eq(&select, &registry.get("select", "tenant")));
        registry
            .get("filter", "tenant")
            .record(PluginOutcome::Denied, false, 10);
        let json = registry.to_json();
        let s = &json["select"]["tenant"];
        assert_eq!(s["calls"], 2);
        assert_eq!(s["approvals"], 1);
        assert_eq!(s["timeouts"], 1);
        assert_eq!(s["skipped"], 1);
        assert_eq!(s["latency_ms"]["count"], 2);
        assert_eq!(json["filter"]["tenant"]["denials"], 1);
        assert_eq!(json["filter"]["tenant"]["calls"], 1);
        let skipped = registry
            .families()
            .calls
            .get_or_create(&OutcomeLabel {
                plugin: "tenant".into(),
                event: "select".into(),
                outcome: "skipped",
            })
            .get();
        assert_eq!(skipped, 1);
    }
}
