//! Building and running the service: ledger, scheduler, HTTP server (and, when configured,
//! the broker consumers). Tests bind port 0 and inject the clock.

use crate::backend::{BuildError, Scheduler};
use crate::clock::{SharedClock, SystemClock};
use crate::configuration::Settings;
use crate::ledger::{Ledger, LedgerError};
use crate::routes;
use crate::stats::Stats;
use actix_web::dev::Server;
use actix_web::{web, App, HttpServer};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("cannot create the data directory: {0}")]
    DataDir(std::io::Error),
    #[error("ledger: {0}")]
    Ledger(#[from] LedgerError),
    #[error("backend: {0}")]
    Backend(#[from] BuildError),
    #[error("{0}")]
    Auth(#[from] crate::auth::AuthError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
}

/// Whether the broker connection is up, for `/healthz` and `/v1/stats`.
#[derive(Debug, Default)]
pub struct BrokerStatus {
    pub configured: AtomicBool,
    pub connected: AtomicBool,
    /// Connection attempts since start (each failure waits a capped, doubling delay).
    pub connect_attempts: AtomicU64,
    /// The delay before the next attempt, in ms, while disconnected.
    pub retry_in_ms: AtomicU64,
    pub last_error: Mutex<Option<String>>,
}

impl BrokerStatus {
    pub fn to_json(&self) -> Value {
        json!({
            "configured": self.configured.load(Ordering::Relaxed),
            "connected": self.connected.load(Ordering::Relaxed),
            "connect_attempts": self.connect_attempts.load(Ordering::Relaxed),
            "retry_in_s": self.retry_in_ms.load(Ordering::Relaxed) as f64 / 1000.0,
            "last_error": *self.last_error.lock(),
        })
    }
}

/// What every route shares.
pub struct AppState {
    pub scheduler: Scheduler,
    pub broker: Arc<BrokerStatus>,
    pub placement: Arc<crate::placement::PlacementStatus>,
    /// Notifications by outcome (applied, duplicate, unknown_event, dead_letter).
    pub notifications: Mutex<BTreeMap<String, u64>>,
}

impl AppState {
    /// Counts a notification outcome here and on `/metrics`.
    pub fn count_notification(&self, outcome: &str) {
        *self
            .notifications
            .lock()
            .entry(outcome.to_string())
            .or_default() += 1;
        self.scheduler.stats().metrics().notification(outcome);
    }

    pub fn notifications_json(&self) -> Value {
        json!(*self.notifications.lock())
    }
}

/// A built, not yet running, service.
pub struct Application {
    port: u16,
    server: Server,
    state: web::Data<AppState>,
}

impl Application {
    /// Connects the ledger (applying migrations) and binds `[server] host:port`.
    pub async fn build(settings: Settings) -> Result<Application, StartupError> {
        let addr = format!("{}:{}", settings.server.host, settings.server.port);
        let listener =
            TcpListener::bind(&addr).map_err(|source| StartupError::Bind { addr, source })?;
        Self::build_with(settings, listener, Arc::new(SystemClock)).await
    }

    /// Like [`Application::build`] on a given listener and clock (tests bind port 0).
    pub async fn build_with(
        settings: Settings,
        listener: TcpListener,
        clock: SharedClock,
    ) -> Result<Application, StartupError> {
        crate::auth::check_bind(&settings.auth, listener.local_addr().ok())?;
        let url = settings
            .ledger
            .resolve_url()
            .map_err(StartupError::DataDir)?;
        let ledger = Ledger::connect(&url, settings.ledger.max_connections).await?;
        ledger.migrate().await?;
        let stats = Arc::new(Stats::new(clock.clone(), settings.scheduler.stats_window_s));
        let settings = Arc::new(settings);
        let scheduler = Scheduler::start(settings.clone(), ledger, stats, clock).await?;
        let state = web::Data::new(AppState {
            scheduler,
            broker: Arc::new(BrokerStatus::default()),
            placement: Default::default(),
            notifications: Mutex::new(BTreeMap::new()),
        });
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let server = http_server(state.clone(), listener, &settings)?;
        tracing::info!(port, backend = settings.scheduler.backend.as_str(), ledger = %redact(&url), "Parasol ready");
        Ok(Application {
            port,
            server,
            state,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The shared state, for the broker consumers and for reconfiguration.
    pub fn state(&self) -> web::Data<AppState> {
        self.state.clone()
    }

    /// A handle to stop the HTTP server gracefully.
    pub fn handle(&self) -> actix_web::dev::ServerHandle {
        self.server.handle()
    }

    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.server.await
    }
}

fn http_server(
    state: web::Data<AppState>,
    listener: TcpListener,
    settings: &Settings,
) -> Result<Server, StartupError> {
    let limit = settings.server.max_body_bytes;
    let workers = settings.server.http_workers;
    let clock = state.scheduler.clock().clone();
    let auth = crate::auth::Auth::new(&settings.auth, listener.local_addr().ok(), clock)?;
    let mut server = HttpServer::new(move || {
        App::new()
            .wrap(auth.clone())
            .app_data(state.clone())
            .app_data(web::Data::new(BodyLimit(limit)))
            .route(
                "/v1/select_destinations",
                web::post().to(routes::select_destinations),
            )
            .route(
                "/v1/notifications",
                web::post().to(routes::post_notification),
            )
            .route("/v1/hosts", web::get().to(routes::list_hosts))
            .route("/v1/stats", web::get().to(routes::get_stats))
            .route("/healthz", web::get().to(routes::healthz))
            .route("/metrics", web::get().to(routes::metrics))
    });
    if workers > 0 {
        server = server.workers(workers);
    }
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    Ok(server
        .listen(listener)
        .map_err(|source| StartupError::Bind { addr, source })?
        .disable_signals()
        .run())
}

/// The largest body a route reads (`[server] max_body_bytes`).
#[derive(Clone, Copy, Debug)]
pub struct BodyLimit(pub usize);

/// A URL without its password, for logs and error messages.
pub use crate::auth::redact_url as redact;
