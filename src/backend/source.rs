//! Where a decision's host states come from: the live table itself (`filter`: every host,
//! read fresh, ranked in place), a snapshot of it refreshed every τ (`caching`/`asc`: each
//! worker ranks its own copy and subtracts its own claims, as Nova's CachingScheduler did), or
//! d hosts sampled at random (`apsr`). Every host state read counts as one query.

use super::cache::CacheShared;
use super::sample::SampleShared;
use super::{worker_states, BackendDeps, BuildError, Snapshot, Worker, WorkerPool, WorkerState};
use crate::domain::{HostState, Resources};
use crate::policy::SortKey;
use crate::policy::{Policy, RankArgs, Rejection, ScanView};
use crate::stats::{Counts, DeclineCause};
use std::sync::Arc;

/// The host states a backend decides on.
pub enum HostSource {
    /// Every host of the live table, for every decision.
    Live { pool: WorkerPool<WorkerState> },
    /// A snapshot of the table, refreshed every τ.
    Snapshot(Arc<CacheShared>),
    /// d hosts of the table, sampled per decision.
    Sample(Arc<SampleShared>),
}

impl HostSource {
    pub(super) fn live(deps: &BackendDeps) -> Self {
        let workers = deps.settings.scheduler.workers;
        HostSource::Live {
            pool: WorkerPool::new(worker_states(&deps.settings, 1, workers)),
        }
    }

    pub(super) fn snapshot(
        deps: &BackendDeps,
        adaptive: bool,
        keys: Vec<SortKey>,
    ) -> Result<Self, BuildError> {
        Ok(HostSource::Snapshot(CacheShared::start(
            deps, adaptive, keys,
        )?))
    }

    pub(super) fn sample(deps: &BackendDeps) -> Result<Self, BuildError> {
        Ok(HostSource::Sample(SampleShared::start(deps)?))
    }

    fn pool(&self) -> &WorkerPool<WorkerState> {
        match self {
            HostSource::Live { pool } => pool,
            HostSource::Snapshot(c) => &c.pool,
            HostSource::Sample(s) => &s.pool,
        }
    }

    /// Waits for an idle worker.
    pub(super) async fn worker(&self) -> Worker<WorkerState> {
        self.pool().acquire().await
    }

    pub(super) fn is_sample(&self) -> bool {
        matches!(self, HostSource::Sample(_))
    }

    pub(super) fn is_live(&self) -> bool {
        matches!(self, HostSource::Live { .. })
    }

    pub(super) fn is_snapshot(&self) -> bool {
        matches!(self, HostSource::Snapshot(_))
    }

    /// Why a claim on a host this source showed with room was refused.
    pub(super) fn conflict_cause(&self) -> DeclineCause {
        match self {
            HostSource::Snapshot(_) => DeclineCause::StaleSnapshot,
            HostSource::Live { .. } | HostSource::Sample(_) => DeclineCause::ClaimConflict,
        }
    }

    /// Reads host states, counting the queries, and ranks them for `args`: the candidates in
    /// order (the pick first), at most `args.max`, or why none passed the filters.
    pub(super) fn rank(
        &self,
        deps: &BackendDeps,
        policy: &Policy,
        worker: &mut WorkerState,
        args: RankArgs,
        counts: &mut Counts,
    ) -> Result<Vec<HostState>, Rejection> {
        let WorkerState {
            rng,
            ranked,
            slots,
            snapshot,
            cache_epoch,
            sorted,
        } = worker;
        match self {
            HostSource::Live { .. } => deps.ledger.table().with_scan(|live, rows| {
                counts.queries += live.len() as u64;
                policy.rank_scan(ScanView::new(live, rows), args, rng, ranked)?;
                Ok(ranked.iter().map(|&i| live[i].clone()).collect())
            }),
            HostSource::Snapshot(cache) => {
                cache.refresh_copy(deps, cache_epoch, snapshot, counts);
                let Snapshot { hosts, rows, index } = &*snapshot;
                let view = ScanView::new(hosts, rows);
                let (walked, scanned, skipped) = (sorted.walked, sorted.scanned, sorted.skipped);
                let answer = policy.rank_sorted(view, index, sorted, args, rng, ranked);
                counts.sorted_walks += sorted.walked - walked;
                counts.sorted_scans += sorted.scanned - scanned;
                counts.sorted_walks_skipped += sorted.skipped - skipped;
                answer?;
                Ok(ranked.iter().map(|&i| hosts[i].clone()).collect())
            }
            // The sampled hosts are read where they are, under the table's read lock, through
            // their scan rows (a copy of d host states was a sixth of the service's CPU); only
            // the candidates are copied.
            HostSource::Sample(sample) => deps.ledger.table().with_scan(|live, rows| {
                sample.draw(live, rng, slots, counts);
                let view = ScanView::new(live, rows);
                let fitting = policy.rank_uniform_at(view, slots, args, rng, ranked);
                let passed = fitting.as_ref().map_or(0, |n| *n);
                sample.record(&args.req.flavor, slots.len() as u64, passed as u64);
                fitting?;
                Ok(ranked.iter().map(|&i| live[i].clone()).collect())
            }),
        }
    }

    /// A claim on `host` held: a snapshot worker subtracts it from its copy (Nova's
    /// `consume_from_request`), host state, scan row and sorted orders alike.
    pub(super) fn consume(&self, worker: &mut WorkerState, host: &HostState, demand: &Resources) {
        if let HostSource::Snapshot(_) = self {
            let hosts = &worker.snapshot.hosts;
            // The host is one of the candidates just ranked; look there first.
            let slot = worker
                .ranked
                .iter()
                .copied()
                .find(|&i| hosts.get(i).is_some_and(|h| h.id == host.id))
                .or_else(|| hosts.iter().position(|h| h.id == host.id));
            if let Some(slot) = slot {
                worker.snapshot.consume(slot, demand);
            }
        }
    }

    /// An instance was placed (ASC's r counts placed and declined per interval).
    pub(super) fn placed(&self) {
        if let HostSource::Snapshot(c) = self {
            c.placed();
        }
    }

    /// A claim was declined.
    pub(super) fn declined(&self) {
        if let HostSource::Snapshot(c) = self {
            c.declined();
        }
    }

    /// Stops the refresh or control task.
    pub(super) fn stop(&self) {
        match self {
            HostSource::Live { .. } => {}
            HostSource::Snapshot(c) => c.stop(),
            HostSource::Sample(s) => s.stop(),
        }
    }
}
