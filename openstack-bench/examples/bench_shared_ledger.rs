//! Several `parasol serve` processes sharing one PostgreSQL ledger (issue 15's "PostgreSQL,
//! two processes"): a fresh database with `--hosts` hosts, `--processes` real service processes
//! on it, and `--concurrency` callers sending `select_destinations` over HTTP (spread over the
//! processes in turn) or over Nova's RPC (one topic queue, the processes competing on it as
//! several nova-scheduler processes do). Prints decisions/s, latency, the services' own CPU per
//! decision and PostgreSQL's (from `/proc/<pid>/stat`), the load average, and then checks the
//! ledger: no host over its capacity, one allocation per placed instance, no failed call.
//!
//! ```sh
//! cargo build --profile perf -p parasol -p openstack-bench --bin parasol --example bench_shared_ledger
//! target/perf/examples/bench_shared_ledger --transport http --processes 2 --hosts 1000 --calls 20000 --concurrency 64
//! target/perf/examples/bench_shared_ledger --transport rpc --processes 2 --hosts 1000 --calls 20000 --concurrency 64
//! ```

use clap::Parser;
use hdrhistogram::Histogram;
use lapin::options::QueueDeleteOptions;
use parasol::clock::{Clock, SystemClock};
use parasol::ledger::{HostRegistration, Ledger};
use parasol_rpc_client::RpcClient;
use serde_json::{json, Value};
use sqlx::Connection;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value_t = 2)]
    processes: usize,
    #[arg(long, default_value_t = 1000)]
    hosts: usize,
    #[arg(long, default_value_t = 20000)]
    calls: u64,
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    #[arg(long, default_value = "apsr")]
    backend: String,
    #[arg(long, default_value = "http", value_parser = ["http", "rpc"])]
    transport: String,
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    amqp: String,
    /// PostgreSQL server where a fresh database is created (and dropped afterwards).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/test")]
    pg: String,
    /// The `parasol` binary; default: the one built beside this example.
    #[arg(long)]
    parasol_bin: Option<PathBuf>,
    /// Log every statement of the bench's database (`log_min_duration_statement = 0` on that
    /// database only) to PostgreSQL's server log, to count them per decision.
    #[arg(long)]
    log_statements: bool,
    /// Log the plan of every statement of the bench's database (`auto_explain`, loaded for that
    /// database's sessions only) to PostgreSQL's server log.
    #[arg(long)]
    log_plans: bool,
    /// SQL run on the bench's database after the migrations and before the hosts register, to
    /// try a change of the schema, a trigger or a setting without rebuilding.
    #[arg(long)]
    setup_sql: Option<PathBuf>,
}

/// PostgreSQL's counters for one database and its tables (`pg_stat_database`,
/// `pg_stat_user_tables`), to report what the database did per decision.
#[derive(Default)]
struct PgStats {
    /// (counter, value) of the database.
    database: Vec<(String, i64)>,
    /// (table.counter, value).
    tables: Vec<(String, i64)>,
}

const DATABASE_COUNTERS: [&str; 9] = [
    "xact_commit",
    "xact_rollback",
    "blks_hit",
    "blks_read",
    "tup_returned",
    "tup_fetched",
    "tup_inserted",
    "tup_updated",
    "tup_deleted",
];

const TABLE_COUNTERS: [&str; 7] = [
    "seq_scan",
    "seq_tup_read",
    "idx_scan",
    "idx_tup_fetch",
    "n_tup_ins",
    "n_tup_upd",
    "n_tup_del",
];

/// Reads the counters of database `name` (through `admin`, another database) and of its tables
/// (through `conn`, on that database).
async fn pg_stats(
    admin: &mut sqlx::PgConnection,
    conn: &mut sqlx::PgConnection,
    name: &str,
) -> anyhow::Result<PgStats> {
    use sqlx::Row;
    let mut stats = PgStats::default();
    let cols = DATABASE_COUNTERS.join(", ");
    let row = sqlx::query(&format!(
        "SELECT {cols} FROM pg_stat_database WHERE datname = $1"
    ))
    .bind(name)
    .fetch_one(&mut *admin)
    .await?;
    for (i, c) in DATABASE_COUNTERS.iter().enumerate() {
        stats.database.push((
            c.to_string(),
            row.try_get::<Option<i64>, _>(i)?.unwrap_or(0),
        ));
    }
    let cols = TABLE_COUNTERS
        .iter()
        .map(|c| format!("coalesce({c}, 0)::bigint"))
        .collect::<Vec<_>>()
        .join(", ");
    let rows = sqlx::query(&format!(
        "SELECT relname::text, {cols} FROM pg_stat_user_tables ORDER BY relname"
    ))
    .fetch_all(&mut *conn)
    .await?;
    for row in rows {
        let table: String = row.try_get(0)?;
        for (i, c) in TABLE_COUNTERS.iter().enumerate() {
            stats
                .tables
                .push((format!("{table}.{c}"), row.try_get::<i64, _>(i + 1)?));
        }
    }
    Ok(stats)
}

/// Prints what changed between two readings, per decision; counters that did not move are left out.
fn print_pg_stats(before: &PgStats, after: &PgStats, decisions: u64) {
    let per = |a: i64, b: i64| (a - b) as f64 / decisions.max(1) as f64;
    let line = |pairs: &[(String, i64)], old: &[(String, i64)]| {
        pairs
            .iter()
            .filter_map(|(k, v)| {
                let b = old.iter().find(|(o, _)| o == k).map_or(0, |(_, v)| *v);
                (*v != b).then(|| format!("{k}={:.2}", per(*v, b)))
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!(
        "postgres_per_decision database: {}",
        line(&after.database, &before.database)
    );
    println!(
        "postgres_per_decision tables: {}",
        line(&after.tables, &before.tables)
    );
}

/// A service process, killed when dropped.
struct Service {
    child: Child,
    base: String,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// utime + stime of a process, in clock ticks (fields 14 and 15 of `/proc/<pid>/stat`).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after it start past its ')'.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// CPU ticks of every process named `postgres` (the server and its backends).
fn postgres_ticks() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|c| c.trim() == "postgres")
                .unwrap_or(false)
        })
        .filter_map(cpu_ticks)
        .sum()
}

/// CPU ticks of each backend of database `name` (the services' connections, the bench's own),
/// by pid: PostgreSQL's CPU for this run alone, whatever else the server does meanwhile.
async fn database_backend_ticks(
    admin: &mut sqlx::PgConnection,
    name: &str,
) -> anyhow::Result<std::collections::HashMap<u32, u64>> {
    let pids: Vec<i32> = sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE datname = $1")
        .bind(name)
        .fetch_all(admin)
        .await?;
    Ok(pids
        .into_iter()
        .filter_map(|pid| Some((pid as u32, cpu_ticks(pid as u32)?)))
        .collect())
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

fn spec() -> Value {
    json!({"nova_object.name": "RequestSpec", "nova_object.namespace": "nova", "nova_object.version": "1.15",
        "nova_object.data": {"num_instances": 1, "project_id": "p", "user_id": "u",
            "flavor": {"nova_object.name": "Flavor", "nova_object.namespace": "nova", "nova_object.version": "1.2",
                "nova_object.data": {"id": 1, "name": "m1.tiny", "flavorid": "1", "memory_mb": 512, "vcpus": 1,
                    "root_gb": 1, "ephemeral_gb": 0, "swap": 0}}}})
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.processes >= 1, "--processes must be at least 1");
    let bin = match &args.parasol_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe()?
            .parent()
            .and_then(|examples| examples.parent())
            .map(|profile| profile.join("parasol"))
            .ok_or_else(|| anyhow::anyhow!("cannot find the parasol binary; give --parasol-bin"))?,
    };
    anyhow::ensure!(bin.exists(), "{} does not exist", bin.display());

    let id = uuid::Uuid::new_v4().simple().to_string();
    let name = format!("parasol_bench_{id}");
    let mut admin = sqlx::PgConnection::connect(&args.pg).await?;
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await?;
    let base = args.pg.rsplit_once('/').map(|(b, _)| b).unwrap_or(&args.pg);
    let url = format!("{base}/{name}");
    if args.log_statements {
        sqlx::query(&format!(
            "ALTER DATABASE {name} SET log_min_duration_statement = 0"
        ))
        .execute(&mut admin)
        .await?;
        println!("logging every statement of database {name}");
    }
    if args.log_plans {
        for set in [
            "session_preload_libraries = 'auto_explain'",
            "auto_explain.log_min_duration = 0",
            "auto_explain.log_nested_statements = on",
        ] {
            sqlx::query(&format!("ALTER DATABASE {name} SET {set}"))
                .execute(&mut admin)
                .await?;
        }
        println!("logging the plan of every statement of database {name}");
    }
    let result = run(&args, &bin, &id, &url, &name, &mut admin).await;
    let _ = sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .execute(&mut admin)
        .await;
    result
}

async fn run(
    args: &Args,
    bin: &std::path::Path,
    id: &str,
    url: &str,
    name: &str,
    admin: &mut sqlx::PgConnection,
) -> anyhow::Result<()> {
    let ledger = Ledger::connect(url, 8).await?;
    ledger.migrate().await?;
    if let Some(file) = &args.setup_sql {
        let sql = std::fs::read_to_string(file)?;
        let mut conn = sqlx::PgConnection::connect(url).await?;
        sqlx::raw_sql(&sql).execute(&mut conn).await?;
        println!("ran {} on database {name}", file.display());
    }
    for i in 0..args.hosts {
        let host = format!("compute{i:05}");
        let uuid = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_DNS, host.as_bytes()).to_string();
        let reg = HostRegistration::simple(&host, &uuid, 64, 262_144, 2_000);
        ledger.register_host(&reg, SystemClock.now_ms()).await?;
    }

    let rpc = args.transport == "rpc";
    let exchange = format!("parasol_bench_{id}");
    let topic = format!("scheduler_bench_{id}");
    let notifications = format!("parasol.notifications.bench_{id}");
    let dir = tempfile::tempdir()?;
    let mut services = Vec::new();
    for p in 0..args.processes {
        let port = free_port()?;
        let amqp = if rpc {
            format!(
                "[amqp]\nurl = \"{}\"\nexchange = \"{exchange}\"\nqueue = \"{notifications}\"\n\
                 [rpc]\nenabled = true\ntopic = \"{topic}\"\nhost = \"bench{p}\"\n",
                args.amqp
            )
        } else {
            "[amqp]\nurl = \"\"\n".to_string()
        };
        let file = dir.path().join(format!("parasol{p}.toml"));
        std::fs::write(
            &file,
            format!(
                "[server]\nhost = \"127.0.0.1\"\nport = {port}\n[ledger]\nurl = \"{url}\"\n\
                 [scheduler]\nbackend = \"{}\"\nseed = {}\n[policy]\nhost_timeout_s = 3600\n{amqp}",
                args.backend,
                p + 1
            ),
        )?;
        let child = Command::new(bin)
            .args(["--config", file.to_str().unwrap_or_default(), "serve"])
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        services.push(Service {
            child,
            base: format!("http://127.0.0.1:{port}"),
        });
    }
    let http = reqwest::Client::new();
    for s in &services {
        let deadline = Instant::now() + Duration::from_secs(60);
        while http
            .get(format!("{}/healthz", s.base))
            .send()
            .await
            .is_err()
        {
            anyhow::ensure!(Instant::now() < deadline, "{} did not come up", s.base);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let client = if rpc {
        let client = Arc::new(RpcClient::connect(&args.amqp, &exchange).await?);
        // Every process answers its own host queue before the run starts.
        for p in 0..args.processes {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let ping =
                    client.call_message("ping", json!({"arg": 0}), "1.1", Some("baseapi"), None);
                let to = format!("{topic}.bench{p}");
                if client
                    .call_with(&to, &ping, Duration::from_millis(300))
                    .await
                    .is_ok()
                {
                    break;
                }
                anyhow::ensure!(Instant::now() < deadline, "bench{p} does not answer RPC");
            }
        }
        Some(client)
    } else {
        None
    };

    println!(
        "# select_destinations on one PostgreSQL ledger shared by several processes (issue 15)"
    );
    println!(
        "processes={} transport={} backend={} hosts={} calls={} concurrency={} flavor=1 VCPU/512 MB/1 GB, 1 instance per call",
        args.processes, args.transport, args.backend, args.hosts, args.calls, args.concurrency
    );
    let pids: Vec<u32> = services.iter().map(|s| s.child.id()).collect();
    let mut stats_conn = sqlx::PgConnection::connect(url).await?;
    // Counters are flushed by each backend at most once a second: let startup's settle.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stats_before = pg_stats(admin, &mut stats_conn, name).await?;
    let service_before: u64 = pids.iter().filter_map(|p| cpu_ticks(*p)).sum();
    let pg_before = postgres_ticks();
    let db_before = database_backend_ticks(&mut *admin, name).await?;
    let next = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let placed = Arc::new(AtomicU64::new(0));
    let bases: Arc<Vec<String>> = Arc::new(services.iter().map(|s| s.base.clone()).collect());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..args.concurrency {
        let (client, next, failures, placed, topic, http, bases) = (
            client.clone(),
            next.clone(),
            failures.clone(),
            placed.clone(),
            topic.clone(),
            http.clone(),
            bases.clone(),
        );
        let calls = args.calls;
        tasks.push(tokio::spawn(async move {
            let mut h = Histogram::<u64>::new(3).expect("histogram");
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= calls {
                    break;
                }
                let a = json!({"spec_obj": spec(), "instance_uuids": [uuid::Uuid::new_v4().to_string()],
                               "return_objects": true, "return_alternates": true});
                let t = Instant::now();
                let ok = match &client {
                    Some(client) => {
                        let m = client.call_message("select_destinations", a, "4.5", None, Some(60));
                        matches!(client.call_with(&topic, &m, Duration::from_secs(60)).await,
                                 Ok(r) if r.failure.is_none())
                    }
                    None => {
                        let base = &bases[n as usize % bases.len()];
                        match http
                            .post(format!("{base}/v1/select_destinations"))
                            .json(&a)
                            .send()
                            .await
                        {
                            Ok(r) => r.status().is_success(),
                            Err(_) => false,
                        }
                    }
                };
                if ok {
                    let _ = h.record(t.elapsed().as_micros() as u64);
                    placed.fetch_add(1, Ordering::Relaxed);
                } else {
                    failures.fetch_add(1, Ordering::Relaxed);
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
    let service_ticks = pids.iter().filter_map(|p| cpu_ticks(*p)).sum::<u64>() - service_before;
    let pg_ticks = postgres_ticks().saturating_sub(pg_before);
    // A backend that connected during the run counts whole; one that closed is missed.
    let db_ticks: u64 = database_backend_ticks(&mut *admin, name)
        .await?
        .iter()
        .map(|(pid, t)| t.saturating_sub(db_before.get(pid).copied().unwrap_or(0)))
        .sum();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let ok = hist.len();
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    let per = |ticks: u64| ticks as f64 / ticks_per_second() * 1e6 / ok.max(1) as f64;
    println!(
        "elapsed_s={elapsed:.2} answered={ok} failures={}",
        failures.load(Ordering::Relaxed)
    );
    println!("throughput_calls_per_s={:.0}", ok as f64 / elapsed);
    println!(
        "latency_ms p50={:.2} p90={:.2} p99={:.2} max={:.2}",
        ms(0.5),
        ms(0.9),
        ms(0.99),
        hist.max() as f64 / 1000.0
    );
    println!(
        "service_cpu_us_per_decision={:.0} (all {} processes) postgres_cpu_us_per_decision={:.0} \
         (of which this database's backends {:.0})",
        per(service_ticks),
        args.processes,
        per(pg_ticks),
        per(db_ticks)
    );
    println!("loadavg={}", load.trim());
    for (p, s) in services.iter().enumerate() {
        let stats: Value = http
            .get(format!("{}/v1/stats", s.base))
            .send()
            .await?
            .json()
            .await?;
        let served: u64 = stats["backends"]
            .as_object()
            .map(|b| b.values().filter_map(|v| v["requests"].as_u64()).sum())
            .unwrap_or(0);
        println!("process{p}_requests={served}");
    }

    // The ledger after the run, read back from the database by a fresh connection.
    drop(services);
    // The services' backends flush their counters as they exit.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stats_after = pg_stats(admin, &mut stats_conn, name).await?;
    print_pg_stats(&stats_before, &stats_after, ok);
    drop(stats_conn);
    let after = Ledger::connect(url, 2).await?;
    after.reload_all().await?;
    let hosts = after.read_hosts().await?;
    let over = hosts
        .iter()
        .filter(|h| !h.used.fits_within(h.usable()))
        .count();
    let instances: i64 = hosts.iter().map(|h| h.num_instances).sum();
    let allocations = after.allocation_count().await?;
    if let Some(client) = client {
        if let Ok(conn) = parasol::amqp::connect(&args.amqp, "bench-cleanup").await {
            if let Ok(ch) = conn.create_channel().await {
                let mut queues = vec![topic.clone(), notifications.clone()];
                queues.extend((0..args.processes).map(|p| format!("{topic}.bench{p}")));
                for q in queues {
                    let _ = ch.queue_delete(&q, QueueDeleteOptions::default()).await;
                }
            }
        }
        client.close().await;
    }
    println!(
        "check: oversubscribed_hosts={over} allocations={allocations} instances_counted={instances}"
    );
    let answered = placed.load(Ordering::Relaxed);
    println!(
        "check: placed {answered} + failed {} = {} calls",
        failures.load(Ordering::Relaxed),
        args.calls
    );
    Ok(())
}
