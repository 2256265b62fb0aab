//! ECSched's Fig. 5 (seed 004, §4.2): the solver's time for 100, 200 and 300 requests on 1,000
//! and 5,000 half-loaded machines of EC2's general-purpose types; the benchmark of issue 44
//! (targets: 300 × 5,000 ≤ 50 ms median, 100 × 1,000 ≤ 5 ms). Times the library's
//! `control::ecsched::solve`, graph building and pruning included.

use super::shapes::{ec2_loaded, Load};
use super::trace::{generate, TraceModel};
use parasol::control::ecsched::{solve, BatchRequest, CostModel, SolveOptions};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

/// One cell: a cluster size, a batch size, a rule set.
#[derive(Clone, Debug)]
pub struct Fig5Row {
    pub hosts: usize,
    pub requests: usize,
    pub rules: &'static str,
    pub median_ms: f64,
    pub p90_ms: f64,
    pub edges: usize,
    pub host_nodes: usize,
    pub unscheduled: usize,
}

/// The two rule sets measured: the paper's and the service's.
pub fn rule_sets() -> [(&'static str, SolveOptions); 2] {
    [
        (
            "paper (dp, 1 per host)",
            SolveOptions::paper(CostModel::DotProduct),
        ),
        ("service (dp-free, as many as fit)", SolveOptions::service()),
    ]
}

/// Requests sized by the trace model, in the units of [`super::shapes`] (1.0 = 4 cores, 12 GiB).
pub fn requests(n: usize, rng: &mut ChaCha8Rng) -> Vec<BatchRequest> {
    let model = TraceModel {
        completed: n,
        sampled: 1.0,
        ..TraceModel::PUBLISHED
    };
    generate(&model, rng)
        .into_iter()
        .map(|t| BatchRequest {
            demand: vec![
                (t.cpu * 4_000.0).ceil() as u64,
                (t.mem * 12_288.0).ceil() as u64,
            ],
            ..Default::default()
        })
        .collect()
}

/// Runs every cell `repeats` times on fresh seeded clusters (loaded as `load`) and batches.
pub fn run(
    hosts: &[usize],
    batch: &[usize],
    load: Load,
    repeats: usize,
    seed: u64,
) -> Vec<Fig5Row> {
    let mut rows = Vec::new();
    for &h in hosts {
        for &n in batch {
            for (rules, opts) in rule_sets() {
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (h as u64) << 20 ^ n as u64);
                let mut times = Vec::with_capacity(repeats);
                let mut last = None;
                for _ in 0..repeats {
                    let cluster = ec2_loaded(h, load, &mut rng);
                    let reqs = requests(n, &mut rng);
                    let start = Instant::now();
                    let p = solve(&cluster, &reqs, &opts).expect("valid batch");
                    times.push(start.elapsed().as_secs_f64() * 1e3);
                    last = Some(p);
                }
                times.sort_by(f64::total_cmp);
                let p = last.expect("repeats ≥ 1");
                rows.push(Fig5Row {
                    hosts: h,
                    requests: n,
                    rules,
                    median_ms: times[times.len() / 2],
                    p90_ms: times[(times.len() * 9 / 10).min(times.len() - 1)],
                    edges: p.stats.edges,
                    host_nodes: p.stats.host_nodes,
                    unscheduled: p.unscheduled(),
                });
            }
        }
    }
    rows
}

/// The rows as a Markdown table.
pub fn markdown(rows: &[Fig5Row]) -> String {
    let mut s = String::from(
        "| hosts | requests | rules | median ms | p90 ms | edges kept | host nodes | unscheduled |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {:.2} | {:.2} | {} | {} | {} |\n",
            r.hosts,
            r.requests,
            r.rules,
            r.median_ms,
            r.p90_ms,
            r.edges,
            r.host_nodes,
            r.unscheduled
        );
    }
    s
}
