//! What claiming in Placement costs per decision: the same `Scheduler` the service runs
//! (filter backend, SQLite ledger, in process), with `[placement] claims` on against a running
//! `openstack-placement`, one caller at a time. It registers `--hosts` providers in Placement,
//! lets Parasol sync them, then makes `--decisions` decisions and prints decisions/s, the mean
//! decision time, the mean time of the claim in Placement inside it (Nova's `GET` + `PUT
//! /allocations/{instance}`), and the time Parasol adds on top. Then, as a baseline, the same
//! number of Nova-style claims (`GET` + `PUT`) made directly against Placement.
//!
//! Placement (e.g. the test's launcher in `tests/support/placement_server.rs`, noauth2):
//! `cargo run --release -p openstack-bench --example bench_placement_claims -- --placement-url http://127.0.0.1:PORT`

use clap::Parser;
use parasol::clock::SystemClock;
use parasol::configuration::Settings;
use parasol::domain::{ConsumerOwner, RequestContext, Resources};
use parasol::placement::{AuthKind, PlacementSettings};
use parasol::startup::Application;
use serde_json::{json, Value};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The service's allocator (`src/main.rs`), so that this measures what the service runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// Placement's endpoint (noauth2: the token `admin`).
    #[arg(long)]
    placement_url: String,
    #[arg(long, default_value_t = 1000)]
    hosts: usize,
    #[arg(long, default_value_t = 500)]
    decisions: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

async fn call(http: &reqwest::Client, url: &str, method: reqwest::Method, body: Value) -> Value {
    let response = http
        .request(method, url)
        .header("X-Auth-Token", "admin")
        .header("OpenStack-API-Version", "placement 1.36")
        .json(&body)
        .send()
        .await
        .expect("placement");
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    assert!(status.is_success(), "{url}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let http = reqwest::Client::new();
    let base = args.placement_url.trim_end_matches('/').to_string();
    let run = uuid::Uuid::new_v4().simple().to_string();
    let started = Instant::now();
    for i in 0..args.hosts {
        let uuid = format!("{}-0000-4000-8000-{i:012}", &run[..8]);
        let body = json!({"name": format!("bench-{}-{i}", &run[..8]), "uuid": uuid});
        call(
            &http,
            &format!("{base}/resource_providers"),
            reqwest::Method::POST,
            body,
        )
        .await;
        let body = json!({"resource_provider_generation": 0, "inventories": {
            "VCPU": {"total": 64, "allocation_ratio": 16.0},
            "MEMORY_MB": {"total": 262144}, "DISK_GB": {"total": 2000}}});
        let url = format!("{base}/resource_providers/{uuid}/inventories");
        call(&http, &url, reqwest::Method::PUT, body).await;
    }
    eprintln!(
        "{} providers registered in Placement in {:.1} s",
        args.hosts,
        started.elapsed().as_secs_f64()
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let mut settings = Settings::default();
    settings.ledger.url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    settings.amqp.url = String::new();
    settings.scheduler.seed = Some(args.seed);
    settings.placement = PlacementSettings {
        enabled: true,
        url: base.clone(),
        auth: AuthKind::Noauth,
        sync_interval_s: 3600.0,
        timeout_s: 30.0,
        ..Default::default()
    };
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let app = Application::build_with(settings, listener, Arc::new(SystemClock))
        .await
        .expect("build");
    let scheduler = app.scheduler().clone();
    let stats = scheduler.stats().clone();
    let shutdown = app.shutdown();
    app.start_placement_sync();
    tokio::spawn(app.run_until_stopped());
    let ledger = scheduler.ledger().clone();
    while ledger.read_hosts().await.expect("hosts").len() < args.hosts {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let owner = Arc::new(ConsumerOwner {
        project_id: "bench".into(),
        user_id: "bench".into(),
    });
    let demand = Resources::new(1, 512, 1);
    let claim_sum = |text: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix("parasol_placement_claim_duration_seconds_sum "))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let before = claim_sum(&stats.metrics().encode());
    let started = Instant::now();
    for _ in 0..args.decisions {
        let mut req = RequestContext::with_demand(uuid::Uuid::new_v4().to_string(), "m1", demand);
        req.owner = Some(owner.clone());
        scheduler.schedule(vec![req]).await.expect("placed");
    }
    let total = started.elapsed().as_secs_f64();
    let in_placement = claim_sum(&stats.metrics().encode()) - before;
    let n = args.decisions as f64;
    println!(
        "parasol+placement hosts={} decisions={} decisions_per_s={:.1} mean_decision_ms={:.2} \
         mean_placement_claim_ms={:.2} parasol_adds_ms={:.2}",
        args.hosts,
        args.decisions,
        n / total,
        total / n * 1000.0,
        in_placement / n * 1000.0,
        (total - in_placement) / n * 1000.0
    );

    // Baseline: Nova's claim alone (GET then PUT of a new consumer), round-robin over hosts.
    let started = Instant::now();
    for i in 0..args.decisions {
        let consumer = uuid::Uuid::new_v4().to_string();
        let rp = format!("{}-0000-4000-8000-{:012}", &run[..8], i % args.hosts);
        let url = format!("{base}/allocations/{consumer}");
        let _ = http
            .get(&url)
            .header("X-Auth-Token", "admin")
            .header("OpenStack-API-Version", "placement 1.28")
            .send()
            .await
            .expect("get");
        let body = json!({"allocations": {rp.clone(): {"resources": {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}}},
                          "mappings": {"": [rp]}, "project_id": "bench", "user_id": "bench",
                          "consumer_generation": null});
        call(&http, &url, reqwest::Method::PUT, body).await;
    }
    let total = started.elapsed().as_secs_f64();
    println!(
        "placement alone claims={} claims_per_s={:.1} mean_claim_ms={:.2}",
        args.decisions,
        n / total,
        total / n * 1000.0
    );
    shutdown.stop().await;
}
