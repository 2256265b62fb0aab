//! The `openstack-bench sim` subcommands: `parallel` (experiment A), `staleness` (experiment B) and
//! `results` (regenerates `docs/results/`).

use super::apsr::{ApsrScheduler, ApsrSetup};
use super::parallel::{run_cells, ParallelCell, ParallelSetup};
use super::report::{render, Format, ParallelRow};
use super::{results, staleness_rows, SimPolicy};
use crate::datasets::DatasetKind;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use parasol::control::ApsrParams;
use parasol::policy::TieBreak;
use std::path::PathBuf;

/// `openstack-bench sim …`
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Experiment A: parallel schedulers in time slots (APSR paper).
    Parallel(ParallelArgs),
    /// Experiment B: cache staleness and ASC (ASC paper).
    Staleness(StalenessArgs),
    /// The Flex paper's §5: usage-aware admission against LeastFit and OverSub.
    Flex(super::flex::cli::FlexArgs),
    /// Regenerate every table and plot into a folder (default docs/results).
    Results(ResultsArgs),
    /// ECSched's experiments (seed 004): Fig. 5's solve times.
    #[command(subcommand)]
    Ecsched(crate::ecsched::cli::EcschedCommand),
    /// Redraw experiment A's and B's figures from the tables `results` wrote.
    Plots {
        #[arg(long, default_value = "docs/results")]
        out: PathBuf,
    },
    /// McNett's FMU rebalancers on the thesis' hot-spot and general-purpose workloads.
    Fmu(super::fmu::FmuArgs),
    /// Issue 46's scale target: a GBM plan for 1,000 hosts and 20,000 VMs, 5 % hot, timed
    /// and replayed.
    FmuScale(super::fmu::FmuScaleArgs),
}

/// Experiment A's policies: the APSR paper's seven and APSR.
pub const PARALLEL_POLICIES: &str =
    "random,first_fit,ffr,worst_fit,wfr,dist_from_diag,adaptive,apsr";
/// Experiment B's fixed-interval policies: the ASC paper's, and best_fit.
pub const STALENESS_POLICIES: &str =
    "random,first_fit,best_fit,ffr,worst_fit,wfr,dist_from_diag,adaptive";
/// Experiment B's dynamic (ASC) policies: the ASC paper's Fig. 5 algorithms (§III-A) the
/// library has: BUP (`worst_fit`), Random, its FirstFit, "the most loaded host that has
/// sufficient resource" (`best_fit`), and DistFromDiag. Its Adaptive switches to that
/// FirstFit at a threshold the paper does not give, which the library's `adaptive` (the APSR
/// paper's, switching to host-order `first_fit` at 0.6) is not.
pub const ASC_POLICIES: &str = "worst_fit,random,best_fit,dist_from_diag";
/// Experiment B's refresh intervals, in requests.
pub const INTERVALS: &str = "1,2,5,10,20,50,100,200,500,1000,never";
/// Experiment A's scheduler counts.
pub const SCHEDULERS: [usize; 5] = [1, 5, 10, 20, 50];

/// Options of `openstack-bench sim parallel`.
#[derive(Debug, Args, Clone)]
pub struct ParallelArgs {
    /// nfv, google, amazon, or all (the three published setups).
    #[arg(long, default_value = "nfv")]
    pub dataset: String,
    /// Replicas of the dataset (default: the published setup's).
    #[arg(long)]
    pub replicas: Option<usize>,
    /// Hosts (default: the published setup's).
    #[arg(long)]
    pub hosts: Option<usize>,
    #[arg(long, value_delimiter = ',', default_values_t = SCHEDULERS)]
    pub schedulers: Vec<usize>,
    #[arg(long, default_value = PARALLEL_POLICIES)]
    pub policies: String,
    /// APSR's SLA ε; a list runs APSR once per value.
    #[arg(long, value_delimiter = ',', default_value = "0.05")]
    pub epsilon: Vec<f64>,
    /// Cap on APSR's scheduler count.
    #[arg(long)]
    pub max_schedulers: Option<u64>,
    /// Mean arrivals per slot (λ).
    #[arg(long, default_value_t = 20.0)]
    pub arrival_rate: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seeds seed, seed+1, …: rows give the mean and the spread.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: Format,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Options of `openstack-bench sim staleness`.
#[derive(Debug, Args, Clone)]
pub struct StalenessArgs {
    /// nfv, google, amazon, or all.
    #[arg(long, default_value = "nfv")]
    pub dataset: String,
    #[arg(long, default_value = STALENESS_POLICIES)]
    pub policies: String,
    /// Replicas of the dataset in the fixed-interval part (default: the setup's; NFV 10,
    /// Amazon 1, Google 1).
    #[arg(long)]
    pub replicas: Option<usize>,
    /// Hosts in the fixed-interval part (default: the setup's; NFV 279, Amazon 126, Google
    /// 5995).
    #[arg(long)]
    pub hosts: Option<usize>,
    /// Refresh intervals in requests; `never` for a cache that is never refreshed.
    #[arg(long, value_delimiter = ',', default_value = INTERVALS)]
    pub intervals: Vec<String>,
    /// Run the fixed-interval part with departures: Poisson arrivals at 1 per second and
    /// exponential lifetimes on the dataset's dynamic setup (NFV ×10 on 28 hosts with L = 437
    /// s, Amazon ×10 on 126 with L = 1100 s, Google ×1 on 600 with L = 1250 s) instead of one
    /// request per second with unbounded lifetimes. --replicas, --hosts and --lifetime then
    /// change that setup, for the ASC runs too.
    #[arg(long)]
    pub departures: bool,
    /// Mean lifetime L in seconds with --departures (default: the setup's).
    #[arg(long)]
    pub lifetime: Option<f64>,
    /// Subtract the scheduler's own placements from its cache (Nova's consume_from_request).
    #[arg(long)]
    pub consume_own: bool,
    /// How equal ranking keys are ordered: random (docs/architecture.md §10 B) or host_order.
    #[arg(long, default_value = "random")]
    pub tie_break: TieBreak,
    /// ASC decides only once its measurement holds this many requests (an interval with fewer
    /// adds its counts to the next and keeps τ); 0, the default, is the ASC paper's loop (§IV,
    /// Fig. 4; docs/architecture.md §4), which decides on every interval.
    #[arg(long, default_value_t = 0)]
    pub asc_min_requests: u64,
    /// The dynamic part's arrival rate alternates between (1 − s) and (1 + s) per second,
    /// each phase one mean lifetime long; 0, the default, is the ASC paper's constant rate.
    #[arg(long, default_value_t = 0.0)]
    pub rate_swing: f64,
    /// Policies of the dynamic (ASC) part.
    #[arg(long, default_value = ASC_POLICIES)]
    pub asc_policies: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: Format,
    #[arg(long)]
    pub threads: Option<usize>,
    #[arg(long)]
    pub quiet: bool,
}

/// Options of `openstack-bench sim results`.
#[derive(Debug, Args, Clone)]
pub struct ResultsArgs {
    #[arg(long, default_value = "docs/results")]
    pub out: PathBuf,
    /// Seeds for the NFV comparison with the paper.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long)]
    pub threads: Option<usize>,
    #[arg(long)]
    pub quiet: bool,
}

/// Runs a `openstack-bench sim` subcommand, printing tables to stdout.
pub fn run(cmd: SimCommand) -> anyhow::Result<()> {
    match cmd {
        SimCommand::Parallel(args) => {
            let rows = parallel_rows(&args)?;
            print!("{}", render(&rows, args.format));
        }
        SimCommand::Staleness(args) => {
            let (fixed, dynamic, _) = staleness_rows(&args)?;
            print!("{}", render(&fixed, args.format));
            println!();
            print!("{}", render(&dynamic, args.format));
        }
        SimCommand::Flex(args) => super::flex::cli::run(&args)?,
        SimCommand::Results(args) => results::generate(&args)?,
        SimCommand::Plots { out } => results::replot(&out)?,
        SimCommand::Fmu(args) => super::fmu::run(&args)?,
        SimCommand::FmuScale(args) => super::fmu::run_scale(&args)?,
        SimCommand::Ecsched(cmd) => crate::ecsched::cli::run(cmd)?,
    }
    Ok(())
}

/// `nfv`, `google`, `amazon` or `all`.
pub(super) fn datasets(name: &str) -> anyhow::Result<Vec<DatasetKind>> {
    if name == "all" {
        return Ok(DatasetKind::ALL.to_vec());
    }
    name.split(',')
        .map(|n| n.trim().parse().map_err(anyhow::Error::msg))
        .collect()
}

pub(super) fn threads(requested: Option<usize>) -> usize {
    requested.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

pub(super) fn progress(len: usize, quiet: bool, what: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len as u64);
    let style = ProgressStyle::with_template(
        "{msg} [{elapsed_precise}] {wide_bar} {pos}/{len} (eta {eta})",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(what.to_string());
    bar
}

/// Experiment A for the given options: one row per (dataset, policy, s) or (dataset, ε).
pub fn parallel_rows(args: &ParallelArgs) -> anyhow::Result<Vec<ParallelRow>> {
    let policies = SimPolicy::parse_list(&args.policies).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(args.runs >= 1, "--runs must be at least 1");
    anyhow::ensure!(
        args.schedulers.iter().all(|s| *s >= 1),
        "--schedulers must be at least 1"
    );
    anyhow::ensure!(
        args.epsilon.iter().all(|e| *e > 0.0 && *e < 1.0),
        "--epsilon must be in (0, 1)"
    );
    let mut groups: Vec<(DatasetKind, SimPolicy, usize, f64)> = Vec::new();
    let kinds = datasets(&args.dataset)?;
    for kind in &kinds {
        for p in &policies {
            match p {
                SimPolicy::Apsr => groups.extend(args.epsilon.iter().map(|e| (*kind, *p, 0, *e))),
                SimPolicy::Classic(_) => {
                    groups.extend(args.schedulers.iter().map(|s| (*kind, *p, *s, 0.0)))
                }
            }
        }
    }
    let mut cells = Vec::new();
    for (kind, policy, schedulers, epsilon) in &groups {
        let mut setup = ParallelSetup::published(*kind);
        setup.replicas = args.replicas.unwrap_or(setup.replicas);
        setup.hosts = args.hosts.unwrap_or(setup.hosts);
        setup.arrival_rate = args.arrival_rate;
        for run in 0..args.runs {
            cells.push(ParallelCell {
                setup,
                policy: *policy,
                schedulers: *schedulers,
                apsr: apsr_setup(*epsilon, args.max_schedulers),
                seed: args.seed + run as u64,
            });
        }
    }
    if let Some(e) = groups.iter().find(|g| g.1 == SimPolicy::Apsr) {
        ApsrScheduler::new(1, &apsr_setup(e.3, args.max_schedulers))?;
    }
    let bar = progress(cells.len(), args.quiet, "sim parallel");
    let outcomes = run_cells(&cells, threads(args.threads), &|_| bar.inc(1));
    bar.finish_and_clear();
    Ok(groups
        .iter()
        .zip(outcomes.chunks(args.runs))
        .map(|((kind, policy, s, e), runs)| ParallelRow::from_runs(*kind, *policy, *s, *e, runs))
        .collect())
}

fn apsr_setup(epsilon: f64, max_schedulers: Option<u64>) -> ApsrSetup {
    let mut setup = ApsrSetup::default();
    setup.params = ApsrParams {
        epsilon,
        max_schedulers: max_schedulers.unwrap_or(setup.params.max_schedulers),
        ..setup.params
    };
    setup
}
