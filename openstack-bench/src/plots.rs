//! PNG and SVG charts of a comparison, drawn with the crate's one plotting module
//! (`openstack_bench::plot`: colour-blind-safe palette, a marker per series, the embedded font):
//! throughput, latency, decline ratio and host reads against the host count on a log axis,
//! decline against APSR's ε when the runs vary it, and the controllers over time.

use crate::run::RunResult;
use openstack_bench::plot::{self, Chart, Legend, Series, Style};
use std::path::Path;

/// Writes every chart into `dir`; returns the file stems written.
pub fn write_all(dir: &Path, runs: &[RunResult]) -> anyhow::Result<Vec<String>> {
    let mut written = Vec::new();
    let labels = unique(runs.iter().map(|r| r.label.clone()));
    let per_label = |f: &dyn Fn(&RunResult) -> f64| -> Vec<Series> {
        labels
            .iter()
            .map(|l| {
                let pts = runs
                    .iter()
                    .filter(|r| &r.label == l)
                    .map(|r| (r.hosts as f64, f(r)))
                    .collect();
                Series::new(l.clone(), pts)
            })
            .collect()
    };
    {
        let charts: Vec<(&str, &str, Vec<Series>)> = vec![
            (
                "throughput",
                "decisions/s",
                per_label(&|r| r.driver.decisions_per_s),
            ),
            (
                "latency_p50",
                "p50 latency (ms)",
                per_label(&|r| r.driver.latency_ms.p50),
            ),
            (
                "latency_p99",
                "p99 latency (ms)",
                per_label(&|r| r.driver.latency_ms.p99),
            ),
            (
                "decline_ratio",
                "decline ratio (%)",
                per_label(&|r| 100.0 * r.stat("decline_ratio")),
            ),
            (
                "queries_per_request",
                "host reads per request",
                per_label(&|r| r.stat("queries_per_request")),
            ),
        ];
        for (stem, y, series) in charts {
            against_hosts(dir, stem, y, &format!("{y} against hosts"), &series)?;
            written.push(stem.to_string());
        }
    }
    let apsr: Vec<(f64, f64)> = runs
        .iter()
        .filter(|r| r.backend == "apsr")
        .map(|r| {
            (
                r.config.apsr_epsilon * 100.0,
                100.0 * r.stat("decline_ratio"),
            )
        })
        .collect();
    if unique(apsr.iter().map(|p| p.0.to_string())).len() > 1 {
        let others: Vec<(String, f64)> = runs
            .iter()
            .filter(|r| r.backend != "apsr")
            .map(|r| (r.label.clone(), 100.0 * r.stat("decline_ratio")))
            .collect();
        decline_vs_epsilon(dir, "decline_vs_epsilon", &apsr, &others)?;
        written.push("decline_vs_epsilon".into());
    }
    let over_time = |pick: &dyn Fn(&crate::driver::ParamSample) -> Option<f64>| -> Vec<Series> {
        runs.iter()
            .map(|r| {
                let pts: Vec<_> = r
                    .params
                    .iter()
                    .filter_map(|p| pick(p).map(|v| (p.t_s, v)))
                    .collect();
                Series::new(format!("{} n={}", r.label, r.hosts), pts)
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    let asc: Vec<Series> = over_time(&|p| p.refresh_interval_s)
        .into_iter()
        .filter(|s| s.label.starts_with("asc"))
        .collect();
    if !asc.is_empty() {
        let y = "ASC refresh interval (s, scaled)";
        let chart = Chart::new(y, "time (s)", y, &asc);
        plot::write(dir, "asc_interval", &chart)?;
        written.push("asc_interval".into());
    }
    let apsr = over_time(&|p| p.schedulers);
    if !apsr.is_empty() {
        let y = "APSR schedulers s";
        let chart = Chart::new(y, "time (s)", y, &apsr);
        plot::write(dir, "apsr_schedulers", &chart)?;
        written.push("apsr_schedulers".into());
    }
    Ok(written)
}

/// The figures BENCHMARKS.md shows beside its tables, drawn from those tables themselves
/// (`openstack-bench figures`): throughput against hosts from the first table under
/// `### throughput-vs-hosts`, decline against ε from the first under
/// `### apsr-vs-parallel-filter`.
pub fn from_benchmarks(markdown: &str, dir: &Path) -> anyhow::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let number = |s: &str| -> anyhow::Result<f64> {
        let t = s.trim().trim_end_matches('%').replace(',', "");
        t.trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("not a number: `{s}`"))
    };
    let rows = table_after(markdown, "### throughput-vs-hosts")?;
    let mut series: Vec<Series> = Vec::new();
    for r in &rows {
        let (run, hosts, dps) = (
            r.get("run")?,
            number(r.get("hosts")?)?,
            number(r.get("decisions/s")?)?,
        );
        match series.iter_mut().find(|s| s.label == run) {
            Some(s) => s.points.push((hosts, dps)),
            None => series.push(Series::new(run, vec![(hosts, dps)])),
        }
    }
    against_hosts(
        dir,
        "throughput_vs_hosts",
        "decisions/s",
        "decisions/s against hosts (throughput-vs-hosts)",
        &series,
    )?;
    let rows = table_after(markdown, "### apsr-vs-parallel-filter")?;
    let (mut apsr, mut others) = (Vec::new(), Vec::new());
    for r in &rows {
        let run = r.get("run")?;
        let decline = number(r.get("decline ratio")?)?;
        match run.strip_prefix("apsr-e") {
            Some(e) => apsr.push((number(e)?, decline)),
            None => others.push((run.to_string(), decline)),
        }
    }
    decline_vs_epsilon(dir, "decline_vs_epsilon", &apsr, &others)?;
    Ok(vec![
        "throughput_vs_hosts".into(),
        "decline_vs_epsilon".into(),
    ])
}

/// One row of a Markdown table, by column name.
struct TableRow {
    cells: Vec<(String, String)>,
}

impl TableRow {
    fn get(&self, column: &str) -> anyhow::Result<&str> {
        self.cells
            .iter()
            .find(|(h, _)| h == column)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| anyhow::anyhow!("no column `{column}`"))
    }
}

/// The first Markdown table after the line `heading`.
fn table_after(markdown: &str, heading: &str) -> anyhow::Result<Vec<TableRow>> {
    let split = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut lines = markdown
        .lines()
        .skip_while(|l| l.trim() != heading)
        .skip_while(|l| !l.trim_start().starts_with('|'));
    let header = split(
        lines
            .next()
            .ok_or_else(|| anyhow::anyhow!("no table after `{heading}`"))?,
    );
    let rows: Vec<TableRow> = lines
        .skip(1)
        .take_while(|l| l.trim_start().starts_with('|'))
        .map(|l| TableRow {
            cells: header.iter().cloned().zip(split(l)).collect(),
        })
        .collect();
    anyhow::ensure!(!rows.is_empty(), "the table after `{heading}` is empty");
    Ok(rows)
}

/// One quantity against the host count, hosts on a log axis with a tick at every count run.
pub fn against_hosts(
    dir: &Path,
    stem: &str,
    y_label: &str,
    title: &str,
    series: &[Series],
) -> anyhow::Result<()> {
    let mut hosts: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    hosts.sort_by(f64::total_cmp);
    hosts.dedup();
    let mut chart = Chart::new(title, "hosts (log scale)", y_label, series);
    chart.log_x = true;
    chart.x_ticks = Some(plot::integer_ticks(&hosts));
    chart.legend = Legend::UpperRight;
    plot::write(dir, stem, &chart)
}

/// APSR's decline ratio against its SLA ε, with the ε = decline diagonal (the SLA bound) and
/// every other run's decline as a horizontal reference.
pub fn decline_vs_epsilon(
    dir: &Path,
    stem: &str,
    apsr: &[(f64, f64)],
    others: &[(String, f64)],
) -> anyhow::Result<()> {
    let mut apsr = apsr.to_vec();
    apsr.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (lo, hi) = (
        apsr.first().map_or(1.0, |p| p.0),
        apsr.last().map_or(1.0, |p| p.0),
    );
    let mut series = vec![
        Series::new(
            "SLA bound: decline = ε",
            apsr.iter().map(|p| (p.0, p.0)).collect(),
        )
        .styled(Style {
            colour: plot::GREY,
            marker: plot::Marker::Plus,
            line: true,
        }),
        Series::new("apsr", apsr.clone()),
    ];
    for (i, (label, d)) in others.iter().enumerate() {
        let mut style = Style::nth(i + 1);
        style.marker = plot::MARKERS[(i + 1) % plot::MARKERS.len()];
        series.push(Series::new(label.clone(), vec![(lo, *d), (hi, *d)]).styled(style));
    }
    let ticks: Vec<f64> = apsr.iter().map(|p| p.0).collect();
    let mut chart = Chart::new(
        "decline ratio against APSR's SLA ε",
        "ε (%, log scale)",
        "decline ratio (%)",
        &series,
    );
    chart.log_x = true;
    chart.x_ticks = Some(plot::integer_ticks(&ticks));
    chart.legend = Legend::UpperLeft;
    plot::write(dir, stem, &chart)
}

fn unique(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}
