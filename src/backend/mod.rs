//! The four scheduling backends (DESIGN §4), a closed set sharing the policy pipeline, the
//! ledger's claim and the per-call flow (all-or-nothing multi-create, alternates, retries).
//!
//! # Layout
//! - `workers`: the resizable pool of scheduling workers, each with private state.
//! - `filter`: fresh read of every host per decision (Nova's FilterScheduler).
//! - `caching`: a snapshot refreshed every fixed interval (Nova's CachingScheduler), and
//!   `asc`, the same snapshot with an adaptive interval.
//! - `apsr`: parallel schedulers sampling d random hosts each, re-planned by a controller.
//! - `switch`: the active backend, swapped on SIGHUP while in-flight calls finish on the old.

mod apsr;
mod caching;
mod filter;
mod switch;
mod workers;

pub use switch::Scheduler;
pub use workers::{Worker, WorkerPool};

use crate::clock::SharedClock;
use crate::configuration::{BackendKind, Settings};
use crate::domain::{HostState, RequestContext};
use crate::ledger::{ClaimOutcome, Ledger, LedgerError};
use crate::policy::{FilterEnv, Policy, PolicyError};
use crate::stats::{BackendStats, Counts};
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
}

/// What every backend is built from.
#[derive(Clone)]
pub struct BackendDeps {
    pub ledger: Ledger,
    pub settings: Arc<Settings>,
    pub stats: Arc<BackendStats>,
    pub clock: SharedClock,
}

/// Private state of one scheduling worker.
#[derive(Debug)]
pub struct WorkerState {
    pub rng: ChaCha8Rng,
    /// Reused buffer of ranked host indices.
    pub ranked: Vec<usize>,
    /// `caching`/`asc`: this worker's copy of the snapshot and the refresh it came from.
    pub cache: Vec<HostState>,
    pub cache_epoch: u64,
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
            cache: Vec::new(),
            cache_epoch: 0,
        }
    }
}

/// One instance's outcome inside a call.
pub(crate) enum Outcome {
    /// The claimed host first, then the alternates.
    Placed(Vec<HostState>),
    NoValidHost(String),
}

/// A running backend.
pub enum Backend {
    Filter(filter::FilterBackend),
    Caching(caching::CacheBackend),
    Asc(caching::CacheBackend),
    Apsr(apsr::ApsrBackend),
}

impl Backend {
    /// Builds and starts the backend `kind` (background refresh or control tasks included).
    pub async fn start(kind: BackendKind, deps: BackendDeps) -> Result<Backend, BuildError> {
        let policy = Policy::from_config(&deps.settings.policy)?;
        Ok(match kind {
            BackendKind::Filter => Backend::Filter(filter::FilterBackend::new(deps, policy)),
            BackendKind::Caching => {
                Backend::Caching(caching::CacheBackend::start(deps, policy, false).await?)
            }
            BackendKind::Asc => {
                Backend::Asc(caching::CacheBackend::start(deps, policy, true).await?)
            }
            BackendKind::Apsr => Backend::Apsr(apsr::ApsrBackend::start(deps, policy).await?),
        })
    }

    pub fn kind(&self) -> BackendKind {
        match self {
            Backend::Filter(_) => BackendKind::Filter,
            Backend::Caching(_) => BackendKind::Caching,
            Backend::Asc(_) => BackendKind::Asc,
            Backend::Apsr(_) => BackendKind::Apsr,
        }
    }

    fn deps(&self) -> &BackendDeps {
        match self {
            Backend::Filter(b) => &b.deps,
            Backend::Caching(b) | Backend::Asc(b) => &b.deps,
            Backend::Apsr(b) => &b.deps,
        }
    }

    /// Places every request of one call, or none: when one instance cannot be placed, the
    /// claims made for the call are released and the whole call is NoValidHost (as Nova).
    pub async fn schedule(
        &self,
        mut requests: Vec<RequestContext>,
    ) -> Result<Vec<Vec<HostState>>, ScheduleError> {
        let started = Instant::now();
        let deps = self.deps();
        let mut counts = Counts {
            requests: requests.len() as u64,
            ..Counts::default()
        };
        let mut placed: Vec<Vec<HostState>> = Vec::with_capacity(requests.len());
        let mut failure = None;
        for i in 0..requests.len() {
            let outcome = match self {
                Backend::Filter(b) => b.place(&requests[i], &mut counts).await,
                Backend::Caching(b) | Backend::Asc(b) => b.place(&requests[i], &mut counts).await,
                Backend::Apsr(b) => b.place(&requests[i], &mut counts).await,
            };
            match outcome {
                Ok(Outcome::Placed(hosts)) => {
                    let chosen = hosts[0].host.to_string();
                    for later in requests.iter_mut().skip(i + 1) {
                        if let Some(group) = later.group.as_mut() {
                            group.hosts.push(chosen.clone());
                        }
                    }
                    tracing::debug!(instance = %requests[i].instance_uuid, host = %chosen, "placed");
                    placed.push(hosts);
                }
                Ok(Outcome::NoValidHost(reason)) => {
                    failure = Some(ScheduleError::NoValidHost { reason });
                    break;
                }
                Err(e) => {
                    failure = Some(ScheduleError::Ledger(e));
                    break;
                }
            }
        }
        if let Some(err) = failure {
            for req in requests.iter().take(placed.len()) {
                deps.ledger.release(&req.instance_uuid).await?;
            }
            counts.no_valid_host = counts.requests;
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
        counts.placed = counts.requests;
        deps.stats
            .record(counts, Some(started.elapsed().as_micros() as u64));
        Ok(placed)
    }

    /// Stops background tasks (refresh, control); in-flight calls keep their handle.
    pub fn stop(&self) {
        match self {
            Backend::Filter(_) => {}
            Backend::Caching(b) | Backend::Asc(b) => b.stop(),
            Backend::Apsr(b) => b.stop(),
        }
    }
}

/// Tries the ranked candidates in order, counting attempts and declines; the first claim
/// that succeeds wins and the remaining candidates become its alternates.
pub(crate) async fn claim_ranked(
    deps: &BackendDeps,
    hosts: &[HostState],
    ranked: &[usize],
    req: &RequestContext,
    budget: &mut usize,
    counts: &mut Counts,
) -> Result<Option<Vec<HostState>>, LedgerError> {
    let now = deps.clock.now_ms();
    for (pos, &idx) in ranked.iter().enumerate() {
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        counts.attempts += 1;
        let started = Instant::now();
        let outcome = deps
            .ledger
            .claim(hosts[idx].id, &req.instance_uuid, &req.demand, now)
            .await?;
        let us = started.elapsed().as_micros() as u64;
        counts.claim_us += us;
        deps.stats.record_claim(us);
        match outcome {
            ClaimOutcome::Claimed => {
                let max = deps.settings.scheduler.max_attempts;
                let mut out = Vec::with_capacity(max);
                out.push(hosts[idx].clone());
                out.extend(
                    ranked[pos + 1..]
                        .iter()
                        .take(max - 1)
                        .map(|&j| hosts[j].clone()),
                );
                return Ok(Some(out));
            }
            ClaimOutcome::Declined => {
                counts.declines += 1;
                tracing::debug!(host = %hosts[idx].host, instance = %req.instance_uuid, "claim declined");
            }
        }
    }
    Ok(None)
}

/// The environment filters run in.
pub(crate) fn filter_env(deps: &BackendDeps) -> FilterEnv {
    FilterEnv::new(deps.clock.now_ms(), &deps.settings.policy)
}

/// Builds the worker states of a backend.
pub(crate) fn worker_states(settings: &Settings, salt: u64, count: usize) -> Vec<WorkerState> {
    (0..count)
        .map(|i| WorkerState::new(settings.scheduler.seed, salt, i))
        .collect()
}
