//! `caching` and `asc`: decisions on a snapshot of every host that a background task
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
//! declined by the ledger (never oversubscribed) and counted as declines, and freed hosts stay
//! unused until the refresh.

use super::{
    claim_ranked, filter_env, worker_states, BackendDeps, Outcome, WorkerPool, WorkerState,
};
use crate::control::AscController;
use crate::domain::{HostState, RequestContext};
use crate::ledger::LedgerError;
use crate::policy::Policy;
use crate::stats::Counts;
use parking_lot::{Mutex, RwLock};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::task::JoinHandle;

/// The snapshot shared by the workers and the refresh task.
struct Shared {
    snapshot: RwLock<Arc<Vec<HostState>>>,
    epoch: AtomicU64,
    /// Placed instances and declined attempts since the last refresh (ASC's r).
    placed: AtomicU64,
    declined: AtomicU64,
}

pub struct CacheBackend {
    pub(super) deps: BackendDeps,
    policy: Policy,
    pool: WorkerPool<WorkerState>,
    shared: Arc<Shared>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl CacheBackend {
    /// Reads the first snapshot and starts the refresh task (adaptive for `asc`).
    pub async fn start(
        deps: BackendDeps,
        policy: Policy,
        adaptive: bool,
    ) -> Result<Self, super::BuildError> {
        let hosts = deps.ledger.read_hosts().await?;
        deps.stats.add_queries(hosts.len() as u64);
        let shared = Arc::new(Shared {
            snapshot: RwLock::new(Arc::new(hosts)),
            epoch: AtomicU64::new(1),
            placed: AtomicU64::new(0),
            declined: AtomicU64::new(0),
        });
        let salt = if adaptive { 3 } else { 2 };
        let pool = WorkerPool::new(worker_states(
            &deps.settings,
            salt,
            deps.settings.scheduler.workers,
        ));
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
        Ok(CacheBackend {
            deps,
            policy,
            pool,
            shared,
            task: Mutex::new(Some(task)),
        })
    }

    pub(super) async fn place(
        &self,
        req: &RequestContext,
        counts: &mut Counts,
    ) -> Result<Outcome, LedgerError> {
        let mut worker = self.pool.acquire().await;
        if self.shared.snapshot.read().is_empty() {
            self.refresh_cold(counts).await?;
        }
        let epoch = self.shared.epoch.load(Ordering::Acquire);
        if worker.cache_epoch != epoch {
            let snapshot = self.shared.snapshot.read().clone();
            worker.cache.clone_from(&snapshot);
            worker.cache_epoch = epoch;
        }
        let mut budget = self.deps.settings.scheduler.max_attempts;
        let env = filter_env(&self.deps);
        let WorkerState {
            rng, ranked, cache, ..
        } = &mut *worker;
        let before = counts.declines;
        if let Err(rejection) = self.policy.rank(cache, req, &env, rng, budget, ranked) {
            counts.attempts += 1;
            counts.declines += 1;
            self.shared.declined.fetch_add(1, Ordering::Relaxed);
            tracing::info!(instance = %req.instance_uuid, %rejection, "no host passed the filters");
            return Ok(Outcome::NoValidHost(rejection.reason()));
        }
        let result = claim_ranked(&self.deps, cache, ranked, req, &mut budget, counts).await?;
        self.shared
            .declined
            .fetch_add(counts.declines - before, Ordering::Relaxed);
        Ok(match result {
            Some(selection) => {
                self.shared.placed.fetch_add(1, Ordering::Relaxed);
                if let Some(host) = cache.iter_mut().find(|h| h.id == selection[0].id) {
                    host.consume(&req.demand);
                }
                Outcome::Placed(selection)
            }
            None => Outcome::NoValidHost(format!(
                "{} candidate host(s) declined the claim",
                ranked.len()
            )),
        })
    }

    /// A cold start (no host known yet, e.g. the service started before any host reported):
    /// read every host now rather than answer NoValidHost until the first refresh.
    async fn refresh_cold(&self, counts: &mut Counts) -> Result<(), LedgerError> {
        let hosts = self.deps.ledger.read_hosts().await?;
        counts.queries += hosts.len() as u64;
        if !hosts.is_empty() {
            *self.shared.snapshot.write() = Arc::new(hosts);
            self.shared.epoch.fetch_add(1, Ordering::Release);
        }
        Ok(())
    }

    pub(super) fn stop(&self) {
        if let Some(task) = self.task.lock().take() {
            task.abort();
        }
    }
}

impl Drop for CacheBackend {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Sleeps τ, adapts τ (ASC), then reads every host into a new snapshot; forever.
async fn refresh_loop(
    deps: BackendDeps,
    shared: Arc<Shared>,
    mut interval_ms: u64,
    mut asc: Option<AscController>,
) {
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
        match deps.ledger.read_hosts().await {
            Ok(hosts) => {
                deps.stats.add_queries(hosts.len() as u64);
                *shared.snapshot.write() = Arc::new(hosts);
                shared.epoch.fetch_add(1, Ordering::Release);
            }
            Err(e) => {
                tracing::warn!(error = %e, "snapshot refresh failed; keeping the previous one")
            }
        }
    }
}
