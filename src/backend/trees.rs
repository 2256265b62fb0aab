//! Requests on provider trees (docs/placement-claims.md, "Requests on provider trees"): only
//! the hosts Placement offered allocation candidates on are ranked, by the policy, on the live
//! table whatever the backend (a snapshot or a sample could miss them); each is claimed with
//! Placement's first candidate for it, as Nova claims — with a NUMA topology or PCI requests,
//! the first candidate the filters pass (Nova's filters drop those that do not fit).

use super::{Backend, WorkerState};
use crate::domain::{Candidate, HostState, RequestContext, Resources};
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

/// Picks the candidate `req` is claimed with on `host`: for a request on trees with a NUMA
/// topology or PCI requests, the first whose NUMA fit and PCI devices pass (Nova claims the
/// first candidate its filters left, `CandidateFilterMixin`), recorded for the claim and the
/// Selection; otherwise Placement's first. False when no candidate of the host fits (the
/// host is not claimed).
pub(super) fn pick(req: &RequestContext, host: &HostState, pack: bool) -> bool {
    let Some(trees) = req.trees.as_deref() else {
        return true;
    };
    if req.numa_pci.is_none() {
        return true;
    }
    match crate::policy::first_numa_pci_fit(host, req, pack) {
        Some(index) => {
            trees.pick(&req.instance_uuid, host.uuid(), index);
            true
        }
        None => false,
    }
}

/// Records, for each of `alternates`, the candidate its Selection carries for `instance`:
/// the first that `req`'s filters pass (Nova's alternates carry each host's first remaining
/// candidate).
pub(super) fn pick_alternates(
    req: &RequestContext,
    instance: &str,
    alternates: &[HostState],
    pack: bool,
) {
    let (Some(trees), Some(_)) = (req.trees.as_deref(), req.numa_pci.as_deref()) else {
        return;
    };
    for host in alternates {
        let index = crate::policy::first_numa_pci_fit(host, req, pack);
        trees.pick(instance, host.uuid(), index.unwrap_or(0));
    }
}

/// What the ledger claims on `host` for `req`: for a request on trees, what its chosen
/// candidate on the host (Placement's first unless [`pick`] chose another) takes from the
/// host's own provider; the demand otherwise.
pub(super) fn demand_on(req: &RequestContext, host: &HostState) -> Resources {
    match chosen(req, host) {
        Some(candidate) => candidate.on_host,
        None => req.demand,
    }
}

/// The allocation request claimed in Placement for `req` on `host`: its chosen candidate
/// for a request on trees (its `mappings` included), the root provider's body otherwise.
pub(super) fn allocation_request(req: &RequestContext, host: &HostState) -> Value {
    match chosen(req, host) {
        Some(candidate) => (*candidate.body).clone(),
        None => crate::nova::allocation_request_body(host.uuid(), &req.demand),
    }
}

/// The candidate `req` is (or was) claimed with on `host`, on provider trees.
pub(super) fn chosen<'a>(req: &'a RequestContext, host: &HostState) -> Option<&'a Candidate> {
    req.trees
        .as_deref()
        .and_then(|t| t.chosen(&req.instance_uuid, host.uuid()))
}
