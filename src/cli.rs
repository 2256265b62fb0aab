//! The command line: `parasol serve | migrate | config check | config from-nova | apsr plan`.

use clap::{Parser, Subcommand};
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
