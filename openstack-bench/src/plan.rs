//! A comparison plan (variants × host counts on one seeded workload) and its execution:
//! header, progress bars, runs, report, plots.

use crate::driver::DriveSpec;
use crate::run::{self, Env, RunResult};
use crate::workload::{self, Dataset, WorkloadSpec};
use crate::{plots, report};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// One backend configuration compared.
#[derive(Clone, Debug)]
pub struct Variant {
    pub label: String,
    pub backend: String,
    pub workers: usize,
    pub epsilon: f64,
    pub refresh_interval_s: f64,
    /// `[batch] mode` and `window_ms` (the service's defaults: off, 10 ms).
    pub batch_mode: String,
    pub window_ms: u64,
    /// Under a demand model (`--demand-model`): the hosts' VCPU and MEMORY_MB allocation
    /// ratio, in their inventory and their books.
    pub allocation_ratio: f64,
    /// `[flex]` on, its penalty moved every this many seconds (real time); `None`: off.
    pub flex_update_period_s: Option<f64>,
}

impl Variant {
    pub fn plain(backend: &str) -> Variant {
        Variant {
            label: backend.to_string(),
            backend: backend.to_string(),
            workers: 4,
            epsilon: 0.05,
            refresh_interval_s: 60.0,
            batch_mode: "off".into(),
            window_ms: 10,
            allocation_ratio: 1.0,
            flex_update_period_s: None,
        }
    }
}

/// Extra report text computed from the results.
pub type Notes = Box<dyn Fn(&[RunResult]) -> String>;

/// Everything a comparison needs.
pub struct Plan {
    pub name: String,
    pub dataset: Dataset,
    pub hosts: Vec<usize>,
    pub variants: Vec<Variant>,
    /// The workload for a host count (identical for every variant).
    pub workload: Box<dyn Fn(usize) -> WorkloadSpec>,
    pub drive: DriveSpec,
    pub seed: u64,
    /// Extra report text from the results (e.g. published values).
    pub notes: Notes,
}

impl Plan {
    fn header(&self, env: &Env) -> Vec<(String, String)> {
        let w = (self.workload)(self.hosts[0]);
        let d = &self.drive;
        let mut h = vec![
            ("scenario", self.name.clone()),
            ("dataset", self.dataset.name.clone()),
            ("hosts", format!("{:?}", self.hosts)),
            (
                "variants",
                self.variants
                    .iter()
                    .map(|v| v.label.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            ("requests (first host count)", w.requests.to_string()),
            (
                "arrivals",
                w.arrival_rate.map_or("closed loop".into(), |r| {
                    format!("Poisson, {r} req/s unscaled")
                }),
            ),
            (
                "lifetime",
                w.mean_lifetime_s.map_or("unbounded".into(), |l| {
                    format!("exponential, mean {l} s unscaled")
                }),
            ),
            ("time scale", format!("{}", d.time_scale)),
            ("concurrency", d.concurrency.to_string()),
            ("batch", d.batch.map_or("none".into(), |b| b.to_string())),
            (
                "max duration per run",
                format!("{} s", d.max_duration.as_secs()),
            ),
            ("notifications", format!("{:?}", env.notify).to_lowercase()),
            (
                "heartbeats",
                format!("every {} s per host", env.heartbeat.as_secs_f64()),
            ),
            (
                "parasol binary",
                crate::service::describe_build(&env.parasol),
            ),
            ("select_destinations via", env.via.as_str().into()),
            ("seed", self.seed.to_string()),
            (
                "host capacity",
                format!("{:?} (VCPU, MEMORY_MB, DISK_GB)", self.dataset.host.0),
            ),
        ];
        h.push(("run id", env.run_id.clone()));
        h.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// Runs every variant on every host count; writes the report; returns the results.
    pub async fn execute(&self, env: &Env, command: &str) -> anyhow::Result<Vec<RunResult>> {
        let header = self.header(env);
        println!("== openstack-bench: {} ==", self.name);
        for (k, v) in &header {
            println!("  {k:<28} {v}");
        }
        let bars = MultiProgress::new();
        let style =
            ProgressStyle::with_template("{prefix:>16} [{bar:30}] {pos}/{len} {per_sec} {msg}")?
                .progress_chars("=> ");
        let mut results = Vec::new();
        for &hosts in &self.hosts {
            let spec = (self.workload)(hosts);
            let requests = workload::generate(&self.dataset, &spec);
            for v in &self.variants {
                let mut cfg = run::config(env, &v.backend, &v.label, hosts);
                cfg.workers = v.workers;
                cfg.apsr_epsilon = v.epsilon;
                cfg.refresh_interval_s = v.refresh_interval_s;
                cfg.batch_mode.clone_from(&v.batch_mode);
                cfg.window_ms = v.window_ms;
                cfg.time_scale = self.drive.time_scale;
                cfg.seed = self.seed;
                cfg.flex_update_period_s = v.flex_update_period_s;
                let measured = env.demand.map(|model| crate::hosts::Measured {
                    model,
                    allocation_ratio: v.allocation_ratio,
                });
                let bar = bars.add(ProgressBar::new(requests.len() as u64));
                bar.set_style(style.clone());
                bar.set_prefix(format!("{}@{hosts}", v.label));
                let r = run::run_one(
                    env,
                    &v.label,
                    cfg,
                    measured,
                    hosts,
                    &self.dataset,
                    &requests,
                    &self.drive,
                    bar.clone(),
                )
                .await?;
                bar.finish_with_message(format!(
                    "{:.0}/s p99 {:.2} ms decline {:.2} % violations {}",
                    r.driver.decisions_per_s,
                    r.driver.latency_ms.p99,
                    100.0 * r.stat("decline_ratio"),
                    r.violations
                ));
                results.push(r);
            }
        }
        let plots = plots::write_all(&env.out_dir, &results).unwrap_or_else(|e| {
            eprintln!("warning: plots not written: {e}");
            Vec::new()
        });
        let notes = (self.notes)(&results);
        report::write(
            &env.out_dir,
            &header,
            command,
            &report::Machine::detect(),
            &results,
            &notes,
            &plots,
        )?;
        println!("\n{}", report::table(&results));
        if !notes.is_empty() {
            println!("{notes}");
        }
        println!("report: {}", env.out_dir.join("report.md").display());
        Ok(results)
    }
}
