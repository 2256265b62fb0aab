//! `openstack-bench sim ecsched …`: ECSched's figures and tables (seed 004, §4).

use clap::{Args, Subcommand};

/// `openstack-bench sim ecsched …`
#[derive(Debug, Subcommand)]
pub enum EcschedCommand {
    /// Fig. 5: the solver's time per batch on 1,000 and 5,000 half-loaded EC2 machines.
    Fig5(Fig5Args),
    /// Table 1: average utilisation of §4.1's 30 VMs, every sampled task submitted at 0.
    Table1(Table1Args),
    /// Fig. 4: per-task completion-time factors against Kubernetes and Swarm.
    Fig4(Fig4Args),
    /// Issue 44's acceptance (b) predicted: NoValidHost of `off` and `window` on one workload.
    Window(WindowArgs),
    /// Table 1, Fig. 4 and the window's prediction written into a folder (as `sim results`).
    Results(ResultsArgs),
}

/// Options of `openstack-bench sim ecsched results`.
#[derive(Debug, Args, Clone)]
pub struct ResultsArgs {
    #[arg(long, default_value = "docs/results/ecsched")]
    pub out: std::path::PathBuf,
    /// Runs of Table 1 and Fig. 4.
    #[arg(long, default_value_t = 3)]
    pub seeds: u64,
}

/// Options of `openstack-bench sim ecsched window`.
#[derive(Debug, Args, Clone)]
pub struct WindowArgs {
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Calls per window.
    #[arg(long, default_value_t = 6)]
    pub group: usize,
    /// Hosts of each of the two sizes.
    #[arg(long, default_value_t = 4)]
    pub hosts_per_size: usize,
    /// The share of the cluster's VCPU the calls ask for in all.
    #[arg(long, default_value_t = 1.0)]
    pub asked: f64,
    /// The window's cost model (the service's: dot-product-free).
    #[arg(long, value_enum, default_value_t = Cost::DotProductFree)]
    pub cost: Cost,
    /// Also print how the margin spreads over seeds 1..=N of the same shape.
    #[arg(long)]
    pub spread: Option<u64>,
    /// Also write the workload as JSON here (the service test's fixture).
    #[arg(long)]
    pub write: Option<std::path::PathBuf>,
}

/// Options of `openstack-bench sim ecsched table1`.
#[derive(Debug, Args, Clone)]
pub struct Table1Args {
    /// Runs (each its own 10 % sample of the generated trace), averaged.
    #[arg(long, default_value_t = 3)]
    pub seeds: u64,
    /// The largest ECSched batch per round.
    #[arg(long, default_value_t = 300)]
    pub window: usize,
    /// The experiment's length over which utilisation is averaged (§4.1: 5 hours).
    #[arg(long, default_value_t = 5.0)]
    pub horizon_h: f64,
    /// Multiplies the generator's median sizes and its cap (at most 1.0): an isolating run
    /// of how coarse the tasks are against the VMs, not the fixed parameters.
    #[arg(long, default_value_t = 1.0)]
    pub size_scale: f64,
    /// Read tasks from the 2011 trace's `task_events` instead of the generator: a CSV file or
    /// the folder of its part files, gzip-compressed (`.gz`, as published) or not.
    #[arg(long)]
    pub task_events: Option<std::path::PathBuf>,
}

/// Options of `openstack-bench sim ecsched fig4`.
#[derive(Debug, Args, Clone)]
pub struct Fig4Args {
    /// Runs (each its own 10 % sample), their tasks pooled.
    #[arg(long, default_value_t = 3)]
    pub seeds: u64,
    /// The largest ECSched batch per round.
    #[arg(long, default_value_t = 300)]
    pub window: usize,
    /// Read tasks from the 2011 trace's `task_events` instead of the generator: a CSV file or
    /// the folder of its part files, gzip-compressed (`.gz`, as published) or not.
    #[arg(long)]
    pub task_events: Option<std::path::PathBuf>,
}

/// Options of `openstack-bench sim ecsched fig5`.
#[derive(Debug, Args, Clone)]
pub struct Fig5Args {
    #[arg(long, value_delimiter = ',', default_values_t = [1_000, 5_000])]
    pub hosts: Vec<usize>,
    #[arg(long, value_delimiter = ',', default_values_t = [100, 200, 300])]
    pub requests: Vec<usize>,
    /// How loaded the machines are: `half` as §4.2, or `uniform` (no two machines alike:
    /// the solver's worst case).
    #[arg(long, value_enum, default_value_t = super::shapes::Load::Half)]
    pub load: super::shapes::Load,
    /// Solves per cell (the paper: 10).
    #[arg(long, default_value_t = 21)]
    pub repeats: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Runs a subcommand, printing its table to stdout.
pub fn run(cmd: EcschedCommand) -> anyhow::Result<()> {
    match cmd {
        EcschedCommand::Fig5(a) => {
            anyhow::ensure!(a.repeats > 0, "--repeats must be at least 1");
            println!(
                "# ECSched Fig. 5: solve time (graph + pruning + min-cost flow), seed {}, {} solves per cell, machines loaded {:?}\n",
                a.seed, a.repeats, a.load
            );
            let rows = super::fig5::run(&a.hosts, &a.requests, a.load, a.repeats, a.seed);
            print!("{}", super::fig5::markdown(&rows));
        }
        EcschedCommand::Table1(a) => {
            anyhow::ensure!(
                a.seeds > 0 && a.window > 0,
                "--seeds and --window must be at least 1"
            );
            anyhow::ensure!(
                a.horizon_h > 0.0 && a.size_scale > 0.0,
                "--horizon-h and --size-scale must be positive"
            );
            print!("{}", super::results::table1(&a)?);
        }
        EcschedCommand::Fig4(a) => {
            anyhow::ensure!(
                a.seeds > 0 && a.window > 0,
                "--seeds and --window must be at least 1"
            );
            print!("{}", super::results::fig4(&a)?.0);
        }
        EcschedCommand::Results(a) => {
            anyhow::ensure!(a.seeds > 0, "--seeds must be at least 1");
            print!("{}", super::results::write_results(&a.out, a.seeds)?);
        }
        EcschedCommand::Window(a) => {
            anyhow::ensure!(
                a.group > 0 && a.hosts_per_size > 0 && a.asked > 0.0,
                "--group, --hosts-per-size and --asked must be positive"
            );
            let shape = super::window::Shape {
                group: a.group,
                hosts_per_size: a.hosts_per_size,
                asked: a.asked,
            };
            let w = super::window::workload(a.seed, shape);
            let cost = a.cost.model();
            let off = super::window::run(&w, None);
            let window = super::window::run(&w, Some(cost));
            print!("{}", super::window::markdown(&w, &off, &window));
            if let Some(seeds) = a.spread {
                print!("\n{}", super::window::spread(shape, seeds, cost));
            }
            if let Some(path) = a.write {
                std::fs::write(&path, serde_json::to_string_pretty(&w)? + "\n")?;
            }
        }
    }
    Ok(())
}

/// A cost model of `control::ecsched` (docs/architecture.md §12.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Cost {
    DotProduct,
    MostLoaded,
    DotProductFree,
    MostLoadedFree,
}

impl Cost {
    pub fn model(self) -> parasol::control::ecsched::CostModel {
        use parasol::control::ecsched::CostModel;
        match self {
            Cost::DotProduct => CostModel::DotProduct,
            Cost::MostLoaded => CostModel::MostLoaded,
            Cost::DotProductFree => CostModel::DotProductFree,
            Cost::MostLoadedFree => CostModel::MostLoadedFree,
        }
    }
}
