//! `[batch] mode = "call"`: a multi-create solved as one assignment by ECSched's min-cost flow
//! (`control::ecsched`, docs/architecture.md §12.5) over the backend's own view of the hosts —
//! the live table, the worker's snapshot or one sample — then claimed at once (one ledger
//! group) and in Placement, all or nothing.
//!
//! Candidates are the hosts that pass the policy's filters for the call's flavor, ranked by
//! its weighers (the order alternates come from); each host's slots are min over classes of
//! ⌊free / demand⌋; Nova's server-group affinity is one flow unit (the aggregator), its
//! anti-affinity one gate per host. Whatever the batch cannot decide alone goes to the
//! one-at-a-time path, counted by reason ([`BatchFallback`]).

use super::{Backend, Call, HostClaim, ScheduleError};
use crate::control::ecsched::{self, BatchRequest, Cluster, Group, GroupPolicy, SolveOptions};
use crate::domain::{self, ClassId, HostState, RequestContext};
use crate::ledger::ClaimOutcome;
use crate::policy::{FilterEnv, RankArgs};
use crate::stats::{BatchFallback, BatchRound, Counts, DeclineCause};
use std::time::Instant;

/// Filters whose answer for a host depends on the call's own instances placed there before
/// (they count instances or I/O operations per host): the batch cannot model them.
const COUNTING_FILTERS: [&str; 4] = [
    "IoOpsFilter",
    "NumInstancesFilter",
    "AggregateIoOpsFilter",
    "AggregateNumInstancesFilter",
];

/// As many candidates as any view holds: every host that passes the filters is ranked.
pub(super) const EVERY_HOST: usize = u32::MAX as usize;

/// What became of a batch.
pub(super) enum Batched {
    /// The call's answer, its statistics recorded.
    Done(Result<Vec<Vec<HostState>>, ScheduleError>),
    /// Place the call one instance at a time, with the counts so far.
    Fallback(BatchFallback),
}

/// Why a batch's claims were given back: a claim refused (the call is placed one at a time
/// instead), or the ledger or Placement failing (the call fails).
enum ClaimsFailed {
    Refused(BatchFallback),
    Broken(ScheduleError),
}

impl Backend {
    /// Places the `requests` of one multi-create as one assignment (see the module), or says
    /// why the one-at-a-time path must.
    pub(super) async fn schedule_batch(
        &self,
        requests: &[RequestContext],
        counts: &mut Counts,
        started: Instant,
        alternates: super::Alternates,
    ) -> Batched {
        let deps = &self.deps;
        let n = requests.len();
        if n > deps.settings.batch.max_instances {
            return Batched::Fallback(BatchFallback::TooLarge);
        }
        let Some(group) = self.batch_shape(requests) else {
            return Batched::Fallback(BatchFallback::Unsupported);
        };
        let first = &requests[0];
        let mut worker = self.source.worker().await;
        let env = FilterEnv::new(deps.clock.now_ms(), &deps.settings.policy);
        let ranked = match self.source.rank(
            deps,
            &self.policy,
            &mut worker,
            RankArgs {
                req: first,
                env: &env,
                max: EVERY_HOST,
            },
            counts,
        ) {
            Ok(ranked) => ranked,
            Err(rejection) if self.source.is_live() => {
                tracing::info!(instance = %first.instance_uuid, %rejection, "no host passed the filters");
                return self.no_valid_host(counts, started, rejection.reason());
            }
            Err(_) => return Batched::Fallback(BatchFallback::Unscheduled),
        };
        let classes: Vec<ClassId> = first.demand.nonzero().map(|(c, _)| c).collect();
        let cluster = cluster_of(&ranked, &classes);
        let demand: Vec<u64> = classes
            .iter()
            .map(|&c| first.demand.get(c).max(0) as u64)
            .collect();
        let batch: Vec<BatchRequest> = (0..n)
            .map(|_| BatchRequest {
                demand: demand.clone(),
                hosts: None,
                group,
            })
            .collect();
        let (solving, clock_at) = (Instant::now(), deps.clock.now_ms());
        let solved = cluster.and_then(|c| ecsched::solve(&c, &batch, &SolveOptions::service()));
        let solve_us = solving.elapsed().as_micros() as u64;
        let past_timeout = past_solve_timeout(deps, clock_at);
        let assignment = match solved {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "the batch could not be read by the solver");
                return Batched::Fallback(BatchFallback::Unsupported);
            }
        };
        let unscheduled = assignment.unscheduled();
        deps.stats.record_batch_round(BatchRound {
            size: n as u64,
            solve_us,
            unscheduled: unscheduled as u64,
        });
        if past_timeout {
            return Batched::Fallback(BatchFallback::SolveTimeout);
        }
        if unscheduled > 0 {
            return self.unscheduled(unscheduled, n, counts, started);
        }
        let chosen: Vec<&HostState> = assignment
            .hosts
            .iter()
            .map(|h| &ranked[h.unwrap_or(0) as usize])
            .collect();
        if let Err(outcome) = self.claim_batch(requests, &chosen, counts).await {
            return self.claims_failed(outcome, counts, started);
        }
        counts.attempts += n as u64;
        for (host, req) in chosen.iter().zip(requests) {
            self.source.placed();
            self.source.consume(&mut worker, host, &req.demand);
            tracing::debug!(instance = %req.instance_uuid, host = %host.host(), "placed");
        }
        // Alternates as the one-at-a-time path makes them: one pass once all are claimed.
        let mut placed: Vec<Vec<HostState>> = chosen.iter().map(|&h| vec![h.clone()]).collect();
        let call = Call {
            requests,
            alternates,
        };
        self.multi_create_alternates(&mut worker, call, &mut placed, counts);
        counts.placed = counts.requests;
        deps.stats
            .record(*counts, Some(started.elapsed().as_micros() as u64));
        tracing::info!(
            instances = n,
            solve_us,
            hosts = assignment.stats.host_nodes,
            "multi-create placed as one batch"
        );
        Batched::Done(Ok(placed))
    }

    /// The server group the solver keeps, `Some(None)` for none, or `None` when the call is
    /// not one the batch models: a rebuild, instances of different demands, anti-affinity
    /// with `max_server_per_host` > 1, or a filter that counts the call's own instances.
    fn batch_shape(&self, requests: &[RequestContext]) -> Option<Option<Group>> {
        let first = requests.first()?;
        if requests
            .iter()
            .any(|r| r.rebuild || r.demand != first.demand)
            || first.demand.is_zero()
            || self
                .policy
                .filter_names()
                .any(|f| COUNTING_FILTERS.contains(&f))
        {
            return None;
        }
        let enabled = |name: &str| self.policy.filter_names().any(|f| f == name);
        let policy = match first.group.as_ref().map(|g| (g.policy, g)) {
            Some((domain::GroupPolicy::Affinity, _)) if enabled("ServerGroupAffinityFilter") => {
                Some(GroupPolicy::Affinity)
            }
            Some((domain::GroupPolicy::AntiAffinity, g))
                if enabled("ServerGroupAntiAffinityFilter") =>
            {
                if g.max_server_per_host != 1 {
                    return None;
                }
                Some(GroupPolicy::AntiAffinity)
            }
            // Soft policies are weighers' preferences: the batch's own costs decide.
            _ => None,
        };
        Some(policy.map(|policy| Group { id: 0, policy }))
    }

    /// The ledger's claims of the assignment, made at once (`Ledger::claim_all`: queued
    /// together, committed as one group), then Placement's. Any refusal releases every claim made, Placement's
    /// first: `ClaimsFailed::Refused` to place one at a time, `ClaimsFailed::Broken` when the
    /// ledger or Placement failed.
    async fn claim_batch(
        &self,
        requests: &[RequestContext],
        chosen: &[&HostState],
        counts: &mut Counts,
    ) -> Result<(), ClaimsFailed> {
        let deps = &self.deps;
        let now = deps.clock.now_ms();
        let claiming = Instant::now();
        let claims: Vec<_> = requests
            .iter()
            .zip(chosen)
            .map(|(req, host)| (host.id, req.instance_uuid.as_str(), &req.demand))
            .collect();
        let outcomes = deps.ledger.claim_all(&claims, now).await;
        let took = claiming.elapsed().as_micros() as u64;
        for _ in &outcomes {
            deps.stats.record_claim(took);
        }
        counts.claim_us += took;
        let mut failure: Option<ClaimsFailed> = None;
        let mut held = Vec::with_capacity(requests.len());
        for (req, outcome) in requests.iter().zip(outcomes) {
            match outcome {
                Ok(ClaimOutcome::Claimed) => held.push(req),
                Ok(ClaimOutcome::Declined) => {
                    counts.decline(self.source.conflict_cause(), true);
                    self.source.declined();
                    failure.get_or_insert(ClaimsFailed::Refused(BatchFallback::Declined));
                }
                Err(e) => {
                    if !matches!(failure, Some(ClaimsFailed::Broken(_))) {
                        failure = Some(ClaimsFailed::Broken(ScheduleError::Ledger(e)));
                    }
                }
            }
        }
        let mut in_placement = Vec::new();
        if failure.is_none() {
            let claiming = Instant::now();
            for (req, host) in requests.iter().zip(chosen) {
                match self.claim_in_placement(host, req).await {
                    Ok(HostClaim::Claimed) => in_placement.push(req),
                    Ok(_) => {
                        // Placement refused it (its ledger claim is released already).
                        held.retain(|r| r.instance_uuid != req.instance_uuid);
                        counts.decline(DeclineCause::PlacementConflict, true);
                        self.source.declined();
                        failure = Some(ClaimsFailed::Refused(BatchFallback::Declined));
                        break;
                    }
                    Err(e) => {
                        held.retain(|r| r.instance_uuid != req.instance_uuid);
                        failure = Some(ClaimsFailed::Broken(e));
                        break;
                    }
                }
            }
            counts.claim_us += claiming.elapsed().as_micros() as u64;
        }
        let Some(failure) = failure else {
            return Ok(());
        };
        counts.attempts += held.len() as u64;
        if let Some(placement) = &deps.placement {
            for req in in_placement.iter().filter(|r| r.owner.is_some()) {
                if let Err(e) = placement.remove(&req.instance_uuid).await {
                    tracing::warn!(instance = %req.instance_uuid, error = %e, "could not remove the claim in Placement of a batch given up; the next sync repairs the ledger");
                }
            }
        }
        for req in held {
            if let Err(e) = deps.ledger.release(&req.instance_uuid).await {
                return Err(ClaimsFailed::Broken(ScheduleError::Ledger(e)));
            }
        }
        Err(failure)
    }

    /// Answers the whole call NoValidHost, as the one-at-a-time path does when its first
    /// instance finds no host.
    /// The claims of a batch did not all hold: an error answers the call, a fallback reason
    /// leaves it to the one-at-a-time path.
    fn claims_failed(
        &self,
        outcome: ClaimsFailed,
        counts: &mut Counts,
        started: Instant,
    ) -> Batched {
        match outcome {
            ClaimsFailed::Broken(e) => {
                counts.errors = counts.requests;
                self.deps
                    .stats
                    .record(*counts, Some(started.elapsed().as_micros() as u64));
                Batched::Done(Err(e))
            }
            ClaimsFailed::Refused(reason) => Batched::Fallback(reason),
        }
    }

    /// The solver left `unscheduled` of the `n` instances without a host. On the live table
    /// the optimum places as many as any order could (one flavor makes the slots exact, and
    /// the groups are modelled): no valid host. Elsewhere the one-at-a-time path tries.
    fn unscheduled(
        &self,
        unscheduled: usize,
        n: usize,
        counts: &mut Counts,
        started: Instant,
    ) -> Batched {
        if self.source.is_live() {
            tracing::info!(
                unscheduled,
                instances = n,
                "the batch cannot place every instance"
            );
            return self.no_valid_host(
                counts,
                started,
                "There are not enough hosts available.".into(),
            );
        }
        Batched::Fallback(BatchFallback::Unscheduled)
    }

    fn no_valid_host(&self, counts: &mut Counts, started: Instant, reason: String) -> Batched {
        counts.decline(DeclineCause::NoValidHost, false);
        counts.no_valid_host = counts.requests;
        self.deps
            .stats
            .record(*counts, Some(started.elapsed().as_micros() as u64));
        Batched::Done(Err(ScheduleError::NoValidHost { reason }))
    }
}

/// The candidates as the solver's cluster: per demanded class, usable capacity and free room.
pub(super) fn cluster_of(
    hosts: &[HostState],
    classes: &[ClassId],
) -> Result<Cluster, ecsched::BatchError> {
    let mut capacity = Vec::with_capacity(hosts.len() * classes.len());
    let mut free = Vec::with_capacity(hosts.len() * classes.len());
    for h in hosts {
        for &c in classes {
            let cap = h.usable().get(c).max(0);
            capacity.push(cap as u64);
            free.push((cap - h.used.get(c)).clamp(0, cap) as u64);
        }
    }
    Cluster::new(classes.len().max(1), capacity, free)
}

/// Whether a solve begun at `started_ms` on the service's clock ran past `[batch]
/// solve_timeout_ms`: the bound is read on the injectable clock (the solve's own duration in
/// the statistics is measured as every latency is).
pub(super) fn past_solve_timeout(deps: &super::BackendDeps, started_ms: i64) -> bool {
    let took = deps.clock.now_ms().saturating_sub(started_ms);
    took > deps.settings.batch.solve_timeout_ms as i64
}
