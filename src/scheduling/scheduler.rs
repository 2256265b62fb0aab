//! The active backend and its replacement on reconfiguration: a call takes a handle on the
//! backend active when it starts and finishes there, new calls go to the new backend, and
//! statistics stay per backend.

use crate::backend::{Alternates, Backend, BackendDeps, BuildError, ScheduleError};
use crate::clock::SharedClock;
use crate::configuration::Settings;
use crate::domain::{HostState, RequestContext};
use crate::ledger::Ledger;
use crate::placement::{PlacementClaims, Resync};
use crate::plugins::Chains;
use crate::stats::Stats;
use parking_lot::RwLock;
use std::sync::Arc;

/// The scheduler the HTTP and RPC surfaces call.
pub struct Scheduler {
    ledger: Ledger,
    cloud: Arc<crate::cloud::Cloud>,
    stats: Arc<Stats>,
    clock: SharedClock,
    /// Claims in Placement, when `[placement] enabled` and `claims` (at start).
    claims: Option<Arc<PlacementClaims>>,
    /// Syncs asked for by requests that found no candidate.
    resync: Arc<Resync>,
    /// Flex's penalty and classes (`[flex]`, read at start), shared by every backend.
    flex: Arc<crate::backend::Flex>,
    // Read on every call, written on SIGHUP only; never held across an await.
    active: RwLock<(Arc<Settings>, Arc<Backend>)>,
}

/// A host's events older than its newest are taken again after `[policy] host_timeout_s`
/// (`table::events`).
fn set_event_clock_reset(ledger: &Ledger, settings: &Settings) {
    let ms = i64::try_from(settings.policy.host_timeout_s.saturating_mul(1000)).unwrap_or(i64::MAX);
    ledger.table().set_event_clock_reset_after_ms(ms);
}

/// The plugin chains of `settings` (rebuilt with the backend on every reload, so a SIGHUP
/// changes them for new calls while running calls finish on the old ones).
fn chains(
    settings: &Settings,
    stats: &Stats,
    clock: &SharedClock,
) -> Result<Arc<Chains>, BuildError> {
    let k = settings.plugins.candidates_for(
        settings.scheduler.max_attempts,
        settings.policy.host_subset_size,
    );
    Ok(Arc::new(Chains::build(&settings.plugins, k, stats, clock)?))
}

impl Scheduler {
    pub async fn start(
        settings: Arc<Settings>,
        ledger: Ledger,
        stats: Arc<Stats>,
        clock: SharedClock,
    ) -> Result<Self, BuildError> {
        let claims = if settings.placement.claims_active() {
            Some(Arc::new(PlacementClaims::new(
                settings.placement.clone(),
                clock.clone(),
            )?))
        } else {
            None
        };
        let resync = Arc::new(Resync::new(
            settings.placement.resync_min_interval_s,
            clock.clone(),
        ));
        let kind = settings.scheduler.backend;
        let deps = BackendDeps {
            ledger: ledger.clone(),
            settings: settings.clone(),
            stats: stats.backend(kind.as_str()),
            clock: clock.clone(),
            placement: claims.clone(),
            resync: resync.clone(),
            plugins: chains(&settings, &stats, &clock)?,
        };
        let backend = Backend::start(kind, deps).await?;
        set_event_clock_reset(&ledger, &settings);
        let (table, signals) = (ledger.clone(), ledger.clone());
        let inputs = crate::backend::QosInputs {
            loads: Arc::new(move |classes, at| table.table().measured_loads(classes, at)),
            instances: Arc::new(move |at, visit| signals.table().visit_instance_qos(at, visit)),
        };
        let flex = crate::backend::Flex::start(&settings, clock.clone(), inputs)?;
        // Nova's aggregate membership is laid over the live table's hosts.
        let cloud = Arc::new(crate::cloud::Cloud::with_table(ledger.table().clone()));
        Ok(Scheduler {
            ledger,
            cloud,
            stats,
            clock,
            claims,
            resync,
            flex,
            active: RwLock::new((settings, Arc::new(backend))),
        })
    }

    async fn build(&self, settings: &Arc<Settings>) -> Result<Backend, BuildError> {
        let kind = settings.scheduler.backend;
        let deps = BackendDeps {
            ledger: self.ledger.clone(),
            settings: settings.clone(),
            stats: self.stats.backend(kind.as_str()),
            clock: self.clock.clone(),
            placement: self.claims.clone(),
            resync: self.resync.clone(),
            plugins: chains(settings, &self.stats, &self.clock)?,
        };
        Backend::start(kind, deps).await
    }

    /// Syncs asked for out of turn (the Placement sync loop waits on it).
    pub fn resync(&self) -> &Arc<Resync> {
        &self.resync
    }

    /// Flex's penalty and classes (`[flex]`).
    pub fn flex(&self) -> &Arc<crate::backend::Flex> {
        &self.flex
    }

    /// Whether placed instances are claimed in Placement.
    /// The Placement client of the claims, when Parasol claims in Placement.
    pub(crate) fn placement_claims(&self) -> Option<&Arc<PlacementClaims>> {
        self.claims.as_ref()
    }

    pub fn claims_in_placement(&self) -> bool {
        self.claims.is_some()
    }

    /// The backend new calls go to.
    pub fn backend(&self) -> Arc<Backend> {
        self.active.read().1.clone()
    }

    pub fn settings(&self) -> Arc<Settings> {
        self.active.read().0.clone()
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    /// The aggregates and facts the request filters read.
    pub fn cloud(&self) -> &Arc<crate::cloud::Cloud> {
        &self.cloud
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// Places the requests of one call on the active backend.
    pub async fn schedule(
        &self,
        requests: Vec<RequestContext>,
    ) -> Result<Vec<Vec<HostState>>, ScheduleError> {
        self.schedule_with(requests, Alternates::Wanted).await
    }

    /// [`Scheduler::schedule`], saying whether the caller reads alternates.
    pub async fn schedule_with(
        &self,
        requests: Vec<RequestContext>,
        alternates: Alternates,
    ) -> Result<Vec<Vec<HostState>>, ScheduleError> {
        let backend = self.backend();
        backend.schedule_with(requests, alternates).await
    }

    /// Switches to the backend and parameters of `settings`. The old backend's background
    /// tasks stop; calls already running on it finish there. On error nothing changes. What
    /// the other parts read only at start is the caller's to keep (`Settings::reload`).
    pub async fn reconfigure(&self, settings: Arc<Settings>) -> Result<(), BuildError> {
        let backend = Arc::new(self.build(&settings).await?);
        set_event_clock_reset(&self.ledger, &settings);
        let old = std::mem::replace(&mut *self.active.write(), (settings, backend.clone()));
        old.1.stop();
        if old.1.kind() != backend.kind() {
            tracing::info!(
                from = old.1.kind().as_str(),
                to = backend.kind().as_str(),
                "backend switched"
            );
        }
        Ok(())
    }
}
