//! `openstack-bench sim results`: regenerates every table and figure into one folder, and a README
//! that compares NFV ×30 with the APSR paper's published cells; ECSched's (seed 004) into its
//! `ecsched/` subfolder.

use super::cli::{ParallelArgs, ResultsArgs, StalenessArgs};
use super::plot::{self, Chart, Series};
use super::report::{render, Format, ParallelRow, Row, StaleRow};
use super::{cli, compare, compare_b, isolate_b, staleness_rows, AscRun, SimPolicy};
use crate::datasets::DatasetKind;
use std::path::Path;
use std::time::Instant;

fn write_tables<R: Row>(dir: &Path, stem: &str, rows: &[R]) -> anyhow::Result<()> {
    for (ext, f) in [
        ("md", Format::Markdown),
        ("csv", Format::Csv),
        ("json", Format::Json),
    ] {
        std::fs::write(dir.join(format!("{stem}.{ext}")), render(rows, f))?;
    }
    Ok(())
}

fn parallel_args(
    dataset: &str,
    runs: usize,
    epsilon: Vec<f64>,
    args: &ResultsArgs,
) -> ParallelArgs {
    ParallelArgs {
        dataset: dataset.into(),
        replicas: None,
        hosts: None,
        schedulers: cli::SCHEDULERS.to_vec(),
        policies: cli::PARALLEL_POLICIES.into(),
        epsilon,
        max_schedulers: None,
        arrival_rate: 20.0,
        seed: args.seed,
        runs,
        format: Format::Markdown,
        threads: args.threads,
        quiet: args.quiet,
    }
}

/// Runs experiments A and B and writes tables, figures and README into `args.out`.
pub fn generate(args: &ResultsArgs) -> anyhow::Result<()> {
    let dir = &args.out;
    std::fs::create_dir_all(dir)?;
    let eps = vec![0.03, 0.05, 0.10];
    let started = Instant::now();
    let nfv = cli::parallel_rows(&parallel_args("nfv", args.runs, eps.clone(), args))?;
    let others = cli::parallel_rows(&parallel_args("amazon,google", 1, eps, args))?;
    let parallel_s = started.elapsed().as_secs_f64();
    let all: Vec<ParallelRow> = nfv.iter().chain(&others).cloned().collect();
    write_tables(dir, "parallel", &all)?;
    for kind in DatasetKind::ALL {
        let rows: Vec<&ParallelRow> = all.iter().filter(|r| r.dataset == kind).collect();
        parallel_plot(dir, kind, &rows)?;
    }
    let stale_args = StalenessArgs {
        dataset: "all".into(),
        policies: cli::STALENESS_POLICIES.into(),
        replicas: None,
        hosts: None,
        intervals: cli::INTERVALS.split(',').map(String::from).collect(),
        departures: false,
        lifetime: None,
        consume_own: false,
        tie_break: parasol::policy::TieBreak::Random,
        asc_min_requests: 0,
        rate_swing: 0.0,
        asc_policies: cli::ASC_POLICIES.into(),
        seed: args.seed,
        format: Format::Markdown,
        threads: args.threads,
        quiet: args.quiet,
    };
    let started = Instant::now();
    let (fixed, dynamic, asc_runs) = staleness_rows(&stale_args)?;
    let stale_s = started.elapsed().as_secs_f64();
    write_tables(dir, "staleness", &fixed)?;
    write_tables(dir, "asc", &dynamic)?;
    for kind in DatasetKind::ALL {
        staleness_plot(dir, kind, fixed.iter().filter(|r| r.dataset == kind))?;
    }
    for run in asc_runs.iter().filter(|r| r.policy.as_str() == "worst_fit") {
        asc_timeline_plot(dir, run)?;
    }
    let notes = std::fs::read_to_string(dir.join("NOTES.md")).unwrap_or_default();
    let isolated = isolate_b::isolate(args.seed);
    let run_length = isolate_b::isolate_run_length(args.seed);
    let asc_policies = asc_runs.iter().map(|r| r.policy).collect::<Vec<_>>();
    let mut asc_own_policies = Vec::new();
    for p in asc_policies {
        if !asc_own_policies.contains(&p) {
            asc_own_policies.push(p);
        }
    }
    let asc_own = isolate_b::isolate_asc_interval(args.seed, &asc_own_policies);
    let asc_sample = isolate_b::isolate_asc_sample(args.seed, &asc_own_policies);
    let asc_varying = isolate_b::isolate_asc_varying(args.seed, &asc_own_policies);
    let ceiling_100s = isolate_b::isolate_ceiling_100s(args.seed, args.runs);
    let departures_never = isolate_b::isolate_departures_never(args.seed);
    let b_section = compare_b::section(
        &fixed,
        &dynamic,
        &compare_b::Isolating {
            nfv_100s: &isolated,
            run_length: &run_length,
            asc_own: &asc_own,
            asc_sample: &asc_sample,
            asc_varying: &asc_varying,
            ceiling_100s: &ceiling_100s,
            seeds: args.runs,
            departures_never: &departures_never,
        },
    );
    let readme = compare::readme(
        &nfv, &others, &dynamic, &b_section, args.runs, parallel_s, stale_s, &notes,
    );
    std::fs::write(dir.join("README.md"), readme)?;
    crate::ecsched::results::write_results(&dir.join("ecsched"), args.runs as u64)?;
    Ok(())
}

/// The scheduler counts of experiment A, as integer ticks.
fn scheduler_ticks() -> Vec<(f64, String)> {
    let s: Vec<f64> = cli::SCHEDULERS.iter().map(|s| *s as f64).collect();
    plot::integer_ticks(&s)
}

/// Decline against s: every policy as a line, APSR as one point per ε at the mean number of
/// schedulers that had a request (the paper's "active" schedulers); the full range on the
/// left, the lowest 5 % on the right so `random`, `wfr` and APSR stay apart.
fn parallel_plot(dir: &Path, kind: DatasetKind, rows: &[&ParallelRow]) -> anyhow::Result<()> {
    let mut series: Vec<Series> = Vec::new();
    let apsr: Vec<&&ParallelRow> = rows
        .iter()
        .filter(|r| r.policy == SimPolicy::Apsr)
        .collect();
    let apsr_markers = [
        plot::Marker::HollowDiamond,
        plot::Marker::Plus,
        plot::Marker::HollowCircle,
    ];
    for (i, r) in apsr.iter().enumerate() {
        series.push(
            Series::new(
                format!(
                    "{} at {:.1} busy schedulers",
                    r.label(),
                    r.mean_busy_schedulers
                ),
                vec![(r.mean_busy_schedulers.max(1.0), r.decline_ratio * 100.0)],
            )
            .styled(plot::Style {
                colour: plot::GREY,
                marker: apsr_markers[i % apsr_markers.len()],
                line: false,
            }),
        );
    }
    // Policies drawn after APSR's points, so no point hides a line.
    series.extend(plot::merge_equal(group_series(
        rows.iter().copied().filter(|r| r.policy != SimPolicy::Apsr),
        |r| r.label(),
        |r| (r.schedulers.unwrap_or(1) as f64, r.decline_ratio * 100.0),
    )));
    let ticks = scheduler_ticks();
    let mut full = Chart::new("all policies", "schedulers s", "decline ratio (%)", &series);
    full.log_x = true;
    full.x_ticks = Some(ticks.clone());
    let mut zoom = full.clone();
    zoom.title = "decline ratio up to 5 %";
    zoom.y_max = Some(5.0);
    zoom.legend = plot::Legend::None;
    let zoomed: Vec<Series> = series
        .iter()
        .map(|s| Series {
            points: s.points.iter().copied().filter(|p| p.1 <= 5.0).collect(),
            ..s.clone()
        })
        .collect();
    zoom.series = &zoomed;
    plot::write_figure(
        dir,
        &format!("parallel_{kind}"),
        &plot::Figure {
            title: &format!("{kind}: decline ratio against parallel schedulers (experiment A)"),
            panels: vec![full, zoom],
            columns: 2,
            size: (1400, 620),
        },
    )
}

/// Decline against the refresh interval, `never` at the right end of a log axis.
fn staleness_plot<'a>(
    dir: &Path,
    kind: DatasetKind,
    rows: impl Iterator<Item = &'a StaleRow>,
) -> anyhow::Result<()> {
    let rows: Vec<&StaleRow> = rows.collect();
    let longest = rows.iter().filter_map(|r| r.interval).max().unwrap_or(1) as f64;
    let never_at = longest * 2.5;
    let series = plot::merge_equal(group_series(
        rows.iter().copied(),
        |r| r.policy.to_string(),
        |r| {
            (
                r.interval.map_or(never_at, |i| i as f64),
                r.decline_ratio * 100.0,
            )
        },
    ));
    let mut ticks = plot::log_ticks(1.0, longest);
    ticks.push((never_at, "never".into()));
    let title = format!(
        "{kind}, {} hosts: decline ratio against the refresh interval (experiment B)",
        rows.first().map_or(0, |r| r.hosts)
    );
    let mut chart = Chart::new(
        &title,
        "refresh interval (requests, one per second)",
        "decline ratio (%)",
        &series,
    );
    chart.log_x = true;
    chart.x_ticks = Some(ticks);
    plot::write(dir, &format!("staleness_{kind}"), &chart)
}

/// ASC's interval and the decline ratio over time, each on its own axis.
fn asc_timeline_plot(dir: &Path, run: &AscRun) -> anyhow::Result<()> {
    let kind = run.setup.dataset;
    let tl = &run.asc.timeline;
    let interval = [Series::new(
        "ASC refresh interval",
        tl.iter().map(|p| (p.t_s, p.interval_s)).collect(),
    )
    .styled(plot::Style {
        line: true,
        ..plot::Style::nth(1)
    })];
    let decline = [Series::new(
        "decline ratio, mean of the last 20 intervals",
        tl.iter()
            .enumerate()
            .map(|(i, p)| {
                let window = &tl[i.saturating_sub(19)..=i];
                let sum: f64 = window.iter().map(|q| q.decline_ratio).sum();
                (p.t_s, sum / window.len() as f64 * 100.0)
            })
            .collect(),
    )
    .styled(plot::Style::nth(0))];
    let mut top = Chart::new("refresh interval", "time (s)", "interval (s)", &interval);
    top.legend = plot::Legend::UpperRight;
    let mut bottom = Chart::new("decline ratio", "time (s)", "decline ratio (%)", &decline);
    bottom.legend = plot::Legend::UpperRight;
    plot::write_figure(
        dir,
        &format!("asc_timeline_{kind}"),
        &plot::Figure {
            title: &format!(
                "{kind}, {} hosts, {}: ASC over time",
                run.setup.hosts,
                run.policy.as_str()
            ),
            panels: vec![top, bottom],
            columns: 1,
            size: (900, 760),
        },
    )
}

fn group_series<'a, R: 'a>(
    rows: impl Iterator<Item = &'a R>,
    key: impl Fn(&R) -> String,
    point: impl Fn(&R) -> (f64, f64),
) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in rows {
        let k = key(r);
        match out.iter_mut().find(|s| s.label == k) {
            Some(s) => s.points.push(point(r)),
            None => out.push(Series::new(k, vec![point(r)])),
        }
    }
    out
}

/// Redraws the experiment A and B figures in `dir` from the tables a regeneration wrote there
/// (`parallel.json`, `staleness.json`), without running the experiments again.
pub fn replot(dir: &Path) -> anyhow::Result<()> {
    use serde_json::Value;
    let read = |name: &str| -> anyhow::Result<Vec<Value>> {
        let text = std::fs::read_to_string(dir.join(name))
            .map_err(|e| anyhow::anyhow!("{}: {e}", dir.join(name).display()))?;
        Ok(serde_json::from_str(&text)?)
    };
    let kind = |v: &Value| -> anyhow::Result<DatasetKind> {
        v["dataset"]
            .as_str()
            .unwrap_or("")
            .parse()
            .map_err(anyhow::Error::msg)
    };
    let policy = |v: &Value| -> anyhow::Result<SimPolicy> {
        v["policy"]
            .as_str()
            .unwrap_or("")
            .parse()
            .map_err(anyhow::Error::msg)
    };
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    let mut parallel = Vec::new();
    for v in read("parallel.json")? {
        parallel.push(ParallelRow {
            dataset: kind(&v)?,
            policy: policy(&v)?,
            schedulers: v["schedulers"].as_u64().map(|s| s as usize),
            decline_ratio: f(&v, "decline_ratio"),
            throughput: f(&v, "throughput"),
            queries: f(&v, "queries"),
            queries_paper: f(&v, "queries_paper"),
            mean_active_schedulers: f(&v, "mean_active_schedulers"),
            epsilon: v["epsilon"].as_f64(),
            runs: v["runs"].as_u64().unwrap_or(1) as usize,
            decline_ratio_sd: f(&v, "decline_ratio_sd"),
            throughput_sd: f(&v, "throughput_sd"),
            queries_sd: f(&v, "queries_sd"),
            mean_busy_schedulers: f(&v, "mean_busy_schedulers"),
        });
    }
    for k in DatasetKind::ALL {
        let rows: Vec<&ParallelRow> = parallel.iter().filter(|r| r.dataset == k).collect();
        parallel_plot(dir, k, &rows)?;
    }
    let mut stale = Vec::new();
    for v in read("staleness.json")? {
        stale.push(StaleRow {
            dataset: kind(&v)?,
            hosts: v["hosts"].as_u64().unwrap_or(0) as usize,
            policy: policy(&v)?,
            interval: v["interval"].as_u64(),
            decline_ratio: f(&v, "decline_ratio"),
            queries: v["queries"].as_u64().unwrap_or(0),
        });
    }
    for k in DatasetKind::ALL {
        staleness_plot(dir, k, stale.iter().filter(|r| r.dataset == k))?;
    }
    Ok(())
}
