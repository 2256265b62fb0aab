//! Notification ingestion benchmark (issue 3): Parasol host-state events published to the real
//! RabbitMQ, consumed and applied exactly once into a fresh SQLite ledger (or, with
//! `--ledger postgres`, a fresh database of the running PostgreSQL, dropped at the end).
//!
//! `cargo run --profile perf -p openstack-bench --example bench_ingest -- --events 50000 --hosts 10000`
//!
//! Phases, each timed from the first publish until the last event is committed:
//! 1. cold registration: `--hosts` emulated hosts each announce themselves once;
//! 2. sustained (live): `--events` inventory/status updates published while the consumer runs;
//! 3. backlog drain: `--events` updates queued while the consumer is stopped, then drained.
//!
//! Each update changes its host's VCPU total (a re-registration); with `--heartbeats` it
//! repeats the host's profile (steady-state traffic: only liveness and last-seen change).
//! `--queue-type quorum` declares Parasol's queue as a quorum queue (`[amqp] queue_type`), for
//! the null consumer's queue too.
//!
//! `--null-consumer`: the broker's ceiling instead. `--events` updates are queued on a queue
//! of their own, then drained by a consumer that does nothing but acknowledge, as the
//! service's consumer does (the same prefetch, batches of ready deliveries up to
//! `--batch-size`, one `multiple` ack per batch): no ledger, no decoding. It also prints the
//! broker's CPU per event (the `beam.smp` process, when the broker runs on this machine).
//! Diagnostics of the broker's ceiling, for the null consumer only: `--queue-version N`
//! (`x-queue-version` at declare), `--queue-mode lazy`, `--no-ack` (the broker's absolute
//! ceiling; Parasol always acknowledges after its commit), `--consumers N` (channels consuming
//! the queue), `--persistent` (delivery mode 2, as oslo.messaging's notifier publishes by
//! default), `--queue-type stream` (a stream, read from its first offset) and
//! `--lapin-executor` (lapin's own executor, as this bench's null consumer used
//! before, instead of the service's tokio runtime).
//!
//! Everything the bench declares on the broker (exchanges, queues, the consumer's fanout
//! queues) is deleted at the end.

use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use parasol::amqp::run_notification_consumer;
use parasol::amqp::topology::{declare_nova_exchange, HOST_STATE};
use parasol::clock::SystemClock;
use parasol::configuration::{AmqpSettings, Choice, QueueType, Settings};
use parasol::startup::{Application, Handles};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The service's allocator (`src/main.rs`), so that this measures what the service runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Args {
    events: usize,
    hosts: usize,
    url: String,
    prefetch: u16,
    batch_size: usize,
    /// `[amqp] batch_timeout_ms` of the consumer.
    batch_timeout_ms: u64,
    /// `sqlite` (a fresh file) or `postgres` (a fresh database on `pg_url`'s server).
    ledger: String,
    pg_url: String,
    /// Updates repeat each host's registered profile (heartbeats) instead of changing it.
    heartbeats: bool,
    /// Only the broker: drain a backlog with a consumer that acknowledges and nothing else.
    null_consumer: bool,
    /// `x-queue-type` of the drained queue: `classic` or `quorum` (Parasol's
    /// `[amqp] queue_type`), or `stream` for the null consumer.
    queue_type: Option<String>,
    /// Diagnostics of the null consumer (see `--null-consumer` in the module's doc).
    null: NullOptions,
}

/// What the null consumer's queue and consumer are declared with (diagnostics only).
#[derive(Default)]
struct NullOptions {
    /// `x-queue-version` of the queue (none: the broker's default, version 1 on 3.10).
    queue_version: Option<i32>,
    /// `x-queue-mode` of the queue (`lazy`).
    queue_mode: Option<String>,
    /// Consume without acknowledgements (the broker's absolute ceiling; Parasol never does).
    no_ack: bool,
    /// Consumers of the queue, each on a channel of its own.
    consumers: usize,
    /// Publish persistent messages (delivery mode 2) instead of transient ones.
    persistent: bool,
    /// lapin's own executor and reactor instead of the service's tokio runtime.
    lapin_executor: bool,
}

const USAGE: &str = "usage: bench_ingest [--events N] [--hosts N] [--url AMQP_URL] \
     [--prefetch N] [--batch-size N] [--batch-timeout-ms N] [--ledger sqlite|postgres] [--pg-url POSTGRES_URL] \
     [--heartbeats] [--queue-type classic|quorum] \
     [--null-consumer [--queue-type classic|quorum|stream] [--queue-version N] \
     [--queue-mode lazy] [--no-ack] [--consumers N] [--persistent] [--lapin-executor]]";

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        events: 50_000,
        hosts: 10_000,
        url: "amqp://guest:guest@127.0.0.1:5672/%2f".into(),
        prefetch: AmqpSettings::default().prefetch,
        batch_size: AmqpSettings::default().batch_size,
        batch_timeout_ms: AmqpSettings::default().batch_timeout_ms,
        ledger: "sqlite".into(),
        pg_url: "postgres://postgres@127.0.0.1:5432/test".into(),
        heartbeats: false,
        null_consumer: false,
        queue_type: None,
        null: NullOptions {
            consumers: 1,
            ..NullOptions::default()
        },
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--events" => args.events = value()?.parse()?,
            "--hosts" => args.hosts = value()?.parse()?,
            "--url" => args.url = value()?,
            "--prefetch" => args.prefetch = value()?.parse()?,
            "--batch-size" => args.batch_size = value()?.parse()?,
            "--batch-timeout-ms" => args.batch_timeout_ms = value()?.parse()?,
            "--ledger" => args.ledger = value()?,
            "--pg-url" => args.pg_url = value()?,
            "--heartbeats" => args.heartbeats = true,
            "--null-consumer" => args.null_consumer = true,
            "--queue-version" => args.null.queue_version = Some(value()?.parse()?),
            "--queue-mode" => args.null.queue_mode = Some(value()?),
            "--queue-type" => args.queue_type = Some(value()?),
            "--no-ack" => args.null.no_ack = true,
            "--consumers" => args.null.consumers = value()?.parse()?,
            "--persistent" => args.null.persistent = true,
            "--lapin-executor" => args.null.lapin_executor = true,
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => anyhow::bail!("unknown flag {other}; {USAGE}"),
        }
    }
    anyhow::ensure!(args.hosts > 0, "--hosts must be positive");
    anyhow::ensure!(args.null.consumers > 0, "--consumers must be positive");
    anyhow::ensure!(
        match args.queue_type.as_deref() {
            None | Some("classic" | "quorum") => true,
            Some("stream") => args.null_consumer,
            Some(_) => false,
        },
        "--queue-type must be classic or quorum (or stream, with --null-consumer), not {:?}",
        args.queue_type
    );
    anyhow::ensure!(
        !(args.null.no_ack && args.queue_type.as_deref() == Some("stream")),
        "a stream is consumed with acknowledgements (--no-ack and --queue-type stream exclude each other)"
    );
    anyhow::ensure!(
        !(args.null.consumers > 1 && args.queue_type.as_deref() == Some("stream")),
        "every consumer of a stream reads all of it: --queue-type stream takes one consumer"
    );
    anyhow::ensure!(
        matches!(args.ledger.as_str(), "sqlite" | "postgres"),
        "--ledger must be sqlite or postgres, not {:?}",
        args.ledger
    );
    Ok(args)
}

/// The envelope of a host-state event for emulated host `h`, as the emulated hosts send it.
fn host_state(seq: usize, h: usize, vcpu: i64) -> Vec<u8> {
    let host = format!("bench-host-{h:05}");
    let inner = json!({
        "message_id": uuid::Uuid::new_v4().to_string(),
        "publisher_id": format!("parasol-host:{host}"),
        "event_type": "compute.host.state",
        "priority": "INFO",
        // Now, as oslo writes it: the ledger records a message under it (migration 0011).
        "timestamp": parasol::nova::oslo_timestamp(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as i64)
        ),
        "payload": {
            "host": host, "node": host,
            "compute_node_uuid": uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_DNS, host.as_bytes()).to_string(),
            "availability_zone": "nova", "up": !seq.is_multiple_of(97), "disabled": false,
            "inventory": {
                "VCPU": {"total": vcpu, "reserved": 0, "allocation_ratio": 4.0},
                "MEMORY_MB": {"total": 262144, "reserved": 512, "allocation_ratio": 1.0},
                "DISK_GB": {"total": 2000, "reserved": 0, "allocation_ratio": 1.0}
            },
            "usage": {"VCPU": 12.5, "MEMORY_MB": 100000}
        }
    });
    json!({"oslo.version": "2.0", "oslo.message": inner.to_string()})
        .to_string()
        .into_bytes()
}

struct Bench {
    handles: Handles,
    amqp: AmqpSettings,
    publisher: lapin::Channel,
    consumer: Option<(CancellationToken, tokio::task::JoinHandle<()>)>,
}

impl Bench {
    fn applied(&self) -> u64 {
        self.handles.ingest.to_json()["applied"]
            .as_u64()
            .unwrap_or(0)
    }

    fn start_consumer(&mut self) {
        let stop = CancellationToken::new();
        let task = tokio::spawn(run_notification_consumer(
            self.handles.ingest.clone(),
            self.handles.broker.clone(),
            self.amqp.clone(),
            stop.clone(),
        ));
        self.consumer = Some((stop, task));
    }

    async fn stop_consumer(&mut self) -> anyhow::Result<()> {
        if let Some((stop, task)) = self.consumer.take() {
            stop.cancel();
            task.await?;
        }
        Ok(())
    }

    async fn wait_connected(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.handles.broker.is_connected() {
            anyhow::ensure!(Instant::now() < deadline, "consumer did not connect");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }

    /// Publishes every body (confirmed by the broker); returns when all are confirmed.
    async fn publish(&self, bodies: &[Vec<u8>]) -> anyhow::Result<Duration> {
        let start = Instant::now();
        publish_all(&self.publisher, &self.amqp.exchange, bodies, false).await?;
        Ok(start.elapsed())
    }

    /// Waits until `target` events in total are applied; returns when.
    async fn applied_by(&self, target: u64) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + Duration::from_secs(600);
        while self.applied() < target {
            anyhow::ensure!(
                Instant::now() < deadline,
                "only {} of {target} applied",
                self.applied()
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Ok(Instant::now())
    }
}

/// CPU seconds this process (consumer, ledger writer, publisher) has used so far, from
/// `/proc/self/stat` (user + system, in the kernel's 100 Hz ticks).
fn cpu_s() -> f64 {
    stat_cpu_s(std::path::Path::new("/proc/self/stat"))
}

/// User + system CPU seconds of one `/proc/<pid>/stat` file (0 when it cannot be read).
fn stat_cpu_s(path: &std::path::Path) -> f64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn machine() -> String {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    format!("nproc {cores}, {cpu}, load average {load}")
}

/// CPU seconds the broker (the `beam.smp` process on this machine) has used so far; 0 when it
/// is not found (a broker elsewhere).
fn broker_cpu_s() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    for entry in dir.flatten() {
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if comm.trim() != "beam.smp" {
            continue;
        }
        return stat_cpu_s(&entry.path().join("stat"));
    }
    0.0
}

/// The broker's ceiling: `--events` host-state events queued on a queue of their own, then
/// drained by a consumer that only acknowledges (the service consumer's prefetch, batches of
/// ready deliveries up to `--batch-size`, one `multiple` ack each).
async fn null_consumer(args: &Args, id: &str) -> anyhow::Result<()> {
    let exchange = format!("bench.{id}.nova");
    let queue = format!("bench.{id}.null");
    let opts = &args.null;
    println!("# Parasol notification ingestion: the broker alone (a consumer that only acks)");
    println!(
        "scenario: {} compute.host.state events queued over RabbitMQ ({}), then drained",
        args.events,
        args.url.rsplit('@').next().unwrap_or("")
    );
    println!(
        "          prefetch {}, batches of ready deliveries up to {}, {}",
        args.prefetch,
        args.batch_size,
        if opts.no_ack {
            "no acknowledgements (no_ack: a diagnostic only)"
        } else {
            "one multiple ack each"
        }
    );
    println!(
        "          queue: x-queue-type {}, x-queue-version {}, x-queue-mode {}; {} consumer(s); {} messages; {}",
        args.queue_type.as_deref().unwrap_or("(default)"),
        opts.queue_version
            .map_or("(default)".to_string(), |v| v.to_string()),
        opts.queue_mode.as_deref().unwrap_or("(default)"),
        opts.consumers,
        if opts.persistent {
            "persistent"
        } else {
            "transient"
        },
        if opts.lapin_executor {
            "lapin's own executor"
        } else {
            "lapin on tokio (as the service)"
        }
    );
    println!("machine:  {}", machine());
    let connect = |name: &'static str| {
        let url = args.url.clone();
        let lapin_executor = opts.lapin_executor;
        async move {
            if lapin_executor {
                Connection::connect(&url, ConnectionProperties::default()).await
            } else {
                parasol::amqp::connect(&url, name).await
            }
        }
    };
    let conn = connect("bench-null-publisher").await?;
    let publisher = conn.create_channel().await?;
    publisher
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let amqp = AmqpSettings {
        exchange: exchange.clone(),
        ..AmqpSettings::default()
    };
    declare_nova_exchange(&publisher, &amqp).await?;
    let durable = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    let mut queue_args = FieldTable::default();
    if let Some(v) = opts.queue_version {
        queue_args.insert("x-queue-version".into(), AMQPValue::LongInt(v));
    }
    if let Some(mode) = &opts.queue_mode {
        queue_args.insert(
            "x-queue-mode".into(),
            AMQPValue::LongString(mode.as_str().into()),
        );
    }
    if let Some(kind) = &args.queue_type {
        queue_args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString(kind.as_str().into()),
        );
    }
    publisher.queue_declare(&queue, durable, queue_args).await?;
    publisher
        .queue_bind(
            &queue,
            &exchange,
            HOST_STATE,
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let bodies: Vec<Vec<u8>> = (0..args.events)
        .map(|i| host_state(i, i % args.hosts, 32 + 32 * (i % 3) as i64))
        .collect();
    let start = Instant::now();
    publish_all(&publisher, &exchange, &bodies, opts.persistent).await?;
    println!(
        "backlog queued:    {} events in {:.2} s; draining",
        args.events,
        start.elapsed().as_secs_f64()
    );
    drop(bodies);

    // The consumers on a connection of their own, as the service's is.
    let consumer_conn = connect("bench-null-consumer").await?;
    let start = Instant::now();
    let cpu = cpu_s();
    let broker_cpu = broker_cpu_s();
    let received = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for c in 0..opts.consumers {
        let ch = consumer_conn.create_channel().await?;
        ch.basic_qos(args.prefetch, BasicQosOptions::default())
            .await?;
        // A stream is read from an offset: the backlog is its whole content.
        let mut consume_args = FieldTable::default();
        if args.queue_type.as_deref() == Some("stream") {
            consume_args.insert(
                "x-stream-offset".into(),
                AMQPValue::LongString("first".into()),
            );
        }
        let consumer = ch
            .basic_consume(
                &queue,
                &format!("bench-{id}-null-{c}"),
                BasicConsumeOptions {
                    no_ack: opts.no_ack,
                    ..Default::default()
                },
                consume_args,
            )
            .await?;
        let (received, events, batch_size, no_ack) =
            (received.clone(), args.events, args.batch_size, opts.no_ack);
        tasks.push(tokio::spawn(async move {
            let mut batches = consumer.ready_chunks(batch_size);
            let (mut bytes, mut acks) = (0usize, 0usize);
            while received.load(std::sync::atomic::Ordering::Relaxed) < events {
                let Some(batch) = batches.next().await else {
                    anyhow::bail!("the broker closed the consumer");
                };
                let mut last = None;
                let n = batch.len();
                for delivery in batch {
                    let delivery = delivery?;
                    bytes += delivery.data.len();
                    last = Some(delivery);
                }
                if let Some(last) = last {
                    if !no_ack {
                        last.acker.ack(BasicAckOptions { multiple: true }).await?;
                    }
                    acks += 1;
                }
                received.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            }
            Ok::<_, anyhow::Error>((bytes, acks))
        }));
    }
    // Each consumer stops once the total is reached; one that waits for a delivery that no
    // longer comes is ended by closing the connection.
    let deadline = Instant::now() + Duration::from_secs(600);
    while received.load(std::sync::atomic::Ordering::Relaxed) < args.events {
        anyhow::ensure!(Instant::now() < deadline, "drain did not finish");
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    let drain_s = start.elapsed().as_secs_f64();
    let drain_cpu = cpu_s() - cpu;
    let drain_broker_cpu = broker_cpu_s() - broker_cpu;
    let received = received.load(std::sync::atomic::Ordering::Relaxed);
    let _ = consumer_conn.close(200, "bench done").await;
    let (mut bytes, mut acks) = (0, 0);
    for task in tasks {
        if let Ok(Ok((b, a))) = task.await {
            bytes += b;
            acks += a;
        }
    }
    println!(
        "backlog drain:     {} events in {:.2} s = {:.0} events/s ({} batches, {:.0} bytes/event; consumer start included)",
        received,
        drain_s,
        received as f64 / drain_s,
        acks,
        bytes as f64 / received.max(1) as f64
    );
    println!(
        "                   {:.2} CPU s in this process = {:.1} µs CPU/event; the broker {:.2} CPU s = {:.1} µs/event",
        drain_cpu,
        drain_cpu * 1e6 / received.max(1) as f64,
        drain_broker_cpu,
        drain_broker_cpu * 1e6 / received.max(1) as f64
    );
    publisher
        .queue_delete(&queue, QueueDeleteOptions::default())
        .await?;
    publisher
        .exchange_delete(&exchange, Default::default())
        .await?;
    conn.close(200, "bench done").await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let id = uuid::Uuid::new_v4().simple().to_string();
    if args.null_consumer {
        return null_consumer(&args, &id).await;
    }
    let dir = tempfile::tempdir()?;
    let mut settings = Settings::default();
    // A fresh PostgreSQL database of its own, dropped at the end.
    let pg_db = format!("bench_ingest_{id}");
    let pg_base = args
        .pg_url
        .rsplit_once('/')
        .map(|(b, _)| b.to_string())
        .unwrap_or_else(|| args.pg_url.clone());
    settings.ledger.url = if args.ledger == "postgres" {
        use sqlx::Connection;
        let mut admin = sqlx::PgConnection::connect(&args.pg_url).await?;
        sqlx::query(&format!("CREATE DATABASE {pg_db}"))
            .execute(&mut admin)
            .await?;
        format!("{pg_base}/{pg_db}")
    } else {
        format!("sqlite://{}", dir.path().join("ledger.db").display())
    };
    settings.amqp = AmqpSettings {
        url: args.url.clone(),
        exchange: format!("bench.{id}.nova"),
        queue: format!("bench.{id}.notifications"),
        dead_letter: format!("bench.{id}.dead_letter"),
        fanout_exchange: format!("bench.{id}.scheduler_fanout"),
        prefetch: args.prefetch,
        batch_size: args.batch_size,
        batch_timeout_ms: args.batch_timeout_ms,
        queue_type: match args.queue_type.as_deref() {
            Some("quorum") => QueueType::Quorum,
            _ => QueueType::Classic,
        },
        ..AmqpSettings::default()
    };
    println!("# Parasol notification ingestion (issue 3)");
    println!(
        "scenario: compute.host.state events over RabbitMQ ({}) into a fresh {} ledger",
        args.url.rsplit('@').next().unwrap_or(""),
        if args.ledger == "postgres" {
            "PostgreSQL"
        } else {
            "SQLite (WAL)"
        }
    );
    println!(
        "          {} emulated hosts register from cold, then {} updates live, then {} from a backlog{}",
        args.hosts,
        args.events,
        args.events,
        if args.heartbeats {
            " (updates: heartbeats, profile unchanged)"
        } else {
            " (updates: VCPU total changed)"
        }
    );
    println!(
        "          prefetch {} per queue, batch_size {} per transaction (gathered for up to {} ms), publisher confirms on, {} queue",
        args.prefetch,
        args.batch_size,
        args.batch_timeout_ms,
        settings.amqp.queue_type.as_str()
    );
    println!("machine:  {}", machine());

    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let app = Application::build_with(settings.clone(), listener, Arc::new(SystemClock)).await?;
    let handles = app.handles().clone();
    let conn = Connection::connect(&args.url, ConnectionProperties::default()).await?;
    let publisher = conn.create_channel().await?;
    publisher
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    declare_nova_exchange(&publisher, &settings.amqp).await?;
    let mut bench = Bench {
        handles,
        amqp: settings.amqp.clone(),
        publisher,
        consumer: None,
    };
    bench.start_consumer();
    bench.wait_connected().await?;

    let cold: Vec<Vec<u8>> = (0..args.hosts).map(|h| host_state(h, h, 64)).collect();
    let start = Instant::now();
    let published = bench.publish(&cold).await?;
    let done = bench.applied_by(args.hosts as u64).await?;
    let registered = bench.handles.scheduler.ledger().host_ids().await?.len();
    anyhow::ensure!(registered == args.hosts, "{registered} hosts registered");
    let cold_s = (done - start).as_secs_f64();
    println!(
        "cold registration: {} hosts in {:.2} s ({:.0} hosts/s; publishing took {:.2} s)",
        args.hosts,
        cold_s,
        args.hosts as f64 / cold_s,
        published.as_secs_f64()
    );

    // Each update changes the host's VCPU total (a re-registration), or with --heartbeats
    // repeats the profile it registered with (only liveness and last-seen change).
    let updates = |salt: usize| -> Vec<Vec<u8>> {
        (0..args.events)
            .map(|i| {
                let vcpu = if args.heartbeats {
                    64
                } else {
                    32 + 32 * ((i + salt) % 3) as i64
                };
                host_state(i + salt, i % args.hosts, vcpu)
            })
            .collect()
    };
    let live = updates(1);
    let base = bench.applied();
    let start = Instant::now();
    let published = bench.publish(&live).await?;
    let done = bench.applied_by(base + args.events as u64).await?;
    let live_s = (done - start).as_secs_f64();
    println!(
        "sustained (live):  {} events in {:.2} s = {:.0} events/s (publishing took {:.2} s)",
        args.events,
        live_s,
        args.events as f64 / live_s,
        published.as_secs_f64()
    );

    bench.stop_consumer().await?;
    let backlog = updates(2);
    let queued = bench.publish(&backlog).await?;
    println!(
        "backlog queued:    {} events in {:.2} s (consumer stopped); draining",
        args.events,
        queued.as_secs_f64()
    );
    let base = bench.applied();
    let start = Instant::now();
    let cpu = cpu_s();
    bench.start_consumer();
    let done = bench.applied_by(base + args.events as u64).await?;
    let drain_s = (done - start).as_secs_f64();
    let drain_cpu = cpu_s() - cpu;
    println!(
        "backlog drain:     {} events in {:.2} s = {:.0} events/s (consumer start included)",
        args.events,
        drain_s,
        args.events as f64 / drain_s
    );
    println!(
        "                   {:.2} CPU s in this process = {:.0} µs CPU/event (the broker's not included)",
        drain_cpu,
        drain_cpu * 1e6 / args.events as f64
    );
    let counts = bench.handles.ingest.to_json();
    println!("outcomes: {counts}");
    bench.stop_consumer().await?;

    // Everything the bench and its consumers declared: the exchanges first (the fanout
    // exchange auto-deletes once its last queue goes, so deleting it afterwards could fail),
    // then the queues, with the consumers' fanout queues (one per start), which would
    // otherwise stay until they expire.
    for exchange in [
        &bench.amqp.fanout_exchange,
        &bench.amqp.exchange,
        &bench.amqp.dead_letter,
    ] {
        bench
            .publisher
            .exchange_delete(exchange, Default::default())
            .await?;
    }
    let mut queues = vec![bench.amqp.queue.clone(), bench.amqp.dead_letter.clone()];
    queues.extend(bench.handles.broker.fanout_queues());
    for queue in &queues {
        bench
            .publisher
            .queue_delete(queue, QueueDeleteOptions::default())
            .await?;
    }
    conn.close(200, "bench done").await?;
    if args.ledger == "postgres" {
        use sqlx::Connection;
        let mut admin = sqlx::PgConnection::connect(&args.pg_url).await?;
        sqlx::query(&format!("DROP DATABASE {pg_db} WITH (FORCE)"))
            .execute(&mut admin)
            .await?;
    }
    Ok(())
}

/// Publishes every body to `exchange` with the host-state routing key; returns once the broker
/// confirmed them all.
async fn publish_all(
    publisher: &lapin::Channel,
    exchange: &str,
    bodies: &[Vec<u8>],
    persistent: bool,
) -> anyhow::Result<()> {
    let mut confirms = Vec::with_capacity(bodies.len());
    for body in bodies {
        let mut props = BasicProperties::default().with_content_type("application/json".into());
        if persistent {
            props = props.with_delivery_mode(2);
        }
        confirms.push(
            publisher
                .basic_publish(
                    exchange,
                    HOST_STATE,
                    BasicPublishOptions::default(),
                    body,
                    props,
                )
                .await?,
        );
    }
    for c in confirms {
        anyhow::ensure!(c.await?.is_ack(), "broker refused a message");
    }
    Ok(())
}
