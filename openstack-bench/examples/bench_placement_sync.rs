//! What a Placement sync costs Parasol at scale (issue 50): the library's `sync` and the
//! consistency check after it (`reconcile`), as the service's periodic sync runs them, against a
//! running `openstack-placement` whose providers are already registered (for 100,000 providers:
//! `openstack-bench/placement_sync/populate.sql` into a PostgreSQL-backed Placement; BENCHMARKS.md
//! gives the whole recipe). The ledger is a SQLite file in a temporary directory.
//!
//! The first sync reads every provider; then `--cycles` syncs each list the providers once and
//! read only those whose generation changed — `--changes` providers changed before each cycle by
//! a new allocation (`PUT /allocations/{consumer}`, which raises their generation), timed apart
//! from the cycle. For each sync: wall time, this process' CPU (Placement is another process),
//! the listing's part of it, providers listed and read (and of those, how many because the ledger
//! disagreed with what was last read), and the CPU per unchanged
//! provider.
//!
//! `cargo run --release -p openstack-bench --example bench_placement_sync -- --placement-url http://127.0.0.1:8780`

use clap::Parser;
use parasol::clock::SystemClock;
use parasol::ledger::Ledger;
use parasol::placement::{
    reconcile, sync, AuthKind, PlacementClient, PlacementSettings, ProviderCache, SyncReport,
};
use serde_json::json;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

/// The service's allocator (`src/main.rs`), so that this measures what the service runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// Placement's endpoint (noauth2: the token `admin`).
    #[arg(long)]
    placement_url: String,
    /// Syncs after the first.
    #[arg(long, default_value_t = 5)]
    cycles: usize,
    /// Providers given a new allocation before each of those syncs, one figure per sync in
    /// turn (`0,100,1000`: none before the first, 100 before the second, …, then again).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    changes: Vec<usize>,
    /// Only list the providers this many times (a profile of the listing), then stop.
    #[arg(long, default_value_t = 1)]
    listings: usize,
    /// Stop after the listings.
    #[arg(long)]
    list_only: bool,
    /// Seed of the providers drawn for the changes.
    #[arg(long)]
    seed: Option<u64>,
}

/// This process' CPU time in µs.
fn cpu_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// One sync and its consistency check: (report, wall s, CPU µs of the sync, CPU µs of the check).
async fn one(
    client: &PlacementClient,
    ledger: &Ledger,
    cache: &mut ProviderCache,
    full: bool,
    now_ms: i64,
    missing: &mut HashSet<String>,
) -> (SyncReport, f64, u64, u64) {
    let started = Instant::now();
    let cpu = cpu_us();
    let mut report = sync(client, ledger, cache, full, now_ms)
        .await
        .expect("sync");
    let synced = cpu_us();
    report.repairs = reconcile(ledger, &report, true, now_ms - 60_000, now_ms, missing)
        .await
        .expect("consistency check");
    let checked = cpu_us();
    (
        report,
        started.elapsed().as_secs_f64(),
        synced - cpu,
        checked - synced,
    )
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let base = args.placement_url.trim_end_matches('/').to_string();
    let settings = PlacementSettings {
        enabled: true,
        url: base.clone(),
        auth: AuthKind::Noauth,
        timeout_s: 600.0,
        ..Default::default()
    };
    let client = PlacementClient::new(settings, Arc::new(SystemClock)).expect("client");
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let ledger = Ledger::connect(&url, 4).await.expect("ledger");
    ledger.migrate().await.expect("migrate");

    // The listing alone: what every cycle pays at least.
    for _ in 0..args.listings {
        let started = Instant::now();
        let cpu = cpu_us();
        let listing = client.listing().await.expect("listing");
        let listed = listing.providers().expect("a listing that parses").len();
        let spent = cpu_us() - cpu;
        println!(
            "listing: {listed} providers, {:.2} s, {:.1} ms CPU ({:.2} µs a provider)",
            started.elapsed().as_secs_f64(),
            spent as f64 / 1000.0,
            spent as f64 / listed.max(1) as f64
        );
    }
    if args.list_only {
        return;
    }

    let mut cache = ProviderCache::default();
    let mut missing = HashSet::new();
    let mut now_ms = 1_000_000;
    let (first, wall, cpu_sync, cpu_check) =
        one(&client, &ledger, &mut cache, true, now_ms, &mut missing).await;
    println!(
        "first sync (full): {:.1} s, {:.2} s CPU (check {:.2} s); listed {}, read {}, hosts {}, imported {}",
        wall,
        cpu_sync as f64 / 1e6,
        cpu_check as f64 / 1e6,
        first.listed_providers,
        first.read_providers,
        first.hosts,
        first.imported_allocations
    );

    let http = reqwest::Client::new();
    let mut rng = args.seed.unwrap_or(1);
    let providers: Vec<String> = first.placement_allocations.keys().cloned().collect();
    for cycle in 1..=args.cycles {
        let changes = args
            .changes
            .get((cycle - 1) % args.changes.len().max(1))
            .copied()
            .unwrap_or(0);
        let changing = Instant::now();
        for _ in 0..changes {
            // A new 1-VCPU instance on a provider drawn by a small LCG (seeded).
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let provider = &providers[(rng >> 33) as usize % providers.len()];
            // A new consumer each time, whatever instances earlier runs left in Placement.
            let consumer = uuid::Uuid::new_v4();
            let body = json!({
                "allocations": {provider: {"resources": {"VCPU": 1}}},
                "project_id": "bench-project", "user_id": "bench-user",
                "consumer_generation": null,
            });
            let response = http
                .put(format!("{base}/allocations/{consumer}"))
                .header("X-Auth-Token", "admin")
                .header("OpenStack-API-Version", "placement 1.28")
                .json(&body)
                .send()
                .await
                .expect("placement");
            assert!(response.status().is_success(), "{}", response.status());
        }
        let changed_s = changing.elapsed().as_secs_f64();
        now_ms += 60_000;
        let (report, wall, cpu_sync, cpu_check) =
            one(&client, &ledger, &mut cache, false, now_ms, &mut missing).await;
        let unchanged = report.listed_providers - report.read_providers;
        println!(
            "cycle {cycle}: {:.2} s, CPU sync {:.1} ms + check {:.1} ms = {:.2} µs per unchanged \
             provider (sync alone {:.2}); listed {}, read {}, of them disagreeing with the ledger {}, imported {} \
             ({} changes made in {changed_s:.1} s before it)",
            wall,
            cpu_sync as f64 / 1000.0,
            cpu_check as f64 / 1000.0,
            (cpu_sync + cpu_check) as f64 / unchanged.max(1) as f64,
            cpu_sync as f64 / unchanged.max(1) as f64,
            report.listed_providers,
            report.read_providers,
            report.disagreeing_providers,
            report.imported_allocations,
            changes
        );
    }
}
