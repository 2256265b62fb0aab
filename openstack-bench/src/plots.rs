//! PNG and SVG charts of a comparison (plotters): throughput against hosts, latency
//! percentiles, decline ratio and queries per request, and the controllers over time, in the
//! embedded font (`openstack_bench::fonts`).

use crate::run::RunResult;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

type Series = (String, Vec<(f64, f64)>);

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Writes every chart into `dir`; returns the file stems written.
pub fn write_all(dir: &Path, runs: &[RunResult]) -> anyhow::Result<Vec<String>> {
    openstack_bench::fonts::register()?;
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
                (l.clone(), pts)
            })
            .collect()
    };
    let x = "hosts";
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
        both(dir, stem, y, x, &series)?;
        written.push(stem.to_string());
    }
    let over_time = |pick: &dyn Fn(&crate::driver::ParamSample) -> Option<f64>| -> Vec<Series> {
        runs.iter()
            .map(|r| {
                let pts: Vec<_> = r
                    .params
                    .iter()
                    .filter_map(|p| pick(p).map(|v| (p.t_s, v)))
                    .collect();
                (format!("{} n={}", r.label, r.hosts), pts)
            })
            .filter(|(_, pts)| !pts.is_empty())
            .collect()
    };
    let asc: Vec<Series> = over_time(&|p| p.refresh_interval_s)
        .into_iter()
        .filter(|(l, _)| l.starts_with("asc"))
        .collect();
    if !asc.is_empty() {
        both(
            dir,
            "asc_interval",
            "ASC refresh interval (s, scaled)",
            "time (s)",
            &asc,
        )?;
        written.push("asc_interval".into());
    }
    let apsr = over_time(&|p| p.schedulers);
    if !apsr.is_empty() {
        both(
            dir,
            "apsr_schedulers",
            "APSR schedulers s",
            "time (s)",
            &apsr,
        )?;
        written.push("apsr_schedulers".into());
    }
    Ok(written)
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

fn both(dir: &Path, stem: &str, y: &str, x: &str, series: &[Series]) -> anyhow::Result<()> {
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    line_chart(
        BitMapBackend::new(&png, (900, 540)).into_drawing_area(),
        y,
        x,
        series,
    )?;
    line_chart(
        SVGBackend::new(&svg, (900, 540)).into_drawing_area(),
        y,
        x,
        series,
    )?;
    Ok(())
}

fn line_chart<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    y_label: &str,
    x_label: &str,
    series: &[Series],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let pts = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        if y.is_finite() {
            y1 = y1.max(y);
        }
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    let pad = ((x1 - x0) * 0.05).max(x0.abs() * 0.1).max(0.5);
    let mut chart = ChartBuilder::on(&root)
        .caption(y_label, (openstack_bench::fonts::FAMILY, 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((x0 - pad)..(x1 + pad), 0.0..(y1 * 1.1).max(1e-6))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(err)?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<_> = points.iter().copied().filter(|p| p.1.is_finite()).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("plot: {e:?}")
}
