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

use super::{worker_states, BackendDeps, BuildError, WorkerPool, WorkerState};
use crate::control::AscController;
use crate::domain::HostState;
use crate::stats::Counts;
use parking_lot::{Mutex, RwLock};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::task::JoinHandle;

/// The snapshot shared by the workers and the refresh task.
pub struct CacheShared {
    pub(super) pool: WorkerPool<WorkerState>,
    snapshot: RwLock<Arc<Vec<HostState>>>,
    epoch: AtomicU64,
    /// Placed instances and declined attempts since the last refresh (ASC's r).
    placed: AtomicU64,
    declined: AtomicU64,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl CacheShared {
    /// Takes the first snapshot and starts the refresh task (adaptive for `asc`).
    pub(super) fn start(deps: &BackendDeps, adaptive: bool) -> Result<Arc<Self>, BuildError> {
        let hosts = deps.ledger.table().snapshot();
        deps.stats.add_queries(hosts.len() as u64);
        let salt = if adaptive { 3 } else { 2 };
        let workers = deps.settings.scheduler.workers;
        let shared = Arc::new(CacheShared {
            pool: WorkerPool::new(worker_states(&deps.settings, salt, workers)),
            snapshot: RwLock::new(Arc::new(hosts)),
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
        copy: &mut Vec<HostState>,
        counts: &mut Counts,
    ) {
        if self.snapshot.read().is_empty() && !deps.ledger.table().is_empty() {
            let hosts = deps.ledger.table().snapshot();
            counts.queries += hosts.len() as u64;
            self.publish(hosts);
        }
        let current = self.epoch.load(Ordering::Acquire);
        if *epoch != current {
            let snapshot = self.snapshot.read().clone();
            copy.clone_from(&snapshot);
            *epoch = current;
        }
    }

    fn publish(&self, hosts: Vec<HostState>) {
        *self.snapshot.write() = Arc::new(hosts);
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
            deps.stats
                .set_param("refresh_interval_s", json!(interval_ms as f64 / 1000.0));
            deps.stats.set_param(
                "interval_history",
                json!(controller.history().collect::<Vec<_>>()),
            );
        }
        let hosts = deps.ledger.table().snapshot();
        deps.stats.add_queries(hosts.len() as u64);
        shared.publish(hosts);
    }
}
