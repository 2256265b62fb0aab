//! Building and running the service: ledger, scheduler, the HTTP server and, when configured,
//! the background parts (notification consumer, Nova RPC server, Placement sync, Nova's
//! databases, the Prometheus usage poller), all stopped
//! by one shutdown signal. Tests bind port 0 and inject the clock.

use crate::amqp::{run_notification_consumer, BrokerStatus};
use crate::backend::BuildError;
use crate::clock::{Clock, SharedClock, SystemClock};
use crate::cloud::Cloud;
use crate::configuration::Settings;
use crate::ledger::{Ledger, LedgerError};
use crate::notifications::Ingest;
use crate::placement::{run_sync, PlacementStatus, SyncDeps};
use crate::routes::{self, BodyLimit};
use crate::rpc::{run_rpc_server, RpcCounters, RpcDeps};
use crate::scheduling::Scheduler;
use crate::stats::Stats;
use actix_web::dev::{Server, ServerHandle};
use actix_web::{web, App, HttpServer};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

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

/// A built, not yet running, service.
pub struct Application {
    port: u16,
    server: Server,
    handles: Handles,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

/// The parts of a built service, each for whoever needs it (tests and benchmarks start the
/// background parts with their own shutdown token through these).
#[derive(Clone)]
pub struct Handles {
    pub settings: Arc<Settings>,
    pub clock: SharedClock,
    pub scheduler: Arc<Scheduler>,
    pub ingest: Arc<Ingest>,
    pub broker: Arc<BrokerStatus>,
    pub placement: Arc<PlacementStatus>,
    pub rpc: Arc<RpcCounters>,
    /// The last read of Nova's databases (`[nova_db]`), published by its refresh loop.
    pub nova_db: tokio::sync::watch::Sender<crate::nova_db::RefreshState>,
}

impl Handles {
    /// What the RPC server needs.
    pub fn rpc_deps(&self) -> RpcDeps {
        RpcDeps {
            scheduler: self.scheduler.clone(),
            cloud: self.scheduler.cloud().clone(),
            ingest: self.ingest.clone(),
            broker: self.broker.clone(),
            counters: self.rpc.clone(),
        }
    }

    /// What the Placement sync needs.
    pub fn sync_deps(&self) -> SyncDeps {
        SyncDeps {
            ledger: self.scheduler.ledger().clone(),
            clock: self.clock.clone(),
            stats: self.scheduler.stats().clone(),
            status: self.placement.clone(),
            resync: self.scheduler.resync().clone(),
            ratios: self.scheduler.flex().ratios().cloned(),
        }
    }
}

/// Flex's figures in `/metrics`: P, Q(t), and the managed allocation ratios when on.
fn register_flex_metrics(scheduler: &Scheduler) {
    let metrics = scheduler.stats().metrics();
    metrics.register(
        "flex_penalty",
        "Flex's estimation penalty P (stays at p_start while no QoS signal exists)",
        scheduler.flex().penalty_gauge(),
    );
    metrics.register(
        "flex_qos",
        "Flex's last cluster QoS Q(t) from [flex] qos_source (NaN until one exists)",
        scheduler.flex().qos_gauge(),
    );
    if let Some(ratios) = scheduler.flex().ratios() {
        metrics.register(
            "flex_allocation_ratio",
            "The allocation ratio Flex wants per managed class, 1/(P·u) within its bounds \
             (NaN without measured hosts)",
            ratios.metrics().target.clone(),
        );
        metrics.register(
            "flex_allocation_ratio_writes",
            "Placement inventory records Flex's ratio manager wrote, or could not (conflict, \
             failed), or found changed by someone else (overridden)",
            ratios.metrics().writes.clone(),
        );
    }
}

/// Stops a running [`Application`]: every part stops taking work and drains what it has.
#[derive(Clone)]
pub struct Shutdown {
    token: CancellationToken,
    http: ServerHandle,
}

impl Shutdown {
    /// Fires the shutdown signal and waits for the HTTP server to finish its in-flight requests.
    pub async fn stop(&self) {
        self.token.cancel();
        self.http.stop(true).await;
    }
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
        let ledger = Ledger::open(&url, settings.ledger.max_connections).await?;
        prewrite_log(&ledger, settings.ledger.wal_prewrite_mib).await;
        let mut settings = settings;
        own_queue_for_sqlite(&mut settings, &ledger).await?;
        let stats = Arc::new(Stats::new(clock.clone(), settings.scheduler.stats_window_s));
        let commits = ledger.commit_counters();
        let metrics = stats.metrics();
        metrics.register(
            "ledger_commits",
            "Group commits of claims in the ledger",
            commits.commits,
        );
        metrics.register(
            "ledger_committed_claims",
            "Claims carried by the ledger's group commits",
            commits.claims,
        );
        metrics.register(
            "ledger_checkpoints",
            "Checkpoints that copied SQLite's whole write-ahead log to the database file",
            commits.checkpoints,
        );
        let hosts = ledger.table().host_counters().clone();
        metrics.register(
            "hosts_node_replaced",
            "Compute nodes re-created under a new uuid that replaced or retired the old node",
            hosts.node_replaced,
        );
        metrics.register(
            "host_events_older",
            "Host-state events older than their host's newest: heartbeats only",
            hosts.older_events,
        );
        metrics.register(
            "usage_readings",
            "Measured usage readings by outcome (accepted, or the reason refused) and source",
            ledger.table().usage_counters().readings.clone(),
        );
        metrics.register(
            "usage_polls",
            "Queries a measured-usage poller sent, by source (prometheus) and outcome (ok, failed)",
            ledger.table().usage_counters().polls.clone(),
        );
        let settings = Arc::new(settings);
        let ingest = Ingest::new(ledger.clone(), clock.clone(), stats.clone());
        let broker = Arc::new(BrokerStatus::new(stats.metrics().broker_connected.clone()));
        let scheduler =
            Arc::new(Scheduler::start(settings.clone(), ledger, stats, clock.clone()).await?);
        // nova-api's aggregate casts come on the fanout queue the notification consumer reads.
        let ingest = Arc::new(ingest.with_cloud(scheduler.cloud().clone()));
        let placement = Arc::new(PlacementStatus::default());
        register_flex_metrics(&scheduler);
        let rpc = Arc::new(RpcCounters::registered(scheduler.stats().metrics()));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let data = HttpData {
            scheduler: web::Data::from(scheduler.clone()),
            ledger: web::Data::new(scheduler.ledger().clone()),
            stats: web::Data::from(scheduler.stats().clone()),
            cloud: web::Data::from(scheduler.cloud().clone()),
            clock: web::Data::from(scheduler.clock().clone()),
            ingest: web::Data::from(ingest.clone()),
            broker: web::Data::from(broker.clone()),
            placement: web::Data::from(placement.clone()),
            rpc: web::Data::from(rpc.clone()),
        };
        let server = http_server(data, listener, &settings)?;
        tracing::info!(port, backend = settings.scheduler.backend.as_str(), ledger = %crate::redact::redact_url(&url), "Parasol ready");
        Ok(Application {
            port,
            server,
            handles: Handles {
                settings,
                clock,
                scheduler,
                ingest,
                broker,
                placement,
                rpc,
                nova_db: tokio::sync::watch::Sender::new(Default::default()),
            },
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn scheduler(&self) -> &Arc<Scheduler> {
        &self.handles.scheduler
    }

    /// Every part of the service.
    pub fn handles(&self) -> &Handles {
        &self.handles
    }

    /// What stops this application (every part, once).
    pub fn shutdown(&self) -> Shutdown {
        Shutdown {
            token: self.shutdown.clone(),
            http: self.server.handle(),
        }
    }

    /// Starts the notification consumer when `[amqp] url` is set.
    pub fn start_notification_consumer(&self) {
        let amqp = self.handles.settings.amqp.clone();
        if amqp.url.is_empty() {
            tracing::info!("no [amqp] url: notifications only over HTTP");
            return;
        }
        self.tasks.spawn(run_notification_consumer(
            self.handles.ingest.clone(),
            self.handles.broker.clone(),
            amqp,
            self.shutdown.clone(),
        ));
    }

    /// Starts Nova's scheduler RPC server when `[rpc] enabled`.
    pub fn start_rpc_server(&self) {
        if !self.handles.settings.rpc.enabled {
            return;
        }
        self.tasks.spawn(run_rpc_server(
            self.handles.rpc_deps(),
            self.shutdown.clone(),
        ));
    }

    /// Starts the Placement sync when `[placement] enabled`.
    pub fn start_placement_sync(&self) {
        self.tasks.spawn(run_sync(
            self.handles.settings.placement.clone(),
            self.handles.sync_deps(),
            self.shutdown.clone(),
        ));
    }

    /// Starts reading Nova's compute-node records when `[nova_db] enabled`: service host,
    /// cell, facts and service state laid over the hosts (see [`crate::nova_db`]).
    pub fn start_nova_db(&self) {
        let settings = self.handles.settings.nova_db.clone();
        if !settings.enabled {
            return;
        }
        let reader = match crate::nova_db::NovaDbReader::new(settings, self.handles.clock.clone()) {
            Ok(reader) => Arc::new(reader),
            Err(e) => {
                tracing::error!(error = %e, "cannot read Nova's databases");
                return;
            }
        };
        self.tasks.spawn(crate::nova_db::run_nova_db(
            reader,
            self.handles.scheduler.ledger().table().clone(),
            self.handles.scheduler.cloud().clone(),
            self.handles.nova_db.clone(),
            self.shutdown.clone(),
        ));
    }

    /// Starts polling Prometheus for measured usage when `[usage.prometheus] url` is set
    /// (see [`crate::usage_poll`]).
    pub fn start_usage_poller(&self) {
        let settings = self.handles.settings.usage.prometheus.clone();
        if !settings.enabled() {
            return;
        }
        self.tasks.spawn(crate::usage_poll::run_prometheus_poller(
            settings,
            self.handles.scheduler.ledger().table().clone(),
            self.handles.clock.clone(),
            self.shutdown.clone(),
        ));
    }

    /// On PostgreSQL, keeps the live table in step with the other processes' writes.
    pub fn start_follow(&self) {
        let ledger = self.handles.scheduler.ledger().clone();
        let (clock, shutdown) = (self.handles.clock.clone(), self.shutdown.clone());
        self.tasks
            .spawn(async move { ledger.follow(clock, shutdown).await });
    }

    /// Releases the claims nothing confirmed within `[scheduler] claim_ttl_s`.
    pub fn start_claim_expiry(&self) {
        let scheduler = &self.handles.scheduler;
        if !self.handles.settings.amqp.url.is_empty() {
            // Before the first sweep: nothing expires until the consumer has applied what the
            // broker kept meanwhile (a restart after a long stop).
            scheduler.ledger().ingest_mark().watch();
        }
        self.tasks.spawn(crate::ledger::run_claim_expiry(
            scheduler.ledger().clone(),
            self.handles.clock.clone(),
            self.handles.settings.scheduler.claim_ttl_s,
            scheduler.stats().clone(),
            self.shutdown.clone(),
        ));
    }

    /// Forgets the ids of applied messages after `[ledger] message_retention_s`.
    pub fn start_message_retention(&self) {
        self.tasks.spawn(crate::ledger::run_message_retention(
            self.handles.scheduler.ledger().clone(),
            self.handles.clock.clone(),
            self.handles.settings.ledger.message_retention_s,
            self.shutdown.clone(),
        ));
    }

    /// Every background part the configuration asks for.
    pub fn start_background(&self) {
        self.start_follow();
        self.start_claim_expiry();
        self.start_message_retention();
        self.start_notification_consumer();
        self.start_rpc_server();
        self.start_placement_sync();
        self.start_nova_db();
        self.start_usage_poller();
    }

    /// Serves until [`Shutdown::stop`]; then waits for the background parts to drain, at
    /// most `[server] shutdown_grace_s`.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let served = self.server.await;
        self.shutdown.cancel();
        self.tasks.close();
        let grace = Duration::from_secs_f64(self.handles.settings.server.shutdown_grace_s);
        if tokio::time::timeout(grace, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("background tasks still running at the end of the grace period");
        }
        self.handles.scheduler.backend().stop();
        served
    }
}

/// Writes a SQLite ledger's write-ahead log out to what the ledger needs, at most `mib` MiB
/// (`[ledger] wal_prewrite_mib`; `Ledger::prewrite_log_for_ledger`). A file system that
/// cannot hold it leaves the log to grow as it is written: said, not refused.
async fn prewrite_log(ledger: &Ledger, mib: u64) {
    if mib == 0 {
        return;
    }
    let started = std::time::Instant::now();
    match ledger.prewrite_log_for_ledger(mib).await {
        Ok(0) => {}
        Ok(bytes) => tracing::info!(
            bytes,
            ms = started.elapsed().as_millis() as u64,
            "wrote out the ledger's write-ahead log"
        ),
        Err(e) => tracing::warn!(
            error = %e,
            "the ledger's write-ahead log was not written out at start; its file grows as it \
             is written"
        ),
    }
}

/// On SQLite (one process per ledger) the default notification queue gets the ledger's id, so
/// that two Parasol processes on two ledgers each receive every event instead of splitting one
/// queue's; a queue name set in the configuration is kept. PostgreSQL processes share one
/// ledger and one queue.
async fn own_queue_for_sqlite(
    settings: &mut Settings,
    ledger: &Ledger,
) -> Result<(), StartupError> {
    let default = crate::configuration::AmqpSettings::default().queue;
    if ledger.engine() == crate::ledger::Engine::Sqlite && settings.amqp.queue == default {
        let id = ledger.ledger_id().await?;
        settings.amqp.queue = format!("{default}.{id}");
    }
    Ok(())
}

/// The handles the routes take, one `web::Data` each.
#[derive(Clone)]
struct HttpData {
    scheduler: web::Data<Scheduler>,
    ledger: web::Data<Ledger>,
    stats: web::Data<Stats>,
    cloud: web::Data<Cloud>,
    clock: web::Data<dyn Clock>,
    ingest: web::Data<Ingest>,
    broker: web::Data<BrokerStatus>,
    placement: web::Data<PlacementStatus>,
    rpc: web::Data<RpcCounters>,
}

fn http_server(
    data: HttpData,
    listener: TcpListener,
    settings: &Settings,
) -> Result<Server, StartupError> {
    let server_settings = &settings.server;
    let limit = web::Data::new(BodyLimit {
        bytes: server_settings.max_body_bytes,
        timeout: Duration::from_secs_f64(server_settings.body_timeout_s),
    });
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let workers = settings.server.workers(cores);
    let clock = data.scheduler.clock().clone();
    let auth = crate::auth::Auth::new(&settings.auth, listener.local_addr().ok(), clock)?;
    let server = HttpServer::new(move || {
        App::new()
            .wrap(auth.clone())
            .wrap(actix_web::middleware::from_fn(
                crate::telemetry::request_span,
            ))
            // Outermost: a connection pipelining without reading is closed before any other work.
            .wrap(actix_web::middleware::from_fn(
                routes::connection::limit_pipelining,
            ))
            .app_data(data.scheduler.clone())
            .app_data(data.ledger.clone())
            .app_data(data.stats.clone())
            .app_data(data.cloud.clone())
            .app_data(data.clock.clone())
            .app_data(data.ingest.clone())
            .app_data(data.broker.clone())
            .app_data(data.placement.clone())
            .app_data(data.rpc.clone())
            .app_data(limit.clone())
            .route(
                "/v1/select_destinations",
                web::post().to(routes::select_destinations),
            )
            .route(
                "/v1/notifications",
                web::post().to(routes::post_notification),
            )
            .route("/v1/rebalance/plan", web::post().to(routes::plan_rebalance))
            .route("/v1/hosts", web::get().to(routes::list_hosts))
            .route("/v1/stats", web::get().to(routes::get_stats))
            .route("/healthz", web::get().to(routes::healthz))
            .route("/readyz", web::get().to(routes::readyz))
            .route("/metrics", web::get().to(routes::metrics))
            .route("/", web::get().to(routes::live_page))
            .route("/assets/{name}", web::get().to(routes::asset))
    })
    .workers(workers)
    // What every connection may hold is bounded (routes::connection); so is their number.
    .max_connections(server_settings.connections_per_worker(workers))
    .client_request_timeout(Duration::from_secs_f64(
        server_settings.client_request_timeout_s,
    ))
    .keep_alive(match server_settings.keep_alive_s {
        0.0 => actix_web::http::KeepAlive::Disabled,
        s => actix_web::http::KeepAlive::Timeout(Duration::from_secs_f64(s)),
    })
    .on_connect(routes::connection::on_connect(
        server_settings.max_pipelined_requests,
    ));
    let grace = settings.server.shutdown_grace_s.ceil() as u64;
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    routes::connection::set_receive_buffer(&listener, server_settings.socket_receive_buffer_bytes)
        .map_err(|source| StartupError::Bind {
            addr: addr.clone(),
            source,
        })?;
    Ok(server
        .listen(listener)
        .map_err(|source| StartupError::Bind { addr, source })?
        .shutdown_timeout(grace)
        .disable_signals()
        .run())
}
