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
    /// Seconds each round's search takes before its first migration starts (0: instant).
    #[arg(long, default_value_t = 0)]
    pub search_s: u64,
    /// Domain-0 MHz per migration on each host.
    #[arg(long, default_value_t = 640.0)]
    pub migration_mhz: f64,
    /// Migrations at once across the testbed (one per source host).
    #[arg(long, default_value_t = 2)]
    pub parallel: usize,
    /// The loader's error, a fraction (§4.1 "off by as much as five percent").
    #[arg(long, default_value_t = 0.05)]
    pub noise: f64,
    /// Seconds between redraws of the loader's error (§4.1: it calibrates every two seconds).
    #[arg(long, default_value_t = 2)]
    pub noise_period_s: u64,
    /// Migration resistance for every solver, a fraction (default: the thesis', 5 % for
    /// BCPU/BCPU2, none for SA and GBM).
    #[arg(long)]
    pub resistance: Option<f64>,
    /// SA plans one round with moves only, then the scheduler stops (isolation, docs/fmu.md §7).
    #[arg(long)]
    pub sa_once: bool,
    /// SA's `cost_new ≤ cost_best` (true, as printed in §3.8.1) or `<` (false).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub sa_accept_ties: bool,
    /// SA's `cost_thr` (not printed; 1e-9).
    #[arg(long, default_value_t = 1e-9)]
    pub sa_cost_thr: f64,
    /// Apply `--sa-cost-thr` to the current state too: SA keeps a state already below it
    /// (§3.8.2's "stopping criteria"; the pseudocode of §3.8.1 tests new states only).
    #[arg(long)]
    pub sa_thr_start: bool,
    /// SA's time_max as a fraction of M·N (Table 3.2: [0.5, 1], the thesis chose 0.5).
    #[arg(long, default_value_t = 0.5)]
    pub sa_time_max_mn: f64,
    /// SA's probability of a "good" move (§3.8.4; not printed, 0.5).
    #[arg(long, default_value_t = 0.5)]
    pub sa_good_move: f64,
    /// SA's initial temperature (Table 3.2: 10).
    #[arg(long, default_value_t = 10.0)]
    pub sa_temp: f64,
    /// GBM's "prescribed fraction" of the best ΔC (§3.9.1; not printed, 0.9).
    #[arg(long, default_value_t = 0.9)]
    pub gbm_fraction: f64,
    /// The scheduler sees each hungry VM's true desire instead of estimating one core
    /// (docs/fmu.md §6 reading 4; an oracle no black box has, for isolation only).
    #[arg(long)]
    pub oracle_desire: bool,
    /// Also print every round with moves (seed, time, moves, C before and predicted after).
    #[arg(long)]
    pub rounds: bool,
}

fn solver(name: &str, args: &FmuArgs) -> anyhow::Result<Option<Solver>> {
    Ok(match name {
        "bcpu" => Some(Solver::Bcpu),
        "bcpu2" => Some(Solver::Bcpu2),
        "sa" => Some(Solver::Sa(SaParams {
            temp: args.sa_temp,
            cost_threshold: args.sa_cost_thr,
            threshold_on_start: args.sa_thr_start,
            good_move_probability: args.sa_good_move,
            accept_ties: args.sa_accept_ties,
            ..SaParams::default()
        })),
        "gbm" => Some(Solver::Gbm(GbmParams {
            candidate_fraction: args.gbm_fraction,
            ..GbmParams::default()
        })),
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

/// The testbed of one run: §4.1's constants, the model's readings and the flags.
fn testbed(args: &FmuArgs, built: &scenarios::Built, solver: Option<Solver>) -> Testbed {
    Testbed {
        mhz: scenarios::MHZ,
        hosts: built.hosts,
        placement: built.placement.clone(),
        duration_s: built.duration_s,
        scheduler_start_s: built.scheduler_start_s,
        sample_s: 20,
        average_s: 60,
        migration_s: args.migration_s,
        search_s: args.search_s,
        migration_mhz: args.migration_mhz,
        noise: args.noise,
        noise_period_s: args.noise_period_s,
        limits: PlanLimits {
            max_concurrent_per_source: 1,
            parallel: args.parallel,
        },
        max_rounds: (args.sa_once && matches!(solver, Some(Solver::Sa(_)))).then_some(1),
        resistance: args.resistance,
        oracle_desire: args.oracle_desire,
    }
}

/// SA's time_max for this scenario: Table 3.2's f·M·N; the default (`None`) is the thesis' MN/2.
fn sized(args: &FmuArgs, solver: Option<Solver>, built: &scenarios::Built) -> Option<Solver> {
    match solver {
        Some(Solver::Sa(p)) if (args.sa_time_max_mn - 0.5).abs() > 1e-12 => {
            let mn = (built.placement.len() * built.hosts) as f64;
            Some(Solver::Sa(SaParams {
                time_max: Some((mn * args.sa_time_max_mn).round() as usize),
                ..p
            }))
        }
        other => other,
    }
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
        .map(|s| Ok((s.as_str(), solver(s, args)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    println!(
        "| scenario | solver | migrations (mean [min–max] of {} seeds) | published | rounds with moves | mean moves/round | mean utilization | min Jain |",
        args.runs
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut round_rows = Vec::new();
    for scenario in names {
        for (name, solver) in &solvers {
            let mut counts = Vec::new();
            let (mut rounds, mut util, mut min_jain) = (0usize, 0.0, 1.0f64);
            for run in 0..args.runs.max(1) {
                let seed = args.seed + run;
                let mut workload_rng = ChaCha8Rng::seed_from_u64(seed);
                let built = scenarios::build(scenario, &mut workload_rng)?;
                let bed = testbed(args, &built, *solver);
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                rng.set_stream(1);
                let solver = sized(args, *solver, &built);
                let outcome = run_testbed(&bed, built.workload.as_ref(), solver, &mut rng)?;
                counts.push(outcome.migrations());
                for r in &outcome.rounds {
                    round_rows.push(format!(
                        "| {scenario} | {} | {seed} | {} | {} | {} | {:.6} | {:.6} |",
                        name.to_uppercase(),
                        r.at_s,
                        r.moves,
                        r.migration_s,
                        r.cost_before,
                        r.cost_after
                    ));
                }
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
    if args.rounds {
        println!();
        println!("| scenario | solver | seed | t (s) | moves | migration s | C before | C after (predicted) |");
        println!("|---|---|---|---|---|---|---|---|");
        for row in round_rows {
            println!("{row}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
