//! Result rows, their mean and spread over seeds, and Markdown / CSV / JSON rendering.

use super::parallel::ParallelOutcome;
use super::SimPolicy;
use crate::datasets::DatasetKind;
use serde::Serialize;

/// Output format of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Markdown,
    Csv,
    Json,
}

/// A row type that renders as a table.
pub trait Row: Serialize {
    fn headers() -> &'static [&'static str];
    /// Machine cells (CSV): plain numbers, ratios as fractions.
    fn cells(&self) -> Vec<String>;
    /// Human cells (Markdown): ratios as percentages, spreads as ±.
    fn pretty(&self) -> Vec<String>;
}

/// Renders `rows` in `format`.
pub fn render<R: Row>(rows: &[R], format: Format) -> String {
    match format {
        Format::Json => serde_json::to_string_pretty(rows).unwrap_or_default() + "\n",
        Format::Csv => {
            let mut s = R::headers().join(",") + "\n";
            for r in rows {
                s += &(r.cells().join(",") + "\n");
            }
            s
        }
        Format::Markdown => {
            let h = R::headers();
            let mut s = format!("| {} |\n|{}\n", h.join(" | "), "---|".repeat(h.len()));
            for r in rows {
                s += &format!("| {} |\n", r.pretty().join(" | "));
            }
            s
        }
    }
}

/// Mean and (sample) standard deviation.
pub fn mean_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return (mean, 0.0);
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// Experiment A, one (dataset, policy, schedulers): means over `runs` seeds and spreads.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ParallelRow {
    pub dataset: DatasetKind,
    pub policy: SimPolicy,
    /// `None` for APSR, which sets its own count.
    pub schedulers: Option<usize>,
    pub decline_ratio: f64,
    /// Requests served (placed or declined) per slot.
    pub throughput: f64,
    /// Host reads over the whole run.
    pub queries: f64,
    /// Host reads as the APSR paper counts them (Table VII: every planned APSR scheduler
    /// samples d hosts every slot).
    pub queries_paper: f64,
    /// APSR: mean planned s per slot; others: s.
    pub mean_active_schedulers: f64,
    /// APSR's SLA ε.
    pub epsilon: Option<f64>,
    pub runs: usize,
    pub decline_ratio_sd: f64,
    pub throughput_sd: f64,
    pub queries_sd: f64,
    /// Mean schedulers per slot that had a request (≤ λ-limited queue).
    pub mean_busy_schedulers: f64,
}

impl ParallelRow {
    pub fn from_runs(
        dataset: DatasetKind,
        policy: SimPolicy,
        schedulers: usize,
        epsilon: f64,
        runs: &[ParallelOutcome],
    ) -> Self {
        let pick =
            |f: fn(&ParallelOutcome) -> f64| mean_sd(&runs.iter().map(f).collect::<Vec<_>>());
        let (decline_ratio, decline_ratio_sd) = pick(|o| o.decline_ratio());
        let (throughput, throughput_sd) = pick(|o| o.throughput());
        let (queries, queries_sd) = pick(|o| o.queries as f64);
        let queries_paper = pick(|o| o.queries_paper as f64).0;
        let apsr = policy == SimPolicy::Apsr;
        ParallelRow {
            dataset,
            policy,
            schedulers: (!apsr).then_some(schedulers),
            decline_ratio,
            throughput,
            queries,
            queries_paper,
            mean_active_schedulers: pick(|o| o.mean_schedulers()).0,
            epsilon: apsr.then_some(epsilon),
            runs: runs.len(),
            decline_ratio_sd,
            throughput_sd,
            queries_sd,
            mean_busy_schedulers: pick(|o| o.mean_busy_schedulers()).0,
        }
    }

    /// `apsr (ε=5%)` or the policy name.
    pub fn label(&self) -> String {
        match self.epsilon {
            Some(e) => format!("apsr (ε={})", pct(e, 0)),
            None => self.policy.to_string(),
        }
    }
}

fn pct(v: f64, digits: usize) -> String {
    format!("{:.*}%", digits, v * 100.0)
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

impl Row for ParallelRow {
    fn headers() -> &'static [&'static str] {
        &[
            "dataset",
            "policy",
            "schedulers",
            "decline_ratio",
            "throughput",
            "queries",
            "mean_active_schedulers",
            "epsilon",
            "runs",
            "decline_ratio_sd",
            "throughput_sd",
            "queries_sd",
            "mean_busy_schedulers",
            "queries_paper",
        ]
    }
    fn cells(&self) -> Vec<String> {
        vec![
            self.dataset.to_string(),
            self.policy.to_string(),
            opt(self.schedulers),
            format!("{:.6}", self.decline_ratio),
            format!("{:.4}", self.throughput),
            format!("{:.1}", self.queries),
            format!("{:.3}", self.mean_active_schedulers),
            opt(self.epsilon),
            self.runs.to_string(),
            format!("{:.6}", self.decline_ratio_sd),
            format!("{:.4}", self.throughput_sd),
            format!("{:.1}", self.queries_sd),
            format!("{:.3}", self.mean_busy_schedulers),
            format!("{:.1}", self.queries_paper),
        ]
    }
    fn pretty(&self) -> Vec<String> {
        let sd = |v: f64, s: String| {
            if self.runs > 1 {
                format!("{s} ± {}", pct(v, 2))
            } else {
                s
            }
        };
        vec![
            self.dataset.to_string(),
            self.label(),
            self.schedulers
                .map(|s| s.to_string())
                .unwrap_or_else(|| "adaptive".into()),
            sd(self.decline_ratio_sd, pct(self.decline_ratio, 2)),
            format!("{:.2}", self.throughput),
            format!("{:.0}", self.queries),
            format!("{:.1}", self.mean_active_schedulers),
            opt(self.epsilon),
            self.runs.to_string(),
            pct(self.decline_ratio_sd, 2),
            format!("{:.2}", self.throughput_sd),
            format!("{:.0}", self.queries_sd),
            format!("{:.1}", self.mean_busy_schedulers),
            format!("{:.0}", self.queries_paper),
        ]
    }
}

/// Experiment B, fixed refresh interval, unbounded lifetimes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StaleRow {
    pub dataset: DatasetKind,
    pub hosts: usize,
    pub policy: SimPolicy,
    /// Requests between refreshes; `None` = never.
    pub interval: Option<u64>,
    pub decline_ratio: f64,
    pub queries: u64,
}

impl Row for StaleRow {
    fn headers() -> &'static [&'static str] {
        &[
            "dataset",
            "hosts",
            "policy",
            "interval",
            "decline_ratio",
            "queries",
        ]
    }
    fn cells(&self) -> Vec<String> {
        vec![
            self.dataset.to_string(),
            self.hosts.to_string(),
            self.policy.to_string(),
            self.interval
                .map(|i| i.to_string())
                .unwrap_or_else(|| "never".into()),
            format!("{:.6}", self.decline_ratio),
            self.queries.to_string(),
        ]
    }
    fn pretty(&self) -> Vec<String> {
        let mut c = self.cells();
        c[4] = pct(self.decline_ratio, 2);
        c
    }
}

/// Experiment B, Poisson arrivals and departures: one refresh mode.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DynamicRow {
    pub dataset: DatasetKind,
    pub hosts: usize,
    pub lifetime_s: f64,
    pub policy: SimPolicy,
    /// `fresh`, `caching_60s`, `asc`, or `fixed_asc_mean`.
    pub mode: String,
    /// Mean refresh interval (s); 0 for fresh.
    pub interval_s: f64,
    pub decline_ratio: f64,
    pub queries_per_request: f64,
}

impl Row for DynamicRow {
    fn headers() -> &'static [&'static str] {
        &[
            "dataset",
            "hosts",
            "lifetime_s",
            "policy",
            "mode",
            "interval_s",
            "decline_ratio",
            "queries_per_request",
        ]
    }
    fn cells(&self) -> Vec<String> {
        vec![
            self.dataset.to_string(),
            self.hosts.to_string(),
            format!("{}", self.lifetime_s),
            self.policy.to_string(),
            self.mode.clone(),
            format!("{:.3}", self.interval_s),
            format!("{:.6}", self.decline_ratio),
            format!("{:.3}", self.queries_per_request),
        ]
    }
    fn pretty(&self) -> Vec<String> {
        let mut c = self.cells();
        c[6] = pct(self.decline_ratio, 2);
        c[5] = format!("{:.1}", self.interval_s);
        c[7] = format!("{:.2}", self.queries_per_request);
        c
    }
}
