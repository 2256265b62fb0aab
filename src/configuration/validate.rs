//! Checks serde cannot do, each error naming its key: ranges, and what `serve` would only
//! find at start (URL schemes, the SQLite file's folder), so `parasol config check` finds them.

use super::{ConfigError, Settings};
use std::path::Path;
use std::str::FromStr;

/// The longest time a `[server]` duration may be (a day): past `u64::MAX` seconds `serve`
/// could not even represent it.
const MAX_SECONDS: f64 = 86_400.0;

/// The longest `[amqp] batch_timeout_ms`: a batch held longer keeps what nova-compute reported
/// from the scheduler for longer than any cloud would want (its heartbeats are a minute apart).
const MAX_BATCH_TIMEOUT_MS: u64 = 10_000;

impl Settings {
    /// Semantic checks serde cannot do, each error naming its key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_scheduler_and_server()?;
        self.check_ledger_and_amqp()?;
        self.placement
            .validate()
            .map_err(|(k, m)| ConfigError::Key {
                key: format!("placement.{k}"),
                message: m,
            })?;
        self.plugins.validate().map_err(|(k, m)| ConfigError::Key {
            key: format!("plugins.{k}"),
            message: m,
        })?;
        self.nova_db.validate().map_err(|(k, m)| ConfigError::Key {
            key: format!("nova_db.{k}"),
            message: m,
        })?;
        self.check_shutdown_and_rpc()?;
        self.check_policy()?;
        self.check_locations()?;
        // After the host itself is known to be an address.
        self.auth
            .validate(&self.server.host)
            .map_err(|(k, m)| ConfigError::Key {
                key: format!("auth.{k}"),
                message: m,
            })
    }

    /// `[scheduler]`'s counts, `[caching]`'s interval and `[server]`'s limits and timeouts.
    fn check_scheduler_and_server(&self) -> Result<(), ConfigError> {
        let key = |key: &str, message: &str| Err(ConfigError::key(key, message));
        if self.scheduler.workers == 0 {
            return key("scheduler.workers", "must be at least 1");
        }
        if self.scheduler.max_attempts == 0 {
            return key("scheduler.max_attempts", "must be at least 1");
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
        if self.server.http_workers > super::MAX_HTTP_WORKERS {
            return key(
                "server.http_workers",
                &format!(
                    "must be at most {} (the HTTP server's limit; 0 = one fewer than the cores)",
                    super::MAX_HTTP_WORKERS
                ),
            );
        }
        if self.server.max_connections == 0 {
            return key("server.max_connections", "must be at least 1");
        }
        if self.server.max_pipelined_requests == 0 {
            return key("server.max_pipelined_requests", "must be at least 1");
        }
        if !(4096..=1 << 30).contains(&self.server.socket_receive_buffer_bytes) {
            return key(
                "server.socket_receive_buffer_bytes",
                "must be from 4096 to 1073741824",
            );
        }
        for (name, value, zero) in [
            (
                "server.client_request_timeout_s",
                self.server.client_request_timeout_s,
                false,
            ),
            ("server.keep_alive_s", self.server.keep_alive_s, true),
            ("server.body_timeout_s", self.server.body_timeout_s, false),
        ] {
            let low = if zero { 0.0 } else { 0.001 };
            if !(value.is_finite() && (low..=MAX_SECONDS).contains(&value)) {
                let from = if zero { "0" } else { "0.001" };
                return key(
                    name,
                    &format!("must be a number of seconds from {from} to 86400, not {value}"),
                );
            }
        }
        Ok(())
    }

    /// `[ledger]`'s pool and log, `[amqp]`'s counts, names and reconnection delays.
    fn check_ledger_and_amqp(&self) -> Result<(), ConfigError> {
        let key = |key: &str, message: &str| Err(ConfigError::key(key, message));
        if self.ledger.max_connections == 0 {
            return key("ledger.max_connections", "must be at least 1");
        }
        if self.ledger.wal_prewrite_mib > crate::ledger::WAL_WORKING_MIB {
            return key(
                "ledger.wal_prewrite_mib",
                &format!(
                    "must be at most {} (the write-ahead log's working size: past it, the log \
                     starts over)",
                    crate::ledger::WAL_WORKING_MIB
                ),
            );
        }
        if self.amqp.prefetch == 0 {
            return key("amqp.prefetch", "must be at least 1");
        }
        if self.amqp.attempts == 0 {
            return key("amqp.attempts", "must be at least 1");
        }
        if self.amqp.batch_size == 0 {
            return key("amqp.batch_size", "must be at least 1");
        }
        if self.amqp.batch_timeout_ms > MAX_BATCH_TIMEOUT_MS {
            return key(
                "amqp.batch_timeout_ms",
                &format!("must be at most {MAX_BATCH_TIMEOUT_MS} (milliseconds)"),
            );
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
        Ok(())
    }

    /// `[server]`'s shutdown grace and `[rpc]`'s delay, names and broker.
    fn check_shutdown_and_rpc(&self) -> Result<(), ConfigError> {
        let key = |key: &str, message: &str| Err(ConfigError::key(key, message));
        if !(self.server.shutdown_grace_s.is_finite()
            && (0.0..=MAX_SECONDS).contains(&self.server.shutdown_grace_s))
        {
            return key(
                "server.shutdown_grace_s",
                "must be a number of seconds from 0 to 86400",
            );
        }
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
        if self.rpc.versioned_notifications
            && (self.rpc.versioned_notifications_topics.is_empty()
                || self
                    .rpc
                    .versioned_notifications_topics
                    .iter()
                    .any(|t| t.is_empty()))
        {
            return key(
                "rpc.versioned_notifications_topics",
                "must name at least one topic, none empty, when rpc.versioned_notifications",
            );
        }
        if self.rpc.enabled && self.amqp.url.is_empty() {
            return key("rpc.enabled", "needs [amqp] url");
        }
        Ok(())
    }

    /// `[asc]`, `[apsr]` and `[policy]` (the policy is built, as `serve` builds it), and the
    /// statistics window.
    fn check_policy(&self) -> Result<(), ConfigError> {
        self.asc
            .validate()
            .map_err(|e| ConfigError::Invalid(format!("[asc] {e}")))?;
        self.apsr
            .validate()
            .map_err(|e| ConfigError::Invalid(format!("[apsr] {e}")))?;
        self.batch.validate().map_err(|(k, m)| ConfigError::Key {
            key: format!("batch.{k}"),
            message: m,
        })?;
        self.rebalance
            .validate()
            .map_err(|(k, m)| ConfigError::Key {
                key: format!("rebalance.{k}"),
                message: m,
            })?;
        self.usage.validate()?;
        self.flex.validate(&self.policy)?;
        if self.flex.manage_allocation_ratio && !self.placement.enabled {
            return Err(ConfigError::key(
                "flex.manage_allocation_ratio",
                "needs [placement] enabled = true: the ratio it manages is Placement's",
            ));
        }
        crate::policy::Policy::from_config(&self.flex.policy(&self.policy))
            .map_err(|e| ConfigError::Invalid(format!("[policy] {e}")))?;
        if self.policy.default_availability_zone.trim().is_empty() {
            return Err(ConfigError::key(
                "policy.default_availability_zone",
                "is empty: it names the zone of a host no aggregate puts in one (Nova's \
                 default is \"nova\")",
            ));
        }
        if self.scheduler.stats_window_s == 0 {
            return Err(ConfigError::key(
                "scheduler.stats_window_s",
                "must be at least 1",
            ));
        }
        Ok(())
    }

    /// URL schemes and syntax of the ledger, the broker and Placement, and the folder of a
    /// SQLite ledger: what `serve` would refuse at start or retry forever.
    fn check_locations(&self) -> Result<(), ConfigError> {
        let addr = (self.server.host.as_str(), self.server.port);
        if std::net::ToSocketAddrs::to_socket_addrs(&addr).map_or(true, |mut a| a.next().is_none())
        {
            return Err(ConfigError::key(
                "server.host",
                format!(
                    "{:?} is neither an IP address nor a name this host resolves",
                    self.server.host
                ),
            ));
        }
        if uuid::Uuid::parse_str(&self.scheduler.cell_uuid).is_err() {
            return Err(ConfigError::key(
                "scheduler.cell_uuid",
                "must be a UUID (Nova's cell mapping)",
            ));
        }
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.log.level) {
            return Err(ConfigError::key(
                "log.level",
                format!("is not a RUST_LOG filter ({e}); e.g. \"info\" or \"info,parasol=debug\""),
            ));
        }
        let url = &self.ledger.url;
        if url.is_empty() {
            creatable_folder("ledger.data_dir", &self.ledger.data_dir)?;
        } else if url.starts_with("sqlite:") {
            let opts = sqlx::sqlite::SqliteConnectOptions::from_str(url)
                .map_err(|e| ConfigError::key("ledger.url", format!("is not a SQLite URL: {e}")))?;
            if let Some(dir) = opts.get_filename().parent() {
                creatable_folder("ledger.url", dir)?;
            }
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            sqlx::postgres::PgConnectOptions::from_str(url).map_err(|e| {
                ConfigError::key("ledger.url", format!("is not a PostgreSQL URL: {e}"))
            })?;
        } else {
            return Err(ConfigError::key(
                "ledger.url",
                format!(
                    "has scheme {:?}: use sqlite://PATH or postgres://USER@HOST:PORT/DB (or leave it \
                     empty for the SQLite file in ledger.data_dir)",
                    scheme(url)
                ),
            ));
        }
        if !self.amqp.url.is_empty() {
            self.amqp
                .url
                .parse::<crate::transport_url::TransportUrl>()
                .map_err(|e| ConfigError::key("amqp.url", e))?;
        }
        for (name, value) in [
            ("placement.url", &self.placement.url),
            (
                "placement.keystone_url",
                &self.placement.keystone.keystone_url,
            ),
        ] {
            if !value.is_empty() {
                http_url(name, value)?;
            }
        }
        Ok(())
    }
}

fn scheme(url: &str) -> &str {
    url.split_once(':').map_or(url, |(s, _)| s)
}

fn http_url(key: &str, value: &str) -> Result<(), ConfigError> {
    let parsed = reqwest::Url::parse(value)
        .map_err(|e| ConfigError::key(key, format!("is not a URL ({e}): {value:?}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(ConfigError::key(
            key,
            format!("must be an http:// or https:// URL with a host, not {value:?}"),
        ));
    }
    Ok(())
}

/// `dir` exists as a folder, or can be created: its nearest existing ancestor is a folder.
fn creatable_folder(key: &str, dir: &Path) -> Result<(), ConfigError> {
    let mut probe = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    loop {
        if probe.exists() {
            return if probe.is_dir() {
                Ok(())
            } else {
                Err(ConfigError::key(
                    key,
                    format!(
                        "needs the folder {}, but {} is not a folder",
                        dir.display(),
                        probe.display()
                    ),
                ))
            };
        }
        match probe.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => probe = parent,
            _ => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(toml: &str) -> String {
        Settings::from_toml(toml).unwrap_err().to_string()
    }

    /// Settings `serve` would refuse at start, and what the refusal says.
    const REFUSED_AT_START: &[(&str, &str)] = &[
        (
            "[ledger]\nurl = \"mysql://db/parasol\"",
            "key `ledger.url` has scheme \"mysql\"",
        ),
        (
            "[amqp]\nurl = \"kafka://guest:guest@h:9092/\"",
            "key `amqp.url` has scheme \"kafka\"",
        ),
        (
            "[amqp]\nurl = \"amqp://h:notaport/\"",
            "key `amqp.url` broker amqp://h:notaport/%2f is not a valid address",
        ),
        (
            "[placement]\nkeystone_url = \"ftp://k/v3\"",
            "key `placement.keystone_url` must be an http",
        ),
        (
            "[placement]\nurl = \"placement\"",
            "key `placement.url` is not a URL",
        ),
        (
            "[nova_db]\nenabled = true",
            "key `nova_db.api_database_url` or cells is required when enabled",
        ),
        (
            "[nova_db]\napi_database_url = \"oracle://nova:pw@db/nova\"",
            "key `nova_db.api_database_url`",
        ),
        (
            "[nova_db]\nrefresh_interval_s = 0",
            "key `nova_db.refresh_interval_s` must be a positive number of seconds",
        ),
        (
            "[ledger]\nurl = \"postgres://u@h:port/db\"",
            "key `ledger.url` is not a PostgreSQL URL",
        ),
        (
            "[ledger]\nwal_prewrite_mib = 257",
            "key `ledger.wal_prewrite_mib` must be at most 256",
        ),
        (
            "[scheduler]\nstats_window_s = 0",
            "key `scheduler.stats_window_s` must be at least 1",
        ),
        (
            "[scheduler]\ncell_uuid = \"cell1\"",
            "key `scheduler.cell_uuid` must be a UUID",
        ),
        (
            "[server]\nhost = \"not a host\"",
            "key `server.host` \"not a host\" is neither",
        ),
        (
            "[log]\nlevel = \"info,parasol=loud\"",
            "key `log.level` is not a RUST_LOG filter",
        ),
        (
            "[server]\nhttp_workers = 513",
            "key `server.http_workers` must be at most 512",
        ),
        (
            "[server]\nshutdown_grace_s = 1e300",
            "key `server.shutdown_grace_s` must be a number of seconds from 0 to 86400",
        ),
        (
            "[server]\nmax_connections = 0",
            "key `server.max_connections` must be at least 1",
        ),
        (
            "[server]\nbody_timeout_s = 0",
            "key `server.body_timeout_s` must be a number of seconds from 0.001 to 86400",
        ),
        (
            "[server]\nmax_pipelined_requests = 0",
            "key `server.max_pipelined_requests` must be at least 1",
        ),
        (
            "[server]\nsocket_receive_buffer_bytes = 100",
            "key `server.socket_receive_buffer_bytes` must be from 4096",
        ),
        (
            "[server]\nclient_request_timeout_s = -1",
            "key `server.client_request_timeout_s`",
        ),
        (
            "[server]\nkeep_alive_s = 1e300",
            "key `server.keep_alive_s`",
        ),
        (
            "[server]\nshutdown_grace_s = -1",
            "key `server.shutdown_grace_s`",
        ),
        (
            "[policy]\ndefault_availability_zone = \" \"",
            "key `policy.default_availability_zone` is empty",
        ),
        (
            "[policy]\nweight_classes = [\"all_weighers\"]\n\
             metrics_weight_setting = [\"cpu.percent=-1\"]",
            "invalid policy setting `metrics_required`: with metrics_weight_setting and \
             MetricsWeigher, true needs MetricsFilter",
        ),
        (
            "[policy]\nmetrics_weight_setting = [\"cpu.percent\"]",
            "invalid policy setting `metrics_weight_setting`: \"cpu.percent\" is not name=ratio",
        ),
        (
            "[flex]\nqos_saturation_threshold = 1.5",
            "key `flex.qos_saturation_threshold` must be a share of capacity above 0 and at most 1",
        ),
        ("[flex]\nqos_source = \"libvirt\"", "host_saturation"),
        (
            "[flex]\nenabled = true\nmanage_allocation_ratio = true",
            "key `flex.manage_allocation_ratio` needs [placement] enabled = true",
        ),
        (
            "[flex]\nmanage_allocation_ratio = true",
            "key `flex.manage_allocation_ratio` needs [flex] enabled = true",
        ),
        (
            "[flex]\nallocation_ratio_bounds = [{ class = \"DISK_GB\", min = 1.0, max = 2.0 }]",
            "key `flex.allocation_ratio_bounds.DISK_GB` names DISK_GB, which is not in \
             flex.classes",
        ),
        (
            "[flex]\nallocation_ratio_bounds = [{ class = \"VCPU\", min = 2.0, max = 1.0 }]",
            "key `flex.allocation_ratio_bounds.VCPU` must be [min, max] with 0 < min <= max",
        ),
        (
            "[flex]\nallocation_ratio_bounds = [{ class = \"VCPU\", min = 0.0, max = 1.0 }]",
            "key `flex.allocation_ratio_bounds.VCPU` must be [min, max]",
        ),
        (
            "[flex]\nallocation_ratio_min_change = 0",
            "key `flex.allocation_ratio_min_change` must be above 0 and at most 1",
        ),
        (
            "[policy]\nmetrics_weight_of_unavailable = nan",
            "invalid policy setting `metrics_weight_of_unavailable`",
        ),
        (
            "[usage.prometheus]\nurl = \"http://p:9090\"",
            "key `usage.prometheus.queries` needs a query for at least one resource class",
        ),
        (
            "[usage.prometheus]\nurl = \"p:9090\"\nqueries = { VCPU = \"up\" }",
            "key `usage.prometheus.url`",
        ),
        (
            "[usage.prometheus]\nurl = \"http://p:9090\"\nqueries = { VCPUS = \"up\" }",
            "key `usage.prometheus.queries.VCPUS` is not a resource class",
        ),
        (
            "[usage.prometheus]\nurl = \"http://p:9090\"\npoll_interval_s = 180\n\
             queries = { VCPU = \"up\" }",
            "key `usage.prometheus.poll_interval_s` must be below usage.max_age_s",
        ),
        (
            "[usage.prometheus]\nhost_label = \"host name\"",
            "key `usage.prometheus.host_label`",
        ),
        (
            "[usage.prometheus]\nquery = \"up\"",
            "key `usage.prometheus.query` is not a known key",
        ),
    ];

    #[test]
    fn what_serve_would_refuse_at_start_is_refused_naming_the_key() {
        for &(toml, want) in REFUSED_AT_START {
            let err = refusal(toml);
            assert!(err.contains(want), "{toml}: {err}");
        }
    }

    #[test]
    fn a_sqlite_folder_under_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        std::fs::write(&file, b"").unwrap();
        let err = refusal(&format!(
            "[ledger]\nurl = \"sqlite://{}/sub/ledger.db\"",
            file.display()
        ));
        assert!(err.contains("key `ledger.url` needs the folder"), "{err}");
        let err = refusal(&format!("[ledger]\ndata_dir = \"{}\"", file.display()));
        assert!(err.contains("key `ledger.data_dir`"), "{err}");
        let fine = format!(
            "[ledger]\nurl = \"sqlite://{}/new/ledger.db\"",
            dir.path().display()
        );
        assert!(Settings::from_toml(&fine).is_ok());
    }

    #[test]
    fn a_prometheus_query_per_class_is_read_with_the_class_in_capitals() {
        let s = Settings::from_toml(
            "[usage.prometheus]\nurl = \"http://127.0.0.1:9090\"\nhost_label = \"instance\"\n\
             [usage.prometheus.queries]\nVCPU = \"sum by (instance) (rate(x[1m]))\"\n\
             CUSTOM_GPU_MEM = \"y\"",
        )
        .unwrap();
        let p = &s.usage.prometheus;
        assert!(p.enabled());
        let classes: Vec<(String, &str)> = p.classes().collect();
        assert_eq!(
            classes,
            vec![
                ("CUSTOM_GPU_MEM".to_string(), "y"),
                ("VCPU".to_string(), "sum by (instance) (rate(x[1m]))")
            ]
        );
    }

    #[test]
    fn good_urls_pass() {
        let toml = "[ledger]\nurl = \"postgresql://parasol:pw@db:5432/parasol\"\n\
                    [amqp]\nurl = \"amqps://nova:pw@rabbit:5671/nova\"\n\
                    [placement]\nurl = \"https://cloud/placement\"\nkeystone_url = \"http://cloud/identity\"";
        Settings::from_toml(toml).unwrap();
    }
}
