//! The active backend and its replacement on reconfiguration: a call takes a handle on the
//! backend active when it starts and finishes there, new calls go to the new backend, and
//! statistics stay per backend.

use crate::backend::{Backend, BackendDeps, BuildError, ScheduleError};
use crate::clock::SharedClock;
use crate::configuration::Settings;
use crate::domain::{HostState, RequestContext};
use crate::ledger::Ledger;
use crate::stats::Stats;
use parking_lot::RwLock;
use std::sync::Arc;

/// The scheduler the HTTP and RPC surfaces call.
pub struct Scheduler {
    ledger: Ledger,
    cloud: Arc<crate::cloud::Cloud>,
    stats: Arc<Stats>,
    clock: SharedClock,
    // Read on every call, written on SIGHUP only; never held across an await.
    active: RwLock<(Arc<Settings>, Arc<Backend>)>,
}

impl Scheduler {
    pub async fn start(
        settings: Arc<Settings>,
        ledger: Ledger,
        stats: Arc<Stats>,
        clock: SharedClock,
    ) -> Result<Self, BuildError> {
        let backend = Self::build(&settings, &ledger, &stats, &clock).await?;
        Ok(Scheduler {
            ledger,
            cloud: Arc::new(crate::cloud::Cloud::new()),
            stats,
            clock,
            active: RwLock::new((settings, Arc::new(backend))),
        })
    }

    async fn build(
        settings: &Arc<Settings>,
        ledger: &Ledger,
        stats: &Arc<Stats>,
        clock: &SharedClock,
    ) -> Result<Backend, BuildError> {
        let kind = settings.scheduler.backend;
        let deps = BackendDeps {
            ledger: ledger.clone(),
            settings: settings.clone(),
            stats: stats.backend(kind.as_str()),
            clock: clock.clone(),
        };
        Backend::start(kind, deps).await
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
        let backend = self.backend();
        backend.schedule(requests).await
    }

    /// Switches to the backend and parameters of `settings`. The old backend's background
    /// tasks stop; calls already running on it finish there. On error nothing changes.
    pub async fn reconfigure(&self, settings: Arc<Settings>) -> Result<(), BuildError> {
        let current = self.settings();
        if current.server.port != settings.server.port || current.ledger.url != settings.ledger.url
        {
            tracing::warn!(
                "server and ledger settings change only at restart; the rest is applied now"
            );
        }
        let backend =
            Arc::new(Self::build(&settings, &self.ledger, &self.stats, &self.clock).await?);
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
