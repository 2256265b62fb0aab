//! A fresh `parasol serve` per run: a generated configuration (every interval divided by the
//! time scale; with `--via rpc` Nova's scheduler RPC on the run's own topic), a fresh SQLite
//! ledger in the run's folder, a free port, logs to a file.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What one service run is configured with.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ServiceConfig {
    pub backend: String,
    pub workers: usize,
    pub seed: u64,
    pub time_scale: f64,
    /// Caching's fixed interval, unscaled seconds.
    pub refresh_interval_s: f64,
    pub asc_start_interval_s: f64,
    pub asc_min_interval_s: f64,
    pub apsr_epsilon: f64,
    pub apsr_round_interval_s: f64,
    /// Empty = no broker (HTTP notifications and HTTP select_destinations).
    pub amqp_url: String,
    pub exchange: String,
    pub queue: String,
    /// `[rpc] topic` when the service serves Nova's scheduler RPC (`--via rpc`), else off.
    pub rpc_topic: Option<String>,
}

/// `[rpc] host` of the bench's services: the server also consumes `<topic>.<host>`.
pub const RPC_HOST: &str = "openstack-bench";

impl ServiceConfig {
    /// The queues the service declares on the broker and leaves there when it stops: its
    /// notification queue and, serving RPC, `<topic>` and `<topic>.<host>`.
    pub fn broker_queues(&self) -> Vec<String> {
        let mut queues = vec![self.queue.clone()];
        if let Some(topic) = &self.rpc_topic {
            queues.push(topic.clone());
            queues.push(format!("{topic}.{RPC_HOST}"));
        }
        queues
    }

    /// The TOML the service reads.
    pub fn to_toml(&self, port: u16, data_dir: &Path) -> String {
        let ts = self.time_scale;
        // The scheduler's minimum interval should not fall below one refresh (a few ms here).
        let floor = |s: f64| (s / ts).max(0.005);
        format!(
            r#"[server]
host = "127.0.0.1"
port = {port}
[ledger]
data_dir = "{data}"
[scheduler]
backend = "{backend}"
workers = {workers}
seed = {seed}
[caching]
refresh_interval_s = {refresh}
[asc]
start_interval_s = {asc_start}
min_interval_s = {asc_min}
[apsr]
epsilon = {eps}
round_interval_s = {round}
[amqp]
url = "{amqp}"
exchange = "{exchange}"
queue = "{queue}"
[rpc]
enabled = {rpc}
host = "{rpc_host}"
topic = "{topic}"
"#,
            data = data_dir.display(),
            backend = self.backend,
            workers = self.workers,
            seed = self.seed,
            refresh = floor(self.refresh_interval_s),
            asc_start = floor(self.asc_start_interval_s),
            asc_min = floor(self.asc_min_interval_s),
            eps = self.apsr_epsilon,
            round = floor(self.apsr_round_interval_s),
            amqp = self.amqp_url,
            exchange = self.exchange,
            queue = self.queue,
            rpc = self.rpc_topic.is_some(),
            rpc_host = RPC_HOST,
            topic = self.rpc_topic.as_deref().unwrap_or("scheduler"),
        )
    }
}

/// A running service; killed on drop.
pub struct Service {
    child: Child,
    pub base: String,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `parasol` binary: `explicit`, else next to this executable (or its parent folder,
/// for test binaries in `deps/`).
pub fn find_parasol(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let exe = std::env::current_exe()?;
    for dir in exe.ancestors().skip(1).take(2) {
        let candidate = dir.join("parasol");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!(
        "no `parasol` binary next to {}; build it or pass --parasol PATH",
        exe.display()
    )
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl Service {
    /// Writes the configuration into `dir`, starts the service, waits for `/healthz`.
    pub async fn start(bin: &Path, cfg: &ServiceConfig, dir: &Path) -> anyhow::Result<Service> {
        std::fs::create_dir_all(dir)?;
        let port = free_port()?;
        let config_path = dir.join("parasol.toml");
        std::fs::write(&config_path, cfg.to_toml(port, &dir.join("ledger")))?;
        let log = std::fs::File::create(dir.join("parasol.log"))?;
        let child = Command::new(bin)
            .arg("--config")
            .arg(&config_path)
            .arg("serve")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let mut service = Service {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = service.child.try_wait()? {
                bail!(
                    "parasol exited with {status}; see {}/parasol.log",
                    dir.display()
                );
            }
            let health = client.get(format!("{}/healthz", service.base)).send().await;
            if health.is_ok_and(|r| r.status().is_success()) {
                return Ok(service);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!(
            "parasol did not answer /healthz within 30 s; see {}/parasol.log",
            dir.display()
        )
    }
}
