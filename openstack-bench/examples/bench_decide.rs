//! Decide-and-claim cost of each backend on a SQLite ledger, in process (no HTTP): the same
//! `Scheduler` the service runs, called by one caller at a time so each figure is one
//! decision's latency.
//!
//! `cargo run --release -p openstack-bench --example bench_decide -- --hosts 100,1000,10000 --backends filter,caching,asc,apsr`

use clap::Parser;
use parasol::configuration::{BackendKind, Settings};
use parasol::domain::{RequestContext, Resources};
use std::time::Instant;

mod common;
use common::{ledger_with_hosts, pct, scheduler_on};

/// The service's allocator (`src/main.rs`), so that this measures what the service runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// Cluster sizes.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,10000")]
    hosts: Vec<usize>,
    /// Backends to measure (default: every one).
    #[arg(long, value_delimiter = ',')]
    backends: Option<Vec<BackendKind>>,
    /// Decisions per (backend, hosts).
    #[arg(long, default_value_t = 2000)]
    decisions: usize,
    /// APSR: most hosts one scheduler may sample (caps d through the query budget).
    #[arg(long, default_value_t = 100)]
    apsr_max_d: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    println!("# bench_decide: decide-and-claim per decision, one caller, SQLite ledger (WAL, synchronous=NORMAL)");
    println!(
        "# machine: {} cores; decisions per cell: {}; flavor 1 VCPU / 512 MB / 1 GB; hosts 64 VCPU x16, 256 GB, 2 TB; seed {}",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        args.decisions,
        args.seed
    );
    println!("| backend | hosts | median decision (µs) | p99 decision (µs) | median decide excl. claim (µs) | median claim (µs) | queries/request | decisions/s |");
    println!("|---|---|---|---|---|---|---|---|");
    for &n in &args.hosts {
        let dir = tempfile::tempdir().expect("tempdir");
        let ledger = ledger_with_hosts(dir.path(), n).await;
        for kind in args.backends.as_deref().unwrap_or(&BackendKind::ALL) {
            let name = kind.as_str();
            let mut settings = Settings::default();
            settings.scheduler.backend = *kind;
            settings.scheduler.workers = 1;
            settings.scheduler.seed = Some(args.seed);
            settings.amqp.url = String::new();
            // The benchmark's hosts never heartbeat; registering 10,000 may outlast the timeout.
            settings.policy.host_timeout_s = 0;
            settings.apsr.budget = Some(args.apsr_max_d * settings.apsr.max_schedulers);
            let (scheduler, stats) = scheduler_on(settings, &ledger).await;
            let mut lat = Vec::with_capacity(args.decisions);
            let started = Instant::now();
            for i in 0..args.decisions {
                let req = RequestContext::with_demand(
                    format!("{name}-{n}-{i}"),
                    "m1.tiny",
                    Resources::new(1, 512, 1),
                );
                let t = Instant::now();
                scheduler.schedule(vec![req]).await.expect("placed");
                lat.push(t.elapsed().as_micros() as u64);
            }
            let elapsed = started.elapsed().as_secs_f64();
            let b = stats.backend(name).to_json();
            let ms = |v: &serde_json::Value| (v.as_f64().unwrap_or(f64::NAN) * 1000.0).round();
            println!(
                "| {name} | {n} | {} | {} | {} | {} | {:.1} | {:.0} |",
                pct(&mut lat, 0.5),
                pct(&mut lat, 0.99),
                ms(&b["decide_latency_ms"]["p50"]),
                ms(&b["claim_latency_ms"]["p50"]),
                b["queries_per_request"].as_f64().unwrap_or(0.0),
                args.decisions as f64 / elapsed
            );
            scheduler.backend().stop();
            // Release the claims so every backend starts from the same empty cluster.
            for i in 0..args.decisions {
                ledger
                    .release(&format!("{name}-{n}-{i}"))
                    .await
                    .expect("release");
            }
        }
    }
}
