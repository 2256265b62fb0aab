//! ECSched's workload (seed 004, §4.1): tasks of the 2011 Google cluster trace's first five
//! hours. The trace cannot be fetched here, so [`generate`] draws tasks from a model fitted to
//! the statistics the paper publishes, and [`load_task_events`] reads the real `task_events`
//! files for whoever has them.
//!
//! Published (§4.1): 83,241 tasks completed in the first 5 h, mean duration 764 s, 10 %
//! (≈ 8,300) sampled per run, 6 % with container or machine affinity. Not published: the
//! size distribution. Ours, fixed before any comparison with Table 1 (docs/bench-history/2026-12-02-ecsched.md):
//! see [`TraceModel::PUBLISHED`].

use rand::Rng;
use std::io::BufRead;

/// One task: when it is submitted, how long it runs, what it requests (fractions of the
/// trace's largest machine, as the trace normalises them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Task {
    pub submit_s: f64,
    pub duration_s: f64,
    pub cpu: f64,
    pub mem: f64,
    /// Whether the task carries an affinity requirement (§4.1's 6 %).
    pub affinity: bool,
}

/// The generator's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceModel {
    /// Tasks completed in the window (§4.1: 83,241).
    pub completed: usize,
    /// The window (§4.1: the first 5 hours).
    pub window_s: f64,
    /// Mean task duration (§4.1: 764 s).
    pub mean_duration_s: f64,
    /// Log-normal shape of durations (ours: the trace's durations are heavy-tailed).
    pub duration_sigma: f64,
    /// Share of tasks sampled per run (§4.1: 10 %).
    pub sampled: f64,
    /// Share with affinity (§4.1: 6 %).
    pub affinity: f64,
    /// Median normalised CPU and memory request, log-normal shape, correlation of the two
    /// logs, and the largest request (ours).
    pub cpu_median: f64,
    pub mem_median: f64,
    pub size_sigma: f64,
    pub size_correlation: f64,
    pub size_max: f64,
}

impl TraceModel {
    /// §4.1's published figures, and our choices where the paper gives none: durations
    /// log-normal with σ = 1.5 (mean kept at 764 s); requests log-normal around a median of
    /// 0.0625 CPU and 0.05 memory of the largest machine (σ = 0.8, correlation 0.5 between
    /// the two logs), capped at 0.25 so every task fits the smallest host of §4.1.
    pub const PUBLISHED: TraceModel = TraceModel {
        completed: 83_241,
        window_s: 5.0 * 3_600.0,
        mean_duration_s: 764.0,
        duration_sigma: 1.5,
        sampled: 0.10,
        affinity: 0.06,
        cpu_median: 0.0625,
        mem_median: 0.05,
        size_sigma: 0.8,
        size_correlation: 0.5,
        size_max: 0.25,
    };
}

/// One run's sample of tasks, ordered by submission.
pub fn generate(model: &TraceModel, rng: &mut impl Rng) -> Vec<Task> {
    let n = (model.completed as f64 * model.sampled).round() as usize;
    let mu_d = model.mean_duration_s.ln() - model.duration_sigma.powi(2) / 2.0;
    let rho = model.size_correlation;
    let mut tasks: Vec<Task> = (0..n)
        .map(|_| {
            let (z1, z2) = (normal(rng), normal(rng));
            let z_mem = rho * z1 + (1.0 - rho * rho).sqrt() * z2;
            let size = |median: f64, z: f64| {
                (median * (model.size_sigma * z).exp()).clamp(0.001, model.size_max)
            };
            Task {
                submit_s: rng.gen_range(0.0..model.window_s),
                duration_s: (mu_d + model.duration_sigma * normal(rng)).exp().max(1.0),
                cpu: size(model.cpu_median, z1),
                mem: size(model.mem_median, z_mem),
                affinity: rng.gen_bool(model.affinity),
            }
        })
        .collect();
    tasks.sort_by(|a, b| a.submit_s.total_cmp(&b.submit_s));
    tasks
}

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut impl Rng) -> f64 {
    let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
    let u2: f64 = rng.gen_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Reads the trace's `task_events` CSV (schema of the 2011 trace: time µs, missing info, job
/// id, task index, machine id, event type, user, scheduling class, priority, CPU request,
/// memory request, disk request, different-machine restriction): a task is submitted at its
/// SUBMIT (event 0), runs from its SCHEDULE (1) and is kept if it ends with FINISH (4) before
/// `until_s`. A row that does not parse is an error naming its line.
pub fn load_task_events(input: impl BufRead, until_s: f64) -> anyhow::Result<Vec<Task>> {
    use std::collections::HashMap;
    struct Open {
        submit: f64,
        start: Option<f64>,
        cpu: f64,
        mem: f64,
        affinity: bool,
    }
    let mut open: HashMap<(u64, u64), Open> = HashMap::new();
    let mut done = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        let bad = |what: &str| anyhow::anyhow!("task_events line {}: {what}", i + 1);
        if f.len() < 13 {
            return Err(bad("fewer than 13 fields"));
        }
        let t = f[0].parse::<f64>().map_err(|_| bad("time"))? / 1e6;
        let key = (
            f[2].parse().map_err(|_| bad("job id"))?,
            f[3].parse().map_err(|_| bad("task index"))?,
        );
        let event: u8 = f[5].parse().map_err(|_| bad("event type"))?;
        let num = |s: &str, what: &str| -> anyhow::Result<f64> {
            if s.is_empty() {
                Ok(0.0)
            } else {
                s.parse().map_err(|_| bad(what))
            }
        };
        match event {
            0 => {
                open.insert(
                    key,
                    Open {
                        submit: t,
                        start: None,
                        cpu: num(f[9], "CPU request")?,
                        mem: num(f[10], "memory request")?,
                        affinity: num(f[12], "different-machine restriction")? > 0.0,
                    },
                );
            }
            1 => {
                if let Some(o) = open.get_mut(&key) {
                    o.start = Some(t);
                }
            }
            4 => {
                if let Some(o) = open.remove(&key) {
                    if let Some(start) = o.start.filter(|_| t <= until_s) {
                        done.push(Task {
                            submit_s: o.submit,
                            duration_s: t - start,
                            cpu: o.cpu,
                            mem: o.mem,
                            affinity: o.affinity,
                        });
                    }
                }
            }
            2 | 3 | 5 | 6 => {
                open.remove(&key);
            }
            _ => {}
        }
    }
    done.sort_by(|a, b| a.submit_s.total_cmp(&b.submit_s));
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_generator_matches_the_published_count_and_mean_duration() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let tasks = generate(&TraceModel::PUBLISHED, &mut rng);
        assert_eq!(tasks.len(), 8_324);
        let mean = tasks.iter().map(|t| t.duration_s).sum::<f64>() / tasks.len() as f64;
        assert!((mean - 764.0).abs() < 764.0 * 0.08, "mean duration {mean}");
        let aff = tasks.iter().filter(|t| t.affinity).count() as f64 / tasks.len() as f64;
        assert!((aff - 0.06).abs() < 0.01, "affinity share {aff}");
        assert!(tasks.iter().all(|t| t.cpu <= 0.25 && t.mem <= 0.25));
    }

    /// Job 7 task 0: submitted 1 s, scheduled 2 s, finished 12 s; task 1 killed (5); job 8
    /// task 0 finishes after the window.
    const EVENTS: &str = "\
1000000,,7,0,,0,u,0,9,0.125,0.0625,0.0,1
1000000,,7,1,,0,u,0,9,0.5,0.5,0.0,0
2000000,,7,0,42,1,u,0,9,0.125,0.0625,0.0,1
2000000,,7,1,43,1,u,0,9,0.5,0.5,0.0,0
3000000,,8,0,,0,u,0,9,0.01,0.02,,0
4000000,,8,0,44,1,u,0,9,0.01,0.02,,0
5000000,,7,1,43,5,u,0,9,0.5,0.5,0.0,0
12000000,,7,0,42,4,u,0,9,0.125,0.0625,0.0,1
99000000,,8,0,44,4,u,0,9,0.01,0.02,,0
";

    #[test]
    fn task_events_keep_finished_tasks_with_their_requests() {
        let tasks = load_task_events(EVENTS.as_bytes(), 60.0).unwrap();
        assert_eq!(
            tasks,
            vec![Task {
                submit_s: 1.0,
                duration_s: 10.0,
                cpu: 0.125,
                mem: 0.0625,
                affinity: true
            }]
        );
        let err = load_task_events("1,,x,0,,0,u,0,9,0.1,0.1,0,0\n".as_bytes(), 60.0).unwrap_err();
        assert_eq!(err.to_string(), "task_events line 1: job id");
    }

    /// The trace as published: a folder of gzip part files (`part-NNNNN-of-MMMMM.csv.gz`),
    /// split here mid-job, loads as the one plain file does.
    #[test]
    fn published_gzip_parts_load_as_the_plain_file() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let lines: Vec<&str> = EVENTS.lines().collect();
        for (k, part) in lines.chunks(4).enumerate() {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(part.join("\n").as_bytes()).unwrap();
            let name = format!("part-{k:05}-of-00002.csv.gz");
            std::fs::write(dir.path().join(name), gz.finish().unwrap()).unwrap();
        }
        // Source::new keeps what ends within the published window (5 h): both jobs here.
        let plain = load_task_events(EVENTS.as_bytes(), TraceModel::PUBLISHED.window_s).unwrap();
        match crate::ecsched::results::Source::new(Some(dir.path())).unwrap() {
            crate::ecsched::results::Source::Loaded(tasks) => assert_eq!(tasks, plain),
            crate::ecsched::results::Source::Generated(_) => panic!("the generator, not the file"),
        }
        assert_eq!(plain.len(), 2);
    }
}
