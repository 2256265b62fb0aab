//! The Prometheus registry, named after kube-scheduler's metrics and Prometheus' conventions
//! (base units, `_total` counters, `_seconds` histograms, one family per quantity with the
//! variants as labels). README "Metrics" lists every family.
//!
//! - `parasol_schedule_attempts_total{backend,result}`: instances asked to be placed, by
//!   `result` = `scheduled` | `unschedulable` (NoValidHost) | `error` (the ledger failed).
//! - `parasol_scheduling_attempt_duration_seconds{backend,result}`: the whole call.
//! - `parasol_scheduling_algorithm_duration_seconds{backend}`: the decision (the call less its
//!   claims: reads, filters, ranking).
//! - `parasol_claim_duration_seconds{backend}`: each claim (in the ledger, and in Placement).
//! - `parasol_placement_attempts_total{backend}`, `parasol_declines_total{backend,cause}`,
//!   `parasol_avoidable_declines_total{backend}`: the papers' attempts and declines, by cause.
//! - `parasol_queries_total{backend}`: host states read.
//! - `parasol_sorted_walks_total{backend}`, `parasol_sorted_scans_total{backend}`: rankings of
//!   a snapshot answered by the sorted walk, and by reading every host;
//!   `parasol_sorted_walks_skipped_total{backend}`: of the scans, those that did not try the
//!   walk because walks had been giving up.
//! - `parasol_batch_rounds_total{backend}`, `parasol_batch_size{backend}`,
//!   `parasol_batch_solve_duration_seconds{backend}`, `parasol_batch_unscheduled_total{backend}`,
//!   `parasol_batch_fallbacks_total{backend,reason}`: batch placement (`[batch]`).
//! - `parasol_notifications_total{kind}`, the broker and Placement sync series, and what the
//!   service registers at start: the RPC server's `parasol_rpc_messages_total{outcome}` and
//!   the ledger's commits.

use super::{BatchFallback, BatchRound, Counts, DeclineCause};
use parking_lot::Mutex;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Metric, Registry};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BackendLabel {
    pub backend: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub backend: String,
    /// `scheduled`, `unschedulable` or `error`.
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CauseLabel {
    pub backend: String,
    /// A [`DeclineCause`] name.
    pub cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub backend: String,
    /// A [`BatchFallback`] name.
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

/// 50 µs … 6.5 s, doubling: decisions take tens of microseconds, a claim in a loaded
/// PostgreSQL or Placement up to seconds.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.00005, 2.0, 18))
}

/// 2 … 8,192 instances, doubling.
fn size_histogram() -> Histogram {
    Histogram::new(exponential_buckets(2.0, 2.0, 13))
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Every metric Parasol exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Mutex<Registry>,
    schedule_attempts: Family<ResultLabel, Counter>,
    attempt_duration: Histograms<ResultLabel>,
    algorithm_duration: Histograms<BackendLabel>,
    claim_duration: Histograms<BackendLabel>,
    placement_attempts: Family<BackendLabel, Counter>,
    declines: Family<CauseLabel, Counter>,
    avoidable_declines: Family<BackendLabel, Counter>,
    queries: Family<BackendLabel, Counter>,
    sorted_walks: Family<BackendLabel, Counter>,
    sorted_scans: Family<BackendLabel, Counter>,
    sorted_walks_skipped: Family<BackendLabel, Counter>,
    batch_rounds: Family<BackendLabel, Counter>,
    batch_size: Histograms<BackendLabel>,
    batch_solve: Histograms<BackendLabel>,
    batch_unscheduled: Family<BackendLabel, Counter>,
    batch_fallbacks: Family<ReasonLabel, Counter>,
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
    /// Requests on provider trees by what became of Placement's allocation candidates
    /// (`found`, `none`, `refused`, `unreachable`, or `unsupported` without Placement's claims).
    placement_candidates: Family<KindLabel, Counter>,
    /// Requests with a NUMA topology or PCI requests, by outcome (`decided`: handed to
    /// `NUMATopologyFilter` and `PciPassthroughFilter`; `refused`: NoValidHost, unsupported).
    numa_pci_requests: Family<KindLabel, Counter>,
    /// Duration of each claim in Placement (`GET` and `PUT /allocations/{instance}`).
    pub placement_claim_seconds: Histogram,
    /// Moves whose source the ledger still holds (set when `/metrics` is read).
    pub held_moves: Gauge,
    /// Hosts whose usage exceeds what they can give in some class (set when `/metrics` is
    /// read): 0 unless an operator lowered an inventory under what runs there.
    pub oversubscribed_hosts: Gauge,
    /// Hosts by the state of their measured usage, `state` = `fresh`, `expired` (decided on
    /// their allocations) or `none` (set when `/metrics` is read).
    pub usage_hosts: Family<Vec<(String, String)>, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        let m = Metrics {
            registry: Mutex::new(Registry::with_prefix("parasol")),
            schedule_attempts: Family::default(),
            attempt_duration: Family::new_with_constructor(latency_histogram),
            algorithm_duration: Family::new_with_constructor(latency_histogram),
            claim_duration: Family::new_with_constructor(latency_histogram),
            placement_attempts: Family::default(),
            declines: Family::default(),
            avoidable_declines: Family::default(),
            queries: Family::default(),
            sorted_walks: Family::default(),
            sorted_scans: Family::default(),
            sorted_walks_skipped: Family::default(),
            batch_rounds: Family::default(),
            batch_size: Family::new_with_constructor(size_histogram),
            batch_solve: Family::new_with_constructor(latency_histogram),
            batch_unscheduled: Family::default(),
            batch_fallbacks: Family::default(),
            notifications: Family::default(),
            broker_connected: Gauge::default(),
            placement_sync_seconds: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            placement_sync_errors: Counter::default(),
            placement_hosts: Gauge::default(),
            expired_claims: Counter::default(),
            placement_repairs: Family::default(),
            placement_resyncs: Counter::default(),
            placement_candidates: Family::default(),
            numa_pci_requests: Family::default(),
            placement_claim_seconds: latency_histogram(),
            held_moves: Gauge::default(),
            oversubscribed_hosts: Gauge::default(),
            usage_hosts: Family::default(),
        };
        m.register_scheduling();
        m.register_placement();
        m.register_ranking();
        m
    }
}

impl Metrics {
    /// Registers how snapshot rankings were answered (README "Metrics").
    fn register_ranking(&self) {
        let help = "Snapshot rankings the sorted walk answered";
        self.register("sorted_walks", help, self.sorted_walks.clone());
        let help = "Snapshot rankings that read every host";
        self.register("sorted_scans", help, self.sorted_scans.clone());
        let help = "Snapshot rankings that read every host without trying the sorted walk, \
                    because walks had been giving up";
        self.register(
            "sorted_walks_skipped",
            help,
            self.sorted_walks_skipped.clone(),
        );
    }

    /// Registers the series of scheduling, host state and notifications.
    fn register_scheduling(&self) {
        let m = self;
        m.register(
            "usage_hosts",
            "Hosts by the state of their measured usage (fresh, expired: decided on allocations, none)",
            m.usage_hosts.clone(),
        );
        m.register(
            "held_moves",
            "Moves in progress whose source host still holds the instance's allocation",
            m.held_moves.clone(),
        );
        m.register(
            "oversubscribed_hosts",
            "Hosts whose usage exceeds their usable capacity in some class",
            m.oversubscribed_hosts.clone(),
        );
        m.register(
            "schedule_attempts",
            "Instances asked to be placed, by result (scheduled, unschedulable: NoValidHost, error)",
            m.schedule_attempts.clone(),
        );
        m.register(
            "scheduling_attempt_duration_seconds",
            "Duration of each select_destinations call, decision and claims",
            m.attempt_duration.clone(),
        );
        m.register(
            "scheduling_algorithm_duration_seconds",
            "Duration of each call's decision: the call less its claims",
            m.algorithm_duration.clone(),
        );
        m.register(
            "claim_duration_seconds",
            "Duration of each claim",
            m.claim_duration.clone(),
        );
        m.register(
            "placement_attempts",
            "Attempts: claims tried, empty APSR samples and nothing-fits (decline_ratio's denominator)",
            m.placement_attempts.clone(),
        );
        m.register(
            "declines",
            "Declined attempts by cause (claim_conflict, placement_conflict, stale_snapshot, empty_sample, no_valid_host)",
            m.declines.clone(),
        );
        m.register(
            "avoidable_declines",
            "Declines a fresh, serial scheduler would not have made",
            m.avoidable_declines.clone(),
        );
        m.register(
            "queries",
            "Host states read (ledger, snapshot or sample)",
            m.queries.clone(),
        );
        m.register(
            "batch_rounds",
            "Batches solved as one min-cost-flow assignment ([batch])",
            m.batch_rounds.clone(),
        );
        m.register(
            "batch_size",
            "Instances per solved batch",
            m.batch_size.clone(),
        );
        m.register(
            "batch_solve_duration_seconds",
            "Duration of each batch solve (network built and solved)",
            m.batch_solve.clone(),
        );
        m.register(
            "batch_unscheduled",
            "Instances a batch solve left unscheduled",
            m.batch_unscheduled.clone(),
        );
        m.register(
            "batch_fallbacks",
            "Calls placed one instance at a time although [batch] asked for a batch, by reason (too_large, solve_timeout, unscheduled, declined, unsupported)",
            m.batch_fallbacks.clone(),
        );
        m.register(
            "notifications",
            "Notifications by outcome",
            m.notifications.clone(),
        );
        m.register(
            "broker_connected",
            "1 while connected to RabbitMQ",
            m.broker_connected.clone(),
        );
    }

    /// Registers the series of Placement's syncs and claims, and of expired claims.
    fn register_placement(&self) {
        let m = self;
        m.register(
            "placement_sync_duration_seconds",
            "Duration of each Placement inventory sync",
            m.placement_sync_seconds.clone(),
        );
        m.register(
            "placement_sync_errors",
            "Placement syncs that failed",
            m.placement_sync_errors.clone(),
        );
        m.register(
            "placement_hosts",
            "Compute hosts in the last Placement sync",
            m.placement_hosts.clone(),
        );
        m.register(
            "expired_claims",
            "Claims released because nothing confirmed them within claim_ttl_s",
            m.expired_claims.clone(),
        );
        m.register(
            "placement_repairs",
            "Ledger allocations repaired from Placement's, by kind",
            m.placement_repairs.clone(),
        );
        m.register(
            "placement_resyncs",
            "Placement syncs run out of turn",
            m.placement_resyncs.clone(),
        );
        m.register(
            "placement_candidates",
            "Requests on provider trees by what became of Placement's allocation candidates",
            m.placement_candidates.clone(),
        );
        m.register(
            "numa_pci_requests",
            "Requests with a NUMA topology or PCI requests, by outcome (decided: handed to \
             NUMATopologyFilter and PciPassthroughFilter; refused: NoValidHost, unsupported)",
            m.numa_pci_requests.clone(),
        );
        m.register(
            "placement_claim_duration_seconds",
            "Duration of each claim in Placement (GET and PUT /allocations/{instance})",
            m.placement_claim_seconds.clone(),
        );
    }
}

/// The series of one backend, resolved once so recording is a few atomic adds.
#[derive(Debug, Clone)]
pub(super) struct BackendMetrics {
    scheduled: Counter,
    unschedulable: Counter,
    errors: Counter,
    /// Call durations by result, in the order scheduled, unschedulable, error.
    attempt_duration: [Histogram; 3],
    algorithm_duration: Histogram,
    claim_duration: Histogram,
    placement_attempts: Counter,
    declines: [Counter; DeclineCause::ALL.len()],
    avoidable_declines: Counter,
    queries: Counter,
    sorted_walks: Counter,
    sorted_scans: Counter,
    sorted_walks_skipped: Counter,
    pub(super) placement_claim: Histogram,
    batch_rounds: Counter,
    batch_size: Histogram,
    batch_solve: Histogram,
    batch_unscheduled: Counter,
    batch_fallbacks: [Counter; BatchFallback::ALL.len()],
}

impl BackendMetrics {
    pub(super) fn add(&self, d: &Counts, latency_us: Option<u64>) {
        self.scheduled.inc_by(d.placed);
        self.unschedulable.inc_by(d.no_valid_host);
        self.errors.inc_by(d.errors);
        self.placement_attempts.inc_by(d.attempts);
        for (counter, n) in self.declines.iter().zip(d.by_cause) {
            counter.inc_by(n);
        }
        self.avoidable_declines.inc_by(d.avoidable);
        self.queries.inc_by(d.queries);
        self.sorted_walks.inc_by(d.sorted_walks);
        self.sorted_scans.inc_by(d.sorted_scans);
        self.sorted_walks_skipped.inc_by(d.sorted_walks_skipped);
        if let Some(us) = latency_us {
            let result = if d.errors > 0 {
                2
            } else if d.no_valid_host > 0 {
                1
            } else {
                0
            };
            self.attempt_duration[result].observe(us as f64 / 1e6);
            self.algorithm_duration
                .observe(us.saturating_sub(d.claim_us) as f64 / 1e6);
        }
    }

    pub(super) fn claim(&self, us: u64) {
        self.claim_duration.observe(us as f64 / 1e6);
    }

    pub(super) fn batch_round(&self, r: &BatchRound) {
        self.batch_rounds.inc();
        self.batch_size.observe(r.size as f64);
        self.batch_solve.observe(r.solve_us as f64 / 1e6);
        self.batch_unscheduled.inc_by(r.unscheduled);
    }

    pub(super) fn batch_fallback(&self, reason: BatchFallback) {
        self.batch_fallbacks[reason as usize].inc();
    }
}

impl Metrics {
    pub(super) fn backend(&self, backend: &str) -> BackendMetrics {
        // `get_or_create` returns a read guard on its family: each one is released (cloned
        // out) before the next call on the same family, which may need the write lock.
        fn get<L, M, C>(family: &Family<L, M, C>, label: &L) -> M
        where
            L: Clone + std::hash::Hash + Eq,
            M: Clone,
            C: prometheus_client::metrics::family::MetricConstructor<M>,
        {
            family.get_or_create(label).clone()
        }
        let b = BackendLabel {
            backend: backend.to_string(),
        };
        let r = |result| ResultLabel {
            backend: backend.to_string(),
            result,
        };
        let results = ["scheduled", "unschedulable", "error"];
        BackendMetrics {
            scheduled: get(&self.schedule_attempts, &r(results[0])),
            unschedulable: get(&self.schedule_attempts, &r(results[1])),
            errors: get(&self.schedule_attempts, &r(results[2])),
            attempt_duration: results.map(|res| get(&self.attempt_duration, &r(res))),
            algorithm_duration: get(&self.algorithm_duration, &b),
            claim_duration: get(&self.claim_duration, &b),
            placement_attempts: get(&self.placement_attempts, &b),
            declines: DeclineCause::ALL.map(|cause| {
                let label = CauseLabel {
                    backend: backend.to_string(),
                    cause: cause.as_str(),
                };
                get(&self.declines, &label)
            }),
            avoidable_declines: get(&self.avoidable_declines, &b),
            queries: get(&self.queries, &b),
            sorted_walks: get(&self.sorted_walks, &b),
            sorted_scans: get(&self.sorted_scans, &b),
            sorted_walks_skipped: get(&self.sorted_walks_skipped, &b),
            placement_claim: self.placement_claim_seconds.clone(),
            batch_rounds: get(&self.batch_rounds, &b),
            batch_size: get(&self.batch_size, &b),
            batch_solve: get(&self.batch_solve, &b),
            batch_unscheduled: get(&self.batch_unscheduled, &b),
            batch_fallbacks: BatchFallback::ALL.map(|reason| {
                let label = ReasonLabel {
                    backend: backend.to_string(),
                    reason: reason.as_str(),
                };
                get(&self.batch_fallbacks, &label)
            }),
        }
    }

    /// Adds a metric of another part of the service (the RPC server's counters, the ledger's
    /// commits) under `parasol_<name>`.
    pub fn register(&self, name: &str, help: &str, metric: impl Metric) {
        self.registry.lock().register(name, help, metric);
    }

    /// Counts a notification outcome.
    pub fn notification(&self, kind: &str) {
        self.notifications_n(kind, 1);
    }

    /// Adds `n` to the notification counter of one kind (a consumer batch counts at once).
    pub fn notifications_n(&self, kind: &str, n: u64) {
        self.notifications
            .get_or_create(&KindLabel {
                kind: kind.to_string(),
            })
            .inc_by(n);
    }

    /// Sets the number of hosts whose measured usage is in `state`.
    pub fn set_usage_hosts(&self, state: &str, hosts: usize) {
        self.usage_hosts
            .get_or_create(&vec![("state".to_string(), state.to_string())])
            .set(hosts as i64);
    }

    /// The counter of requests on provider trees whose candidates came out as `kind`.
    pub fn placement_candidates(&self, kind: &str) -> Counter {
        self.placement_candidates
            .get_or_create(&KindLabel {
                kind: kind.to_string(),
            })
            .clone()
    }

    /// The counter of requests with a NUMA topology or PCI requests whose outcome was `kind`.
    pub fn numa_pci_requests(&self, kind: &str) -> Counter {
        self.numa_pci_requests
            .get_or_create(&KindLabel {
                kind: kind.to_string(),
            })
            .clone()
    }

    /// The repair counter of one kind.
    pub fn placement_repairs(&self, kind: &str) -> Counter {
        self.placement_repairs
            .get_or_create(&KindLabel {
                kind: kind.to_string(),
            })
            .clone()
    }

    /// The exposition of every metric, in the OpenMetrics text format Prometheus scrapes.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry.lock());
        out
    }
}
