//! `apsr` (Adaptive Partial State Random): s parallel schedulers, each sampling d distinct
//! random hosts per request (d queries), keeping those that pass the filters and claiming a
//! uniformly random one. A controller re-plans (s, d) every round from the estimated number of
//! hosts that can take any request, so the expected decline ratio stays under ε
//! (docs/architecture.md §4).
//!
//! Suitable for large clouds under heavy load: each decision reads d ≪ n hosts and the
//! number of parallel schedulers is as large as the SLA allows. A sample with no fitting host
//! is a decline (`empty_sample`) and is retried with a fresh sample, up to `max_attempts`.

use super::{worker_states, BackendDeps, BuildError, WorkerPool, WorkerState};
use crate::control::ApsrController;
use crate::domain::HostState;
use crate::stats::Counts;
use parking_lot::Mutex;
use rand::seq::index::sample;
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::task::JoinHandle;

/// APSR's live parameters, shared by its schedulers and its control task.
pub struct SampleShared {
    /// The s schedulers.
    pub(super) pool: WorkerPool<WorkerState>,
    /// Hosts per scheduler (d).
    d: AtomicUsize,
    /// Hosts in the table when the round was planned (n).
    n: AtomicUsize,
    controller: Mutex<ApsrController>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl SampleShared {
    /// Plans the first round from the table and starts the control task.
    pub(super) fn start(deps: &BackendDeps) -> Result<Arc<Self>, BuildError> {
        let n = deps.ledger.table().len();
        let controller = ApsrController::new(deps.settings.apsr.clone(), n as u64)?;
        let plan = controller.plan();
        let shared = Arc::new(SampleShared {
            pool: WorkerPool::new(worker_states(&deps.settings, 4, plan.schedulers as usize)),
            d: AtomicUsize::new(plan.hosts_per_scheduler as usize),
            n: AtomicUsize::new(n),
            controller: Mutex::new(controller),
            task: Mutex::new(None),
        });
        shared.publish(deps);
        let task = tokio::spawn(control_loop(deps.clone(), shared.clone()));
        *shared.task.lock() = Some(task);
        Ok(shared)
    }

    /// Samples d distinct slots of the table (`live`, read under its lock) into `out`: d
    /// queries, each host then read in place. A cold start (hosts registered since the round
    /// was planned with none) re-plans first.
    pub(super) fn draw(
        &self,
        live: &[HostState],
        rng: &mut ChaCha8Rng,
        out: &mut Vec<usize>,
        counts: &mut Counts,
    ) {
        out.clear();
        let n = live.len();
        if self.n.load(Ordering::Relaxed) == 0 && n > 0 {
            let plan = self.controller.lock().on_round(n as u64);
            self.d
                .store(plan.hosts_per_scheduler as usize, Ordering::Relaxed);
            self.n.store(n, Ordering::Relaxed);
        }
        if n == 0 {
            return;
        }
        let d = self.d.load(Ordering::Relaxed).clamp(1, n);
        out.extend(sample(rng, n, d));
        counts.queries += out.len() as u64;
    }

    /// Records what a sample held for `flavor`, for the next round's estimate of k.
    pub(super) fn record(&self, flavor: &str, sampled: u64, fitting: u64) {
        self.controller.lock().record(flavor, sampled, fitting);
    }

    fn publish(&self, deps: &BackendDeps) {
        let c = self.controller.lock();
        let plan = c.plan();
        // One update: a reader never sees a plan beside another round's history.
        deps.stats.set_params([
            ("schedulers", json!(plan.schedulers)),
            ("hosts_per_scheduler", json!(plan.hosts_per_scheduler)),
            ("expected_decline_ratio", json!(plan.expected_decline_ratio)),
            (
                "estimated_available_hosts",
                json!(c.estimated_available_hosts()),
            ),
            ("history", json!(c.history().collect::<Vec<_>>())),
        ]);
    }

    pub(super) fn stop(&self) {
        if let Some(task) = self.task.lock().take() {
            task.abort();
        }
    }
}

/// Every round: end the estimator's round, re-plan for the table's size and resize the pool.
async fn control_loop(deps: BackendDeps, shared: Arc<SampleShared>) {
    let round_ms = deps.settings.apsr.round_interval_ms.max(1);
    loop {
        deps.clock.sleep_ms(round_ms).await;
        let n = deps.ledger.table().len();
        shared.n.store(n, Ordering::Relaxed);
        let plan = shared.controller.lock().on_round(n as u64);
        shared
            .d
            .store(plan.hosts_per_scheduler as usize, Ordering::Relaxed);
        let settings = deps.settings.clone();
        shared
            .pool
            .resize(plan.schedulers as usize, |i| {
                WorkerState::new(settings.scheduler.seed, 4, i)
            })
            .await;
        shared.publish(&deps);
        tracing::debug!(
            schedulers = plan.schedulers,
            d = plan.hosts_per_scheduler,
            "APSR re-planned"
        );
    }
}
