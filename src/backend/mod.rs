//! The four scheduling backends (docs/architecture.md §4), a closed set. They differ only in where
//! their host states come from — the live table (`filter`), a snapshot of it refreshed every τ
//! (`caching`, `asc`), or d hosts sampled at random (`apsr`) — so they share one placement loop
//! over one [`HostSource`], the policy pipeline, the ledger's claim and the per-call flow
//! (all-or-nothing multi-create, alternates, retries).
//!
//! # Layout
//! - `source`: [`HostSource`], the three kinds of host state a decision reads.
//! - `cache`: the snapshot and its refresh task (fixed τ, or ASC's adaptive τ).
//! - `sample`: APSR's sampling parameters and its control task.
//! - `workers`: the resizable pool of scheduling workers, each with private state.
//! - `alternates`: a multi-create's alternates, Nova's pass after every instance is placed.
//! - `batch`: `[batch] mode = "call"`, a multi-create solved as one min-cost-flow assignment.
//! - `window`: `[batch] mode = "window"`, single calls of a short window solved together.
//! - `flex`: [`Flex`], the penalty P of Flex's filter and weigher and its controller's task.
//! - `trees`: requests on provider trees, ranked and claimed on Placement's candidates.

mod alternates;
mod batch;
mod cache;
mod flex;
mod sample;
mod source;
mod trees;
mod window;
mod workers;

pub use cache::Snapshot;
pub use flex::{Flex, InstanceSignals, MeasuredLoads, QosInputs};
pub use source::HostSource;
pub use workers::{Worker, WorkerPool};

use crate::clock::SharedClock;
use crate::configuration::{BackendKind, BatchMode, Settings};
use crate::domain::{CallClaims, HostState, RequestContext};
use crate::ledger::{ClaimOutcome, Ledger, LedgerError};
use crate::placement::{PlacementClaim, PlacementClaims, Resync};
use crate::plugins::Chains;
use crate::policy::{FilterEnv, Policy, PolicyError, RankArgs, Rejection, SortedScratch};
use crate::stats::{BackendStats, Counts, DeclineCause};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use std::time::Instant;

/// Why a call got no placement.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error("No valid host was found. {reason}")]
    NoValidHost { reason: String },
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// Placement could not be reached or answered an error to a claim: no placement is made
    /// without Placement's claim.
    #[error("Placement: {0}")]
    Placement(String),
}

/// Why a backend could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Control(#[from] crate::control::ControlError),
    #[error(transparent)]
    Placement(#[from] crate::placement::PlacementError),
    #[error(transparent)]
    Plugins(#[from] crate::plugins::PluginError),
}

/// What every backend is built from.
#[derive(Clone)]
pub struct BackendDeps {
    pub ledger: Ledger,
    pub settings: Arc<Settings>,
    pub stats: Arc<BackendStats>,
    pub clock: SharedClock,
    /// Claims in Placement after the ledger's, when `[placement] claims` is active.
    pub placement: Option<Arc<PlacementClaims>>,
    /// Asked for a Placement sync when a claim there is refused.
    pub resync: Arc<Resync>,
    /// The operator's plugin chains; the filter and weigh chains run on each instance's
    /// candidates before its claims (docs/plugins.md).
    pub plugins: Arc<Chains>,
}

/// Private state of one scheduling worker.
#[derive(Debug)]
pub struct WorkerState {
    pub rng: ChaCha8Rng,
    /// Reused buffer of ranked host indices.
    pub ranked: Vec<usize>,
    /// `apsr`: the table slots of the sample being decided on.
    pub slots: Vec<usize>,
    /// `caching`/`asc`: this worker's copy of the snapshot (its own claims subtracted) and the
    /// refresh it came from.
    pub snapshot: Snapshot,
    pub cache_epoch: u64,
    /// `caching`/`asc`: buffers of the sorted walk over the snapshot.
    pub sorted: SortedScratch,
}

impl WorkerState {
    /// Worker `index` of a backend; its RNG derives from `[scheduler] seed` when set.
    pub fn new(seed: Option<u64>, salt: u64, index: usize) -> Self {
        let rng = match seed {
            Some(seed) => ChaCha8Rng::seed_from_u64(
                seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    ^ (index as u64).wrapping_mul(0xD1B5_4A32_D192_ED03),
            ),
            None => ChaCha8Rng::from_entropy(),
        };
        WorkerState {
            rng,
            ranked: Vec::new(),
            slots: Vec::new(),
            snapshot: Snapshot::default(),
            cache_epoch: 0,
            sorted: SortedScratch::default(),
        }
    }
}

/// A running backend: a host source, the policy, and the workers that decide.
pub struct Backend {
    kind: BackendKind,
    deps: BackendDeps,
    policy: Policy,
    source: HostSource,
    /// `[batch] mode = "window"`: the calls waiting for the current round.
    gathering: window::Gathering,
}

impl Backend {
    /// Builds and starts the backend `kind` (background refresh or control tasks included).
    pub async fn start(kind: BackendKind, deps: BackendDeps) -> Result<Backend, BuildError> {
        let mut policy = Policy::from_config(&deps.settings.flex.policy(&deps.settings.policy))?;
        let source = match kind {
            BackendKind::Filter => HostSource::live(&deps),
            BackendKind::Caching => HostSource::snapshot(&deps, false, policy.sorted_keys())?,
            BackendKind::Asc => HostSource::snapshot(&deps, true, policy.sorted_keys())?,
            BackendKind::Apsr => {
                policy = policy.with_algorithm(crate::policy::Algorithm::Random);
                HostSource::sample(&deps)?
            }
        };
        Ok(Backend {
            kind,
            deps,
            policy,
            source,
            gathering: window::Gathering::default(),
        })
    }

    pub fn kind(&self) -> BackendKind {
        self.kind
    }

    /// The plugin chains this backend was built with (the `select` chain runs before it).
    pub fn plugins(&self) -> &Arc<Chains> {
        &self.deps.plugins
    }

    /// Places every request of one call, or none: when one instance cannot be placed, the
    /// claims made for the call are released and the whole call is NoValidHost (as Nova).
    /// With `[batch] mode = "call"` (or `"window"`), a multi-create is first placed as one
    /// assignment (`batch`); with `"window"` a single-instance call waits for the others of
    /// its window (`window`); what the batch leaves to it, and every call otherwise, goes one
    /// instance at a time.
    pub async fn schedule(
        &self,
        requests: Vec<RequestContext>,
    ) -> Result<Vec<Vec<HostState>>, ScheduleError> {
        self.schedule_with(requests, Alternates::Wanted).await
    }

    /// [`Backend::schedule`], saying whether the caller reads alternates: a multi-create
    /// whose caller does not (Nova's `return_alternates` false, or legacy dicts) gets none
    /// and costs no alternates pass.
    pub async fn schedule_with(
        &self,
        requests: Vec<RequestContext>,
        alternates: Alternates,
    ) -> Result<Vec<Vec<HostState>>, ScheduleError> {
        let started = Instant::now();
        let mut counts = Counts {
            requests: requests.len() as u64,
            ..Counts::default()
        };
        // Filter and weigh plugins judge one instance's ranked candidates at a time
        // (docs/plugins.md §2): with such plugins every call goes one instance at a time.
        // A request on provider trees goes one instance at a time too: only `place` knows its
        // candidates. So does one with a NUMA topology or PCI requests: the solver knows
        // resources, not NUMA cells and devices, which `NUMATopologyFilter` and
        // `PciPassthroughFilter` judge per instance with the call's earlier ones.
        let on_trees = requests.first().is_some_and(|r| r.trees.is_some());
        let numa_pci = requests.first().is_some_and(|r| r.numa_pci.is_some());
        let mode = if self.deps.plugins.has_candidate_plugins() || on_trees || numa_pci {
            BatchMode::Off
        } else {
            self.deps.settings.batch.mode
        };
        if mode == BatchMode::Window && requests.len() == 1 && !requests[0].rebuild {
            let request = requests.into_iter().next().expect("one request");
            return Box::pin(self.schedule_windowed(request)).await;
        }
        if mode != BatchMode::Off && requests.len() >= 2 {
            // Boxed, as the window's and the failure paths' futures below: a future holds room
            // for its largest await, and the common path's is copied on every call.
            let batch = Box::pin(self.schedule_batch(&requests, &mut counts, started, alternates));
            match batch.await {
                batch::Batched::Done(answer) => return answer,
                batch::Batched::Fallback(reason) => {
                    tracing::info!(
                        reason = reason.as_str(),
                        instances = requests.len(),
                        "multi-create placed one instance at a time instead of as a batch"
                    );
                    self.deps.stats.record_batch_fallback(reason);
                }
            }
        }
        self.schedule_each(requests, started, counts, alternates)
            .await
    }

    /// Today's path: each instance in turn (`place`), the group's members updated for the
    /// next; `counts` holds what the call counted before (a batch given up).
    async fn schedule_each(
        &self,
        mut requests: Vec<RequestContext>,
        started: Instant,
        mut counts: Counts,
        alternates: Alternates,
    ) -> Result<Vec<Vec<HostState>>, ScheduleError> {
        let deps = &self.deps;
        let mut placed: Vec<Vec<HostState>> = Vec::with_capacity(requests.len());
        let mut failure = None;
        // A single instance takes its alternates from its own ranking (Nova's index 0); the
        // instances of a multi-create take theirs from one more pass once all are placed.
        let multi = requests.len() > 1;
        let mut taken = CallClaims::default();
        for i in 0..requests.len() {
            match self.place(&requests[i], &mut counts, multi).await {
                Ok(Placement::Placed(hosts)) => {
                    let chosen = hosts[0].host().to_string();
                    if multi && i + 1 < requests.len() {
                        taken.add(hosts[0].id, requests[i].demand);
                        if let Some(c) = trees::chosen(&requests[i], &hosts[0]) {
                            taken.add_candidate(hosts[0].id, c.body.clone());
                        }
                        requests[i + 1].call_claims = Some(Arc::new(taken.clone()));
                    }
                    for later in requests.iter_mut().skip(i + 1) {
                        if let Some(group) = later.group.as_mut() {
                            group.add_member_on(&chosen);
                        }
                    }
                    tracing::debug!(instance = %requests[i].instance_uuid, host = %chosen, "placed");
                    placed.push(hosts);
                }
                Ok(Placement::NoValidHost(reason)) => {
                    failure = Some(ScheduleError::NoValidHost { reason });
                    break;
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if let Some(err) = failure {
            // Nova's `_cleanup_allocations`: Placement's claims of this call go first, so a
            // sync never sees them without the ledger's.
            if let Some(placement) = &deps.placement {
                for req in requests.iter().take(placed.len()) {
                    if req.owner.is_none() {
                        continue;
                    }
                    if let Err(e) = Box::pin(placement.remove(&req.instance_uuid)).await {
                        tracing::warn!(instance = %req.instance_uuid, error = %e, "could not remove the claim in Placement of a failed multi-create; the next sync repairs the ledger");
                    }
                }
            }
            for req in requests.iter().take(placed.len()) {
                if req.rebuild {
                    continue; // nothing was claimed: the instance keeps its allocation
                }
                Box::pin(deps.ledger.release(&req.instance_uuid)).await?;
            }
            match &err {
                ScheduleError::NoValidHost { .. } => counts.no_valid_host = counts.requests,
                ScheduleError::Ledger(_) | ScheduleError::Placement(_) => {
                    counts.errors = counts.requests
                }
            }
            deps.stats
                .record(counts, Some(started.elapsed().as_micros() as u64));
            return Err(match err {
                ScheduleError::NoValidHost { reason }
                    if requests.len() > 1 && !placed.is_empty() =>
                {
                    tracing::info!(%reason, "multi-create failed part-way; claims released");
                    ScheduleError::NoValidHost {
                        reason: "There are not enough hosts available.".into(),
                    }
                }
                other => other,
            });
        }
        if multi {
            let mut worker = self.source.worker().await;
            let call = Call {
                requests: &requests,
                alternates,
            };
            self.multi_create_alternates(&mut worker, call, &mut placed, &mut counts);
        }
        counts.placed = counts.requests;
        deps.stats
            .record(counts, Some(started.elapsed().as_micros() as u64));
        Ok(placed)
    }

    /// `[policy] packing_host_numa_cells_allocation_strategy` (Nova's `[compute]` option).
    fn pack(&self) -> bool {
        let policy = &self.deps.settings.policy;
        policy.packing_host_numa_cells_allocation_strategy
    }

    /// The cell a Selection names for `host`: its node's from Nova's records, else the
    /// configured one (without `[nova_db]` every host is in that one cell).
    fn cell_of<'a>(&'a self, host: &'a HostState) -> &'a str {
        host.profile
            .facts
            .as_ref()
            .and_then(|f| f.cell_uuid.as_deref())
            .unwrap_or(&self.deps.settings.scheduler.cell_uuid)
    }

    /// The placement loop every backend runs: read host states from the source, rank them,
    /// claim the best in order until one claim holds, within `max_attempts` attempts.
    /// In a multi-create (`multi`) only the claimed host is answered: the alternates come
    /// from the pass after every instance is placed.
    async fn place(
        &self,
        req: &RequestContext,
        counts: &mut Counts,
        multi: bool,
    ) -> Result<Placement, ScheduleError> {
        let mut worker = self.source.worker().await;
        let max_attempts = self.deps.settings.scheduler.max_attempts;
        if req.rebuild {
            return Ok(self.check_rebuild(&mut worker, req, max_attempts, counts));
        }
        let mut budget = max_attempts;
        let mut empty_samples = 0u64;
        let mut last_reason = String::new();
        let plugins = &self.deps.plugins;
        while budget > 0 {
            let env = FilterEnv::new(self.deps.clock.now_ms(), &self.deps.settings.policy);
            // Filter and weigh plugins see the top K candidates (more when the call needs
            // more), and only hosts they saw are claimed.
            // Hosts the call filled are ranked (as Nova weighs them) but never claimed: rank
            // as many more.
            let filled = req.call_claims.as_ref().map_or(0, |c| c.len());
            let wanted = if plugins.has_candidate_plugins() {
                plugins.candidates().max(budget + filled)
            } else {
                budget + filled
            };
            let args = RankArgs {
                req,
                env: &env,
                max: wanted,
            };
            let candidates = match self.ranked(&mut worker, args, counts) {
                Ok(candidates) => candidates,
                Err(rejection) if req.trees.is_some() => {
                    counts.decline(DeclineCause::NoValidHost, false);
                    tracing::info!(instance = %req.instance_uuid, %rejection, "no host Placement offered passed the filters");
                    return Ok(Placement::NoValidHost(rejection.reason()));
                }
                Err(rejection) if self.source.is_sample() => {
                    budget -= 1;
                    empty_samples += 1;
                    counts.decline(DeclineCause::EmptySample, false);
                    last_reason = rejection.reason();
                    continue;
                }
                Err(rejection) => return Ok(self.no_host_passed(req, &rejection, counts)),
            };
            let candidates = self.claimable(&mut worker, args, candidates, multi, counts);
            if candidates.is_empty() {
                counts.decline(DeclineCause::NoValidHost, false);
                return Ok(Placement::NoValidHost(
                    "the call's earlier instances filled every candidate host".into(),
                ));
            }
            let candidates = match self.reviewed(req, candidates, counts).await {
                Ok(candidates) => candidates,
                Err(refused) => return Ok(refused),
            };
            // APSR claims one host per sample: the rest of the sample are its alternates.
            let tries = if self.source.is_sample() && req.trees.is_none() {
                1
            } else {
                budget
            };
            let mut tried = 0;
            // A host none of whose candidates fits any more is skipped, as Nova skips it.
            let fits = |(_, h): &(usize, &HostState)| trees::pick(req, h, self.pack());
            for (pos, host) in candidates.iter().enumerate().filter(fits).take(tries) {
                budget -= 1;
                tried += 1;
                match self.claim_on(host, req, counts).await? {
                    HostClaim::Claimed => {
                        counts.attempts += 1;
                        self.source.placed();
                        let claimed = trees::demand_on(req, host);
                        self.source.consume(&mut worker, host, &claimed);
                        let selection = self.answered(req, &candidates, pos, multi, max_attempts);
                        if empty_samples > 0 {
                            // A fitting host existed all along: those samples were avoidable.
                            counts.avoidable += empty_samples;
                        }
                        return Ok(Placement::Placed(selection));
                    }
                    HostClaim::Declined => {
                        counts.decline(self.source.conflict_cause(), true);
                        self.source.declined();
                        tracing::debug!(host = %host.host(), instance = %req.instance_uuid, "claim declined");
                    }
                    HostClaim::PlacementDeclined => {
                        counts.decline(DeclineCause::PlacementConflict, true);
                        self.source.declined();
                    }
                }
            }
            last_reason = format!("{tried} candidate host(s) declined the claim");
        }
        if empty_samples > 0 && self.fits_somewhere(req) {
            counts.avoidable += empty_samples;
        }
        if self.source.is_sample() && empty_samples > 0 {
            last_reason = format!(
                "no sampled host could take the request ({empty_samples} sample(s) held no fitting host; {last_reason})"
            );
        }
        Ok(Placement::NoValidHost(last_reason))
    }

    /// The source's ranking of the request's hosts, or Placement's candidates' hosts for a
    /// request on provider trees.
    fn ranked(
        &self,
        worker: &mut WorkerState,
        args: RankArgs,
        counts: &mut Counts,
    ) -> Result<Vec<HostState>, Rejection> {
        if args.req.trees.is_some() {
            self.rank_trees(worker, args, counts)
        } else {
            self.source
                .rank(&self.deps, &self.policy, worker, args, counts)
        }
    }

    /// What a placement answers once `candidates[pos]` is claimed: the host and its
    /// alternates for a single instance; in a multi-create the host alone, or with what the
    /// plugins kept for the alternates pass to keep to.
    fn answered(
        &self,
        req: &RequestContext,
        candidates: &[HostState],
        pos: usize,
        multi: bool,
        max_attempts: usize,
    ) -> Vec<HostState> {
        let host = &candidates[pos];
        if !multi {
            let selection = self.selection(host, &candidates[pos + 1..], max_attempts);
            trees::pick_alternates(req, &req.instance_uuid, &selection[1..], self.pack());
            selection
        } else if self.deps.plugins.has_candidate_plugins() {
            let kept = candidates.iter().filter(|h| h.id != host.id);
            std::iter::once(host).chain(kept).cloned().collect()
        } else {
            vec![host.clone()]
        }
    }

    /// The candidates the filter and weigh plugins keep (all of them without such plugins),
    /// or NoValidHost when they keep none or a plugin stops the call.
    async fn reviewed(
        &self,
        req: &RequestContext,
        candidates: Vec<HostState>,
        counts: &mut Counts,
    ) -> Result<Vec<HostState>, Placement> {
        let plugins = &self.deps.plugins;
        if !plugins.has_candidate_plugins() {
            return Ok(candidates);
        }
        match Box::pin(plugins.review(req, candidates)).await {
            Ok(kept) if !kept.is_empty() => Ok(kept),
            Ok(_) => {
                counts.decline(DeclineCause::NoValidHost, false);
                Err(Placement::NoValidHost(
                    "no candidate host was left by the filter plugins".into(),
                ))
            }
            Err(stopped) => {
                counts.decline(DeclineCause::NoValidHost, false);
                Err(Placement::NoValidHost(stopped.to_string()))
            }
        }
    }

    /// No host passed the filters: a snapshot that shows no room where the live table has
    /// some is stale (an avoidable decline), otherwise there is no valid host.
    fn no_host_passed(
        &self,
        req: &RequestContext,
        rejection: &Rejection,
        counts: &mut Counts,
    ) -> Placement {
        self.source.declined();
        if self.source.is_snapshot() && self.fits_somewhere(req) {
            counts.decline(DeclineCause::StaleSnapshot, true);
        } else {
            counts.decline(DeclineCause::NoValidHost, false);
        }
        tracing::info!(instance = %req.instance_uuid, %rejection, "no host passed the filters");
        Placement::NoValidHost(rejection.reason())
    }

    /// Claims `req` on `host` in the ledger, then in Placement when that holds, counting the
    /// time both take as claim time.
    async fn claim_on(
        &self,
        host: &HostState,
        req: &RequestContext,
        counts: &mut Counts,
    ) -> Result<HostClaim, ScheduleError> {
        let started = Instant::now();
        let outcome = self
            .deps
            .ledger
            .claim(
                host.id,
                &req.instance_uuid,
                &trees::demand_on(req, host),
                self.deps.clock.now_ms(),
            )
            .await;
        let us = started.elapsed().as_micros() as u64;
        counts.claim_us += us;
        self.deps.stats.record_claim(us);
        match outcome {
            Ok(ClaimOutcome::Claimed) => {
                // Placement's claim is claim time too, not decision time.
                let started = Instant::now();
                let placed = self.claim_in_placement(host, req).await;
                counts.claim_us += started.elapsed().as_micros() as u64;
                placed
            }
            Ok(ClaimOutcome::Declined) => Ok(HostClaim::Declined),
            Err(e) => Err(ScheduleError::Ledger(e)),
        }
    }

    /// The claimed `host` and at most `size - 1` of the `alternates` after it, from its cell
    /// only (a reschedule builds in the instance's cell), as Nova's `_get_alternate_hosts`.
    fn selection(&self, host: &HostState, alternates: &[HostState], size: usize) -> Vec<HostState> {
        let cell = self.cell_of(host);
        let mut selection = Vec::with_capacity(size);
        selection.push(host.clone());
        selection.extend(
            alternates
                .iter()
                .filter(|h| self.cell_of(h) == cell)
                .take(size - 1)
                .cloned(),
        );
        selection
    }

    /// Nova's rebuild check (`_nova_check_type: ["rebuild"]`, `_legacy_find_hosts`): the
    /// instance's own host, which the request forces, through the filters that run on a
    /// rebuild, and no claim — the instance keeps its allocation, in the ledger as in
    /// Placement. Decided on the live table whatever the backend: a snapshot or a sample
    /// could miss or misstate that one host.
    fn check_rebuild(
        &self,
        worker: &mut WorkerState,
        req: &RequestContext,
        max: usize,
        counts: &mut Counts,
    ) -> Placement {
        let env = FilterEnv::new(self.deps.clock.now_ms(), &self.deps.settings.policy);
        let ranked = self.deps.ledger.table().with_hosts(|live| {
            counts.queries += live.len() as u64;
            let mut order = Vec::new();
            self.policy
                .rank(
                    live,
                    RankArgs {
                        req,
                        env: &env,
                        max,
                    },
                    &mut worker.rng,
                    &mut order,
                )
                .map(|()| order.iter().map(|&i| live[i].clone()).collect::<Vec<_>>())
        });
        match ranked {
            Ok(hosts) => {
                counts.attempts += 1;
                Placement::Placed(hosts)
            }
            Err(rejection) => {
                counts.decline(DeclineCause::NoValidHost, false);
                tracing::info!(instance = %req.instance_uuid, %rejection, "the rebuild's host did not pass the filters");
                Placement::NoValidHost(rejection.reason())
            }
        }
    }

    /// Nova's claim in Placement after the ledger's claim held: `Claimed` when Placement took
    /// it too (or no claim there is due), `PlacementDeclined` after a 409 (the ledger's claim
    /// released, a sync asked for), `Err` when Placement could not be asked (the ledger's
    /// claim released too: never a placement without Placement's claim).
    async fn claim_in_placement(
        &self,
        host: &HostState,
        req: &RequestContext,
    ) -> Result<HostClaim, ScheduleError> {
        let (Some(placement), Some(owner)) = (&self.deps.placement, &req.owner) else {
            return Ok(HostClaim::Claimed);
        };
        // Boxed: the HTTP call's future would otherwise size every claim's.
        Box::pin(self.claim_in_placement_now(placement, owner, host, req)).await
    }

    /// [`Backend::claim_in_placement`] once a claim there is due.
    async fn claim_in_placement_now(
        &self,
        placement: &PlacementClaims,
        owner: &crate::domain::ConsumerOwner,
        host: &HostState,
        req: &RequestContext,
    ) -> Result<HostClaim, ScheduleError> {
        let body = trees::allocation_request(req, host);
        let started = Instant::now();
        let answer = placement
            .claim(
                &req.instance_uuid,
                &body,
                crate::nova::ALLOCATION_REQUEST_VERSION,
                &owner.project_id,
                &owner.user_id,
            )
            .await;
        self.deps
            .stats
            .record_placement_claim(started.elapsed().as_secs_f64());
        match answer {
            Ok(PlacementClaim::Claimed) => Ok(HostClaim::Claimed),
            Ok(PlacementClaim::Conflict(detail)) => {
                tracing::info!(host = %host.host(), instance = %req.instance_uuid, %detail, "Placement refused the claim; trying the next host");
                self.deps.ledger.release(&req.instance_uuid).await?;
                self.deps.resync.request();
                Ok(HostClaim::PlacementDeclined)
            }
            Err(e) => {
                tracing::warn!(host = %host.host(), instance = %req.instance_uuid, error = %e, "claim in Placement failed; the ledger's claim is released");
                self.deps.ledger.release(&req.instance_uuid).await?;
                Err(ScheduleError::Placement(e.to_string()))
            }
        }
    }

    /// Whether some host of the live table could take `req` now (to tell an APSR request that
    /// found no host apart from one the cloud could not take). Not a query: a diagnosis.
    fn fits_somewhere(&self, req: &RequestContext) -> bool {
        let env = FilterEnv::new(self.deps.clock.now_ms(), &self.deps.settings.policy);
        self.deps
            .ledger
            .table()
            .with_hosts(|hosts| hosts.iter().any(|h| self.policy.fits_any(h, req, &env)))
    }

    /// Stops background tasks (refresh, control); in-flight calls keep their handle.
    pub fn stop(&self) {
        self.source.stop();
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether the caller reads alternates (Nova's `return_alternates and return_objects`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alternates {
    Wanted,
    Unwanted,
}

/// The requests of one call and whether its caller reads alternates.
#[derive(Clone, Copy)]
struct Call<'a> {
    pub requests: &'a [RequestContext],
    pub alternates: Alternates,
}

/// What became of a claim on one host: the ledger's, then Placement's.
enum HostClaim {
    /// Both took it (or no claim in Placement is due).
    Claimed,
    /// The ledger declined it: the host no longer had room.
    Declined,
    /// Placement refused a claim the ledger had taken (409); the ledger's was released.
    PlacementDeclined,
}

/// One instance's outcome inside a call.
enum Placement {
    /// The claimed host first, then the alternates.
    Placed(Vec<HostState>),
    NoValidHost(String),
}

/// Builds the worker states of a backend.
pub(crate) fn worker_states(settings: &Settings, salt: u64, count: usize) -> Vec<WorkerState> {
    (0..count)
        .map(|i| WorkerState::new(settings.scheduler.seed, salt, i))
        .collect()
}

#[cfg(test)]
impl Backend {
    /// Bytes of the futures one instance's placement awaits on the common path (not polled),
    /// for the size guard in `scheduling::select`'s tests.
    pub(crate) fn future_sizes(
        &self,
        req: &RequestContext,
        host: &HostState,
    ) -> Vec<(&'static str, usize)> {
        let mut counts = Counts::default();
        let schedule = self.schedule_with(vec![req.clone()], Alternates::Wanted);
        let mut sizes = vec![("Backend::schedule_with", std::mem::size_of_val(&schedule))];
        drop(schedule);
        let place = self.place(req, &mut counts, false);
        sizes.push(("Backend::place", std::mem::size_of_val(&place)));
        drop(place);
        let claim = self.claim_on(host, req, &mut counts);
        sizes.push(("Backend::claim_on", std::mem::size_of_val(&claim)));
        sizes
    }
}
