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
        Command::Rebalance(RebalanceCommand::Apply(ref args)) => {
            rebalance_apply(&cli, args).await?;
        }
    }
    Ok(())
}

/// The service's URL (`--url`, else `[server]`'s address) and token (`--token`, else `[auth]
/// token` with strategy "token").
fn service_endpoint(
    settings: &Settings,
    args: &parasol::cli::RebalancePlanArgs,
) -> (String, Option<String>) {
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
    (url, args.token.clone().or(configured))
}

/// `parasol rebalance plan`: the running service's plan, as a table or JSON.
async fn rebalance_plan(cli: &Cli, args: &parasol::cli::RebalancePlanArgs) -> anyhow::Result<()> {
    let settings = load(cli)?;
    let (url, token) = service_endpoint(&settings, args);
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

/// `parasol rebalance apply`: the service's plan (with what Nova knows of its servers and
/// groups), or the saved one of `--plan` if the ledger has not changed since, printed, then
/// carried out through Nova one move at a time.
async fn rebalance_apply(cli: &Cli, args: &parasol::cli::RebalanceApplyArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        !args.plan.watcher,
        "parasol rebalance apply carries out Parasol's own plan; --watcher is for `plan`"
    );
    let settings = load(cli)?;
    let clock: parasol::clock::SharedClock = std::sync::Arc::new(parasol::clock::SystemClock);
    let nova = parasol::rebalance::ComputeApi::new(&settings, clock.clone())
        .context("parasol rebalance apply: Nova's compute API")?;
    let placement =
        parasol::placement::PlacementClient::new(settings.placement.clone(), clock.clone())
            .context("parasol rebalance apply: Placement")?;
    let (url, token) = service_endpoint(&settings, &args.plan);
    let mut body = args.plan.body();
    parasol::rebalance::from_nova(&nova, &mut body)
        .await
        .context("parasol rebalance apply: reading Nova's servers and server groups")?;
    let plan = plan_to_apply(args, &url, token.as_deref(), body).await?;
    if args.plan.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
    } else {
        print!("{}", parasol::rebalance::render_text(&plan));
    }
    let moves = parasol::rebalance::plan_moves(&plan)?;
    if args.dry_run {
        return Ok(());
    }
    let r = &settings.rebalance;
    let apply = parasol::rebalance::Apply {
        nova: &nova,
        placement: &placement,
        parasol: parasol::rebalance::ParasolEndpoint { url, token },
        clock,
        poll_ms: (r.apply_poll_interval_s * 1000.0) as u64,
        move_timeout_ms: (r.move_timeout_s * 1000.0) as i64,
        agree_timeout_ms: (r.agree_timeout_s * 1000.0) as i64,
    };
    let done = apply
        .run(&moves, &mut std::io::stdout())
        .await
        .map_err(|stopped| anyhow::anyhow!("parasol rebalance apply {stopped}"))?;
    println!(
        "applied {done} of {} moves; predicted F {} -> {}, U {} -> {}",
        moves.len(),
        plan["before"]["fairness"],
        plan["after"]["fairness"],
        plan["before"]["utilization"],
        plan["after"]["utilization"]
    );
    Ok(())
}

/// The plan `apply` carries out: a new one from the service; with `--plan FILE`, the saved
/// one when the ledger is still at its `base_revision` (the service checks it), else a
/// refusal naming why (nothing moved), or with `--replan` the service's new plan.
async fn plan_to_apply(
    args: &parasol::cli::RebalanceApplyArgs,
    url: &str,
    token: Option<&str>,
    mut body: serde_json::Value,
) -> anyhow::Result<serde_json::Value> {
    let mut saved = None;
    if let Some(path) = &args.plan_file {
        anyhow::ensure!(
            args.plan.base_revision.is_none(),
            "--plan takes the base revision from {}; leave --base-revision out",
            path.display()
        );
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("parasol rebalance apply: reading {}", path.display()))?;
        let (plan, revision) = parasol::rebalance::saved_plan(&text).with_context(|| {
            format!(
                "parasol rebalance apply: {} is not a plan saved by `parasol rebalance apply --dry-run --json`",
                path.display()
            )
        })?;
        body["base_revision"] = serde_json::Value::String(revision);
        saved = Some(plan);
    }
    let call = parasol::rebalance::PlanCall {
        base_url: url,
        token,
        body: &body,
        format: None,
        timeout: std::time::Duration::from_secs(120),
    };
    let fresh =
        match parasol::rebalance::request_plan(&call).await {
            Err(parasol::rebalance::ClientError::Refused {
                status: 409,
                message,
            }) if saved.is_some() => anyhow::bail!(
            "parasol rebalance apply: the plan in {} is older than the ledger's state, nothing \
             was moved (make a new plan, or add --replan to plan again on the current state): \
             {message}",
            args.plan_file.as_ref().map_or(String::new(), |p| p.display().to_string())
        ),
            other => other.context("parasol rebalance apply")?,
        };
    match (saved, fresh["replanned"].as_str()) {
        (Some(_), Some(why)) => {
            eprintln!("parasol rebalance apply: {why}; applying the new plan");
            Ok(fresh)
        }
        (Some(saved), None) => Ok(saved),
        (None, _) => Ok(fresh),
    }
}

fn load(cli: &Cli) -> anyhow::Result<Settings> {
    let (path, explicit) = cli.config_path();
    Settings::load(&path, explicit).context("reading the configuration")
}
