//! `[batch] mode = "window"`: single-instance calls arriving within `window_ms` of the first
//! are solved together as one ECSched assignment (docs/architecture.md §12.5), each call still
//! claimed on its own and answered on its own.
//!
//! No task of its own: every waiting call sleeps until the round's deadline on the injectable
//! clock, and the first to wake whose entry is still waiting takes the round and answers the
//! others (so a call given up by its caller never holds the round back). Each call has its
//! own candidates (its filters, its flavor) as the solver's machine affinity; the slots are
//! the conservative bound for mixed flavors (§12.2). The round's ledger claims are one group
//! (`Ledger::claim_all`), as a multi-create's. A call the round cannot place — no
//! candidate, unscheduled, its claim declined — goes the one-at-a-time path alone.

use super::batch::{cluster_of, past_solve_timeout, EVERY_HOST};
use super::{Backend, HostClaim, ScheduleError};
use crate::control::ecsched::{self, BatchRequest, SolveOptions};
use crate::domain::{ClassId, HostId, HostState, RequestContext};
use crate::ledger::{ClaimOutcome, LedgerError};
use crate::policy::{FilterEnv, RankArgs};
use crate::stats::{BatchFallback, BatchRound, Counts};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::Instant;
use tokio::sync::oneshot;

type Answer = Result<Vec<Vec<HostState>>, ScheduleError>;

/// The calls waiting for the current round.
#[derive(Default)]
pub(super) struct Gathering {
    // std-like lock (parking_lot): held to push or take, never across an await.
    inner: Mutex<Round>,
}

#[derive(Default)]
struct Round {
    /// The clock's time the round is solved at; `None` while no call waits.
    deadline_ms: Option<i64>,
    next_id: u64,
    waiting: Vec<Waiting>,
}

struct Waiting {
    id: u64,
    request: RequestContext,
    started: Instant,
    reply: oneshot::Sender<Answer>,
}

/// One call of a round, as it is being decided.
struct Entry {
    waiting: Waiting,
    counts: Counts,
    ranked: Vec<HostState>,
}

impl Backend {
    /// Places one single-instance call with the others of its window.
    pub(super) async fn schedule_windowed(&self, request: RequestContext) -> Answer {
        let (reply, answer) = oneshot::channel();
        let (id, deadline) = {
            let mut round = self.gathering.inner.lock();
            let now = self.deps.clock.now_ms();
            let window = self.deps.settings.batch.window_ms as i64;
            let deadline = *round.deadline_ms.get_or_insert(now + window);
            round.next_id += 1;
            let id = round.next_id;
            round.waiting.push(Waiting {
                id,
                request,
                started: Instant::now(),
                reply,
            });
            (id, deadline)
        };
        let wait = (deadline - self.deps.clock.now_ms()).max(0) as u64;
        self.deps.clock.sleep_ms(wait).await;
        let taken = {
            let mut round = self.gathering.inner.lock();
            if round.waiting.iter().any(|w| w.id == id) {
                round.deadline_ms = None;
                std::mem::take(&mut round.waiting)
            } else {
                Vec::new()
            }
        };
        if !taken.is_empty() {
            self.run_round(taken).await;
        }
        answer.await.unwrap_or_else(|_| {
            Err(ScheduleError::Placement(
                "the batch round ended without an answer".into(),
            ))
        })
    }

    /// Decides a round: candidates per call, one solve, the claims, each call answered.
    async fn run_round(&self, taken: Vec<Waiting>) {
        let deps = &self.deps;
        let mut fallbacks: Vec<(Waiting, Counts, BatchFallback)> = Vec::new();
        let mut entries: Vec<Entry> = Vec::new();
        let mut worker = self.source.worker().await;
        let env = FilterEnv::new(deps.clock.now_ms(), &deps.settings.policy);
        for waiting in taken {
            if waiting.reply.is_closed() {
                continue; // its caller gave up: nothing to decide
            }
            let mut counts = Counts {
                requests: 1,
                ..Counts::default()
            };
            let ranked = self.source.rank(
                deps,
                &self.policy,
                &mut worker,
                RankArgs {
                    req: &waiting.request,
                    env: &env,
                    max: EVERY_HOST,
                },
                &mut counts,
            );
            match ranked {
                Ok(ranked) => entries.push(Entry {
                    waiting,
                    counts,
                    ranked,
                }),
                // The one-at-a-time path finds and counts the NoValidHost (or the stale
                // snapshot, the empty sample) as it always does.
                Err(_) => fallbacks.push((waiting, counts, BatchFallback::Unscheduled)),
            }
        }
        if !entries.is_empty() {
            let (placed, lost) = self.solve_round(entries, &mut worker).await;
            fallbacks.extend(lost);
            for (entry, answer) in placed {
                let _ = entry.waiting.reply.send(answer);
            }
        }
        drop(worker);
        futures::future::join_all(fallbacks.into_iter().map(|(waiting, counts, reason)| {
            deps.stats.record_batch_fallback(reason);
            tracing::info!(
                instance = %waiting.request.instance_uuid,
                reason = reason.as_str(),
                "call of a window placed one at a time instead of in its round"
            );
            async move {
                let answer = self
                    .schedule_each(
                        vec![waiting.request.clone()],
                        waiting.started,
                        counts,
                        super::Alternates::Wanted,
                    )
                    .await;
                if let Err(Ok(placed)) = waiting.reply.send(answer) {
                    self.release_unanswered(&waiting.request, &placed).await;
                }
            }
        }))
        .await;
    }

    /// Solves the round's calls together and claims each on its host: the calls placed with
    /// their answers, and those left to the one-at-a-time path.
    #[allow(clippy::type_complexity)]
    async fn solve_round(
        &self,
        entries: Vec<Entry>,
        worker: &mut super::WorkerState,
    ) -> (Vec<(Entry, Answer)>, Vec<(Waiting, Counts, BatchFallback)>) {
        let deps = &self.deps;
        let (hosts, classes, batch) = round_batch(&entries);
        let (solving, clock_at) = (Instant::now(), deps.clock.now_ms());
        let solved = cluster_of(&hosts, &classes)
            .and_then(|c| ecsched::solve(&c, &batch, &SolveOptions::service()));
        let solve_us = solving.elapsed().as_micros() as u64;
        let past_timeout = past_solve_timeout(deps, clock_at);
        let assignment = match solved {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "the round could not be read by the solver");
                let lost = entries
                    .into_iter()
                    .map(|e| (e.waiting, e.counts, BatchFallback::Unsupported))
                    .collect();
                return (Vec::new(), lost);
            }
        };
        deps.stats.record_batch_round(BatchRound {
            size: entries.len() as u64,
            solve_us,
            unscheduled: assignment.unscheduled() as u64,
        });
        let mut lost = Vec::new();
        let mut claiming: Vec<(Entry, HostState)> = Vec::new();
        for (e, h) in entries.into_iter().zip(&assignment.hosts) {
            match h {
                _ if past_timeout => lost.push((e.waiting, e.counts, BatchFallback::SolveTimeout)),
                None => lost.push((e.waiting, e.counts, BatchFallback::Unscheduled)),
                Some(h) => {
                    let host = hosts[*h as usize].clone();
                    claiming.push((e, host));
                }
            }
        }
        let outcomes = self.claim_round(&claiming).await;
        let mut placed = Vec::new();
        for ((mut e, host), (outcome, us)) in claiming.into_iter().zip(outcomes) {
            e.counts.claim_us += us;
            let req = &e.waiting.request;
            let outcome = match outcome {
                Ok(ClaimOutcome::Claimed) => {
                    let started = Instant::now();
                    let made = self.claim_in_placement(&host, req).await;
                    e.counts.claim_us += started.elapsed().as_micros() as u64;
                    made
                }
                Ok(ClaimOutcome::Declined) => Ok(HostClaim::Declined),
                Err(err) => Err(ScheduleError::Ledger(err)),
            };
            match outcome {
                Ok(HostClaim::Claimed) => {
                    e.counts.attempts += 1;
                    e.counts.placed = 1;
                    self.source.placed();
                    self.source.consume(worker, &host, &req.demand);
                    let selection = self.round_selection(&host, &e.ranked);
                    deps.stats.record(
                        e.counts,
                        Some(e.waiting.started.elapsed().as_micros() as u64),
                    );
                    placed.push((e, Ok(vec![selection])));
                }
                Ok(HostClaim::Declined) => {
                    e.counts.decline(self.source.conflict_cause(), true);
                    self.source.declined();
                    lost.push((e.waiting, e.counts, BatchFallback::Declined));
                }
                Ok(HostClaim::PlacementDeclined) => {
                    e.counts
                        .decline(crate::stats::DeclineCause::PlacementConflict, true);
                    self.source.declined();
                    lost.push((e.waiting, e.counts, BatchFallback::Declined));
                }
                Err(err) => {
                    e.counts.errors = 1;
                    deps.stats.record(
                        e.counts,
                        Some(e.waiting.started.elapsed().as_micros() as u64),
                    );
                    placed.push((e, Err(err)));
                }
            }
        }
        (self.still_awaited(placed).await, lost)
    }

    /// Claims each call on its host in the ledger as one group (`Ledger::claim_all`: queued
    /// together, committed in one transaction, each claim still conditional with its own
    /// answer): each outcome with the time the group took.
    async fn claim_round(
        &self,
        claiming: &[(Entry, HostState)],
    ) -> Vec<(Result<ClaimOutcome, LedgerError>, u64)> {
        if claiming.is_empty() {
            return Vec::new();
        }
        let deps = &self.deps;
        let claims: Vec<_> = claiming
            .iter()
            .map(|(e, host)| {
                let req = &e.waiting.request;
                (host.id, req.instance_uuid.as_str(), &req.demand)
            })
            .collect();
        let started = Instant::now();
        let outcomes = deps.ledger.claim_all(&claims, deps.clock.now_ms()).await;
        let us = started.elapsed().as_micros() as u64;
        outcomes
            .into_iter()
            .map(|outcome| {
                deps.stats.record_claim(us);
                (outcome, us)
            })
            .collect()
    }

    /// The answers whose caller still waits; a caller that gave up meanwhile gets none, and
    /// its claims are given back.
    async fn still_awaited(&self, placed: Vec<(Entry, Answer)>) -> Vec<(Entry, Answer)> {
        let mut answered = Vec::with_capacity(placed.len());
        for (e, answer) in placed {
            if e.waiting.reply.is_closed() {
                if let Ok(hosts) = &answer {
                    self.release_unanswered(&e.waiting.request, hosts).await;
                }
                continue;
            }
            answered.push((e, answer));
        }
        answered
    }

    /// The claimed `host` with its alternates: the `ranked` hosts of its cell after it, as
    /// many as `max_attempts` allows.
    fn round_selection(&self, host: &HostState, ranked: &[HostState]) -> Vec<HostState> {
        let cell = self.cell_of(host);
        let alternates = self.deps.settings.scheduler.max_attempts - 1;
        let mut selection = vec![host.clone()];
        selection.extend(
            ranked
                .iter()
                .filter(|h| h.id != host.id && self.cell_of(h) == cell)
                .take(alternates)
                .cloned(),
        );
        selection
    }

    /// Gives back what was claimed for a call whose caller is gone (its answer cannot be
    /// delivered, so nothing will confirm it): Placement's claim first, then the ledger's.
    async fn release_unanswered(&self, req: &RequestContext, placed: &[Vec<HostState>]) {
        if placed.is_empty() || req.rebuild {
            return;
        }
        if let (Some(placement), Some(_)) = (&self.deps.placement, &req.owner) {
            if let Err(e) = placement.remove(&req.instance_uuid).await {
                tracing::warn!(instance = %req.instance_uuid, error = %e, "could not remove the claim in Placement of a call whose caller is gone");
            }
        }
        if let Err(e) = self.deps.ledger.release(&req.instance_uuid).await {
            tracing::warn!(instance = %req.instance_uuid, error = %e, "could not release the claim of a call whose caller is gone; claim_ttl_s releases it");
        }
    }
}

/// A round as one batch for the solver: the hosts any call ranked (each once), the classes
/// any call demands, and per call its demand in those classes and its ranked hosts as
/// indices of the first.
fn round_batch(entries: &[Entry]) -> (Vec<HostState>, Vec<ClassId>, Vec<BatchRequest>) {
    let mut hosts: Vec<HostState> = Vec::new();
    let mut index: HashMap<HostId, u32> = HashMap::new();
    let mut classes: Vec<ClassId> = Vec::new();
    for e in entries {
        for (c, _) in e.waiting.request.demand.nonzero() {
            if !classes.contains(&c) {
                classes.push(c);
            }
        }
    }
    let batch: Vec<BatchRequest> = entries
        .iter()
        .map(|e| BatchRequest {
            demand: classes
                .iter()
                .map(|&c| e.waiting.request.demand.get(c).max(0) as u64)
                .collect(),
            hosts: Some(
                e.ranked
                    .iter()
                    .map(|h| {
                        *index.entry(h.id).or_insert_with(|| {
                            hosts.push(h.clone());
                            hosts.len() as u32 - 1
                        })
                    })
                    .collect(),
            ),
            group: None,
        })
        .collect();
    (hosts, classes, batch)
}
