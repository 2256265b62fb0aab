//! Settings: one TOML file (`etc/parasol.toml`) overridable by `PARASOL__SECTION__KEY`
//! environment variables, read with the `config` crate and validated before anything starts.
//!
//! # Layout
//! - `load`: reading file and environment; unknown keys refused with the nearest valid one;
//!   Nova's `[filter_scheduler]` option names accepted as `[policy]` keys.
//! - `validate`: what serde cannot check (ranges, URL schemes, paths), each error naming its key.
//! - `choice`: enums chosen by name, whose errors list the valid names.
//! - `nova_conf`, `from_nova`: `parasol config from-nova`, nova.conf to parasol.toml.
//! - `flex`: `[usage]` and `[flex]` (issue 45), and the policy with Flex's plugins added.
//! - `rebalance`: `[rebalance]`, the FMU planner's solver and bounds (issue 46).

mod batch;
mod flex;
pub mod from_nova;
mod load;
pub mod nova_conf;
mod rebalance;
mod reload;
mod validate;

pub use crate::choice::{nearest, parse_choice, Choice, UnknownChoice};
pub use batch::{BatchMode, BatchSettings, MAX_WINDOW_MS};
pub use flex::{FlexSettings, QosSource, RatioBound, UsageSettings};
pub use load::{ConfigError, Source};
pub use rebalance::{
    NovaAuth, RebalanceSettings, RebalanceSolver, MAX_MOVES as MAX_REBALANCE_MOVES,
};

use crate::control::{ApsrParams, AscParams};
use crate::policy::PolicyConfig;
pub use reload::{Reload, KEYS_READ_AT_START, READ_AT_START};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::str::FromStr;

/// The four backends (docs/architecture.md §4): a closed set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum BackendKind {
    Filter,
    Caching,
    Asc,
    Apsr,
}

crate::choice_from_string!(BackendKind);

impl Choice for BackendKind {
    const ALL: &'static [Self] = &BackendKind::ALL;
    fn as_str(self) -> &'static str {
        BackendKind::as_str(self)
    }
}

impl BackendKind {
    pub const ALL: [BackendKind; 4] = [
        BackendKind::Filter,
        BackendKind::Caching,
        BackendKind::Asc,
        BackendKind::Apsr,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Filter => "filter",
            BackendKind::Caching => "caching",
            BackendKind::Asc => "asc",
            BackendKind::Apsr => "apsr",
        }
    }
}

impl FromStr for BackendKind {
    type Err = crate::choice::UnknownChoice;
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        crate::choice::parse_choice(name)
    }
}

impl From<BackendKind> for &'static str {
    fn from(kind: BackendKind) -> Self {
        kind.as_str()
    }
}

/// Every setting; see `etc/parasol.toml` for each one's meaning.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub server: ServerSettings,
    pub ledger: LedgerSettings,
    pub scheduler: SchedulerSettings,
    pub policy: PolicyConfig,
    pub caching: CachingSettings,
    pub asc: AscParams,
    pub apsr: ApsrParams,
    pub batch: BatchSettings,
    pub usage: UsageSettings,
    pub flex: FlexSettings,
    pub rebalance: RebalanceSettings,
    pub amqp: AmqpSettings,
    pub rpc: RpcSettings,
    pub placement: crate::placement::PlacementSettings,
    pub nova_db: crate::nova_db::NovaDbSettings,
    pub log: LogSettings,
    pub auth: crate::auth::AuthSettings,
    pub plugins: crate::plugins::PluginSettings,
}

/// The most HTTP worker threads the HTTP server runs (actix-server panics past it).
pub const MAX_HTTP_WORKERS: usize = 512;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSettings {
    pub host: String,
    pub port: u16,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// HTTP worker threads (0 = one fewer than the cores, at least one: see
    /// [`ServerSettings::workers`]).
    pub http_workers: usize,
    /// On SIGTERM/SIGINT, how long in-flight calls (HTTP and RPC) and the notification batch
    /// in hand may take to finish before the process exits anyway.
    pub shutdown_grace_s: f64,
    /// HTTP connections open at once, all workers together; further ones wait in the
    /// listen queue until one closes.
    pub max_connections: usize,
    /// Seconds a new connection has to send its first request's head.
    pub client_request_timeout_s: f64,
    /// Seconds an idle keep-alive connection stays open (0: one request per connection).
    pub keep_alive_s: f64,
    /// Seconds a request's body has to arrive in full once its handler reads it; then 408
    /// and the connection is closed.
    pub body_timeout_s: f64,
    /// Requests a connection may send in a row before reading the answers to the earlier
    /// ones (HTTP pipelining); past it the connection is closed (see `routes::connection`).
    pub max_pipelined_requests: u32,
    /// Receive buffer of each HTTP connection's socket, in bytes: bounds what the server reads
    /// ahead of its answers.
    pub socket_receive_buffer_bytes: usize,
    /// Let the kernel back the process's memory with transparent huge pages (2 MiB). Off by
    /// default: at start the process opts out (`prctl(PR_SET_THP_DISABLE)`, as Redis's
    /// `disable-thp` does), because the allocator asks for huge pages on its whole arena and a
    /// 2 MiB page stays resident while any byte of it is used, so the RSS grew in 2 MiB steps
    /// after every burst and never came back (issue 40's soak). On: fewer TLB misses, more RSS.
    pub huge_pages: bool,
}

impl ServerSettings {
    /// The HTTP worker threads to run on `cores` cores: `http_workers`, or when it is 0 one
    /// fewer than the cores (at least one). The ledger's writer thread commits every claim
    /// and notification and is the one serial stage: a worker per core left it competing
    /// with them for every core, and on two cores one worker took about a tenth less CPU a
    /// decision than two, at the same rate (BENCHMARKS.md, issue 15, 2026-12-01).
    pub fn workers(&self, cores: usize) -> usize {
        match self.http_workers {
            0 => cores.saturating_sub(1).clamp(1, MAX_HTTP_WORKERS),
            n => n,
        }
    }

    /// `max_connections` shared among `workers` HTTP workers (the HTTP server counts them
    /// per worker), at least one each.
    pub fn connections_per_worker(&self, workers: usize) -> usize {
        self.max_connections.div_ceil(workers.max(1)).max(1)
    }
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            host: "127.0.0.1".into(),
            port: 8790,
            max_body_bytes: 1 << 20,
            http_workers: 0,
            shutdown_grace_s: 30.0,
            max_connections: 1024,
            client_request_timeout_s: 5.0,
            keep_alive_s: 5.0,
            body_timeout_s: 30.0,
            max_pipelined_requests: 16,
            socket_receive_buffer_bytes: 4096,
            huge_pages: false,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LedgerSettings {
    /// `sqlite://PATH` or `postgres://…`; empty means `sqlite://<data_dir>/parasol.db`.
    pub url: String,
    /// Folder for the default SQLite ledger, created on first run.
    pub data_dir: PathBuf,
    pub max_connections: u32,
    /// Seconds the id of an applied message is kept, so that a redelivered duplicate changes
    /// nothing; older ids are forgotten. 0: kept forever.
    pub message_retention_s: u64,
    /// At most this many MiB of a SQLite ledger's write-ahead log written out when the service
    /// starts, so that commits overwrite its file instead of growing it (at most the log's
    /// working size, [`crate::ledger::WAL_WORKING_MIB`]); what is written out is sized by the
    /// ledger (`Ledger::prewrite_log_for_ledger`). 0: the log's file grows as it is written.
    pub wal_prewrite_mib: u64,
}

impl Default for LedgerSettings {
    fn default() -> Self {
        LedgerSettings {
            url: String::new(),
            data_dir: PathBuf::from("data"),
            max_connections: 8,
            message_retention_s: 86_400,
            wal_prewrite_mib: crate::ledger::WAL_WORKING_MIB,
        }
    }
}

impl LedgerSettings {
    /// The URL to connect to, creating the data folder for the default SQLite file.
    pub fn resolve_url(&self) -> std::io::Result<String> {
        if !self.url.is_empty() {
            return Ok(self.url.clone());
        }
        std::fs::create_dir_all(&self.data_dir)?;
        Ok(format!(
            "sqlite://{}",
            self.data_dir.join("parasol.db").display()
        ))
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerSettings {
    pub backend: BackendKind,
    /// Parallel scheduling workers of `filter`, `caching` and `asc` (APSR sets its own).
    pub workers: usize,
    /// Claims tried per instance: the pick and `max_attempts − 1` alternates (Nova's option).
    pub max_attempts: usize,
    /// Seed of every random choice; absent means a fresh seed per start.
    pub seed: Option<u64>,
    /// `cell_uuid` put in every Selection.
    pub cell_uuid: String,
    /// Selection object version answered: "1.1" (Ussuri and later) or "1.0".
    pub selection_version: crate::nova::SelectionVersion,
    /// Length of the recent window of `/v1/stats`, in seconds.
    pub stats_window_s: u64,
    /// Nova's `[scheduler]` request filters, same names and defaults (see etc/parasol.toml).
    pub limit_tenants_to_placement_aggregate: bool,
    pub placement_aggregate_required_for_tenants: bool,
    pub enable_isolated_aggregate_filtering: bool,
    pub query_placement_for_image_type_support: bool,
    pub image_metadata_prefilter: bool,
    /// Nova's `[scheduler] max_placement_results`.
    pub max_placement_results: u32,
    /// Nova's `[workarounds] disable_fallback_pcpu_query`: no VCPU retry for dedicated CPUs.
    pub disable_fallback_pcpu_query: bool,
    /// Seconds a claim may stay unconfirmed (no `instance.create.end` or other end
    /// notification, no instance info from its host) before it is released; 0: never.
    pub claim_ttl_s: u64,
}

impl SchedulerSettings {
    /// The request filters' options as the codec takes them.
    pub fn request_filters(&self) -> crate::nova::RequestFilterOptions {
        crate::nova::RequestFilterOptions {
            limit_tenants_to_placement_aggregate: self.limit_tenants_to_placement_aggregate,
            placement_aggregate_required_for_tenants: self.placement_aggregate_required_for_tenants,
            enable_isolated_aggregate_filtering: self.enable_isolated_aggregate_filtering,
            query_placement_for_image_type_support: self.query_placement_for_image_type_support,
            image_metadata_prefilter: self.image_metadata_prefilter,
            max_placement_results: self.max_placement_results,
        }
    }
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        SchedulerSettings {
            backend: BackendKind::Filter,
            workers: 4,
            max_attempts: 3,
            seed: None,
            cell_uuid: "00000000-0000-0000-0000-000000000000".into(),
            selection_version: crate::nova::SelectionVersion::V1_1,
            stats_window_s: 60,
            limit_tenants_to_placement_aggregate: false,
            placement_aggregate_required_for_tenants: false,
            enable_isolated_aggregate_filtering: false,
            query_placement_for_image_type_support: false,
            image_metadata_prefilter: false,
            max_placement_results: 1000,
            disable_fallback_pcpu_query: false,
            claim_ttl_s: 600,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CachingSettings {
    /// Seconds between two full reads of every host (Nova's CachingScheduler: 60).
    pub refresh_interval_s: f64,
}

impl Default for CachingSettings {
    fn default() -> Self {
        CachingSettings {
            refresh_interval_s: 60.0,
        }
    }
}

/// The kind of the durable queues Parasol declares (`[amqp] queue_type`): RabbitMQ's
/// `x-queue-type`, as oslo.messaging's `[oslo_messaging_rabbit] rabbit_quorum_queue` chooses it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum QueueType {
    /// The broker's default kind (no `x-queue-type`), as oslo.messaging declares by default.
    #[default]
    Classic,
    /// Replicated, durable queues (`x-queue-type: quorum`), as oslo.messaging declares with
    /// `rabbit_quorum_queue = true`.
    Quorum,
}

crate::choice_from_string!(QueueType);

impl Choice for QueueType {
    const ALL: &'static [Self] = &[QueueType::Classic, QueueType::Quorum];
    fn as_str(self) -> &'static str {
        match self {
            QueueType::Classic => "classic",
            QueueType::Quorum => "quorum",
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AmqpSettings {
    /// Broker URL; empty turns the notification consumer off.
    pub url: String,
    /// Exchange Nova publishes on (`control_exchange`).
    pub exchange: String,
    /// Declare the exchange durable: must match Nova's `amqp_durable_queues` (default false).
    /// With `queue_type = "quorum"` it is declared durable whatever this says, as oslo does.
    pub durable_exchange: bool,
    /// The kind of Parasol's durable queues (notifications, dead letters) and of the RPC
    /// server's topic queues: must match Nova's `rabbit_quorum_queue` for the topic queues
    /// that nova-scheduler declared before. Per-process fanout queues stay classic.
    pub queue_type: QueueType,
    /// Parasol's own durable notification queue.
    pub queue: String,
    /// Parasol's durable dead-letter exchange and queue (same name) for poison notifications
    /// and RPC messages that cannot be answered.
    pub dead_letter: String,
    /// nova-compute's fanout exchange for the scheduler topic (oslo: `<topic>_fanout`).
    pub fanout_exchange: String,
    /// Unacknowledged messages in flight per queue (and RPC calls running at once). Four
    /// batches by default, so that the broker refills while the ledger commits: at two, a
    /// backlog drain waited for deliveries (quorum queue, re-registrations: 47,000 → 52,000
    /// events/s, BENCHMARKS.md).
    pub prefetch: u16,
    /// Most messages applied in one ledger transaction (acknowledged together after commit).
    pub batch_size: usize,
    /// How long a batch waits, from its first delivery, for more to join it before it is
    /// applied (oslo.messaging's `batch_timeout`, in milliseconds; 0: what is ready at once).
    pub batch_timeout_ms: u64,
    /// When a batch fails although the ledger takes writes, each of its messages is tried
    /// alone up to this many times before it is dead-lettered with the database's reason.
    pub attempts: u32,
    /// Reconnect backoff bounds, in seconds.
    pub reconnect_min_s: f64,
    pub reconnect_max_s: f64,
}

impl AmqpSettings {
    /// Whether Nova's exchanges and the topic queues are durable: oslo.messaging's
    /// `amqp_durable_queues or rabbit_quorum_queue` (quorum queues are always durable).
    pub fn durable(&self) -> bool {
        self.durable_exchange || self.queue_type == QueueType::Quorum
    }

    /// The arguments every durable queue Parasol declares carries: `x-queue-type` for quorum
    /// queues (none for classic ones, as oslo declares them).
    pub fn queue_arguments(&self) -> lapin::types::FieldTable {
        let mut args = lapin::types::FieldTable::default();
        if self.queue_type == QueueType::Quorum {
            args.insert(
                "x-queue-type".into(),
                lapin::types::AMQPValue::LongString(self.queue_type.as_str().into()),
            );
        }
        args
    }
}

impl Default for AmqpSettings {
    fn default() -> Self {
        AmqpSettings {
            url: "amqp://guest:guest@127.0.0.1:5672/%2f".into(),
            exchange: "nova".into(),
            durable_exchange: false,
            queue_type: QueueType::Classic,
            queue: "parasol.notifications".into(),
            dead_letter: "parasol.dead_letter".into(),
            fanout_exchange: "scheduler_fanout".into(),
            prefetch: 2000,
            batch_size: 500,
            batch_timeout_ms: 100,
            attempts: 3,
            reconnect_min_s: 0.5,
            reconnect_max_s: 30.0,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RpcSettings {
    /// Serve Nova's scheduler RPC on the broker of `[amqp] url`.
    pub enabled: bool,
    /// This server's name (Nova's `CONF.host`): queue `scheduler.<host>`. Defaults to the
    /// machine's hostname, as Nova's does, so that a health probe pinging
    /// `scheduler.<hostname>` finds Parasol.
    pub host: String,
    pub topic: String,
    /// Test aid only: every `select_destinations` call sleeps this long before deciding, so
    /// tests can watch heartbeats keep a slow call alive. Leave at 0 in production.
    pub debug_delay_s: f64,
    /// Emit nova-scheduler's versioned notifications `scheduler.select_destinations.start`
    /// and `.end` on every RPC call (Nova's `[notifications] notification_format` of
    /// `versioned` or `both`, with an `[oslo_messaging_notifications] driver`). Off, as
    /// Nova's default `unversioned` format emits none.
    pub versioned_notifications: bool,
    /// The topics they go to, at priority `info` (routing key `<topic>.info` on `[amqp]
    /// exchange`): Nova's `[notifications] versioned_notifications_topics`.
    pub versioned_notifications_topics: Vec<String>,
}

impl Default for RpcSettings {
    fn default() -> Self {
        RpcSettings {
            enabled: false,
            host: machine_hostname(),
            topic: "scheduler".into(),
            debug_delay_s: 0.0,
            versioned_notifications: false,
            versioned_notifications_topics: vec!["versioned_notifications".into()],
        }
    }
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum LogFormat {
    /// `time LEVEL span{fields}: message key=value`, for people.
    #[default]
    Text,
    /// One JSON object a line, for log collectors.
    Json,
}

crate::choice_from_string!(LogFormat);

impl Choice for LogFormat {
    const ALL: &'static [Self] = &[LogFormat::Text, LogFormat::Json];
    fn as_str(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSettings {
    /// `text` or `json` (read at start only).
    pub format: LogFormat,
    /// Level filter when `RUST_LOG` is unset, in `RUST_LOG`'s syntax.
    pub level: String,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            format: LogFormat::Text,
            level: "info".into(),
        }
    }
}

/// The machine's hostname (Nova's default `CONF.host`); "parasol" if it has none.
pub fn machine_hostname() -> String {
    let name = gethostname::gethostname()
        .to_string_lossy()
        .trim()
        .to_string();
    if name.is_empty() {
        "parasol".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_version_takes_nova_s_names_and_refuses_others_naming_the_key() {
        for (text, version) in [
            ("1.0", crate::nova::SelectionVersion::V1_0),
            ("1.1", crate::nova::SelectionVersion::V1_1),
        ] {
            let toml = format!("[scheduler]\nselection_version = \"{text}\"\n");
            let s = Settings::from_toml(&toml).unwrap();
            assert_eq!(s.scheduler.selection_version, version);
        }
        let err = Settings::from_toml("[scheduler]\nselection_version = \"2.0\"\n").unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("scheduler.selection_version"), "{text}");
        assert!(text.contains("1.0, 1.1"), "{text}");
    }

    #[test]
    fn keystone_credentials_keep_their_keys_in_auth_and_placement() {
        let s = Settings::from_toml(
            "[auth]\nkeystone_url = \"http://k/v3\"\npassword = 12345\n\
             [placement]\nproject_name = \"svc\"\nuser_domain_name = \"D\"\n",
        )
        .unwrap();
        assert_eq!(s.auth.keystone.keystone_url, "http://k/v3");
        // A number (as an environment variable arrives) is taken as its text.
        assert_eq!(s.auth.keystone.password, "12345");
        assert_eq!(s.auth.keystone.username, "parasol", "[auth]'s default user");
        assert_eq!(
            s.placement.keystone.username, "nova",
            "[placement]'s default user"
        );
        assert_eq!(s.placement.keystone.project_name, "svc");
        assert_eq!(s.placement.keystone.user_domain_name, "D");
        let err = Settings::from_toml("[placement]\nkeystone_uri = \"http://k\"\n").unwrap_err();
        assert!(err.to_string().contains("placement.keystone_uri"), "{err}");
    }

    #[test]
    fn http_workers_zero_leaves_a_core_to_the_ledger_writer_and_a_number_is_kept() {
        let zero = Settings::from_toml("[server]\nhttp_workers = 0\n")
            .unwrap()
            .server;
        assert_eq!(zero.workers(1), 1);
        assert_eq!(zero.workers(2), 1);
        assert_eq!(zero.workers(8), 7);
        assert_eq!(
            zero.workers(1024),
            MAX_HTTP_WORKERS,
            "the HTTP server's limit"
        );
        assert_eq!(ServerSettings::default().workers(4), 3);
        let server = ServerSettings::default();
        assert_eq!(server.connections_per_worker(1), 1024);
        assert_eq!(server.connections_per_worker(3), 342);
        assert_eq!(server.connections_per_worker(2048), 1);
        let three = Settings::from_toml("[server]\nhttp_workers = 3\n")
            .unwrap()
            .server;
        assert_eq!(three.workers(2), 3);
        assert_eq!(three.workers(16), 3);
    }

    #[test]
    fn backend_names_parse_serialize_and_read_from_the_file_alike() {
        for (name, kind) in [
            ("filter", BackendKind::Filter),
            ("caching", BackendKind::Caching),
            ("asc", BackendKind::Asc),
            ("apsr", BackendKind::Apsr),
        ] {
            assert_eq!(name.parse(), Ok(kind));
            assert_eq!(kind.as_str(), name);
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
            let toml = format!("[scheduler]\nbackend = \"{name}\"\n");
            assert_eq!(Settings::from_toml(&toml).unwrap().scheduler.backend, kind);
            assert!(BackendKind::ALL.contains(&kind));
        }
        assert_eq!(BackendKind::ALL.len(), 4);
    }

    #[test]
    fn an_unknown_backend_is_refused_naming_the_known_ones() {
        let err = "cache".parse::<BackendKind>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown value \"cache\"; valid values: filter, caching, asc, apsr \
             (did you mean \"caching\"?)"
        );
        let err = Settings::from_toml("[scheduler]\nbackend = \"cache\"\n").unwrap_err();
        assert!(
            format!("{err:#}").contains("unknown value \"cache\""),
            "{err:#}"
        );
    }
}
