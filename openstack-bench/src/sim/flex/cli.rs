//! `openstack-bench sim flex`: the Flex paper's §5 runs, its sensitivity runs (§5.6), and the
//! P / Q series of Fig. 8.

use std::path::PathBuf;

use clap::Args;
use parasol::control::FlexParams;

use super::super::report::{render, Format};
use super::trace::{self, TraceParams};
use super::{run_grid, FlexOutcome, FlexPolicy, FlexSetup};

/// Options of `openstack-bench sim flex`.
#[derive(Debug, Args, Clone)]
pub struct FlexArgs {
    /// Fraction of §5.1's cluster and workload (4,000 nodes, 714,030 tasks in 24 h); the
    /// default tenth runs in minutes on two cores, 1 is the full scale.
    #[arg(long, default_value_t = 0.1)]
    pub scale: f64,
    /// Nodes (overrides --scale's count; the workload stays sized by --scale).
    #[arg(long)]
    pub hosts: Option<usize>,
    /// LeastFit, OverSub, FlexF, FlexL.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "LeastFit,OverSub,FlexF,FlexL"
    )]
    pub policies: Vec<String>,
    /// Demand multiplier (§5.6: 0.5, 1, 1.5).
    #[arg(long, default_value_t = 1.0)]
    pub demand_scale: f64,
    /// Run §5.6's sensitivity grid instead: nodes 3,000 / 3,500 / 4,000 (× --scale) at demand
    /// × 1, and demand × 0.5 / 1 / 1.5 at 4,000 nodes.
    #[arg(long)]
    pub sensitivity: bool,
    /// Simulated hours (§5.1: 24).
    #[arg(long, default_value_t = 24.0)]
    pub hours: f64,
    /// Measurement and P update period, seconds (the trace samples usage every 300 s).
    #[arg(long, default_value_t = 300.0)]
    pub period_s: f64,
    /// Period-to-period coefficient of variation of a task's demand (not in the paper).
    #[arg(long, default_value_t = 0.3)]
    pub temporal_cv: f64,
    /// Offered CPU requests per unit of capacity at steady state (not in the paper: 1.75 makes
    /// OverSub admit all that is offered, as Fig. 6 shows OverSub and Flex admitting alike).
    #[arg(long, default_value_t = 1.75)]
    pub offered_load: f64,
    /// OverSub's factor θ (§5.1: 2).
    #[arg(long, default_value_t = 2.0)]
    pub oversub: f64,
    /// The service's controller defaults (P_min 1.1, P_max 4) instead of §5.1's (P_min 1).
    #[arg(long)]
    pub service_params: bool,
    /// The trace's task_events file or folder (with --task-usage): run on the real trace.
    #[arg(long, requires = "task_usage")]
    pub task_events: Option<PathBuf>,
    #[arg(long, requires = "task_events")]
    pub task_usage: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seeds seed, seed+1, …
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: Format,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Also write the table (Markdown and CSV) and each run's P / Q series (CSV) here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Runs `sim flex` and prints the table.
#[allow(clippy::too_many_lines)]
pub fn run(args: &FlexArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.scale > 0.0 && args.scale <= 1.0,
        "--scale must be in (0, 1]"
    );
    anyhow::ensure!(
        args.hours > 0.0 && args.period_s > 0.0,
        "--hours and --period-s must be positive"
    );
    let policies = args
        .policies
        .iter()
        .map(|p| FlexPolicy::parse(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let settings: Vec<(usize, f64)> = if args.sensitivity {
        let n = |h: f64| (h * args.scale).round() as usize;
        vec![
            (n(3_000.0), 1.0),
            (n(3_500.0), 1.0),
            (n(4_000.0), 1.0),
            (n(4_000.0), 0.5),
            (n(4_000.0), 1.5),
        ]
    } else {
        let hosts = args
            .hosts
            .unwrap_or((4_000.0 * args.scale).round() as usize);
        vec![(hosts, args.demand_scale)]
    };
    let trace_params = TraceParams {
        hosts: (4_000.0 * args.scale).round() as usize,
        horizon_s: args.hours * 3_600.0,
        offered_load: args.offered_load,
        ..TraceParams::default()
    };
    let workload = |seed: u64| -> anyhow::Result<Vec<trace::Task>> {
        match (&args.task_events, &args.task_usage) {
            (Some(events), Some(usage)) => {
                let (tasks, report) = trace::load(
                    events,
                    usage,
                    trace_params.horizon_s,
                    trace_params.usage_ratio,
                )?;
                eprintln!("trace: {report:?}");
                Ok(tasks)
            }
            _ => Ok(trace::generate(&trace_params, seed)),
        }
    };
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let seeds: Vec<u64> = (0..args.runs.max(1) as u64)
        .map(|i| args.seed + i)
        .collect();
    let mut rows = Vec::new();
    let mut outcomes: Vec<FlexOutcome> = Vec::new();
    for (hosts, demand_scale) in settings {
        let base = FlexSetup {
            policy: FlexPolicy::LeastFit,
            hosts,
            period_s: args.period_s,
            horizon_s: args.hours * 3_600.0,
            oversub: args.oversub,
            demand_scale,
            temporal_cv: args.temporal_cv,
            params: if args.service_params {
                FlexParams::default()
            } else {
                FlexParams::paper()
            },
            seed: args.seed,
        };
        let (r, o) = run_grid(&base, &policies, &seeds, threads, &workload)?;
        rows.extend(r);
        outcomes.extend(o);
    }
    print!("{}", render(&rows, args.format));
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("flex.md"), render(&rows, Format::Markdown))?;
        std::fs::write(dir.join("flex.csv"), render(&rows, Format::Csv))?;
        let mut series = String::from("policy,hosts,demand_scale,seed,hour,penalty,qos,requested_cpu,requested_mem,usage_cpu,usage_mem\n");
        for o in &outcomes {
            for p in &o.series {
                series += &format!(
                    "{},{},{},{},{:.4},{:.6},{},{:.6},{:.6},{:.6},{:.6}\n",
                    o.policy.name(),
                    o.hosts,
                    o.demand_scale,
                    o.seed,
                    p.hour,
                    p.penalty,
                    p.qos.map_or(String::new(), |q| format!("{q:.6}")),
                    p.requested_cpu,
                    p.requested_mem,
                    p.usage_cpu,
                    p.usage_mem
                );
            }
        }
        std::fs::write(dir.join("flex_series.csv"), series)?;
    }
    Ok(())
}
