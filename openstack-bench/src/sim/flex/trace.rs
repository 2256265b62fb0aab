//! The workload of `sim flex`: tasks with requests, lifetimes and usage, either generated to
//! the statistics the Flex paper states about the 2011 Google trace (seed 002, §2.2, §5.1) or
//! loaded from the trace's own `task_events` and `task_usage` files.
//!
//! The trace itself cannot be fetched here. The generator is fitted only to numbers the text
//! states (Figs. 1–5 are pictures): over the cluster, mean request / capacity is 1.1 for CPU
//! and 0.9 for memory and mean usage / capacity 0.43 and 0.5 (§2.2, Fig. 1), so a task uses on
//! average 0.43 / 1.1 ≈ 0.39 of its CPU request and 0.5 / 0.9 ≈ 0.56 of its memory request;
//! usage varies a lot over time and between tasks and CPU usage can exceed the request (Fig.
//! 4a–c); §5.1 submits 714,030 tasks within 24 h to 4,000 nodes of 64 cores and 128 GB. What
//! the text does not give is fixed here and named in [`TraceParams`]: request sizes, lifetimes
//! (set from the offered load) and the spread of usage.

use anyhow::Context;
use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

use rand::Rng;

use super::super::random::{stream, Stream};

/// Resource classes of the model, as indices: CPU and memory.
pub const CPU: usize = 0;
pub const MEM: usize = 1;

/// One task: requests and mean usage ratios as fractions of one node (the trace normalises to
/// the largest machine; §5.1's nodes are all alike).
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    /// Position in the workload; also the seed of its usage series.
    pub id: u64,
    /// The job it belongs to (Alg. 3 line 9's "source").
    pub job: u64,
    /// Submission time, seconds from the start.
    pub arrival_s: f64,
    /// How long it runs once placed, seconds.
    pub duration_s: f64,
    /// Request per class, fraction of a node.
    pub request: [f64; 2],
    /// Mean usage / request per class (above 1 when the task uses more than it asked).
    pub usage_ratio: [f64; 2],
}

/// The generator's parameters. `fitted` holds the stated figures; the rest are our choices.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceParams {
    /// Nodes the workload is sized for (§5.1: 4,000).
    pub hosts: usize,
    /// Tasks submitted over the horizon per 4,000 nodes (§5.1: 714,030 in 24 h).
    pub tasks_per_4000_hosts: f64,
    /// Length of the trace, seconds (§5.1: 24 h).
    pub horizon_s: f64,
    /// Mean usage / request for CPU and memory (§2.2: 0.43 / 1.1 and 0.5 / 0.9).
    pub usage_ratio: [f64; 2],
    /// Memory request per unit of CPU request (§2.2: 0.9 / 1.1).
    pub mem_per_cpu: f64,
    /// Ours: mean CPU request, fraction of a node (0.05 = 3.2 of 64 cores).
    pub mean_cpu_request: f64,
    /// Ours: coefficient of variation of the CPU request and of the memory / CPU proportion.
    pub request_cv: [f64; 2],
    /// Ours: coefficient of variation of a task's mean usage ratio across tasks.
    pub usage_cv: f64,
    /// Ours: CPU requests offered per node capacity at steady state (sets the lifetimes). 1.75:
    /// Fig. 6 shows OverSub θ = 2 and Flex admitting about the same, 1.74× LeastFit, which
    /// with LeastFit near 1 means OverSub admitted what was offered.
    pub offered_load: f64,
    /// Ours: mean tasks per job (geometric).
    pub tasks_per_job: f64,
}

impl Default for TraceParams {
    fn default() -> Self {
        TraceParams {
            hosts: 4_000,
            tasks_per_4000_hosts: 714_030.0,
            horizon_s: 86_400.0,
            usage_ratio: [0.43 / 1.1, 0.5 / 0.9],
            mem_per_cpu: 0.9 / 1.1,
            mean_cpu_request: 0.05,
            request_cv: [1.0, 0.5],
            usage_cv: 0.5,
            offered_load: 1.75,
            tasks_per_job: 4.0,
        }
    }
}

impl TraceParams {
    /// Arrivals per second.
    pub fn arrival_rate(&self) -> f64 {
        self.tasks_per_4000_hosts * self.hosts as f64 / 4_000.0 / self.horizon_s
    }

    /// Mean lifetime that makes the offered CPU load `offered_load` (Little's law).
    pub fn mean_duration_s(&self) -> f64 {
        self.offered_load * self.hosts as f64 / (self.arrival_rate() * self.mean_cpu_request)
    }
}

/// A lognormal draw with the given mean and coefficient of variation.
pub fn lognormal(rng: &mut impl Rng, mean: f64, cv: f64) -> f64 {
    let sigma2 = (1.0 + cv * cv).ln();
    let mu = mean.ln() - sigma2 / 2.0;
    (mu + sigma2.sqrt() * standard_normal(rng)).exp()
}

/// A standard normal draw (Box–Muller; no extra crate for one formula).
pub fn standard_normal(rng: &mut impl Rng) -> f64 {
    let u: f64 = rng.gen_range(f64::EPSILON..1.0);
    let v: f64 = rng.gen();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// The generated workload: the tasks running at the start (a steady state: λ·D tasks with
/// memoryless residual lifetimes, all submitted at 0) followed by the horizon's arrivals.
pub fn generate(params: &TraceParams, seed: u64) -> Vec<Task> {
    let mut rng = stream(seed, Stream::Workload);
    let rate = params.arrival_rate();
    let mean_duration = params.mean_duration_s();
    let initial = (rate * mean_duration).round() as usize;
    let mut tasks = Vec::new();
    let (mut job, mut left_in_job) = (0u64, 0u32);
    let mut t = 0.0;
    for i in 0.. {
        if i >= initial {
            t += -rng.gen_range(f64::EPSILON..1.0f64).ln() / rate;
            if t >= params.horizon_s {
                break;
            }
        }
        if left_in_job == 0 {
            job += 1;
            let p = 1.0 / params.tasks_per_job.max(1.0);
            left_in_job = 1 + (rng.gen_range(f64::EPSILON..1.0f64).ln() / (1.0 - p).ln()) as u32;
        }
        left_in_job -= 1;
        let cpu = lognormal(&mut rng, params.mean_cpu_request, params.request_cv[CPU]);
        let mem = cpu * lognormal(&mut rng, params.mem_per_cpu, params.request_cv[MEM]);
        tasks.push(Task {
            id: tasks.len() as u64,
            job,
            arrival_s: t,
            duration_s: -rng.gen_range(f64::EPSILON..1.0f64).ln() * mean_duration,
            request: [cpu.clamp(0.002, 0.5), mem.clamp(0.002, 0.5)],
            usage_ratio: [
                lognormal(&mut rng, params.usage_ratio[CPU], params.usage_cv),
                lognormal(&mut rng, params.usage_ratio[MEM], params.usage_cv),
            ],
        });
    }
    tasks
}

/// What a load skipped, by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Tasks kept.
    pub tasks: usize,
    /// Submitted but never finished within the files (no lifetime).
    pub unfinished: usize,
    /// Without a CPU or memory request.
    pub no_request: usize,
    /// Without any usage sample (their ratio defaults to the generator's mean).
    pub no_usage: usize,
    /// Lines that do not parse.
    pub bad_lines: usize,
}

#[derive(Default)]
struct Building {
    job: u64,
    submit_us: Option<u64>,
    schedule_us: Option<u64>,
    end_us: Option<u64>,
    request: [Option<f64>; 2],
    usage_sum: [f64; 2],
    usage_samples: u32,
}

/// Loads the 2011 trace's (v2 format) `task_events` and `task_usage` CSV files, each a file
/// or a folder of part files, keeping tasks submitted within `horizon_s` of the first event.
/// Columns used: task_events 0 time (µs), 2 job, 3 task index, 5 event type (0 submit,
/// 1 schedule, 2–6 end), 9 CPU request, 10 memory request; task_usage 2 job, 3 task index,
/// 5 mean CPU rate, 6 canonical memory usage.
pub fn load(
    events: &Path,
    usage: &Path,
    horizon_s: f64,
    default_ratio: [f64; 2],
) -> anyhow::Result<(Vec<Task>, LoadReport)> {
    let mut report = LoadReport::default();
    let mut tasks: HashMap<(u64, u64), Building> = HashMap::new();
    let mut first_us = None;
    for line in lines(events)? {
        let f: Vec<&str> = line.split(',').collect();
        let parsed = (|| -> Option<(u64, u64, u64, u8)> {
            Some((
                f.first()?.parse().ok()?,
                f.get(2)?.parse().ok()?,
                f.get(3)?.parse().ok()?,
                f.get(5)?.parse().ok()?,
            ))
        })();
        let Some((time, job, index, kind)) = parsed else {
            report.bad_lines += 1;
            continue;
        };
        let first = *first_us.get_or_insert(time);
        let task = tasks.entry((job, index)).or_default();
        task.job = job;
        match kind {
            0 => {
                if time.saturating_sub(first) as f64 / 1e6 <= horizon_s {
                    task.submit_us.get_or_insert(time);
                }
                for (class, col) in [(CPU, 9), (MEM, 10)] {
                    if let Some(x) = f.get(col).and_then(|s| s.parse::<f64>().ok()) {
                        task.request[class] = Some(x);
                    }
                }
            }
            1 => {
                task.schedule_us.get_or_insert(time);
            }
            2..=6 => task.end_us = Some(time),
            _ => {}
        }
    }
    for line in lines(usage)? {
        let f: Vec<&str> = line.split(',').collect();
        let parsed = (|| -> Option<(u64, u64, f64, f64)> {
            Some((
                f.get(2)?.parse().ok()?,
                f.get(3)?.parse().ok()?,
                f.get(5)?.parse().ok()?,
                f.get(6)?.parse().ok()?,
            ))
        })();
        let Some((job, index, cpu, mem)) = parsed else {
            report.bad_lines += 1;
            continue;
        };
        if let Some(task) = tasks.get_mut(&(job, index)) {
            task.usage_sum[CPU] += cpu;
            task.usage_sum[MEM] += mem;
            task.usage_samples += 1;
        }
    }
    let first = first_us.unwrap_or(0);
    let mut keys: Vec<_> = tasks.keys().copied().collect();
    keys.sort_by_key(|k| (tasks[k].submit_us, *k));
    let mut out = Vec::new();
    for key in keys {
        let b = &tasks[&key];
        let Some(submit) = b.submit_us else { continue };
        let (Some(start), Some(end)) = (b.schedule_us, b.end_us) else {
            report.unfinished += 1;
            continue;
        };
        let (Some(cpu), Some(mem)) = (b.request[CPU], b.request[MEM]) else {
            report.no_request += 1;
            continue;
        };
        if cpu <= 0.0 || mem <= 0.0 {
            report.no_request += 1;
            continue;
        }
        let ratio = if b.usage_samples == 0 {
            report.no_usage += 1;
            default_ratio
        } else {
            let n = f64::from(b.usage_samples);
            [b.usage_sum[CPU] / n / cpu, b.usage_sum[MEM] / n / mem]
        };
        out.push(Task {
            id: out.len() as u64,
            job: b.job,
            arrival_s: submit.saturating_sub(first) as f64 / 1e6,
            duration_s: end.saturating_sub(start) as f64 / 1e6,
            request: [cpu, mem],
            usage_ratio: ratio,
        });
    }
    report.tasks = out.len();
    Ok((out, report))
}

/// The non-empty lines of the table at `path` (a file or a folder of part files, gzip or
/// not: [`crate::trace_files`]).
fn lines(path: &Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for line in crate::trace_files::reader(path)?.lines() {
        let line = line.with_context(|| format!("cannot read {}", path.display()))?;
        if !line.trim().is_empty() {
            out.push(line);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_meets_the_stated_statistics() {
        let params = TraceParams {
            hosts: 400,
            ..TraceParams::default()
        };
        let tasks = generate(&params, 1);
        let arrivals = tasks.iter().filter(|t| t.arrival_s > 0.0).count() as f64;
        assert!(
            (arrivals / 71_403.0 - 1.0).abs() < 0.02,
            "{arrivals} arrivals in 24 h"
        );
        let mean = |f: &dyn Fn(&Task) -> f64| tasks.iter().map(f).sum::<f64>() / tasks.len() as f64;
        let cpu = mean(&|t| t.request[CPU]);
        let mem = mean(&|t| t.request[MEM]);
        assert!((cpu / 0.05 - 1.0).abs() < 0.05, "mean CPU request {cpu}");
        assert!(
            (mem / cpu / (0.9 / 1.1) - 1.0).abs() < 0.05,
            "memory / CPU {}",
            mem / cpu
        );
        let used = mean(&|t| t.request[CPU] * t.usage_ratio[CPU]) / cpu;
        assert!(
            (used / (0.43 / 1.1) - 1.0).abs() < 0.05,
            "CPU usage / request {used}"
        );
        let used = mean(&|t| t.request[MEM] * t.usage_ratio[MEM]) / mem;
        assert!(
            (used / (0.5 / 0.9) - 1.0).abs() < 0.05,
            "memory usage / request {used}"
        );
        assert_eq!(tasks, generate(&params, 1), "seeded");
    }

    #[test]
    fn a_small_file_in_the_traces_format_loads() {
        let dir = tempfile::tempdir().unwrap();
        let events = dir.path().join("task_events.csv");
        // time,missing,job,index,machine,event,user,class,priority,cpu,mem,disk,constraint
        std::fs::write(
            &events,
            "600000000,,7,0,,0,u,2,9,0.0625,0.0318,0.0001,0\n\
             600500000,,7,0,42,1,u,2,9,0.0625,0.0318,0.0001,0\n\
             601000000,,7,1,,0,u,2,9,0.125,0.05,0.0001,0\n\
             602000000,,7,1,43,1,u,2,9,0.125,0.05,0.0001,0\n\
             700500000,,7,0,42,4,u,2,9,0.0625,0.0318,0.0001,0\n\
             garbage\n\
             800000000,,8,0,,0,u,0,0,,,0,0\n\
             800000001,,8,0,44,1,u,0,0,,,0,0\n\
             800000002,,8,0,44,5,u,0,0,,,0,0\n",
        )
        .unwrap();
        let usage = dir.path().join("task_usage.csv");
        // start,end,job,index,machine,cpu rate,canonical mem,... (20 columns in the trace)
        std::fs::write(
            &usage,
            "600000000,900000000,7,0,42,0.025,0.0159,0.02,0,0,0.02,0,0,0.05,0,1.2,0.001,1,0,0.03\n\
             900000000,1200000000,7,0,42,0.035,0.0159,0.02,0,0,0.02,0,0,0.05,0,1.2,0.001,1,0,0.03\n",
        )
        .unwrap();
        let (tasks, report) = load(&events, &usage, 86_400.0, [0.4, 0.5]).unwrap();
        assert_eq!(tasks.len(), 1);
        let t = &tasks[0];
        assert_eq!((t.job, t.arrival_s, t.duration_s), (7, 0.0, 100.0));
        assert_eq!(t.request, [0.0625, 0.0318]);
        assert!((t.usage_ratio[CPU] - 0.48).abs() < 1e-12);
        assert!((t.usage_ratio[MEM] - 0.5).abs() < 1e-12);
        assert_eq!(
            report,
            LoadReport {
                tasks: 1,
                unfinished: 1,
                no_request: 1,
                no_usage: 0,
                bad_lines: 1
            }
        );
    }
}
