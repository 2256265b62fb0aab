//! `filter`: every decision reads every host's current state from the ledger (n queries),
//! filters, weighs, picks and claims — Nova's FilterScheduler.
//!
//! Suitable for small clouds and for operators who want the freshest decisions; its cost
//! grows linearly with the number of hosts.

use super::{
    claim_ranked, filter_env, worker_states, BackendDeps, Outcome, WorkerPool, WorkerState,
};
use crate::domain::RequestContext;
use crate::ledger::LedgerError;
use crate::policy::Policy;
use crate::stats::Counts;

pub struct FilterBackend {
    pub(super) deps: BackendDeps,
    policy: Policy,
    pool: WorkerPool<WorkerState>,
}

impl FilterBackend {
    pub fn new(deps: BackendDeps, policy: Policy) -> Self {
        let pool = WorkerPool::new(worker_states(
            &deps.settings,
            1,
            deps.settings.scheduler.workers,
        ));
        FilterBackend { deps, policy, pool }
    }

    pub(super) async fn place(
        &self,
        req: &RequestContext,
        counts: &mut Counts,
    ) -> Result<Outcome, LedgerError> {
        let mut worker = self.pool.acquire().await;
        let max_attempts = self.deps.settings.scheduler.max_attempts;
        let mut budget = max_attempts;
        let mut last_reason = String::new();
        while budget > 0 {
            let hosts = self.deps.ledger.read_hosts().await?;
            counts.queries += hosts.len() as u64;
            let env = filter_env(&self.deps);
            let WorkerState { rng, ranked, .. } = &mut *worker;
            if let Err(rejection) = self.policy.rank(&hosts, req, &env, rng, budget, ranked) {
                counts.attempts += 1;
                counts.declines += 1;
                tracing::info!(instance = %req.instance_uuid, %rejection, "no host passed the filters");
                return Ok(Outcome::NoValidHost(rejection.reason()));
            }
            if let Some(selection) =
                claim_ranked(&self.deps, &hosts, ranked, req, &mut budget, counts).await?
            {
                return Ok(Outcome::Placed(selection));
            }
            last_reason = format!("{} candidate host(s) declined the claim", ranked.len());
        }
        Ok(Outcome::NoValidHost(last_reason))
    }
}
