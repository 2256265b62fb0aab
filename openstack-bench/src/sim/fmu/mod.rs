//! `openstack-bench sim fmu`: McNett's rebalancing experiments (seed 003 chapter 4, issue 46)
//! on a fluid model of the testbed, planned by the library's own FMU solvers (docs/fmu.md).
//!
//! # Layout
//! - `testbed`: the fluid model (fair sharing, loader error, 1-minute averages, migrations).
//! - `scale`: `sim fmu-scale`, a GBM plan for 1,000 hosts and 20,000 VMs, timed and replayed.
//! - `scenarios`: HSA-18:3, HSA-120:20 and GPCW-LD/MD/HD, with the published counts.

mod scale;
mod scenarios;
mod testbed;

use clap::Args;
use parasol::control::{GbmParams, PlanLimits, SaParams, Solver};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

pub use scale::{run as run_scale, FmuScaleArgs};
pub use scenarios::{published, SCENARIOS};
pub use testbed::{run as run_testbed, Outcome, Round, Testbed, Workload};

/// Options of `openstack-bench sim fmu`.
#[derive(Debug, Args, Clone)]
pub struct FmuArgs {
    /// Scenarios (comma-separated), or `hsa`, `gpcw`, `all`.
    #[arg(long, default_value = "hsa")]
    pub scenarios: String,
    /// Solvers: bcpu, bcpu2, sa, gbm, null.
    #[arg(long, value_delimiter = ',', default_value = "bcpu,bcpu2,sa,gbm")]
    pub solvers: Vec<String>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seeds seed, seed+1, …: the table gives the mean and the range.
    #[arg(long, default_value_t = 3)]
    pub runs: u64,
    /// Seconds one step of migrations takes.
    #[arg(long, default_value_t = 2)]
    pub migration_s: u64,
    /// Domain-0 MHz per migration on each host.
    #[arg(long, default_value_t = 640.0)]
    pub migration_mhz: f64,
    /// Migrations at once across the testbed (one per source host).
    #[arg(long, default_value_t = 2)]
    pub parallel: usize,
}

fn solver(name: &str) -> anyhow::Result<Option<Solver>> {
    Ok(match name {
        "bcpu" => Some(Solver::Bcpu),
        "bcpu2" => Some(Solver::Bcpu2),
        "sa" => Some(Solver::Sa(SaParams::default())),
        "gbm" => Some(Solver::Gbm(GbmParams::default())),
        "null" => None,
        other => anyhow::bail!("unknown solver `{other}` (bcpu, bcpu2, sa, gbm, null)"),
    })
}

fn published_for(scenario: &str, name: &str) -> Option<usize> {
    let index = ["bcpu", "bcpu2", "sa", "gbm"]
        .iter()
        .position(|s| *s == name)?;
    published(scenario)[index]
}

/// Runs the experiments and prints one Markdown row per scenario and solver.
pub fn run(args: &FmuArgs) -> anyhow::Result<()> {
    let names: Vec<&str> = match args.scenarios.as_str() {
        "all" => SCENARIOS.to_vec(),
        "hsa" => SCENARIOS[..4].to_vec(),
        "gpcw" => SCENARIOS[4..].to_vec(),
        list => list.split(',').map(str::trim).collect(),
    };
    let solvers = args
        .solvers
        .iter()
        .map(|s| Ok((s.as_str(), solver(s)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    println!(
        "| scenario | solver | migrations (mean [min–max] of {} seeds) | published | rounds with moves | mean moves/round | mean utilization | min Jain |",
        args.runs
    );
    println!("|---|---|---|---|---|---|---|---|");
    for scenario in names {
        for (name, solver) in &solvers {
            let mut counts = Vec::new();
            let (mut rounds, mut util, mut min_jain) = (0usize, 0.0, 1.0f64);
            for run in 0..args.runs.max(1) {
                let seed = args.seed + run;
                let mut workload_rng = ChaCha8Rng::seed_from_u64(seed);
                let built = scenarios::build(scenario, &mut workload_rng)?;
                let bed = Testbed {
                    mhz: scenarios::MHZ,
                    hosts: built.hosts,
                    placement: built.placement.clone(),
                    duration_s: built.duration_s,
                    scheduler_start_s: built.scheduler_start_s,
                    sample_s: 20,
                    average_s: 60,
                    migration_s: args.migration_s,
                    migration_mhz: args.migration_mhz,
                    noise: 0.05,
                    noise_period_s: 2,
                    limits: PlanLimits {
                        max_concurrent_per_source: 1,
                        parallel: args.parallel,
                    },
                };
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                rng.set_stream(1);
                let outcome = run_testbed(&bed, built.workload.as_ref(), *solver, &mut rng)?;
                counts.push(outcome.migrations());
                rounds += outcome.rounds.len();
                let after: Vec<_> = outcome
                    .samples
                    .iter()
                    .filter(|s| s.0 >= bed.scheduler_start_s)
                    .collect();
                util += after.iter().map(|s| s.1).sum::<f64>() / after.len().max(1) as f64;
                min_jain = after.iter().map(|s| s.3).fold(min_jain, f64::min);
            }
            let n = counts.len() as f64;
            let mean = counts.iter().sum::<usize>() as f64 / n;
            let published = published_for(scenario, name).map_or("–".into(), |p| p.to_string());
            println!(
                "| {scenario} | {} | {mean:.1} [{}–{}] | {published} | {:.1} | {:.1} | {:.3} | {min_jain:.3} |",
                name.to_uppercase(),
                counts.iter().min().unwrap_or(&0),
                counts.iter().max().unwrap_or(&0),
                rounds as f64 / n,
                if rounds > 0 { mean * n / rounds as f64 } else { 0.0 },
                util / n,
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
