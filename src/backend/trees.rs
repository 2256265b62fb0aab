//! Requests on provider trees (docs/placement-claims.md, "Requests on provider trees"): only
//! the hosts Placement offered allocation candidates on are ranked, by the policy, on the live
//! table whatever the backend (a snapshot or a sample could miss them); each is claimed with
//! Placement's first candidate for it, as Nova claims.

use super::{Backend, WorkerState};
use crate::domain::{HostState, RequestContext, Resources};
use crate::policy::{RankArgs, Rejection};
use crate::stats::Counts;
use serde_json::Value;

impl Backend {
    /// The live table's hosts that `req`'s candidates name, filtered and weighed.
    pub(super) fn rank_trees(
        &self,
        worker: &mut WorkerState,
        args: RankArgs,
        counts: &mut Counts,
    ) -> Result<Vec<HostState>, Rejection> {
        let Some(trees) = args.req.trees.as_deref() else {
            return Ok(Vec::new());
        };
        let hosts: Vec<HostState> = self.deps.ledger.table().with_hosts(|live| {
            live.iter()
                .filter(|h| trees.has(h.uuid()))
                .cloned()
                .collect()
        });
        counts.queries += hosts.len() as u64;
        let mut order = Vec::new();
        self.policy
            .rank(&hosts, args, &mut worker.rng, &mut order)?;
        Ok(order.into_iter().map(|i| hosts[i].clone()).collect())
    }
}

/// What the ledger claims on `host` for `req`: for a request on trees, what Placement's first
/// candidate on the host takes from the host's own provider; the demand otherwise.
pub(super) fn demand_on(req: &RequestContext, host: &HostState) -> Resources {
    match req.trees.as_deref().and_then(|t| t.first(host.uuid())) {
        Some(candidate) => candidate.on_host,
        None => req.demand,
    }
}

/// The allocation request claimed in Placement for `req` on `host`: Placement's first
/// candidate for a request on trees (its `mappings` included), the root provider's body
/// otherwise.
pub(super) fn allocation_request(req: &RequestContext, host: &HostState) -> Value {
    match req.trees.as_deref().and_then(|t| t.first(host.uuid())) {
        Some(candidate) => (*candidate.body).clone(),
        None => crate::nova::allocation_request_body(host.uuid(), &req.demand),
    }
}
