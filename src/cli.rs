//! The command line: `parasol serve | migrate | config check | config from-nova | apsr plan |
//! rebalance plan`.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Parasol: a drop-in replacement for the OpenStack Nova scheduler.
#[derive(Debug, Parser)]
#[command(name = "parasol", version, about, long_about = None)]
pub struct Cli {
    /// Configuration file (TOML). Without this flag `etc/parasol.toml` is read when it exists;
    /// `PARASOL__SECTION__KEY` environment variables override either.
    #[arg(long, short, global = true, env = "PARASOL_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the scheduler service (HTTP API, and Nova RPC / notifications when configured).
    /// SIGHUP re-reads the configuration file and switches backend without dropping calls.
    Serve,
    /// Apply the ledger's database migrations and exit.
    Migrate,
    /// Configuration tools.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// APSR tools.
    #[command(subcommand)]
    Apsr(ApsrCommand),
    /// Rebalancing tools (docs/fmu.md §8).
    #[command(subcommand)]
    Rebalance(RebalanceCommand),
}

#[derive(Debug, Subcommand)]
pub enum RebalanceCommand {
    /// Ask the running service for a Fair Maximum Utilization plan (a dry run: nothing moves)
    /// and print its moves with each one's predicted ΔU, ΔF, ΔC and the plan's before/after.
    /// The service holds the measured usage the plan needs (soft state, never in the ledger),
    /// so this calls `POST /v1/rebalance/plan` rather than reading the ledger.
    Plan(RebalancePlanArgs),
    /// Ask the running service for a plan (as `plan` does, telling it which of Nova's servers
    /// cannot move now and Nova's server groups) and carry it out through Nova's compute API:
    /// one live migration at a time (os-migrateLive, block_migration auto, microversion
    /// 2.68), each waited for, then Placement and Parasol's ledger checked to agree. The first
    /// move Nova refuses or that fails stops the apply, naming the server and the reason.
    /// Nova and Placement are reached as `[rebalance] nova_*` and `[placement]` say.
    /// With --plan FILE, carries out a plan saved by `apply --dry-run --json` instead of a new
    /// one.
    Apply(RebalanceApplyArgs),
}

/// Flags of `parasol rebalance apply`: `plan`'s, and a saved plan to carry out.
#[derive(Args, Clone, Debug, Default, PartialEq)]
pub struct RebalanceApplyArgs {
    #[command(flatten)]
    pub plan: RebalancePlanArgs,
    /// Carry out this saved plan (`parasol rebalance apply --dry-run --json > FILE`), the one
    /// reviewed, rather than a new one. Refused, nothing moved, if the ledger changed since it was made
    /// (its `base_revision`); with --replan, planned again on the current state instead.
    #[arg(long = "plan", value_name = "FILE")]
    pub plan_file: Option<PathBuf>,
    /// Print the plan apply would carry out (made with what Nova knows: servers that cannot
    /// move, hard server groups) and move nothing; `--dry-run --json > FILE` saves it for
    /// --plan.
    #[arg(long)]
    pub dry_run: bool,
}

/// Flags of `parasol rebalance plan`; each one left out takes `[rebalance]`'s value.
#[derive(Args, Clone, Debug, Default, PartialEq)]
pub struct RebalancePlanArgs {
    /// The service's base URL [default: http://<server.host>:<server.port> of the
    /// configuration, 127.0.0.1 for a wildcard address].
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// X-Auth-Token to send [default: `[auth] token` with strategy "token"].
    #[arg(long, env = "PARASOL_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Balance among these hosts only (service host, node or compute node uuid); repeatable.
    #[arg(long = "host", value_name = "HOST")]
    pub hosts: Vec<String>,
    /// gbm, bcpu, bcpu2 or sa.
    #[arg(long)]
    pub solver: Option<String>,
    #[arg(long)]
    pub seed: Option<u64>,
    #[arg(long)]
    pub max_moves: Option<u64>,
    #[arg(long)]
    pub parallel: Option<u64>,
    #[arg(long)]
    pub max_concurrent_per_source: Option<u64>,
    #[arg(long)]
    pub migration_resistance: Option<f64>,
    /// The revision a previous plan was made on: refused if the ledger changed since.
    #[arg(long)]
    pub base_revision: Option<String>,
    /// With --base-revision: plan again on the current state instead of refusing.
    #[arg(long)]
    pub replan: bool,
    /// Print the service's JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Print Watcher's action list (JSON).
    #[arg(long)]
    pub watcher: bool,
}

impl RebalancePlanArgs {
    /// The request body: only the fields given.
    pub fn body(&self) -> serde_json::Value {
        let mut body = serde_json::Map::new();
        let mut put = |key: &str, value: serde_json::Value| {
            if !value.is_null() {
                body.insert(key.to_string(), value);
            }
        };
        if !self.hosts.is_empty() {
            put("hosts", serde_json::json!(self.hosts));
        }
        put("solver", serde_json::json!(self.solver));
        put("seed", serde_json::json!(self.seed));
        put("max_moves", serde_json::json!(self.max_moves));
        put("parallel", serde_json::json!(self.parallel));
        put(
            "max_concurrent_per_source",
            serde_json::json!(self.max_concurrent_per_source),
        );
        put(
            "migration_resistance",
            serde_json::json!(self.migration_resistance),
        );
        put("base_revision", serde_json::json!(self.base_revision));
        if self.replan {
            put("replan", serde_json::Value::Bool(true));
        }
        serde_json::Value::Object(body)
    }
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a configuration file offline (no environment overrides) and print the result:
    /// every error `serve` would meet at start (keys, values, ranges, URL schemes, folders).
    Check {
        /// The file to check.
        file: PathBuf,
    },
    /// Print the parasol.toml that keeps a Nova cloud's scheduler options (filters, weighers
    /// and multipliers, max_attempts, host_subset_size, transport_url, [placement]
    /// credentials); each option it cannot carry is named on stderr.
    FromNova {
        /// Nova's configuration file, e.g. /etc/nova/nova.conf.
        file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum ApsrCommand {
    /// Plan the number of schedulers s and hosts per scheduler d for an SLA ε (docs/architecture.md
    /// §4).
    Plan(crate::control::PlanArgs),
}

impl Cli {
    /// The configuration file to read, and whether the operator named it.
    pub fn config_path(&self) -> (PathBuf, bool) {
        match &self.config {
            Some(p) => (p.clone(), true),
            None => (PathBuf::from("etc/parasol.toml"), false),
        }
    }
}
