//! The `parasol` binary: parse the command line, read the configuration, start telemetry, run.

// Long functions are split into named steps and long argument lists into structs (issue 41;
// the threshold is in clippy.toml).
#![deny(clippy::too_many_lines, clippy::too_many_arguments)]

use anyhow::Context;
use clap::Parser;
use parasol::cli::{ApsrCommand, Cli, Command, ConfigCommand, RebalanceCommand};
use parasol::configuration::{LogFormat, Settings};
use std::io::IsTerminal;

/// mimalloc, not glibc's allocator: the service allocates and frees many small values per
/// message and per decision (decoded notifications, host registrations, JSON text), often on
/// another thread than the one that allocated them (the consumer's task allocates, the ledger's
/// writer thread frees). Draining re-registrations it took 15–25 % less of the service's CPU
/// per event (BENCHMARKS.md, "Known inventory rows and mimalloc").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let terminal = std::io::stderr().is_terminal();
    if !matches!(cli.command, Command::Serve) {
        parasol::telemetry::init("info", LogFormat::Text, std::io::stderr, terminal);
    }
    match cli.command {
        Command::Serve => {
            let settings = load(&cli)?;
            let log = &settings.log;
            parasol::telemetry::init(&log.level, log.format, std::io::stderr, terminal);
            parasol::service::serve(settings, cli.config_path())
                .await
                .context("parasol serve")?;
        }
        Command::Migrate => {
            let settings = load(&cli)?;
            let url = settings
                .ledger
                .resolve_url()
                .context("creating the data directory")?;
            let ledger = parasol::ledger::Ledger::connect(&url, 1)
                .await
                .context("connecting to the ledger")?;
            ledger.migrate().await.context("applying migrations")?;
            println!(
                "migrations applied to {}",
                parasol::redact::redact_url(&url)
            );
        }
        Command::Config(ConfigCommand::Check { file }) => {
            let settings = Settings::check_file(&file)
                .with_context(|| format!("{} is not valid", file.display()))?;
            println!(
                "{}: valid (backend {})",
                file.display(),
                settings.scheduler.backend.as_str()
            );
        }
        Command::Config(ConfigCommand::FromNova { file }) => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let conf = parasol::configuration::nova_conf::NovaConf::parse(&text)
                .with_context(|| format!("{} is not an oslo.config file", file.display()))?;
            let out =
                parasol::configuration::from_nova::translate(&conf, &file.display().to_string());
            for warning in &out.warnings {
                eprintln!("warning: {warning}");
            }
            print!("{}", out.toml);
        }
        Command::Apsr(ApsrCommand::Plan(args)) => {
            parasol::control::run_plan(&args, &mut std::io::stdout())
                .context("parasol apsr plan")?;
        }
        Command::Rebalance(RebalanceCommand::Plan(ref args)) => {
            rebalance_plan(&cli, args).await?;
        }
    }
    Ok(())
}

/// `parasol rebalance plan`: the running service's plan, as a table or JSON.
async fn rebalance_plan(cli: &Cli, args: &parasol::cli::RebalancePlanArgs) -> anyhow::Result<()> {
    let settings = load(cli)?;
    let host = match settings.server.host.as_str() {
        "0.0.0.0" | "::" | "[::]" => "127.0.0.1".to_string(),
        h if h.contains(':') && !h.starts_with('[') => format!("[{h}]"),
        h => h.to_string(),
    };
    let url = args
        .url
        .clone()
        .unwrap_or_else(|| format!("http://{host}:{}", settings.server.port));
    let configured = (settings.auth.strategy == parasol::auth::Strategy::Token)
        .then(|| settings.auth.token.clone());
    let token = args.token.clone().or(configured);
    let body = args.body();
    let call = parasol::rebalance::PlanCall {
        base_url: &url,
        token: token.as_deref(),
        body: &body,
        format: args.watcher.then_some("watcher"),
        timeout: std::time::Duration::from_secs(120),
    };
    let plan = parasol::rebalance::request_plan(&call)
        .await
        .context("parasol rebalance plan")?;
    if args.json || args.watcher {
        println!("{}", serde_json::to_string_pretty(&plan)?);
    } else {
        print!("{}", parasol::rebalance::render_text(&plan));
    }
    Ok(())
}

fn load(cli: &Cli) -> anyhow::Result<Settings> {
    let (path, explicit) = cli.config_path();
    Settings::load(&path, explicit).context("reading the configuration")
}
