//! Settings: one TOML file (`etc/parasol.toml`) overridable by `PARASOL__SECTION__KEY`
//! environment variables, read with the `config` crate and validated before anything starts.

use crate::control::{ApsrParams, AscParams};
use crate::policy::PolicyConfig;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The four backends (DESIGN §4): a closed set. [`BackendKind::ALL`] and
/// [`BackendKind::as_str`] are the one list of names (the benchmark parses with [`FromStr`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum BackendKind {
    Filter,
    Caching,
    Asc,
    Apsr,
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
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        BackendKind::ALL
            .into_iter()
            .find(|b| b.as_str() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = BackendKind::ALL.iter().map(|b| b.as_str()).collect();
                format!("unknown backend `{name}` (expected {})", names.join(", "))
            })
    }
}

impl TryFrom<String> for BackendKind {
    type Error = String;
    fn try_from(name: String) -> Result<Self, String> {
        name.parse()
    }
}

impl From<BackendKind> for &'static str {
    fn from(kind: BackendKind) -> Self {
        kind.as_str()
    }
}

/// Every setting; see `etc/parasol.toml` for each one's meaning.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub server: ServerSettings,
    pub ledger: LedgerSettings,
    pub scheduler: SchedulerSettings,
    pub policy: PolicyConfig,
    pub caching: CachingSettings,
    pub asc: AscParams,
    pub apsr: ApsrParams,
    pub amqp: AmqpSettings,
    pub rpc: RpcSettings,
    pub placement: crate::placement::PlacementSettings,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSettings {
    pub host: String,
    pub port: u16,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// HTTP worker threads (0 = one per core).
    pub http_workers: usize,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            host: "127.0.0.1".into(),
            port: 8790,
            max_body_bytes: 1 << 20,
            http_workers: 0,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LedgerSettings {
    /// `sqlite://PATH` or `postgres://…`; empty means `sqlite://<data_dir>/parasol.db`.
    pub url: String,
    /// Folder for the default SQLite ledger, created on first run.
    pub data_dir: PathBuf,
    pub max_connections: u32,
}

impl Default for LedgerSettings {
    fn default() -> Self {
        LedgerSettings {
            url: String::new(),
            data_dir: PathBuf::from("data"),
            max_connections: 8,
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

#[derive(Clone, Debug, Deserialize)]
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
    pub selection_version: String,
    /// Length of the recent window of `/v1/stats`, in seconds.
    pub stats_window_s: u64,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        SchedulerSettings {
            backend: BackendKind::Filter,
            workers: 4,
            max_attempts: 3,
            seed: None,
            cell_uuid: "00000000-0000-0000-0000-000000000000".into(),
            selection_version: "1.1".into(),
            stats_window_s: 60,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
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

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AmqpSettings {
    /// Broker URL; empty turns the notification consumer off.
    pub url: String,
    /// Exchange Nova publishes on (`control_exchange`).
    pub exchange: String,
    /// Declare the exchange durable: must match Nova's `amqp_durable_queues` (default false).
    pub durable_exchange: bool,
    /// Parasol's own durable notification queue.
    pub queue: String,
    /// Parasol's durable dead-letter exchange and queue (same name) for poison notifications
    /// and RPC messages that cannot be answered.
    pub dead_letter: String,
    /// nova-compute's fanout exchange for the scheduler topic (oslo: `<topic>_fanout`).
    pub fanout_exchange: String,
    /// Unacknowledged messages in flight per queue.
    pub prefetch: u16,
    /// Most messages applied in one ledger transaction (acknowledged together after commit).
    pub batch_size: usize,
    /// Reconnect backoff bounds, in seconds.
    pub reconnect_min_s: f64,
    pub reconnect_max_s: f64,
}

impl Default for AmqpSettings {
    fn default() -> Self {
        AmqpSettings {
            url: "amqp://guest:guest@127.0.0.1:5672/%2f".into(),
            exchange: "nova".into(),
            durable_exchange: false,
            queue: "parasol.notifications".into(),
            dead_letter: "parasol.dead_letter".into(),
            fanout_exchange: "scheduler_fanout".into(),
            prefetch: 1000,
            batch_size: 500,
            reconnect_min_s: 0.5,
            reconnect_max_s: 30.0,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RpcSettings {
    /// Serve Nova's scheduler RPC on the broker of `[amqp] url`.
    pub enabled: bool,
    /// This server's name (Nova's `CONF.host`): queue `scheduler.<host>`.
    pub host: String,
    pub topic: String,
    /// Test aid only: every `select_destinations` call sleeps this long before deciding, so
    /// tests can watch heartbeats keep a slow call alive. Leave at 0 in production.
    pub debug_delay_s: f64,
}

impl Default for RpcSettings {
    fn default() -> Self {
        RpcSettings {
            enabled: false,
            host: "parasol".into(),
            topic: "scheduler".into(),
            debug_delay_s: 0.0,
        }
    }
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration file {path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error("invalid configuration: key `{key}` {message}")]
    Key { key: String, message: String },
}

impl Settings {
    /// Reads `path` (required when `explicit`, else optional), then the environment.
    pub fn load(path: &Path, explicit: bool) -> Result<Settings, ConfigError> {
        if explicit && !path.exists() {
            return Err(ConfigError::File {
                path: path.to_path_buf(),
                message: "does not exist".into(),
            });
        }
        let env = config::Environment::with_prefix("PARASOL")
            .prefix_separator("__")
            .separator("__")
            .try_parsing(true);
        let built = config::Config::builder()
            .add_source(
                config::File::from(path)
                    .format(config::FileFormat::Toml)
                    .required(false),
            )
            .add_source(env)
            .build()
            .map_err(|e| ConfigError::File {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        let settings: Settings = built
            .try_deserialize()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        settings.validate()?;
        Ok(settings)
    }

    /// Parses a whole TOML document (no environment), as `parasol config check` and SIGHUP do.
    pub fn from_toml(text: &str) -> Result<Settings, ConfigError> {
        let built = config::Config::builder()
            .add_source(config::File::from_str(text, config::FileFormat::Toml))
            .build()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let settings: Settings = built
            .try_deserialize()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        settings.validate()?;
        Ok(settings)
    }

    /// Semantic checks serde cannot do, each error naming its key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let key = |key: &str, message: &str| {
            Err(ConfigError::Key {
                key: key.into(),
                message: message.into(),
            })
        };
        if self.scheduler.workers == 0 {
            return key("scheduler.workers", "must be at least 1");
        }
        if self.scheduler.max_attempts == 0 {
            return key("scheduler.max_attempts", "must be at least 1");
        }
        if !matches!(self.scheduler.selection_version.as_str(), "1.0" | "1.1") {
            return key("scheduler.selection_version", "must be \"1.0\" or \"1.1\"");
        }
        if !(self.caching.refresh_interval_s.is_finite() && self.caching.refresh_interval_s > 0.0) {
            return key(
                "caching.refresh_interval_s",
                "must be a positive number of seconds",
            );
        }
        if self.server.max_body_bytes < 1024 {
            return key("server.max_body_bytes", "must be at least 1024");
        }
        if self.ledger.max_connections == 0 {
            return key("ledger.max_connections", "must be at least 1");
        }
        if self.amqp.prefetch == 0 {
            return key("amqp.prefetch", "must be at least 1");
        }
        if self.amqp.batch_size == 0 {
            return key("amqp.batch_size", "must be at least 1");
        }
        for (name, value) in [
            ("amqp.exchange", &self.amqp.exchange),
            ("amqp.queue", &self.amqp.queue),
            ("amqp.dead_letter", &self.amqp.dead_letter),
            ("amqp.fanout_exchange", &self.amqp.fanout_exchange),
        ] {
            if value.is_empty() {
                return key(name, "must not be empty");
            }
        }
        if self.amqp.reconnect_min_s <= 0.0 || self.amqp.reconnect_max_s < self.amqp.reconnect_min_s
        {
            return key(
                "amqp.reconnect_min_s",
                "must be positive and at most amqp.reconnect_max_s",
            );
        }
        self.placement
            .validate()
            .map_err(|(k, m)| ConfigError::Key {
                key: format!("placement.{k}"),
                message: m.into(),
            })?;
        if !(self.rpc.debug_delay_s.is_finite() && self.rpc.debug_delay_s >= 0.0) {
            return key(
                "rpc.debug_delay_s",
                "must be a non-negative number of seconds",
            );
        }
        if self.rpc.enabled && (self.rpc.topic.is_empty() || self.rpc.host.is_empty()) {
            return key(
                "rpc.topic",
                "and rpc.host must not be empty when rpc.enabled",
            );
        }
        if self.rpc.enabled && self.amqp.url.is_empty() {
            return key("rpc.enabled", "needs [amqp] url");
        }
        self.asc
            .validate()
            .map_err(|e| ConfigError::Invalid(format!("[asc] {e}")))?;
        self.apsr
            .validate()
            .map_err(|e| ConfigError::Invalid(format!("[apsr] {e}")))?;
        crate::policy::Policy::from_config(&self.policy)
            .map_err(|e| ConfigError::Invalid(format!("[policy] {e}")))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            err,
            "unknown backend `cache` (expected filter, caching, asc, apsr)"
        );
        let err = Settings::from_toml("[scheduler]\nbackend = \"cache\"\n").unwrap_err();
        assert!(
            format!("{err:#}").contains("unknown backend `cache`"),
            "{err:#}"
        );
    }
}
