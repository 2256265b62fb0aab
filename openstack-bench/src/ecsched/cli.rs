//! `openstack-bench sim ecsched …`: ECSched's figures and tables (seed 004, §4).

use clap::{Args, Subcommand};

/// `openstack-bench sim ecsched …`
#[derive(Debug, Subcommand)]
pub enum EcschedCommand {
    /// Fig. 5: the solver's time per batch on 1,000 and 5,000 half-loaded EC2 machines.
    Fig5(Fig5Args),
    /// Table 1: average utilisation of §4.1's 30 VMs, every sampled task submitted at 0.
    Table1(Table1Args),
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
    /// Read tasks from a `task_events` CSV of the 2011 trace instead of the generator.
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
            print!("{}", super::results::table1(&a)?);
        }
    }
    Ok(())
}
