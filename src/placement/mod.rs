//! Inventory sync from OpenStack Placement: real compute hosts' inventories (and the
//! allocations of instances that existed before Parasol) seeded into the ledger at start and
//! refreshed every `[placement] sync_interval_s`. A Placement outage keeps the last known
//! state and shows in `/healthz` and `/metrics`.
//!
//! # Layout
//! - `settings`: the `[placement]` section.
//! - `client`: Keystone v3 password auth (or a static token, or noauth2) and the reads.
//! - `sync`: one sync, Placement → ledger (providers whose generation changed, or all).

mod claims;
mod client;
mod consistency;
mod ratios;
mod settings;
mod sync;

pub use claims::{PlacementClaim, PlacementClaims, CONSUMER_GENERATION_VERSION};
pub use client::{Listed, Listing, PlacementClient};
pub use consistency::{provider_usages, reconcile, Repairs};
pub use ratios::{Penalty, RatioManager, RatioMetrics, RatioSettings};
pub use settings::{AuthKind, PlacementSettings};
pub use sync::{sync, sync_once, ProviderAllocations, ProviderCache, SyncReport};

use crate::clock::SharedClock;
use crate::domain::{HostId, Resources};
use crate::ledger::{Ledger, LedgerError, Settled};
use crate::stats::Stats;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Why a sync failed.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    #[error("request to Placement failed: {}", crate::redact::with_cause(.0))]
    Http(reqwest::Error),
    #[error("{} answered {status}: {body}", crate::redact::redact_url(url))]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("authentication failed: {0}")]
    Auth(String),
    #[error("[placement] {0}")]
    Client(#[from] crate::auth::ClientError),
    #[error("authentication failed: {0}")]
    Keystone(#[from] crate::auth::KeystoneError),
    #[error("ledger: {0}")]
    Ledger(#[from] LedgerError),
    #[error("Placement's provider listing does not parse: {0}")]
    Listing(serde_json::Error),
}

impl PlacementError {
    /// Placement answered `status` at `path` where the caller expected another: the first 300
    /// characters of its answer kept.
    pub(crate) fn status(path: impl Into<String>, status: u16, body: &Value) -> Self {
        PlacementError::Status {
            url: path.into(),
            status,
            body: body.to_string().chars().take(300).collect(),
        }
    }
}

/// The sync's state for `/healthz` (a `parking_lot` lock, held only to copy fields).
#[derive(Debug, Default)]
pub struct PlacementStatus {
    inner: Mutex<StatusInner>,
}

#[derive(Debug, Default)]
struct StatusInner {
    enabled: bool,
    reachable: Option<bool>,
    last_success_ms: Option<i64>,
    last_error: Option<String>,
    hosts: usize,
    imported_allocations: usize,
    released_allocations: usize,
    syncs: u64,
    failures: u64,
    repairs: Repairs,
    /// Each provider's allocations in Placement at the last sync, by provider uuid.
    allocations: Arc<std::collections::BTreeMap<String, Arc<ProviderAllocations>>>,
    /// Providers listed, and read, by the last sync; whether it read every one.
    listed_providers: usize,
    read_providers: usize,
    full: bool,
}

impl PlacementStatus {
    fn enable(&self) {
        self.inner.lock().enabled = true;
    }

    fn record(&self, outcome: &Result<SyncReport, PlacementError>, now_ms: i64) {
        let mut s = self.inner.lock();
        match outcome {
            Ok(report) => {
                s.reachable = Some(true);
                s.last_success_ms = Some(now_ms);
                s.last_error = None;
                s.hosts = report.hosts;
                s.imported_allocations += report.imported_allocations;
                s.released_allocations += report.released_allocations;
                s.syncs += 1;
                s.repairs.add(&report.repairs);
                s.allocations = report.placement_allocations.clone();
                s.listed_providers = report.listed_providers;
                s.read_providers = report.read_providers;
                s.full = report.full;
            }
            Err(e) => {
                s.reachable = Some(false);
                s.last_error = Some(e.to_string());
                s.failures += 1;
            }
        }
    }

    /// Whether the last sync failed (the ledger keeps the state of the last good one).
    pub fn is_stale(&self) -> bool {
        let s = self.inner.lock();
        s.enabled && s.reachable != Some(true)
    }

    /// The ledger repairs made since start.
    pub fn repairs(&self) -> Repairs {
        self.inner.lock().repairs
    }

    /// A provider's usage in Placement at the last sync (`None`: not read, or sync off).
    pub fn usage(&self, provider: &str) -> Option<std::collections::BTreeMap<String, i64>> {
        let consumers = self.inner.lock().allocations.get(provider)?.clone();
        Some(consistency::usage_of(&consumers))
    }

    pub fn to_json(&self) -> Value {
        let s = self.inner.lock();
        if !s.enabled {
            return json!({"enabled": false});
        }
        json!({
            "enabled": true,
            "reachable": s.reachable,
            "state": if s.reachable == Some(true) { "synced" } else { "stale" },
            "last_success_ms": s.last_success_ms,
            "last_error": s.last_error,
            "hosts": s.hosts,
            "imported_allocations": s.imported_allocations,
            "released_allocations": s.released_allocations,
            "syncs": s.syncs,
            "failures": s.failures,
            "last_sync": {
                "listed_providers": s.listed_providers,
                "read_providers": s.read_providers,
                "full": s.full,
            },
            "repairs": s.repairs,
        })
    }
}

/// A sync asked for out of turn — by a request that found no candidate host, or a claim
/// Placement refused — at most one per `[placement] resync_min_interval_s` (by the injected
/// clock); the periodic sync loop takes it at once. Syncs are numbered as they start, so a
/// request can wait for the sync that answers it ([`Resync::ask`], [`Resync::wait_for`]).
pub struct Resync {
    notify: tokio::sync::Notify,
    last_ms: Mutex<Option<i64>>,
    min_interval_ms: i64,
    clock: SharedClock,
    /// Syncs started so far.
    started: std::sync::atomic::AtomicU64,
    /// The number of the last sync finished (successful or not).
    finished: tokio::sync::watch::Sender<u64>,
    /// The sync the last accepted request waits for.
    pending: Mutex<u64>,
    /// Nova's compute nodes the table lacked when the last sync finished: Placement had no
    /// provider for them then, so a request does not wait for a sync because of them.
    unloaded_at_sync: Mutex<Vec<String>>,
    /// The last answer of [`Resync::node_since_last_sync`] with the table generation and
    /// records it was computed from (cleared by each sync), so that a call costs no walk
    /// over every node while neither changes.
    since_cache: Mutex<Option<(u64, Arc<crate::table::NodeRecords>, bool)>>,
}

impl Resync {
    pub fn new(min_interval_s: f64, clock: SharedClock) -> Self {
        Resync {
            notify: tokio::sync::Notify::new(),
            last_ms: Mutex::new(None),
            min_interval_ms: (min_interval_s * 1000.0).round() as i64,
            clock,
            started: std::sync::atomic::AtomicU64::new(0),
            finished: tokio::sync::watch::Sender::new(0),
            pending: Mutex::new(0),
            unloaded_at_sync: Mutex::new(Vec::new()),
            since_cache: Mutex::new(None),
        }
    }

    /// True when Nova's records name a compute node that the table lacks and that the last
    /// finished sync did not see lacking either: a node that registered since, whose
    /// provider the next sync loads (Nova's scheduler would see it on this call).
    pub fn node_since_last_sync(&self, table: &crate::table::HostTable) -> bool {
        let Some(records) = table.records() else {
            return false;
        };
        let generation = table.generation();
        if let Some((g, r, answer)) = &*self.since_cache.lock() {
            if *g == generation && Arc::ptr_eq(r, &records) {
                return *answer;
            }
        }
        let (generation, records, missing) = table.nodes_not_loaded();
        let answer = {
            let known = self.unloaded_at_sync.lock();
            missing.iter().any(|u| known.binary_search(u).is_err())
        };
        if let Some(records) = records {
            *self.since_cache.lock() = Some((generation, records, answer));
        }
        answer
    }

    /// Records what the table lacks of Nova's nodes after a sync, of the nodes Nova's
    /// records named when the sync began (`at_start`): a node that appeared in the records
    /// during the sync may have registered in Placement after the sync read it, so a request
    /// still waits for the next sync because of it.
    pub(crate) fn note_unloaded(
        &self,
        table: &crate::table::HostTable,
        at_start: Option<&crate::table::NodeRecords>,
    ) {
        let mut missing = table.nodes_not_loaded().2;
        missing.retain(|u| at_start.is_some_and(|r| r.by_uuid.contains_key(u)));
        *self.unloaded_at_sync.lock() = missing;
        *self.since_cache.lock() = None;
    }

    /// Asks for a sync (as [`Resync::request`]) and names the sync that will see Placement as
    /// it is now: one that starts after this call. When the request is refused (within the
    /// minimum interval), the sync an earlier accepted request waits for, if it has not
    /// finished; else `None`.
    pub fn ask(&self) -> Option<u64> {
        let next = self.started.load(std::sync::atomic::Ordering::Acquire) + 1;
        if self.request() {
            *self.pending.lock() = next;
            return Some(next);
        }
        let pending = *self.pending.lock();
        (pending > *self.finished.borrow()).then_some(pending)
    }

    /// Waits until sync number `sync` has finished (true), or `timeout_ms` has passed by the
    /// injected clock (false).
    pub async fn wait_for(&self, sync: u64, timeout_ms: u64) -> bool {
        let mut finished = self.finished.subscribe();
        tokio::select! {
            done = finished.wait_for(|f| *f >= sync) => done.is_ok(),
            _ = self.clock.sleep_ms(timeout_ms) => false,
        }
    }

    /// A sync starts: its number.
    fn begin(&self) -> u64 {
        self.started
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
            + 1
    }

    /// Sync number `sync` has finished.
    fn end(&self, sync: u64) {
        self.finished.send_modify(|f| *f = (*f).max(sync));
    }

    /// Asks for a sync; false (and nothing happens) within the minimum interval of the last
    /// one asked for.
    pub fn request(&self) -> bool {
        let now = self.clock.now_ms();
        let mut last = self.last_ms.lock();
        if last.is_some_and(|l| now - l < self.min_interval_ms) {
            return false;
        }
        *last = Some(now);
        drop(last);
        self.notify.notify_one();
        true
    }

    /// Waits for a request (one made while nobody waited is kept for the next wait).
    pub async fn requested(&self) {
        self.notify.notified().await
    }
}

/// What the sync works with.
#[derive(Clone)]
pub struct SyncDeps {
    pub ledger: Ledger,
    pub clock: SharedClock,
    pub stats: Arc<Stats>,
    pub status: Arc<PlacementStatus>,
    /// Syncs asked for out of turn.
    pub resync: Arc<Resync>,
    /// Flex's allocation ratios, managed after each sync (`[flex] manage_allocation_ratio`).
    pub ratios: Option<Arc<RatioManager>>,
}

/// The periodic sync, when `[placement] enabled`: one full sync now, then one every
/// `sync_interval_s` (read at start; changing it needs a restart), until `shutdown`. A sync
/// in progress at shutdown runs to its end.
pub async fn run_sync(settings: PlacementSettings, deps: SyncDeps, shutdown: CancellationToken) {
    if !settings.enabled {
        return;
    }
    deps.status.enable();
    let interval_ms = (settings.sync_interval_s * 1000.0).round() as u64;
    let client = match PlacementClient::new(settings.clone(), deps.clock.clone()) {
        Ok(client) => client,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the Placement client; no inventory sync");
            deps.status.record(&Err(e), 0);
            return;
        }
    };
    // Only a sync that runs releases the parts an evacuation keeps and reads failed
    // operations: said once the client exists.
    deps.ledger.table().set_follows_placement();
    if settings.claims {
        deps.ledger.table().failed().enable();
    }
    // Consumers the last consistency check found missing from Placement.
    let mut missing = std::collections::HashSet::new();
    let mut providers = Rounds::new(&settings);
    let timeout_ms = (settings.timeout_s * 1000.0).round() as i64;
    while !shutdown.is_cancelled() {
        let sync = deps.resync.begin();
        let records_at_start = deps.ledger.table().records();
        run_one(&deps, &client, &settings, &mut providers, &mut missing).await;
        deps.resync
            .note_unloaded(deps.ledger.table(), records_at_start.as_deref());
        deps.resync.end(sync);
        // A compute service announced in the last `timeout_s` whose node this sync did not
        // load yet (nova-compute creates its node record and provider right after the
        // service): look again soon rather than at the interval.
        let now = deps.clock.now_ms();
        let chasing = !deps
            .ledger
            .table()
            .announced_not_loaded(now - timeout_ms)
            .is_empty();
        let wait_ms = if chasing {
            interval_ms.min(ANNOUNCED_CHASE_MS)
        } else {
            interval_ms
        };
        let next_ms = deps.clock.now_ms() + wait_ms as i64;
        loop {
            let left = (next_ms - deps.clock.now_ms()).max(0) as u64;
            tokio::select! {
                _ = deps.clock.sleep_ms(left) => break,
                _ = deps.resync.requested() => {
                    deps.stats.metrics().placement_resyncs.inc();
                    tracing::info!("Placement sync asked for by a request");
                    break;
                }
                _ = deps.ledger.table().announcement() => {
                    deps.stats.metrics().placement_resyncs.inc();
                    tracing::info!("Placement sync for a compute service created, updated or deleted (service.create, .update, .delete)");
                    break;
                }
                // Read between syncs, without a sync: one request per failed operation.
                _ = deps.ledger.table().failed().waiting() => check_failed(&deps, &client).await,
                _ = shutdown.cancelled() => return,
            }
        }
    }
}

/// The failed operations waiting (`table::FailedChecks`): each instance's allocations read
/// in Placement (`GET /allocations/{consumer}`, as Nova reads them) and its claim settled by
/// what Placement holds ([`Ledger::settle_failed`]). Only when Parasol claims in Placement
/// (nothing is queued otherwise): without, Placement never had the claim and its absence there
/// says nothing.
async fn check_failed(deps: &SyncDeps, client: &PlacementClient) {
    for (instance, at_ms) in deps.ledger.table().failed().take() {
        let allocations = match client.consumer_allocations(&instance).await {
            Ok(allocations) => allocations,
            Err(e) => {
                tracing::warn!(%instance, error = %e, "cannot read a failed operation's allocations in Placement; its claim is left to the TTL and the repair");
                continue;
            }
        };
        let table = deps.ledger.table();
        // A provider the table lacks (a child in a tree) is no host of a claim.
        let placed: Vec<(HostId, Resources)> = allocations
            .iter()
            .filter_map(|(uuid, a)| Some((table.id_of_uuid(uuid)?, sync::demand_of(&a.resources))))
            .collect();
        match deps.ledger.settle_failed(&instance, &placed, at_ms).await {
            Ok(Some(settled)) => {
                let kind = match settled {
                    Settled::MoveUndone { .. } | Settled::SourceRestored { .. } => "failed_move",
                    Settled::Released { .. } => "failed_build",
                };
                deps.stats.metrics().placement_repairs(kind).inc();
                tracing::info!(%instance, ?settled, "a failed operation's claim follows Placement");
            }
            Ok(None) => {
                tracing::debug!(%instance, "a failed operation left nothing to settle");
            }
            Err(e) => {
                tracing::warn!(%instance, error = %e, "cannot settle a failed operation's claim");
            }
        }
    }
}

/// How soon the sync looks again for the node of a compute service announced by
/// `service.create` that the last sync did not find (at most `[placement] timeout_s` after
/// the announcement, then at the interval again).
const ANNOUNCED_CHASE_MS: u64 = 500;

/// What the periodic sync keeps between rounds: what it read of each provider, and when it
/// last read every one.
struct Rounds {
    cache: ProviderCache,
    last_full_ms: Option<i64>,
    full_interval_ms: i64,
}

impl Rounds {
    fn new(settings: &PlacementSettings) -> Self {
        Rounds {
            cache: ProviderCache::default(),
            last_full_ms: None,
            full_interval_ms: (settings.full_sync_interval_s * 1000.0).round() as i64,
        }
    }

    /// Whether the sync starting at `now_ms` reads every provider.
    fn full_due(&self, now_ms: i64) -> bool {
        self.last_full_ms
            .is_none_or(|last| now_ms - last >= self.full_interval_ms)
    }
}

/// One sync with its metrics, log line and status update; with claims, the consistency check
/// that repairs the ledger from Placement's allocations.
async fn run_one(
    deps: &SyncDeps,
    client: &PlacementClient,
    settings: &PlacementSettings,
    rounds: &mut Rounds,
    missing: &mut std::collections::HashSet<String>,
) {
    let started = Instant::now();
    let now_ms = deps.clock.now_ms();
    let full = rounds.full_due(now_ms);
    let mut outcome = sync(client, &deps.ledger, &mut rounds.cache, full, now_ms).await;
    if full && outcome.is_ok() {
        rounds.last_full_ms = Some(now_ms);
    }
    if let Ok(report) = &mut outcome {
        let grace_ms = (settings.repair_grace_s * 1000.0).round() as i64;
        match reconcile(
            &deps.ledger,
            report,
            settings.claims,
            now_ms - grace_ms,
            deps.clock.now_ms(),
            missing,
        )
        .await
        {
            Ok(repairs) => {
                let metrics = deps.stats.metrics();
                for (kind, count) in repairs.by_kind() {
                    if count > 0 {
                        metrics.placement_repairs(kind).inc_by(count);
                    }
                }
                report.repairs = repairs;
            }
            Err(e) => outcome = Err(e),
        }
    }
    if let (Ok(report), Some(ratios)) = (&outcome, &deps.ratios) {
        let usages = provider_usages(report);
        ratios
            .round(client, &deps.ledger, &usages, deps.clock.now_ms())
            .await;
    }
    let metrics = deps.stats.metrics();
    metrics
        .placement_sync_seconds
        .observe(started.elapsed().as_secs_f64());
    match &outcome {
        Ok(report) => {
            metrics.placement_hosts.set(report.hosts as i64);
            // A sync that changed nothing is the common case every interval: keep it out of
            // an operator's INFO log, which then shows only the syncs that moved something.
            let changed = report.imported_allocations > 0
                || report.released_allocations > 0
                || report.removed_hosts > 0
                || report.repairs.total() > 0;
            macro_rules! sync_done {
                ($level:expr) => {
                    tracing::event!(
                        $level,
                        hosts = report.hosts,
                        listed = report.listed_providers,
                        read = report.read_providers,
                        disagreeing = report.disagreeing_providers,
                        full = report.full,
                        imported = report.imported_allocations,
                        released = report.released_allocations,
                        removed = report.removed_hosts,
                        skipped = report.skipped_providers,
                        repaired = report.repairs.total(),
                        "Placement sync done"
                    )
                };
            }
            if changed {
                sync_done!(tracing::Level::INFO);
            } else {
                sync_done!(tracing::Level::DEBUG);
            }
        }
        Err(e) => {
            metrics.placement_sync_errors.inc();
            tracing::warn!(error = %e, "Placement sync failed; keeping the last known state");
        }
    }
    deps.status.record(&outcome, now_ms);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::domain::HostState;
    use crate::domain::{ClassId, ComputeFacts, HostId, HostProfile, Inventory, Resources};
    use crate::table::{HostTable, NodeRecord, NodeRecords};

    fn row(id: i64, name: &str) -> HostState {
        let uuid = format!("uuid-{name}");
        let inventories = vec![(ClassId::VCPU, Inventory::of(4))];
        HostState {
            id: HostId(id),
            profile: Arc::new(HostProfile::new(name, name, &uuid, "nova", inventories)),
            used: Resources::ZERO,
            num_instances: 0,
            num_io_ops: 0,
            up: true,
            disabled: false,
            forced_down: false,
            last_seen_ms: 0,
            measured: None,
        }
    }

    #[test]
    fn a_full_sync_is_due_first_then_once_per_full_sync_interval_and_always_at_zero() {
        let mut settings = PlacementSettings {
            full_sync_interval_s: 600.0,
            ..Default::default()
        };
        let mut rounds = Rounds::new(&settings);
        assert!(
            rounds.full_due(5_000),
            "the first sync reads every provider"
        );
        rounds.last_full_ms = Some(5_000);
        assert!(!rounds.full_due(5_000 + 599_999));
        assert!(rounds.full_due(5_000 + 600_000));
        settings.full_sync_interval_s = 0.0;
        let mut every = Rounds::new(&settings);
        every.last_full_ms = Some(5_000);
        assert!(every.full_due(5_000), "0: every sync is full");
    }

    fn record(service_host: &str) -> NodeRecord {
        NodeRecord {
            service_host: Arc::from(service_host),
            facts: Arc::new(ComputeFacts::default()),
            up: true,
            disabled: false,
            forced_down: false,
        }
    }

    #[test]
    fn nodes_of_novas_records_not_loaded_yet_make_a_request_wait_once() {
        let t = HostTable::new();
        let resync = Resync::new(1.0, Arc::new(ManualClock::new(0)));
        assert!(!resync.node_since_last_sync(&t), "no records");
        t.load([row(1, "a")]);
        let mut records = NodeRecords::default();
        records.by_uuid.insert("uuid-a".into(), record("a"));
        records.by_uuid.insert("uuid-b".into(), record("b"));
        t.set_records(Arc::new(records));
        assert!(
            resync.node_since_last_sync(&t),
            "b registered since the last sync"
        );
        // A sync that began before b was in Nova's records and finished without it: b may
        // have registered in Placement after that sync read it, so requests still wait.
        let mut only_a = NodeRecords::default();
        only_a.by_uuid.insert("uuid-a".into(), record("a"));
        resync.note_unloaded(&t, Some(&only_a));
        assert!(
            resync.node_since_last_sync(&t),
            "b appeared during the sync"
        );
        // A sync that began with b in the records and finished without it (Placement has no
        // provider for it): no more waiting for it.
        let records = t.records();
        resync.note_unloaded(&t, records.as_deref());
        assert!(!resync.node_since_last_sync(&t));
        // Once loaded, nothing is missing.
        t.load([row(2, "b")]);
        assert!(!resync.node_since_last_sync(&t));
    }

    #[tokio::test]
    async fn resyncs_asked_for_are_bounded_in_rate_by_the_injected_clock() {
        let clock = ManualClock::new(10_000);
        let resync = Resync::new(2.0, Arc::new(clock.clone()));
        assert!(resync.request(), "the first one is taken");
        // Kept for the next wait even though nobody waited.
        tokio::time::timeout(std::time::Duration::from_secs(1), resync.requested())
            .await
            .expect("the request wakes the sync");
        clock.advance_ms(1_999);
        assert!(!resync.request(), "within the minimum interval");
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(50), resync.requested())
                .await
                .is_err(),
            "a refused request wakes nothing"
        );
        clock.advance_ms(1);
        assert!(resync.request(), "once the interval has passed");
        // Waiting for the sync that answers a request: it is the next one to start.
        clock.advance_ms(2_000);
        let sync = resync.ask().expect("accepted");
        assert_eq!(sync, 1);
        assert_eq!(
            resync.ask(),
            Some(1),
            "refused, but the pending sync answers it"
        );
        let begun = resync.begin();
        assert_eq!(begun, 1);
        resync.end(begun);
        assert!(resync.wait_for(sync, 10).await, "finished");
        assert_eq!(resync.ask(), None, "refused and nothing pending");
        clock.advance_ms(2_000);
        let later = resync.ask().expect("accepted");
        assert_eq!(later, 2);
        let waiting = resync.wait_for(later, 500);
        tokio::pin!(waiting);
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(20), &mut waiting)
                .await
                .is_err(),
            "not finished yet"
        );
        clock.advance_ms(500);
        assert!(!waiting.await, "the injected clock's timeout");
    }
}
