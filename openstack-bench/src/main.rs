//! # openstack-bench
//!
//! Parasol's research tools (see the library's doc for why they share this crate).
//!
//! `compare` and `scenario`: emulated compute hosts and a load driver that compare Parasol's
//! backends side by side: each run starts a fresh `parasol serve`, registers N emulated hosts
//! over RabbitMQ (or HTTP), replays one seeded dataset workload through `POST
//! /v1/select_destinations` (or, with `--via rpc`, Nova's scheduler RPC on RabbitMQ), boots
//! every placed instance on its host, and reports decisions/s, latency percentiles, decline
//! ratio, host reads per request and oversubscription violations.
//!
//! `soak`: a long run with faults against two `parasol serve` processes on one PostgreSQL
//! ledger (`soak`; results in docs/failures.md).
//!
//! `sim`: the APSR and ASC papers' experiments in virtual time (`openstack_bench::sim`).
//!
//! # Layout
//! - `workload`: the library's datasets as hosts and flavors; seeded arrivals and lifetimes.
//! - `wire`: host-state events, Nova notifications, select_destinations bodies.
//! - `notify`, `hosts`: the emulated hosts and how they publish.
//! - `service`, `driver`, `run`: one service per run, the load, the checks.
//! - `plan`, `scenarios`, `report`, `plots`: comparisons, named scenarios and their output.
//! - `soak`: the soak with faults, on the same hosts, wire and services.

/// The driver shares the machine with the service it measures: with glibc's malloc,
/// allocating and freeing were a third of its CPU, and mimalloc takes 13 % less CPU per
/// decision (BENCHMARKS.md). The service uses it too (`src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod demand;
mod driver;
mod hosts;
mod notify;
mod plan;
mod plots;
mod report;
mod run;
mod scenarios;
mod service;
mod soak;
mod wire;
mod workload;

use clap::{Args, Parser, Subcommand, ValueEnum};
use driver::Via;
use notify::NotifyVia;
use openstack_bench::sim::cli::SimCommand;
use parasol::configuration::BackendKind;
use plan::{Plan, Variant};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "openstack-bench",
    about = "Parasol's research tools: compare the backends on emulated hosts, simulate the papers' experiments"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Every backend on the same seeded workload, for each host count.
    Compare(CompareArgs),
    /// A named scenario of docs/architecture.md §10 C.
    Scenario {
        name: ScenarioName,
        #[command(flatten)]
        common: Common,
        /// Host counts (throughput-vs-hosts) or the host count (apsr-vs-parallel-filter,
        /// flex-service).
        #[arg(long, value_delimiter = ',')]
        hosts: Option<Vec<usize>>,
    },
    /// Reproduce the APSR and ASC papers' experiments in virtual time.
    #[command(subcommand)]
    Sim(SimCommand),
    /// A long run with faults: two processes on one PostgreSQL ledger, HTTP and Nova's RPC,
    /// a SIGKILL, a broker cut, a database cut or a malformed burst every interval; checks
    /// that nothing answered is lost and the ledger equals the hosts' books (docs/failures.md).
    Soak(SoakArgs),
    /// Draw the figures BENCHMARKS.md shows beside its tables, from those tables.
    Figures {
        /// The Markdown file holding the tables.
        #[arg(long, default_value = "BENCHMARKS.md")]
        tables: PathBuf,
        #[arg(long, default_value = "docs/bench")]
        out: PathBuf,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum ScenarioName {
    ThroughputVsHosts,
    AscOpenstack,
    ApsrVsParallelFilter,
    /// Flex against the request-based filter at several allocation ratios, on hosts under the
    /// demand model (issue 45; implies --demand-model).
    FlexService,
}

#[derive(Args, Clone)]
struct Common {
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Divides every interval: arrivals, lifetimes, refresh and control intervals.
    #[arg(long)]
    time_scale: Option<f64>,
    #[arg(long, value_enum, default_value = "amqp")]
    notify: NotifyVia,
    /// How select_destinations is called: HTTP, or Nova's scheduler RPC (4.5) on the broker
    /// of --amqp-url.
    #[arg(long, value_enum, default_value = "http")]
    via: Via,
    /// RabbitMQ for `--notify amqp` and `--via rpc`.
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    amqp_url: String,
    /// The `parasol` binary (default: next to this one).
    #[arg(long)]
    parasol: Option<PathBuf>,
    /// Results go to `<out>/<run>/`.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
    /// Run name (default: scenario name and a timestamp).
    #[arg(long)]
    run: Option<String>,
    /// Stop issuing requests after this many seconds per run (scenario default otherwise).
    #[arg(long)]
    max_duration: Option<u64>,
    /// Seconds between two host-state heartbeats of each host (real time): as often as
    /// nova-compute's periodic resource update runs (`update_resources_interval` = 0, its
    /// default: oslo.service's default periodic interval, 60 s).
    #[arg(long, default_value_t = 60.0)]
    heartbeat_s: f64,
    /// Seconds the service's ingestion is measured alone (heartbeats, no request) before each
    /// run's requests: its CPU per event, reported apart from its CPU per decision (0: not
    /// measured).
    #[arg(long, default_value_t = 5.0)]
    ingest_window_s: f64,
    /// Milliseconds between two reads of the service's `/v1/stats` during the requests (the
    /// backend's parameters over time, in the report); 0: none, so that nothing the service
    /// does depends on the wall time (as when it is counted under callgrind).
    #[arg(long, default_value_t = 250)]
    stats_sample_ms: u64,
    /// The hosts use what they run by seed 002's demand model (`--seed`) and report their
    /// usage and each instance's QoS signals at every heartbeat (issue 45).
    #[arg(long)]
    demand_model: bool,
    /// Length of one demand of the demand model, seconds (real time, as --heartbeat-s; the
    /// trace's usage sample and `sim flex`'s period: 300).
    #[arg(long, default_value_t = 300.0)]
    demand_period_s: f64,
}

#[derive(Args, Clone)]
struct SoakArgs {
    #[arg(long, default_value_t = 10_000)]
    hosts: usize,
    #[arg(long, default_value = "nfv")]
    dataset: String,
    /// Decisions per second asked for (Poisson arrivals), unless --find-rates finds one.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// Rates to try first without faults, --calibrate-s each, highest first: the soak runs at
    /// the first one sustained (issued ≥ 97 %, released ≤ 100 ms late and answered within 1 s
    /// at p99, nothing failed), else at the last.
    #[arg(long, value_delimiter = ',')]
    find_rates: Vec<f64>,
    #[arg(long, default_value_t = 60)]
    calibrate_s: u64,
    #[arg(long, default_value_t = 1800)]
    duration_s: u64,
    #[arg(long, default_value_t = 300)]
    fault_interval_s: u64,
    /// Faults in turn; `--faults none` for a run without faults (to find the rate).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "kill,broker,postgres,malformed"
    )]
    faults: Vec<String>,
    /// Mean instance lifetime, seconds.
    #[arg(long, default_value_t = 300.0)]
    lifetime_s: f64,
    /// Share of calls over HTTP (the rest over Nova's RPC).
    #[arg(long, default_value_t = 0.5)]
    http_share: f64,
    #[arg(long, default_value_t = 512)]
    concurrency: usize,
    #[arg(long, default_value = "filter")]
    backend: String,
    #[arg(long, default_value_t = 2)]
    workers: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seconds between two host-state heartbeats of each host.
    #[arg(long, default_value_t = 30.0)]
    heartbeat_s: f64,
    /// `[scheduler] claim_ttl_s` of both processes.
    #[arg(long, default_value_t = 120)]
    claim_ttl_s: u64,
    /// Malformed notifications per burst.
    #[arg(long, default_value_t = 10_000)]
    burst: usize,
    /// When the RSS baseline is taken (default: a sixth of the duration, 5 min of 30).
    #[arg(long)]
    rss_baseline_s: Option<u64>,
    /// PostgreSQL server (no database: the soak creates and drops its own).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432")]
    pg: String,
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    amqp_url: String,
    #[arg(long)]
    parasol: Option<PathBuf>,
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
    #[arg(long)]
    run: Option<String>,
    /// Keep the soak's database for inspection.
    #[arg(long)]
    keep_database: bool,
}

/// `[batch] mode` of a compared run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum BatchModeArg {
    Off,
    Call,
    Window,
}

impl BatchModeArg {
    fn as_str(self) -> &'static str {
        match self {
            BatchModeArg::Off => "off",
            BatchModeArg::Call => "call",
            BatchModeArg::Window => "window",
        }
    }
}

#[derive(Args, Clone)]
struct CompareArgs {
    #[command(flatten)]
    common: Common,
    /// Backends to compare (default: every one).
    #[arg(long, value_delimiter = ',')]
    backends: Option<Vec<BackendKind>>,
    #[arg(long, value_delimiter = ',', default_value = "100,1000")]
    hosts: Vec<usize>,
    #[arg(long, default_value = "nfv")]
    dataset: String,
    /// Requests per run (default: 6 per host, 2,000 … 30,000).
    #[arg(long)]
    requests: Option<usize>,
    /// Poisson arrival rate, requests per unscaled second (default: closed loop).
    #[arg(long)]
    rate: Option<f64>,
    /// Mean lifetime, unscaled seconds (default: unbounded).
    #[arg(long)]
    lifetime: Option<f64>,
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    #[arg(long)]
    batch: Option<usize>,
    /// Scheduling workers of filter, caching and asc.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    #[arg(long, default_value_t = 0.05)]
    epsilon: f64,
    /// Caching's refresh interval, unscaled seconds.
    #[arg(long, default_value_t = 60.0)]
    refresh_interval: f64,
    /// `[batch] mode` of each run: every backend runs once per mode given (`off`, `call`,
    /// `window`); a run's label gains the mode when it is not `off`.
    #[arg(long, value_delimiter = ',', default_value = "off")]
    batch_modes: Vec<BatchModeArg>,
    /// `[batch] window_ms` of the `window` runs (1–100).
    #[arg(long, default_value_t = 10)]
    window_ms: u64,
    /// With --demand-model: the hosts' VCPU and MEMORY_MB allocation ratio (Placement's), in
    /// their inventory and their books.
    #[arg(long, default_value_t = 1.0)]
    allocation_ratio: f64,
    /// `[flex]` on in every run, QoS from the hosts' signals, the penalty moved every this
    /// many seconds (real time).
    #[arg(long)]
    flex_update_period_s: Option<f64>,
}

fn main() -> anyhow::Result<()> {
    let (plan, common) = match Cli::parse().command {
        // The simulator runs in virtual time on its own threads: no runtime.
        Cmd::Sim(cmd) => return openstack_bench::sim::cli::run(cmd),
        Cmd::Figures { tables, out } => {
            let markdown = std::fs::read_to_string(&tables)
                .map_err(|e| anyhow::anyhow!("{}: {e}", tables.display()))?;
            for stem in plots::from_benchmarks(&markdown, &out)? {
                println!("{}", out.join(format!("{stem}.png")).display());
            }
            return Ok(());
        }
        Cmd::Soak(a) => return tokio::runtime::Runtime::new()?.block_on(soak(a)),
        Cmd::Compare(a) => (compare_plan(&a)?, a.common),
        Cmd::Scenario {
            name,
            common,
            hosts,
        } => {
            let ts = common.time_scale;
            let plan = match name {
                ScenarioName::ThroughputVsHosts => scenarios::throughput_vs_hosts(
                    hosts.unwrap_or_else(|| vec![100, 1_000, 10_000]),
                    common.seed,
                    16,
                    common.max_duration.unwrap_or(30),
                )?,
                ScenarioName::AscOpenstack => {
                    scenarios::asc_openstack(common.seed, ts.unwrap_or(100.0))?
                }
                ScenarioName::ApsrVsParallelFilter => scenarios::apsr_vs_parallel_filter(
                    hosts.and_then(|h| h.first().copied()).unwrap_or(200),
                    common.seed,
                    ts.unwrap_or(100.0),
                )?,
                ScenarioName::FlexService => scenarios::flex_service(
                    hosts.and_then(|h| h.first().copied()).unwrap_or(100),
                    common.seed,
                    24.0,
                    60.0,
                    common.max_duration.unwrap_or(240),
                )?,
            };
            let common = Common {
                demand_model: common.demand_model || matches!(name, ScenarioName::FlexService),
                ..common
            };
            (plan, common)
        }
    };
    tokio::runtime::Runtime::new()?.block_on(bench(plan, common))
}

/// `compare` and `scenario`: one plan of runs against real `parasol serve` processes.
async fn bench(plan: Plan, common: Common) -> anyhow::Result<()> {
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let run_id = common.run.clone().unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        format!("{}-{secs}", plan.name)
    });
    let env = run::Env {
        parasol: service::find_parasol(common.parasol.as_deref())?,
        out_dir: run::out_dir(&common.out, &run_id)?,
        notify: common.notify,
        via: common.via,
        amqp_url: common.amqp_url.clone(),
        run_id: run_id.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
        heartbeat: Duration::from_secs_f64(common.heartbeat_s.max(0.1)),
        ingest_window: Duration::from_secs_f64(common.ingest_window_s.max(0.0)),
        stats_sample: (common.stats_sample_ms > 0)
            .then(|| Duration::from_millis(common.stats_sample_ms)),
        demand: common
            .demand_model
            .then(|| demand::DemandModel::paper(common.seed, common.demand_period_s)),
    };
    let results = plan.execute(&env, &command).await?;
    anyhow::ensure!(
        report::invariants_hold(&results),
        "invariants violated; see {}",
        env.out_dir.join("report.md").display()
    );
    Ok(())
}

async fn soak(a: SoakArgs) -> anyhow::Result<()> {
    let faults = a
        .faults
        .iter()
        .filter(|f| f.as_str() != "none")
        .map(|f| {
            <soak::Fault as ValueEnum>::from_str(f, true).map_err(|_| {
                anyhow::anyhow!(
                    "--faults: unknown fault {f:?} (kill, broker, postgres, malformed, none)"
                )
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    anyhow::ensure!(
        a.rate > 0.0 && a.find_rates.iter().all(|r| *r > 0.0),
        "--rate and --find-rates must be above 0"
    );
    anyhow::ensure!(
        (0.0..=1.0).contains(&a.http_share),
        "--http-share must be within 0 and 1"
    );
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let run = a.run.unwrap_or_else(|| format!("soak-{secs}"));
    // Names of the database, queues and exchanges: letters, digits and `_` only.
    let run_id: String = run
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    let report = soak::run(soak::SoakSpec {
        hosts: a.hosts,
        dataset: a.dataset,
        rate: a.rate,
        find_rates: a.find_rates,
        calibrate_s: a.calibrate_s,
        duration_s: a.duration_s,
        fault_interval_s: a.fault_interval_s.max(1),
        faults,
        lifetime_s: a.lifetime_s,
        http_share: a.http_share,
        concurrency: a.concurrency,
        backend: a.backend,
        workers: a.workers,
        seed: a.seed,
        heartbeat_s: a.heartbeat_s,
        claim_ttl_s: a.claim_ttl_s,
        burst: a.burst,
        rss_baseline_s: a.rss_baseline_s.unwrap_or(a.duration_s / 6),
        pg: a.pg.trim_end_matches('/').to_string(),
        amqp_url: a.amqp_url,
        parasol: service::find_parasol(a.parasol.as_deref())?,
        out_dir: run::out_dir(&a.out, &run)?,
        run_id,
        keep_database: a.keep_database,
    })
    .await?;
    let ok = report.lost == 0
        && report.http_5xx == 0
        && report.rpc_failure == 0
        && report.violations == 0
        && report.oversubscribed_in_ledger == 0
        && report.oversubscribed_gauge_max <= 0
        && report.ledger_equals_books
        && report.rss_growth_pct_a <= 5.0;
    anyhow::ensure!(ok, "the soak's checks failed; see the report above");
    Ok(())
}

fn compare_plan(a: &CompareArgs) -> anyhow::Result<Plan> {
    let dataset = workload::Dataset::named(&a.dataset)?;
    anyhow::ensure!(
        (1..=100).contains(&a.window_ms),
        "--window-ms {} is outside 1–100 (the service's [batch] window_ms bound)",
        a.window_ms
    );
    let backends = a.backends.as_deref().unwrap_or(&BackendKind::ALL);
    let mut variants = Vec::new();
    for b in backends {
        for mode in &a.batch_modes {
            let label = match mode {
                BatchModeArg::Off => b.as_str().to_string(),
                other => format!("{}-{}", b.as_str(), other.as_str()),
            };
            variants.push(Variant {
                label,
                workers: a.workers,
                epsilon: a.epsilon,
                refresh_interval_s: a.refresh_interval,
                batch_mode: mode.as_str().into(),
                window_ms: a.window_ms,
                allocation_ratio: a.allocation_ratio,
                flex_update_period_s: a.flex_update_period_s,
                ..Variant::plain(b.as_str())
            });
        }
    }
    let (requests, rate, lifetime, seed) = (a.requests, a.rate, a.lifetime, a.common.seed);
    Ok(Plan {
        name: "compare".into(),
        dataset,
        hosts: a.hosts.clone(),
        variants,
        workload: Box::new(move |n| workload::WorkloadSpec {
            requests: requests.unwrap_or((n * 6).clamp(2_000, 30_000)),
            arrival_rate: rate,
            mean_lifetime_s: lifetime,
            seed,
        }),
        drive: driver::DriveSpec {
            concurrency: a.concurrency,
            time_scale: a.common.time_scale.unwrap_or(1.0),
            open_loop: rate.is_some(),
            batch: a.batch,
            max_duration: Duration::from_secs(a.common.max_duration.unwrap_or(60)),
        },
        seed,
        notes: Box::new(|_| String::new()),
    })
}
