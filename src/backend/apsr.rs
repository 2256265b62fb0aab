//! `apsr` (Adaptive Partial State Random): s parallel schedulers, each sampling d distinct
//! random hosts per request (d queries), keeping those that pass the filters and claiming a
//! uniformly random one. A controller re-plans (s, d) every round from the estimated number of
//! hosts that can take any request, so the expected decline ratio stays under ε (DESIGN §4).
//!
//! Suitable for large clouds under heavy load: each decision reads d ≪ n hosts and the
//! number of parallel schedulers is as large as the SLA allows. A sample with no fitting host
//! is a decline and is retried with a fresh sample, up to `max_attempts`.

use super::{
    claim_ranked, filter_env, worker_states, BackendDeps, Outcome, WorkerPool, WorkerState,
};
use crate::control::ApsrController;
use crate::domain::{HostId, RequestContext};
use crate::ledger::LedgerError;
use crate::policy::{Algorithm, Policy};
use crate::stats::Counts;
use parking_lot::{Mutex, RwLock};
use rand::seq::index::sample;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::task::JoinHandle;

struct Shared {
    /// The hosts to sample from, re-read every round.
    ids: RwLock<Arc<Vec<HostId>>>,
    /// Hosts per scheduler (d).
    d: AtomicUsize,
    controller: Mutex<ApsrController>,
    pool: WorkerPool<WorkerState>,
}

pub struct ApsrBackend {
    pub(super) deps: BackendDeps,
    policy: Policy,
    shared: Arc<Shared>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl ApsrBackend {
    pub async fn start(deps: BackendDeps, policy: Policy) -> Result<Self, super::BuildError> {
        let ids = deps.ledger.host_ids().await?;
        let controller = ApsrController::new(deps.settings.apsr.clone(), ids.len() as u64)?;
        let plan = controller.plan();
        let shared = Arc::new(Shared {
            ids: RwLock::new(Arc::new(ids)),
            d: AtomicUsize::new(plan.hosts_per_scheduler as usize),
            pool: WorkerPool::new(worker_states(&deps.settings, 4, plan.schedulers as usize)),
            controller: Mutex::new(controller),
        });
        publish(&deps, &shared);
        let task = tokio::spawn(control_loop(deps.clone(), shared.clone()));
        Ok(ApsrBackend {
            deps,
            policy: policy.with_algorithm(Algorithm::Random),
            shared,
            task: Mutex::new(Some(task)),
        })
    }

    pub(super) async fn place(
        &self,
        req: &RequestContext,
        counts: &mut Counts,
    ) -> Result<Outcome, LedgerError> {
        let mut worker = self.shared.pool.acquire().await;
        let mut budget = self.deps.settings.scheduler.max_attempts;
        let mut empty_samples = 0;
        while budget > 0 {
            let mut ids = self.shared.ids.read().clone();
            if ids.is_empty() {
                // Cold start: hosts may have registered since the last round.
                ids = Arc::new(self.deps.ledger.host_ids().await?);
                if !ids.is_empty() {
                    let plan = self.shared.controller.lock().on_round(ids.len() as u64);
                    self.shared
                        .d
                        .store(plan.hosts_per_scheduler as usize, Ordering::Relaxed);
                    *self.shared.ids.write() = ids.clone();
                }
            }
            if ids.is_empty() {
                counts.attempts += 1;
                counts.declines += 1;
                return Ok(Outcome::NoValidHost("no hosts are registered".into()));
            }
            let d = self.shared.d.load(Ordering::Relaxed).clamp(1, ids.len());
            let WorkerState { rng, ranked, .. } = &mut *worker;
            let picked: Vec<HostId> = sample(rng, ids.len(), d)
                .into_iter()
                .map(|i| ids[i])
                .collect();
            let hosts = self.deps.ledger.read_hosts_by_id(&picked).await?;
            counts.queries += hosts.len() as u64;
            let env = filter_env(&self.deps);
            let fitting = hosts
                .iter()
                .filter(|h| self.policy.fits_any(h, req, &env))
                .count();
            self.shared
                .controller
                .lock()
                .record(&req.flavor, hosts.len() as u64, fitting as u64);
            if self
                .policy
                .rank(&hosts, req, &env, rng, budget, ranked)
                .is_err()
            {
                counts.attempts += 1;
                counts.declines += 1;
                budget -= 1;
                empty_samples += 1;
                continue;
            }
            // One claim per sample: the rest of the sample are the alternates.
            let mut one = 1;
            if let Some(selection) =
                claim_ranked(&self.deps, &hosts, ranked, req, &mut one, counts).await?
            {
                return Ok(Outcome::Placed(selection));
            }
            budget -= 1;
        }
        Ok(Outcome::NoValidHost(format!(
            "no sampled host could take the request ({empty_samples} sample(s) held no fitting host)"
        )))
    }

    pub(super) fn stop(&self) {
        if let Some(task) = self.task.lock().take() {
            task.abort();
        }
    }
}

impl Drop for ApsrBackend {
    fn drop(&mut self) {
        self.stop();
    }
}

fn publish(deps: &BackendDeps, shared: &Shared) {
    let c = shared.controller.lock();
    let plan = c.plan();
    deps.stats.set_param("schedulers", json!(plan.schedulers));
    deps.stats
        .set_param("hosts_per_scheduler", json!(plan.hosts_per_scheduler));
    deps.stats
        .set_param("expected_decline_ratio", json!(plan.expected_decline_ratio));
    deps.stats.set_param(
        "estimated_available_hosts",
        json!(c.estimated_available_hosts()),
    );
    deps.stats
        .set_param("history", json!(c.history().collect::<Vec<_>>()));
}

/// Every round: re-read the host list, end the estimator's round, re-plan and resize.
async fn control_loop(deps: BackendDeps, shared: Arc<Shared>) {
    let round_ms = deps.settings.apsr.round_interval_ms.max(1);
    loop {
        deps.clock.sleep_ms(round_ms).await;
        match deps.ledger.host_ids().await {
            Ok(ids) => *shared.ids.write() = Arc::new(ids),
            Err(e) => tracing::warn!(error = %e, "APSR could not re-read the host list"),
        }
        let n = shared.ids.read().len() as u64;
        let plan = shared.controller.lock().on_round(n);
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
        publish(&deps, &shared);
        tracing::debug!(
            schedulers = plan.schedulers,
            d = plan.hosts_per_scheduler,
            "APSR re-planned"
        );
    }
}
