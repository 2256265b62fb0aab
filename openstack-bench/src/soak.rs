//! `openstack-bench soak`: a long run with faults (issue 40). Two `parasol serve` processes
//! share one PostgreSQL ledger, one notification queue and one RPC topic; the emulated hosts
//! of `hosts` register and report over RabbitMQ; an open-loop driver calls select_destinations
//! at a fixed Poisson rate, split between HTTP (alternating between the two processes, as a
//! load balancer would, and to the other process when one refuses the connection) and Nova's
//! scheduler RPC; every placed instance boots on its host and is deleted at the end of its
//! lifetime. Every `--fault-interval-s` one fault, in turn:
//! - `kill`: SIGKILL of the second process, restarted on the same port (the first is never
//!   killed, so that its memory can be compared over the whole run);
//! - `broker`: `rabbitmqctl close_connection` on the two processes' own connections (found by
//!   their local ports; the broker is shared with other users and nothing else is touched);
//! - `postgres`: `pg_terminate_backend` on every session of the soak's own database;
//! - `malformed`: 10,000 malformed notifications on the notification exchange.
//!
//! At the end the hosts stop, the queue drains, and the ledger (read back with `psql`) is
//! compared with the hosts' own books: every instance a host runs must have its allocation
//! (else it is *lost*), every host's usage must equal its books, and no host may be over its
//! capacity. The service's own gauge `parasol_oversubscribed_hosts` is sampled throughout.

use crate::hosts::Fleet;
use crate::notify::Notifier;
use crate::service::{anon_huge_kb, free_port, rss_kb, Service, ServiceConfig};
use crate::wire;
use crate::workload::{self, Dataset, Request};
use anyhow::Context;
use hdrhistogram::Histogram;
use parasol_rpc_client::RpcClient;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// One kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fault {
    Kill,
    Broker,
    Postgres,
    Malformed,
}

/// What one soak does.
#[derive(Clone, Debug, Serialize)]
pub struct SoakSpec {
    pub hosts: usize,
    pub dataset: String,
    /// Decisions per second asked for (open loop, Poisson), unless `find_rates` finds one.
    pub rate: f64,
    /// Rates tried first, without faults, `calibrate_s` each, highest first: the soak runs at
    /// the first this machine sustains (see [`CalibrationStep::sustained`]).
    pub find_rates: Vec<f64>,
    pub calibrate_s: u64,
    pub duration_s: u64,
    pub fault_interval_s: u64,
    /// In this order, repeated; empty: no faults (the rate calibration).
    pub faults: Vec<Fault>,
    /// Mean instance lifetime, seconds.
    pub lifetime_s: f64,
    /// Share of calls made over HTTP; the rest go over Nova's RPC.
    pub http_share: f64,
    pub concurrency: usize,
    pub backend: String,
    pub workers: usize,
    pub seed: u64,
    pub heartbeat_s: f64,
    /// `[scheduler] claim_ttl_s` of both processes: how long a claim whose answer never
    /// reached its caller (a killed process, a closed connection) holds capacity.
    pub claim_ttl_s: u64,
    /// Malformed notifications per `malformed` fault.
    pub burst: usize,
    /// The RSS baseline is taken this many seconds into the run (issue 40: at 5 minutes).
    pub rss_baseline_s: u64,
    /// PostgreSQL server, without a database: `postgres://USER@HOST:PORT`.
    pub pg: String,
    pub amqp_url: String,
    #[serde(skip)]
    pub parasol: PathBuf,
    #[serde(skip)]
    pub out_dir: PathBuf,
    pub run_id: String,
    pub keep_database: bool,
}

/// What the callers saw.
#[derive(Default)]
struct Tally {
    issued: AtomicU64,
    http_placed: AtomicU64,
    http_no_valid_host: AtomicU64,
    http_4xx: AtomicU64,
    http_5xx: AtomicU64,
    /// No HTTP answer (reset mid-call, or both processes refused the connection).
    http_unanswered: AtomicU64,
    http_failovers: AtomicU64,
    rpc_placed: AtomicU64,
    rpc_no_valid_host: AtomicU64,
    /// Answered with a failure other than NoValidHost (the RPC's 5xx).
    rpc_failure: AtomicU64,
    rpc_unanswered: AtomicU64,
    /// Answered with a host the fleet does not have.
    unknown_host: AtomicU64,
    /// Boots handed to the hosts.
    handed: AtomicU64,
}

/// The soak's figures, written to `report.json` and summarised in `report.md`.
#[derive(Debug, Serialize)]
pub struct SoakReport {
    pub spec: SoakSpec,
    pub started_utc: String,
    pub load_average_at_start: String,
    /// The no-fault steps that chose the rate, and the rate the soak ran at.
    pub calibration: Vec<CalibrationStep>,
    pub rate: f64,
    pub load_average_at_end: String,
    pub issued: u64,
    /// Issued over the time until the last call was answered.
    pub achieved_rate: f64,
    pub release_late_ms_p99: f64,
    pub latency_ms: [f64; 4],
    pub answered: u64,
    pub placed: u64,
    pub no_valid_host: u64,
    pub http_4xx: u64,
    pub http_5xx: u64,
    pub rpc_failure: u64,
    pub unanswered: u64,
    pub http_failovers: u64,
    pub unknown_host: u64,
    pub booted: u64,
    pub deleted_by_driver: u64,
    pub violations: u64,
    pub running_at_end: usize,
    /// Instances a host runs (answered with that host, booted, not deleted) without an
    /// allocation in the ledger at the end.
    pub lost: usize,
    /// Allocations in the ledger of instances no host runs at the end.
    pub ledger_extra: usize,
    /// Hosts whose ledger usage differs from their books, per process's `/v1/hosts`.
    pub mismatch_hosts: [usize; 2],
    pub ledger_equals_books: bool,
    /// Seconds after the hosts stopped until the checks above held (or the deadline).
    pub settle_s: f64,
    /// Hosts over capacity in any class in the ledger's tables at the end.
    pub oversubscribed_in_ledger: u64,
    /// Highest `parasol_oversubscribed_hosts` either process reported while sampled.
    pub oversubscribed_gauge_max: i64,
    pub rss_kb_a_baseline: u64,
    /// When the calls ended (before the checks).
    pub rss_kb_a_end: u64,
    pub rss_kb_b_end: u64,
    pub rss_growth_pct_a: f64,
    pub faults: Vec<FaultEvent>,
    pub malformed_sent: u64,
    pub notifications_sent: u64,
    pub notifications_failed: u64,
    pub dead_letters_in_ledger: u64,
}

/// One no-fault step of the rate search.
#[derive(Clone, Debug, Serialize)]
pub struct CalibrationStep {
    pub rate: f64,
    pub achieved: f64,
    pub release_late_ms_p99: f64,
    pub latency_ms_p99: f64,
    /// Unanswered calls, 5xx and RPC failures.
    pub failed: u64,
    pub load_average: String,
    /// Issued at ≥ 97 % of the rate asked, released ≤ 100 ms late (p99), answered within 1 s
    /// (p99), nothing failed.
    pub sustained: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct FaultEvent {
    pub t_s: f64,
    pub fault: Fault,
    pub detail: String,
}

/// The two processes' fixed parts: configuration, folders, ports, environment.
struct Pair {
    bin: PathBuf,
    cfg: ServiceConfig,
    dirs: [PathBuf; 2],
    ports: [u16; 2],
    env: Vec<(String, String)>,
    /// The running processes; the fault task replaces the second after a kill.
    procs: tokio::sync::Mutex<[Option<Service>; 2]>,
    pids: Mutex<[u32; 2]>,
}

impl Pair {
    fn base(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[i])
    }

    async fn start(&self, i: usize) -> anyhow::Result<()> {
        let s = Service::start_on(
            &self.bin,
            &self.cfg,
            &self.dirs[i],
            self.ports[i],
            &self.env,
        )
        .await?;
        self.pids.lock()[i] = s.pid();
        self.procs.lock().await[i] = Some(s);
        Ok(())
    }
}

async fn psql(url: &str, sql: &str) -> anyhow::Result<String> {
    let out = tokio::process::Command::new("psql")
        .args([
            "-X",
            "-q",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            url,
            "-c",
            sql,
        ])
        .output()
        .await
        .context("running psql")?;
    anyhow::ensure!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

async fn run_tool(cmd: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = tokio::process::Command::new(cmd)
        .args(args)
        .output()
        .await
        .with_context(|| format!("running {cmd}"))?;
    anyhow::ensure!(
        out.status.success(),
        "{cmd} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    format!("unix {secs} ({h:02}:{m:02}:{s:02} UTC)")
}

/// Runs one soak; the report is written to `<out_dir>/report.{json,md}` and returned.
pub async fn run(spec: SoakSpec) -> anyhow::Result<SoakReport> {
    let db = format!("parasol_soak_{}", spec.run_id);
    let admin = format!("{}/postgres", spec.pg);
    let ledger_url = format!("{}/{db}", spec.pg);
    psql(&admin, &format!("CREATE DATABASE {db}")).await?;
    let exchange = format!("parasol_soak_{}", spec.run_id);
    let dead_letter = format!("parasol.soak.{}.dead_letter", spec.run_id);
    let cfg = ServiceConfig {
        backend: spec.backend.clone(),
        workers: spec.workers,
        seed: spec.seed,
        time_scale: 1.0,
        refresh_interval_s: 60.0,
        asc_start_interval_s: 60.0,
        asc_min_interval_s: 1.0,
        apsr_epsilon: 0.05,
        apsr_round_interval_s: 10.0,
        amqp_url: spec.amqp_url.clone(),
        exchange: exchange.clone(),
        queue: format!("parasol.soak.{}", spec.run_id),
        rpc_topic: Some(format!("scheduler.soak.{}", spec.run_id)),
        batch_mode: "off".into(),
        window_ms: 10,
        flex_update_period_s: None,
    };
    let env = vec![
        ("PARASOL__LEDGER__URL".to_string(), ledger_url.clone()),
        (
            "PARASOL__SCHEDULER__CLAIM_TTL_S".to_string(),
            spec.claim_ttl_s.to_string(),
        ),
        (
            "PARASOL__AMQP__DEAD_LETTER".to_string(),
            dead_letter.clone(),
        ),
    ];
    let pair = Arc::new(Pair {
        bin: spec.parasol.clone(),
        cfg: cfg.clone(),
        dirs: [spec.out_dir.join("a"), spec.out_dir.join("b")],
        ports: [free_port()?, free_port()?],
        env,
        procs: tokio::sync::Mutex::new([None, None]),
        pids: Mutex::new([0, 0]),
    });
    let result = soak(&spec, &pair, &cfg, &ledger_url).await;
    // Whatever happened: stop both processes (SIGTERM), delete the broker objects and the
    // database this run made.
    {
        let mut procs = pair.procs.lock().await;
        for p in procs.iter_mut() {
            drop(p.take());
        }
    }
    let mut queues = cfg.broker_queues();
    queues.push(dead_letter.clone());
    if let Err(e) = Notifier::cleanup_amqp(&spec.amqp_url, &queues, &exchange).await {
        eprintln!("warning: could not delete {}: {e}", queues.join(", "));
    }
    if let Err(e) = Notifier::cleanup_amqp(&spec.amqp_url, &[], &dead_letter).await {
        eprintln!("warning: could not delete exchange {dead_letter}: {e}");
    }
    if !spec.keep_database {
        if let Err(e) = psql(
            &admin,
            &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
        )
        .await
        {
            eprintln!("warning: could not drop {db}: {e}");
        }
    }
    let report = result?;
    std::fs::write(
        spec.out_dir.join("report.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    let md = markdown(&report);
    std::fs::write(spec.out_dir.join("report.md"), &md)?;
    println!("{md}");
    Ok(report)
}

#[allow(clippy::too_many_lines)]
async fn soak(
    spec: &SoakSpec,
    pair: &Arc<Pair>,
    cfg: &ServiceConfig,
    ledger_url: &str,
) -> anyhow::Result<SoakReport> {
    let started_utc = utc_now();
    let load_average_at_start = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let ds = Dataset::named(&spec.dataset)?;
    // The notifier declares the shared queue before either process consumes it.
    let notifier = Notifier::amqp(&spec.amqp_url, &cfg.exchange, &cfg.queue).await?;
    pair.start(0).await?;
    pair.start(1).await?;
    eprintln!("soak: both processes up; registering {} hosts", spec.hosts);
    let fleet = Arc::new(
        Fleet::start(
            spec.hosts,
            ds.host,
            notifier.clone(),
            Duration::from_secs_f64(spec.heartbeat_s.max(0.1)),
        )
        .await,
    );
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let n: usize = psql(ledger_url, "SELECT count(*) FROM hosts")
            .await?
            .trim()
            .parse()
            .unwrap_or(0);
        let seen = [
            hosts_seen(&pair.base(0)).await,
            hosts_seen(&pair.base(1)).await,
        ];
        if n >= spec.hosts && seen.iter().all(|s| *s >= spec.hosts) {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {n} of {} hosts registered in 300 s (processes see {seen:?})",
            spec.hosts
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let rpc = Arc::new(
        RpcClient::connect(&spec.amqp_url, &cfg.exchange)
            .await
            .context("connecting the RPC client")?,
    );
    let topic = cfg.rpc_topic.clone().unwrap_or_default();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(spec.concurrency)
        .pool_idle_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(60))
        .build()?;
    let new_ctx = || -> anyhow::Result<Arc<Ctx>> {
        Ok(Arc::new(Ctx {
            http: http.clone(),
            urls: [0, 1].map(|i| {
                reqwest::Url::parse(&format!("{}/v1/select_destinations", pair.base(i)))
                    .expect("a local URL")
            }),
            rpc: rpc.clone(),
            topic: topic.clone(),
            fleet: fleet.clone(),
            flavors: ds.flavors.clone(),
            http_share: spec.http_share,
            tally: Tally::default(),
            latency: Mutex::new(Histogram::new_with_bounds(1, 600_000_000, 3)?),
        }))
    };
    let workload = |rate: f64, secs: u64, seed: u64| {
        workload::generate(
            &ds,
            &workload::WorkloadSpec {
                requests: (rate * secs as f64 * 1.05) as usize + 100,
                arrival_rate: Some(rate),
                mean_lifetime_s: Some(spec.lifetime_s),
                seed,
            },
        )
    };
    // The rate: the highest of `find_rates` that runs without faults as asked.
    let mut calibration = Vec::new();
    let mut rate = spec.rate;
    for (k, &try_rate) in spec.find_rates.iter().enumerate() {
        let ctx = new_ctx()?;
        let requests = workload(try_rate, spec.calibrate_s, spec.seed + 1_000 + k as u64);
        let load_average = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let began = Instant::now();
        let late = run_phase(&ctx, requests, spec.calibrate_s, spec.concurrency).await?;
        // Decisions over the time until the last was answered: a service that falls behind
        // answers the step's calls long after its end.
        let wall = began.elapsed().as_secs_f64().max(spec.calibrate_s as f64);
        let t = &ctx.tally;
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let failed = ld(&t.http_unanswered)
            + ld(&t.rpc_unanswered)
            + ld(&t.http_5xx)
            + ld(&t.rpc_failure)
            + ld(&t.http_4xx);
        let achieved = ld(&t.issued) as f64 / wall;
        let p99 = ctx.latency.lock().value_at_quantile(0.99) as f64 / 1000.0;
        let sustained =
            achieved >= 0.97 * try_rate && late <= 100.0 && p99 <= 1_000.0 && failed == 0;
        eprintln!(
            "soak: calibration at {try_rate}/s: achieved {achieved:.1}/s, released p99 {late:.1} ms late, latency p99 {p99:.1} ms, {failed} failed: {}",
            if sustained { "sustained" } else { "not sustained" }
        );
        calibration.push(CalibrationStep {
            rate: try_rate,
            achieved,
            release_late_ms_p99: late,
            latency_ms_p99: p99,
            failed,
            load_average: load_average.trim().to_string(),
            sustained,
        });
        rate = try_rate;
        if sustained {
            break;
        }
    }
    let requests = workload(rate, spec.duration_s, spec.seed);
    let ctx = new_ctx()?;
    let start = Instant::now();
    eprintln!(
        "soak: {} hosts registered; {} decisions/s for {} s, a fault every {} s: {:?}",
        spec.hosts, rate, spec.duration_s, spec.fault_interval_s, spec.faults
    );
    // Samples: RSS of both processes and the oversubscription gauge, every 5 s.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let sampler = tokio::spawn(sample(
        pair.clone(),
        start,
        spec.rss_baseline_s,
        stop_rx.clone(),
        spec.out_dir.join("samples.csv"),
    ));
    let faults = tokio::spawn(inject_faults(
        spec.clone(),
        pair.clone(),
        start,
        stop_rx,
        cfg.clone(),
    ));
    let late = run_phase_from(&ctx, requests, spec.duration_s, spec.concurrency, start).await?;
    let wall_s = start.elapsed().as_secs_f64();
    // Memory when the calls end: the checks below read `/v1/hosts` (every host, twice a
    // process) over and over, and the answers' buffers would count in it.
    let pids = *pair.pids.lock();
    let (rss_a, rss_b) = (rss_kb(pids[0]).unwrap_or(0), rss_kb(pids[1]).unwrap_or(0));
    let _ = stop_tx.send(true);
    let fault_events = faults.await.unwrap_or_default();
    let (gauge_max, rss_baseline) = sampler.await.unwrap_or((0, 0));
    eprintln!("soak: calls done after {wall_s:.0} s; stopping the hosts and draining");
    rpc.close().await;
    // Every boot handed out reaches its host (booted, or refused as oversubscribing) before
    // the hosts stop.
    let counters = fleet.counters.clone();
    let handed = ctx.tally.handed.load(Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(60);
    while counters.booted.load(Ordering::Relaxed) + counters.violations.load(Ordering::Relaxed)
        < handed
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The callers' figures, then the hosts stop: what they run is the truth the ledger must
    // match.
    let t = &ctx.tally;
    let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let placed = ld(&t.http_placed) + ld(&t.rpc_placed);
    let no_valid_host = ld(&t.http_no_valid_host) + ld(&t.rpc_no_valid_host);
    let unanswered = ld(&t.http_unanswered) + ld(&t.rpc_unanswered);
    let issued = ld(&t.issued);
    let (http_4xx, http_5xx, rpc_failure) = (ld(&t.http_4xx), ld(&t.http_5xx), ld(&t.rpc_failure));
    let (http_failovers, unknown_host) = (ld(&t.http_failovers), ld(&t.unknown_host));
    let latency_ms = {
        let h = ctx.latency.lock();
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        [ms(0.5), ms(0.9), ms(0.99), ms(1.0)]
    };
    drop(ctx);
    let mut fleet = fleet;
    let fleet = loop {
        // The last callers' tasks drop their handles just after their permits.
        match Arc::try_unwrap(fleet) {
            Ok(f) => break f.stop_with_instances().await,
            Err(shared) => {
                anyhow::ensure!(Instant::now() < deadline, "the fleet is still shared");
                fleet = shared;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    let books: Vec<_> = fleet.iter().map(|(used, _)| *used).collect();
    let running: HashSet<String> = fleet.into_iter().flat_map(|(_, r)| r).collect();
    let stopped = Instant::now();
    // Claims whose answers were lost (a killed process, a closed connection) hold capacity
    // until their TTL: allow that, then a minute for the queue to drain.
    let settle_deadline = stopped + Duration::from_secs(spec.claim_ttl_s + 60);
    let mut check;
    loop {
        check = check_ledger(ledger_url, pair, &running, &books).await?;
        if check.holds() || Instant::now() > settle_deadline {
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let settle_s = stopped.elapsed().as_secs_f64();
    let dead_letters_in_ledger = psql(ledger_url, "SELECT count(*) FROM dead_letters")
        .await
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    Ok(SoakReport {
        spec: spec.clone(),
        started_utc,
        load_average_at_start: load_average_at_start.trim().to_string(),
        issued,
        achieved_rate: issued as f64 / wall_s.max(1.0),
        calibration,
        rate,
        load_average_at_end: std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .to_string(),
        release_late_ms_p99: late,
        latency_ms,
        answered: issued - unanswered,
        placed,
        no_valid_host,
        http_4xx,
        http_5xx,
        rpc_failure,
        unanswered,
        http_failovers,
        unknown_host,
        booted: counters.booted.load(Ordering::Relaxed),
        deleted_by_driver: counters.deleted.load(Ordering::Relaxed),
        violations: counters.violations.load(Ordering::Relaxed),
        running_at_end: running.len(),
        lost: check.lost,
        ledger_extra: check.extra,
        mismatch_hosts: check.mismatch,
        ledger_equals_books: check.mismatch == [0, 0],
        settle_s,
        oversubscribed_in_ledger: check.oversubscribed,
        oversubscribed_gauge_max: gauge_max,
        rss_kb_a_baseline: rss_baseline,
        rss_kb_a_end: rss_a,
        rss_kb_b_end: rss_b,
        rss_growth_pct_a: 100.0 * (rss_a as f64 / rss_baseline.max(1) as f64 - 1.0),
        faults: fault_events,
        malformed_sent: MALFORMED_SENT.load(Ordering::Relaxed),
        notifications_sent: notifier.sent.load(Ordering::Relaxed),
        notifications_failed: notifier.failed.load(Ordering::Relaxed),
        dead_letters_in_ledger,
    })
}

/// How many hosts a process's `/v1/hosts` lists (0 when it does not answer).
async fn hosts_seen(base: &str) -> usize {
    let v: Option<Value> = match reqwest::get(format!("{base}/v1/hosts")).await {
        Ok(r) => r.json().await.ok(),
        Err(_) => None,
    };
    v.and_then(|v| v["hosts"].as_array().map(Vec::len))
        .unwrap_or(0)
}

struct LedgerCheck {
    lost: usize,
    extra: usize,
    mismatch: [usize; 2],
    oversubscribed: u64,
}

impl LedgerCheck {
    fn holds(&self) -> bool {
        self.lost == 0 && self.extra == 0 && self.mismatch == [0, 0] && self.oversubscribed == 0
    }
}

async fn check_ledger(
    ledger_url: &str,
    pair: &Pair,
    running: &HashSet<String>,
    books: &[parasol::domain::Resources],
) -> anyhow::Result<LedgerCheck> {
    let allocations: HashSet<String> = psql(ledger_url, "SELECT instance_uuid FROM allocations")
        .await?
        .lines()
        .map(str::to_string)
        .collect();
    let oversubscribed = psql(
        ledger_url,
        "SELECT count(DISTINCT host_id) FROM inventories WHERE used > usable",
    )
    .await?
    .trim()
    .parse()
    .unwrap_or(u64::MAX);
    let mut mismatch = [usize::MAX; 2];
    for (i, m) in mismatch.iter_mut().enumerate() {
        if let Ok(r) = reqwest::get(format!("{}/v1/hosts", pair.base(i))).await {
            if let Ok(v) = r.json::<Value>().await {
                *m = crate::run::mismatches(&v, books);
            }
        }
    }
    Ok(LedgerCheck {
        lost: running.difference(&allocations).count(),
        extra: allocations.difference(running).count(),
        mismatch,
        oversubscribed,
    })
}

struct Ctx {
    http: reqwest::Client,
    urls: [reqwest::Url; 2],
    rpc: Arc<RpcClient>,
    topic: String,
    fleet: Arc<Fleet>,
    flavors: Vec<parasol::domain::Resources>,
    http_share: f64,
    tally: Tally,
    latency: Mutex<Histogram<u64>>,
}

/// Releases `requests` for `secs` from now and waits for every call's answer; answers how
/// late the releases were (p99, ms).
async fn run_phase(
    ctx: &Arc<Ctx>,
    requests: Vec<Request>,
    secs: u64,
    concurrency: usize,
) -> anyhow::Result<f64> {
    run_phase_from(ctx, requests, secs, concurrency, Instant::now()).await
}

async fn run_phase_from(
    ctx: &Arc<Ctx>,
    requests: Vec<Request>,
    secs: u64,
    concurrency: usize,
    start: Instant,
) -> anyhow::Result<f64> {
    let permits = concurrency.max(1);
    let sem = Arc::new(Semaphore::new(permits));
    let late = {
        let (ctx, sem) = (ctx.clone(), sem.clone());
        let limit = Duration::from_secs(secs);
        let handle = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || dispatch(&handle, &ctx, &sem, &requests, limit, start))
            .await??
    };
    drop(sem.acquire_many(permits as u32).await?);
    Ok(late)
}

/// Releases each request at its arrival time (a thread of its own, as `driver::dispatch`);
/// returns the p99 of how late the releases were, in ms.
fn dispatch(
    handle: &tokio::runtime::Handle,
    ctx: &Arc<Ctx>,
    sem: &Arc<Semaphore>,
    requests: &[Request],
    limit: Duration,
    start: Instant,
) -> anyhow::Result<f64> {
    let mut late = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)?;
    for (i, req) in requests.iter().enumerate() {
        let at = start + Duration::from_secs_f64(req.arrival_s);
        if at.duration_since(start) > limit {
            break;
        }
        if let Some(wait) = at.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let permit = handle.block_on(sem.clone().acquire_owned())?;
        let _ = late.record((at.elapsed().as_micros() as u64).max(1));
        ctx.tally.issued.fetch_add(1, Ordering::Relaxed);
        let (ctx, req) = (ctx.clone(), req.clone());
        handle.spawn(async move {
            call(&ctx, i, &req, at).await;
            drop(permit);
        });
    }
    Ok(late.value_at_quantile(0.99) as f64 / 1000.0)
}

async fn call(ctx: &Ctx, i: usize, req: &Request, at: Instant) {
    let demand = ctx.flavors[req.flavor];
    let uuid = req.uuid.to_string();
    let body = wire::select_body(&uuid, demand);
    let t = &ctx.tally;
    // A fixed, seeded split: the request's uuid decides its path.
    let via_http = (req.uuid.as_u128() % 1_000) as f64 / 1_000.0 < ctx.http_share;
    let host = if via_http {
        http_call(ctx, i % 2, &body).await
    } else {
        rpc_call(ctx, body).await
    };
    let us = at.elapsed().as_micros() as u64;
    let _ = ctx.latency.lock().record(us.max(1));
    let Some(host) = host else { return };
    let lifetime = Some(Duration::from_secs_f64(req.lifetime_s.unwrap_or(60.0)));
    let booted = wire::host_index(&host).is_some_and(|h| ctx.fleet.boot(h, uuid, demand, lifetime));
    if booted {
        t.handed.fetch_add(1, Ordering::Relaxed);
    } else {
        t.unknown_host.fetch_add(1, Ordering::Relaxed);
    }
}

/// One HTTP call to process `first`, or to the other when `first` refuses the connection
/// (nothing was sent, so nothing can have been claimed). The chosen host, if placed.
async fn http_call(ctx: &Ctx, first: usize, body: &Value) -> Option<String> {
    let t = &ctx.tally;
    let mut sent = ctx
        .http
        .post(ctx.urls[first].clone())
        .json(body)
        .send()
        .await;
    if sent.as_ref().is_err_and(|e| e.is_connect()) {
        t.http_failovers.fetch_add(1, Ordering::Relaxed);
        sent = ctx
            .http
            .post(ctx.urls[1 - first].clone())
            .json(body)
            .send()
            .await;
    }
    let r = match sent {
        Ok(r) => r,
        Err(_) => {
            t.http_unanswered.fetch_add(1, Ordering::Relaxed);
            return None;
        }
    };
    let status = r.status();
    let bytes = r.bytes().await;
    match (status.as_u16(), bytes) {
        (200..=299, Ok(b)) => match wire::chosen_host_in(&b) {
            Ok(host) => {
                t.http_placed.fetch_add(1, Ordering::Relaxed);
                host
            }
            Err(_) => {
                t.http_5xx.fetch_add(1, Ordering::Relaxed);
                None
            }
        },
        (409, _) => {
            t.http_no_valid_host.fetch_add(1, Ordering::Relaxed);
            None
        }
        (s, b) if s >= 500 => {
            if t.http_5xx.fetch_add(1, Ordering::Relaxed) < 5 {
                let b = b.map(|b| String::from_utf8_lossy(&b).into_owned());
                eprintln!("soak: HTTP {status}: {}", b.unwrap_or_default());
            }
            None
        }
        (_, Err(_)) => {
            t.http_unanswered.fetch_add(1, Ordering::Relaxed);
            None
        }
        (_, Ok(b)) => {
            if t.http_4xx.fetch_add(1, Ordering::Relaxed) < 5 {
                eprintln!("soak: HTTP {status}: {}", String::from_utf8_lossy(&b));
            }
            None
        }
    }
}

/// One call over Nova's scheduler RPC (4.5, as nova-conductor makes it).
async fn rpc_call(ctx: &Ctx, body: Value) -> Option<String> {
    let t = &ctx.tally;
    let m = ctx
        .rpc
        .call_message("select_destinations", body, "4.5", None, Some(60));
    match ctx
        .rpc
        .call_with(&ctx.topic, &m, Duration::from_secs(60))
        .await
    {
        Ok(reply) => match &reply.failure {
            None => {
                t.rpc_placed.fetch_add(1, Ordering::Relaxed);
                wire::chosen_host(&reply.result).map(String::from)
            }
            Some(f) if f["class"] == "NoValidHost" => {
                t.rpc_no_valid_host.fetch_add(1, Ordering::Relaxed);
                None
            }
            Some(f) => {
                if t.rpc_failure.fetch_add(1, Ordering::Relaxed) < 5 {
                    eprintln!("soak: RPC failure: {f}");
                }
                None
            }
        },
        Err(_) => {
            t.rpc_unanswered.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

/// Every 5 s until stopped: both processes' RSS, `parasol_oversubscribed_hosts` and the RSS held
/// in transparent huge pages, to a CSV.
/// Returns the highest gauge seen and the first process's RSS at `baseline_s`.
async fn sample(
    pair: Arc<Pair>,
    start: Instant,
    baseline_s: u64,
    mut stop: tokio::sync::watch::Receiver<bool>,
    csv: PathBuf,
) -> (i64, u64) {
    let client = reqwest::Client::new();
    let mut lines = vec![
        "t_s,rss_kb_a,rss_kb_b,oversubscribed_a,oversubscribed_b,anon_huge_kb_a,anon_huge_kb_b"
            .to_string(),
    ];
    let (mut gauge_max, mut baseline) = (0i64, 0u64);
    loop {
        let t = start.elapsed().as_secs_f64();
        let pids = *pair.pids.lock();
        let rss = pids.map(|p| rss_kb(p).unwrap_or(0));
        let huge = pids.map(|p| anon_huge_kb(p).unwrap_or(0));
        let mut gauges = [-1i64; 2];
        for (i, g) in gauges.iter_mut().enumerate() {
            if let Ok(r) = client.get(format!("{}/metrics", pair.base(i))).send().await {
                let text = r.text().await.unwrap_or_default();
                *g = text
                    .lines()
                    .find_map(|l| l.strip_prefix("parasol_oversubscribed_hosts "))
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .map_or(-1, |v| v as i64);
            }
        }
        gauge_max = gauge_max.max(gauges[0]).max(gauges[1]);
        if baseline == 0 && t >= baseline_s as f64 {
            baseline = rss[0];
        }
        lines.push(format!(
            "{t:.1},{},{},{},{},{},{}",
            rss[0], rss[1], gauges[0], gauges[1], huge[0], huge[1]
        ));
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            _ = stop.changed() => break,
        }
    }
    let _ = std::fs::write(csv, lines.join("\n") + "\n");
    (gauge_max, baseline)
}

static MALFORMED_SENT: AtomicU64 = AtomicU64::new(0);

/// One fault every `fault_interval_s`, in the order of `spec.faults`, until stopped.
async fn inject_faults(
    spec: SoakSpec,
    pair: Arc<Pair>,
    start: Instant,
    mut stop: tokio::sync::watch::Receiver<bool>,
    cfg: ServiceConfig,
) -> Vec<FaultEvent> {
    let mut events = Vec::new();
    if spec.faults.is_empty() {
        return events;
    }
    for n in 1u32.. {
        let at = start + Duration::from_secs(spec.fault_interval_s * u64::from(n));
        // Faults while calls are issued, not while a backlog drains after.
        if at >= start + Duration::from_secs(spec.duration_s) {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(at.into()) => {}
            _ = stop.changed() => break,
        }
        let fault = spec.faults[(n as usize - 1) % spec.faults.len()];
        let t_s = start.elapsed().as_secs_f64();
        let detail = match fault {
            Fault::Kill => kill_and_restart(&pair).await,
            Fault::Broker => close_broker_connections(&pair, &spec.amqp_url).await,
            Fault::Postgres => terminate_sessions(&spec).await,
            Fault::Malformed => malformed_burst(&spec, &cfg).await,
        }
        .unwrap_or_else(|e| format!("FAILED: {e:#}"));
        eprintln!("soak: t={t_s:.0} s {fault:?}: {detail}");
        events.push(FaultEvent { t_s, fault, detail });
    }
    events
}

async fn kill_and_restart(pair: &Pair) -> anyhow::Result<String> {
    let old = pair.procs.lock().await[1].take();
    let pid = old.as_ref().map_or(0, Service::pid);
    if let Some(s) = old {
        s.kill_hard();
    }
    let t = Instant::now();
    pair.start(1).await?;
    Ok(format!(
        "SIGKILL of process b (pid {pid}); restarted as pid {} in {:.1} s",
        pair.pids.lock()[1],
        t.elapsed().as_secs_f64()
    ))
}

/// Closes the broker connections of the two processes only: their local ports (`ss`) matched
/// with the broker's peer ports (`rabbitmqctl list_connections`).
async fn close_broker_connections(pair: &Pair, amqp_url: &str) -> anyhow::Result<String> {
    let broker_port = reqwest::Url::parse(amqp_url)?.port().unwrap_or(5672);
    let pids = *pair.pids.lock();
    let ss = run_tool("ss", &["-tnpH", "state", "established"]).await?;
    let ours: HashSet<String> = ss
        .lines()
        .filter(|l| pids.iter().any(|p| l.contains(&format!("pid={p},"))))
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            // Recv-Q Send-Q Local Peer Process (the state column is left out with `state`).
            let (local, peer) = (cols.get(2)?, cols.get(3)?);
            peer.ends_with(&format!(":{broker_port}"))
                .then(|| local.rsplit(':').next().map(str::to_string))
                .flatten()
        })
        .collect();
    let listed = run_tool(
        "rabbitmqctl",
        &[
            "list_connections",
            "-q",
            "--no-table-headers",
            "pid",
            "peer_port",
        ],
    )
    .await?;
    let mut closed = 0;
    for line in listed.lines() {
        let mut cols = line.split_whitespace();
        let (Some(pid), Some(port)) = (cols.next(), cols.next()) else {
            continue;
        };
        if ours.contains(port) {
            run_tool(
                "rabbitmqctl",
                &[
                    "close_connection",
                    pid,
                    "openstack-bench soak: broker fault",
                ],
            )
            .await?;
            closed += 1;
        }
    }
    anyhow::ensure!(
        closed > 0,
        "no connection of pids {pids:?} found on the broker"
    );
    Ok(format!(
        "closed {closed} broker connections of pids {pids:?}"
    ))
}

async fn terminate_sessions(spec: &SoakSpec) -> anyhow::Result<String> {
    let db = format!("parasol_soak_{}", spec.run_id);
    let out = psql(
        &format!("{}/postgres", spec.pg),
        &format!(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = '{db}' AND pid <> pg_backend_pid()"
        ),
    )
    .await?;
    Ok(format!(
        "pg_terminate_backend on {} sessions of {db}",
        out.trim()
    ))
}

/// `spec.burst` malformed messages on the notification exchange, of four kinds in turn.
async fn malformed_burst(spec: &SoakSpec, cfg: &ServiceConfig) -> anyhow::Result<String> {
    let notifier = Notifier::amqp(&spec.amqp_url, &cfg.exchange, &cfg.queue).await?;
    let kinds: [(&str, Vec<u8>); 4] = [
        (wire::NOVA_KEY, b"not json {".to_vec()),
        (
            wire::NOVA_KEY,
            json!({"oslo.version": "2.0", "oslo.message": "{\"event_type\": "})
                .to_string()
                .into_bytes(),
        ),
        (
            wire::NOVA_KEY,
            parasol::nova::encode_envelope_str(
                &json!({"event_type": "instance.create.end", "message_id": "soak-bad",
                         "payload": {"nova_object.data": {"uuid": "not-a-uuid", "host": 7}}})
                .to_string(),
            ),
        ),
        (
            wire::HOST_STATE_KEY,
            parasol::nova::encode_envelope_str(
                &json!({"event_type": "parasol.host_state", "payload": {"host": 42}}).to_string(),
            ),
        ),
    ];
    let t = Instant::now();
    let mut sent = 0u64;
    for i in 0..spec.burst {
        let (key, body) = &kinds[i % kinds.len()];
        if notifier.publish_raw(key, body).await {
            sent += 1;
        }
    }
    MALFORMED_SENT.fetch_add(sent, Ordering::Relaxed);
    Ok(format!(
        "{sent} of {} malformed notifications published in {:.1} s",
        spec.burst,
        t.elapsed().as_secs_f64()
    ))
}

#[allow(clippy::too_many_lines)]
fn markdown(r: &SoakReport) -> String {
    let s = &r.spec;
    let mut out = format!(
        "# openstack-bench soak {}\n\nstarted {}, load average at start {}, at end {}\n\n\
         {} hosts ({}), {} s at {} decisions/s asked (open loop), {:.0} % over HTTP, the rest \
         over Nova's RPC; backend {}, {} workers; two processes on one PostgreSQL ledger; \
         faults every {} s: {:?}; claim_ttl_s {}\n\n",
        s.run_id,
        r.started_utc,
        r.load_average_at_start,
        r.load_average_at_end,
        s.hosts,
        s.dataset,
        s.duration_s,
        r.rate,
        100.0 * s.http_share,
        s.backend,
        s.workers,
        s.fault_interval_s,
        s.faults,
        s.claim_ttl_s,
    );
    if !r.calibration.is_empty() {
        out += &format!(
            "Rate search without faults, {} s a step:\n\n\
             | asked /s | achieved /s | released late p99 ms | latency p99 ms | failed | load average | sustained |\n\
             |---|---|---|---|---|---|---|\n",
            s.calibrate_s
        );
        for c in &r.calibration {
            out += &format!(
                "| {} | {:.1} | {:.1} | {:.1} | {} | {} | {} |\n",
                c.rate,
                c.achieved,
                c.release_late_ms_p99,
                c.latency_ms_p99,
                c.failed,
                c.load_average,
                c.sustained
            );
        }
        out += "\n";
    }
    let row = |k: &str, v: String| format!("| {k} | {v} |\n");
    out += "| figure | value |\n|---|---|\n";
    out += &row("issued", r.issued.to_string());
    out += &row("achieved rate (/s)", format!("{:.1}", r.achieved_rate));
    out += &row(
        "release late p99 (ms)",
        format!("{:.1}", r.release_late_ms_p99),
    );
    out += &row(
        "latency p50 / p90 / p99 / max (ms)",
        format!(
            "{:.1} / {:.1} / {:.1} / {:.1}",
            r.latency_ms[0], r.latency_ms[1], r.latency_ms[2], r.latency_ms[3]
        ),
    );
    out += &row("answered", r.answered.to_string());
    out += &row(
        "placed / no valid host",
        format!("{} / {}", r.placed, r.no_valid_host),
    );
    out += &row("HTTP 5xx", r.http_5xx.to_string());
    out += &row("HTTP 4xx (other than 409)", r.http_4xx.to_string());
    out += &row("RPC failures (not NoValidHost)", r.rpc_failure.to_string());
    out += &row("unanswered", r.unanswered.to_string());
    out += &row(
        "HTTP failovers (refused, sent to the other)",
        r.http_failovers.to_string(),
    );
    out += &row("unknown host in an answer", r.unknown_host.to_string());
    out += &row(
        "booted / deleted by the driver / running at end",
        format!(
            "{} / {} / {}",
            r.booted, r.deleted_by_driver, r.running_at_end
        ),
    );
    out += &row("**lost**", r.lost.to_string());
    out += &row(
        "allocations of no running instance",
        r.ledger_extra.to_string(),
    );
    out += &row(
        "**ledger = books** (hosts differing: a, b)",
        format!("{} ({:?})", r.ledger_equals_books, r.mismatch_hosts),
    );
    out += &row("settled after (s)", format!("{:.0}", r.settle_s));
    out += &row(
        "**oversubscribed hosts**: host books / ledger / gauge max",
        format!(
            "{} / {} / {}",
            r.violations, r.oversubscribed_in_ledger, r.oversubscribed_gauge_max
        ),
    );
    out += &row(
        "**RSS a** at baseline / end (kB), growth",
        format!(
            "{} / {} ({:+.1} %)",
            r.rss_kb_a_baseline, r.rss_kb_a_end, r.rss_growth_pct_a
        ),
    );
    out += &row(
        "RSS b at end (kB, since its last restart)",
        r.rss_kb_b_end.to_string(),
    );
    out += &row(
        "notifications sent / failed / malformed",
        format!(
            "{} / {} / {}",
            r.notifications_sent, r.notifications_failed, r.malformed_sent
        ),
    );
    out += &row(
        "dead letters in the ledger",
        r.dead_letters_in_ledger.to_string(),
    );
    out += "\nFaults:\n\n";
    for f in &r.faults {
        out += &format!("- t = {:.0} s, {:?}: {}\n", f.t_s, f.fault, f.detail);
    }
    out
}
