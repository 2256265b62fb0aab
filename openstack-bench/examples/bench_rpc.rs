//! Throughput of `select_destinations` over Nova's RPC: an in-process Parasol (`apsr` on a
//! fresh PostgreSQL database, or a fresh SQLite file with `--ledger sqlite`) serving the oslo
//! RPC server, driven by Parasol's oslo client.
//!
//! `cargo run --release -p openstack-bench --example bench_rpc -- --hosts 1000 --calls 20000 --concurrency 64`

use clap::Parser;
use hdrhistogram::Histogram;
use parasol::clock::{Clock, SystemClock};
use parasol::configuration::{BackendKind, Settings};
use parasol::ledger::{HostRegistration, Ledger};
use parasol::rpc::run_rpc_server;
use parasol::startup::Application;
use parasol_rpc_client::RpcClient;
use serde_json::{json, Value};
use sqlx::Connection;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The service's allocator (`src/main.rs`), so that this measures what the service runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value_t = 1000)]
    hosts: usize,
    #[arg(long, default_value_t = 20000)]
    calls: u64,
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    #[arg(long, default_value = "apsr")]
    backend: String,
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    amqp: String,
    /// PostgreSQL server where a fresh database is created (and dropped afterwards).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/test")]
    pg: String,
    /// The ledger's engine: `postgres` (a fresh database on `--pg`) or `sqlite` (a fresh file).
    #[arg(long, default_value = "postgres", value_parser = ["postgres", "sqlite"])]
    ledger: String,
}

fn spec() -> Value {
    json!({"nova_object.name": "RequestSpec", "nova_object.namespace": "nova", "nova_object.version": "1.15",
        "nova_object.data": {"num_instances": 1, "project_id": "p", "user_id": "u",
            "flavor": {"nova_object.name": "Flavor", "nova_object.namespace": "nova", "nova_object.version": "1.2",
                "nova_object.data": {"id": 1, "name": "m1.tiny", "flavorid": "1", "memory_mb": 512, "vcpus": 1,
                    "root_gb": 1, "ephemeral_gb": 0, "swap": 0}}}})
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let backend: BackendKind = serde_json::from_value(json!(args.backend))?;
    let dir = tempfile::tempdir()?;
    let mut admin = None;
    let name = format!("parasol_bench_{}", uuid::Uuid::new_v4().simple());
    let url = if args.ledger == "sqlite" {
        format!("sqlite://{}", dir.path().join("ledger.db").display())
    } else {
        let mut conn = sqlx::PgConnection::connect(&args.pg).await?;
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await?;
        admin = Some(conn);
        let base = args.pg.rsplit_once('/').map(|(b, _)| b).unwrap_or(&args.pg);
        format!("{base}/{name}")
    };

    let ledger = Ledger::connect(&url, 8).await?;
    ledger.migrate().await?;
    for i in 0..args.hosts {
        let host = format!("compute{i:05}");
        let uuid = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_DNS, host.as_bytes()).to_string();
        let reg = HostRegistration::simple(&host, &uuid, 64, 262_144, 2_000);
        ledger.register_host(&reg, SystemClock.now_ms()).await?;
    }
    drop(ledger);

    let id = uuid::Uuid::new_v4().simple().to_string();
    let mut s = Settings::default();
    s.ledger.url = url.clone();
    s.ledger.max_connections = 16;
    s.scheduler.backend = backend;
    s.scheduler.seed = Some(1);
    s.amqp.url = args.amqp.clone();
    s.amqp.exchange = format!("parasol_bench_{id}");
    s.rpc.enabled = true;
    s.rpc.topic = format!("scheduler_bench_{id}");
    let (exchange, topic) = (s.amqp.exchange.clone(), s.rpc.topic.clone());
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let app = Application::build_with(s, listener, Arc::new(SystemClock)).await?;
    let handles = app.handles().clone();
    let shutdown = app.shutdown();
    tokio::spawn(app.run_until_stopped());
    let counters = handles.rpc.clone();
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(run_rpc_server(handles.rpc_deps(), stop.clone()));
    let client = Arc::new(RpcClient::connect(&args.amqp, &exchange).await?);
    loop {
        let ping = client.call_message("ping", json!({"arg": 0}), "1.1", Some("baseapi"), None);
        if client
            .call_with(&topic, &ping, Duration::from_millis(300))
            .await
            .is_ok()
        {
            break;
        }
    }

    println!("# Nova RPC select_destinations throughput (issue 7)");
    println!(
        "backend={} hosts={} calls={} concurrency={} flavor=1 VCPU/512 MB/1 GB, 1 instance per call, RPC 4.5 with objects+alternates, ledger={}, broker=RabbitMQ",
        args.backend, args.hosts, args.calls, args.concurrency, args.ledger
    );
    let next = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..args.concurrency {
        let (client, next, failures, topic) = (
            client.clone(),
            next.clone(),
            failures.clone(),
            topic.clone(),
        );
        let calls = args.calls;
        tasks.push(tokio::spawn(async move {
            let mut h = Histogram::<u64>::new(3).expect("histogram");
            while next.fetch_add(1, Ordering::Relaxed) < calls {
                let a = json!({"spec_obj": spec(), "instance_uuids": [uuid::Uuid::new_v4().to_string()],
                               "return_objects": true, "return_alternates": true});
                let m = client.call_message("select_destinations", a, "4.5", None, Some(60));
                let t = Instant::now();
                match client.call_with(&topic, &m, Duration::from_secs(60)).await {
                    Ok(r) if r.failure.is_none() => {
                        let _ = h.record(t.elapsed().as_micros() as u64);
                    }
                    _ => {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            h
        }));
    }
    let mut hist = Histogram::<u64>::new(3)?;
    for t in tasks {
        hist.add(t.await?)?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let ok = hist.len();
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "elapsed_s={elapsed:.2} answered={ok} failures={} stray_replies={}",
        failures.load(Ordering::Relaxed),
        client.stray_replies()
    );
    println!("throughput_calls_per_s={:.0}", ok as f64 / elapsed);
    println!(
        "latency_ms p50={:.2} p90={:.2} p99={:.2} max={:.2}",
        ms(0.5),
        ms(0.9),
        ms(0.99),
        hist.max() as f64 / 1000.0
    );
    println!("server={}", counters.to_json());
    stop.cancel();
    shutdown.stop().await;
    drop(handles);
    if let Some(mut admin) = admin {
        let _ = sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
            .execute(&mut admin)
            .await;
    }
    Ok(())
}
