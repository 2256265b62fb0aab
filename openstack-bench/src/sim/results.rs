//! `openstack-bench sim results`: regenerates every table and figure into one folder, and a README
//! that compares NFV ×30 with the APSR paper's published cells.

use super::cli::{ParallelArgs, ResultsArgs, StalenessArgs};
use super::plot::{self, Chart, Series};
use super::report::{render, Format, ParallelRow, Row};
use super::{cli, compare, staleness_rows, SimPolicy};
use parasol::datasets::DatasetKind;
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
        intervals: cli::INTERVALS.split(',').map(String::from).collect(),
        consume_own: false,
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
        let series = group_series(
            fixed.iter().filter(|r| r.dataset == kind),
            |r| r.policy.to_string(),
            |r| {
                (
                    r.interval.map_or(2000.0, |i| i as f64),
                    r.decline_ratio * 100.0,
                )
            },
        );
        plot::write(
            dir,
            &format!("staleness_{kind}"),
            &Chart {
                title: &format!(
                    "{kind}: decline ratio vs refresh interval (never plotted at 2000)"
                ),
                x_label: "refresh interval (requests)",
                y_label: "decline ratio (%)",
                log_x: true,
                series: &series,
            },
        )?;
    }
    for run in asc_runs.iter().filter(|r| r.policy.as_str() == "worst_fit") {
        let kind = run.setup.dataset;
        let tl = &run.asc.timeline;
        let series = [
            Series {
                label: "ASC interval (s)".into(),
                points: tl.iter().map(|p| (p.t_s, p.interval_s)).collect(),
            },
            Series {
                label: "decline ratio, mean of the last 20 intervals (%)".into(),
                points: tl
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let window = &tl[i.saturating_sub(19)..=i];
                        let sum: f64 = window.iter().map(|q| q.decline_ratio).sum();
                        (p.t_s, sum / window.len() as f64 * 100.0)
                    })
                    .collect(),
            },
        ];
        plot::write(
            dir,
            &format!("asc_timeline_{kind}"),
            &Chart {
                title: &format!(
                    "{kind}, {} hosts, worst_fit: ASC over time",
                    run.setup.hosts
                ),
                x_label: "time (s)",
                y_label: "interval (s) / decline ratio (%)",
                log_x: false,
                series: &series,
            },
        )?;
    }
    let notes = std::fs::read_to_string(dir.join("NOTES.md")).unwrap_or_default();
    let readme = compare::readme(
        &nfv, &others, &dynamic, args.runs, parallel_s, stale_s, &notes,
    );
    std::fs::write(dir.join("README.md"), readme)?;
    Ok(())
}

fn parallel_plot(dir: &Path, kind: DatasetKind, rows: &[&ParallelRow]) -> anyhow::Result<()> {
    let mut series = group_series(
        rows.iter().copied().filter(|r| r.policy != SimPolicy::Apsr),
        |r| r.label(),
        |r| (r.schedulers.unwrap_or(1) as f64, r.decline_ratio * 100.0),
    );
    series.extend(
        rows.iter()
            .filter(|r| r.policy == SimPolicy::Apsr)
            .map(|r| Series {
                label: format!("{} at mean s = {:.1}", r.label(), r.mean_active_schedulers),
                points: vec![
                    (1.0, r.decline_ratio * 100.0),
                    (50.0, r.decline_ratio * 100.0),
                ],
            }),
    );
    plot::write(
        dir,
        &format!("parallel_{kind}"),
        &Chart {
            title: &format!("{kind}: decline ratio vs parallel schedulers"),
            x_label: "schedulers s",
            y_label: "decline ratio (%)",
            log_x: false,
            series: &series,
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
            None => out.push(Series {
                label: k,
                points: vec![point(r)],
            }),
        }
    }
    out
}
