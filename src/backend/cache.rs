//! `caching` and `asc`: decisions on a snapshot of the live table that a background task
//! refreshes every τ (n queries per refresh).
//!
//! `caching` keeps τ fixed (Nova's CachingScheduler, 60 s). `asc` (Adaptive Scheduler Cache)
//! adapts τ to the decline ratio observed over the last interval: it shrinks τ by
//! `speed_up_step` when the ratio exceeds `th_decline` and grows it by `slow_down_step` when
//! the ratio is below `th_low`.
//!
//! Suitable for large clouds where reading every host per request is too slow.
//! Caveats of staleness: each worker decides on its own copy of the snapshot and subtracts
//! only its own successful claims from it (Nova's `consume_from_request`). Capacity taken by
//! other workers or other Parasol processes, and capacity freed by deletions, stays invisible
//! until the next refresh: a host filled by someone else keeps being chosen, its claims are
//! refused by the ledger (never oversubscribed) and counted as declines (`stale_snapshot`),
//! and freed hosts stay unused until the refresh.
//!
//! A snapshot is taken with the table's dense scan rows and, per weigher value the policy
//! ranks by, the hosts sorted by that value ([`SortedIndex`]), once per refresh: a decision
//! walks those orders and stops once the top k is proven (`Policy::rank_sorted`), or scans the
//! rows, instead of reading 10,000 hosts' states. A worker's claim updates its copy's host,
//! row and orders.

use super::{worker_states, BackendDeps, BuildError, WorkerPool, WorkerState};
use crate::control::AscController;
use crate::domain::{HostScan, HostState};
use crate::policy::SortKey;
use crate::policy::SortedIndex;
use crate::stats::Counts;
use parking_lot::{Mutex, RwLock};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::task::JoinHandle;

/// One snapshot of the table: every host, its scan row, and its place in each sorted order.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub hosts: Vec<HostState>,
    pub rows: Vec<HostScan>,
    pub index: SortedIndex,
}

impl Clone for Snapshot {
    fn clone(&self) -> Self {
        Snapshot {
            hosts: self.hosts.clone(),
            rows: self.rows.clone(),
            index: self.index.clone(),
        }
    }

    /// A worker's copy is refreshed into its own buffers.
    fn clone_from(&mut self, source: &Self) {
        self.hosts.clone_from(&source.hosts);
        self.rows.clone_from(&source.rows);
        self.index.clone_from(&source.index);
    }
}

impl Snapshot {
    /// Copies the live table and sorts it by `keys`; how long it took (wall time, for the
    /// operator: a refresh should take far less than its interval) goes to `/v1/stats` as the
    /// backend's `snapshot_ms` parameter.
    fn take(deps: &BackendDeps, keys: &[SortKey]) -> Snapshot {
        let began = std::time::Instant::now();
        let (hosts, rows) = deps.ledger.table().snapshot_scan();
        let index = SortedIndex::build(&rows, keys);
        let took_ms = began.elapsed().as_secs_f64() * 1_000.0;
        deps.stats
            .set_param("snapshot_ms", json!((took_ms * 100.0).round() / 100.0));
        Snapshot { hosts, rows, index }
    }

    /// Records a claim of this copy on host `slot` (Nova's `consume_from_request`): its state,
    /// its row and its place in the orders.
    pub fn consume(&mut self, slot: usize, demand: &crate::domain::Resources) {
        self.hosts[slot].consume(demand);
        let old = std::mem::replace(&mut self.rows[slot], HostScan::of(&self.hosts[slot]));
        self.index.moved(&self.rows, slot, &old);
    }
}

/// The snapshot shared by the workers and the refresh task.
pub struct CacheShared {
    pub(super) pool: WorkerPool<WorkerState>,
    snapshot: RwLock<Arc<Snapshot>>,
    /// The orders snapshots are sorted in.
    keys: Vec<SortKey>,
    epoch: AtomicU64,
    /// Placed instances and declined attempts since the last refresh (ASC's r).
    placed: AtomicU64,
    declined: AtomicU64,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl CacheShared {
    /// Takes the first snapshot and starts the refresh task (adaptive for `asc`).
    pub(super) fn start(
        deps: &BackendDeps,
        adaptive: bool,
        keys: Vec<SortKey>,
    ) -> Result<Arc<Self>, BuildError> {
        let snapshot = Snapshot::take(deps, &keys);
        deps.stats.add_queries(snapshot.hosts.len() as u64);
        let salt = if adaptive { 3 } else { 2 };
        let workers = deps.settings.scheduler.workers;
        let shared = Arc::new(CacheShared {
            pool: WorkerPool::new(worker_states(&deps.settings, salt, workers)),
            snapshot: RwLock::new(Arc::new(snapshot)),
            keys,
            epoch: AtomicU64::new(1),
            placed: AtomicU64::new(0),
            declined: AtomicU64::new(0),
            task: Mutex::new(None),
        });
        let controller = if adaptive {
            Some(AscController::new(deps.settings.asc.clone())?)
        } else {
            None
        };
        let interval_ms = match &controller {
            Some(c) => c.interval_ms(),
            None => (deps.settings.caching.refresh_interval_s * 1000.0).round() as u64,
        };
        deps.stats
            .set_param("refresh_interval_s", json!(interval_ms as f64 / 1000.0));
        let task = tokio::spawn(refresh_loop(
            deps.clone(),
            shared.clone(),
            interval_ms,
            controller,
        ));
        *shared.task.lock() = Some(task);
        Ok(shared)
    }

    /// Brings a worker's copy up to the latest snapshot. A cold start (no host known when
    /// the snapshot was taken) takes a new snapshot now rather than answer NoValidHost until
    /// the first refresh.
    pub(super) fn refresh_copy(
        &self,
        deps: &BackendDeps,
        epoch: &mut u64,
        copy: &mut Snapshot,
        counts: &mut Counts,
    ) {
        if self.snapshot.read().hosts.is_empty() && !deps.ledger.table().is_empty() {
            let snapshot = Snapshot::take(deps, &self.keys);
            counts.queries += snapshot.hosts.len() as u64;
            self.publish(snapshot);
        }
        let current = self.epoch.load(Ordering::Acquire);
        if *epoch != current {
            let snapshot = self.snapshot.read().clone();
            copy.clone_from(&*snapshot);
            *epoch = current;
        }
    }

    fn publish(&self, snapshot: Snapshot) {
        *self.snapshot.write() = Arc::new(snapshot);
        self.epoch.fetch_add(1, Ordering::Release);
    }

    pub(super) fn placed(&self) {
        self.placed.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn declined(&self) {
        self.declined.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn stop(&self) {
        if let Some(task) = self.task.lock().take() {
            task.abort();
        }
    }
}

/// Sleeps τ, adapts τ (ASC), then snapshots the live table; forever.
async fn refresh_loop(
    deps: BackendDeps,
    shared: Arc<CacheShared>,
    mut interval_ms: u64,
    mut asc: Option<AscController>,
) {
    // Runs until the backend stops it (on a switch, or when the backend is dropped).
    loop {
        deps.clock.sleep_ms(interval_ms).await;
        let placed = shared.placed.swap(0, Ordering::Relaxed);
        let declined = shared.declined.swap(0, Ordering::Relaxed);
        if let Some(controller) = asc.as_mut() {
            interval_ms = controller.on_interval(placed, declined);
            // Together, so that no reader sees the new τ beside the history before it.
            deps.stats.set_params([
                ("refresh_interval_s", json!(interval_ms as f64 / 1000.0)),
                (
                    "interval_history",
                    json!(controller.history().collect::<Vec<_>>()),
                ),
            ]);
        }
        let snapshot = Snapshot::take(&deps, &shared.keys);
        deps.stats.add_queries(snapshot.hosts.len() as u64);
        shared.publish(snapshot);
    }
}
