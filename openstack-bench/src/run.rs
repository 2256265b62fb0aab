//! One measured run: a fresh service for one backend configuration, a fresh fleet, the
//! workload, then the service's own counters, and the checks (no oversubscription, every
//! request answered, the ledger agreeing with the hosts' books).

use crate::driver::{self, DriveSpec, DriverResult, ParamSample, Target, Via};
use crate::hosts::Fleet;
use crate::notify::{Notifier, NotifyVia};
use crate::service::{process_cpu_seconds, threads_cpu_seconds, Service, ServiceConfig};
use crate::workload::{Dataset, Request};
use anyhow::Context;
use indicatif::ProgressBar;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What is the same for every run of a comparison.
#[derive(Clone, Debug)]
pub struct Env {
    pub parasol: PathBuf,
    pub out_dir: PathBuf,
    pub notify: NotifyVia,
    /// How select_destinations is called.
    pub via: Via,
    pub amqp_url: String,
    pub run_id: String,
    /// Between two host-state heartbeats of each emulated host.
    pub heartbeat: Duration,
    /// How long the service's ingestion alone is measured before each run's requests.
    pub ingest_window: Duration,
    /// How often the service's `/v1/stats` is read during the requests (`--stats-sample-ms`);
    /// `None`: never.
    pub stats_sample: Option<Duration>,
    /// The hosts' demand model (`--demand-model`), else none: hosts report no usage and
    /// take what they are given up to their capacity.
    pub demand: Option<crate::demand::DemandModel>,
}

/// The outcome of one run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunResult {
    pub label: String,
    pub backend: String,
    pub hosts: usize,
    pub config: ServiceConfig,
    pub driver: DriverResult,
    /// `/v1/stats` → `backends.<backend>` at the end.
    pub service: Value,
    pub violations: u64,
    pub booted: u64,
    /// VCPU of every instance booted (the admitted request, issue 45's service benchmark).
    pub booted_vcpu: u64,
    /// Under a demand model: instances judged at the hosts' heartbeats during the run and
    /// those served (§5.1), their ratio the run's Q; 0 without one.
    pub qos_judged: u64,
    pub qos_served: u64,
    /// The hosts' allocation ratio under a demand model, else `None`.
    pub allocation_ratio: Option<f64>,
    pub deleted: u64,
    pub notifications_sent: u64,
    pub notifications_failed: u64,
    /// Notifications counted sent to the measured service that it had not handled when the
    /// drain ended (nothing handled for a second, or 60 s): 0 when the count closes.
    pub unhandled_at_end: u64,
    /// CPU seconds the measured service used from the first request until the run's
    /// notifications were applied (`/proc/<pid>/stat`), and that per decision in µs.
    pub service_cpu_s: f64,
    pub service_cpu_us_per_decision: f64,
    /// Of `service_cpu_s`, the part in system (kernel) mode, and the context switches of the
    /// service's threads over the same span, per decision.
    pub service_system_cpu_s: f64,
    pub service_context_switches_per_decision: f64,
    /// The service's CPU per host-state heartbeat applied, measured before the requests with
    /// the heartbeats alone (see [`Ingestion`]).
    pub ingestion: Ingestion,
    /// Heartbeats the hosts sent from the first request until the run's notifications were
    /// applied.
    pub heartbeats_during_run: u64,
    /// `service_cpu_us_per_decision` without the heartbeats' share (their count during the run
    /// times `ingestion.cpu_us_per_event`): what deciding, claiming and confirming each
    /// decision's build (its `instance.create.end`) cost the service.
    pub decision_cpu_us_per_decision: f64,
    /// The same for this process (the driver and the emulated hosts), which shares the
    /// machine with the service: how much of it the measuring took.
    pub driver_cpu_us_per_decision: f64,
    /// The service's resident memory once the run's notifications were applied (`VmRSS`) and
    /// the most it held since it started (`VmHWM`), in kB.
    pub service_rss_kb: u64,
    pub service_peak_rss_kb: u64,
    /// Hosts whose ledger `used` differs from their own books after draining.
    pub ledger_mismatch_hosts: usize,
    /// placed + no_valid_host = requests, by the driver and by the service.
    pub accounted: bool,
    pub params: Vec<ParamSample>,
}

impl RunResult {
    pub fn stat(&self, key: &str) -> f64 {
        self.service[key].as_f64().unwrap_or(f64::NAN)
    }

    /// The run's Q under a demand model: the share of instance-heartbeats served; `None`
    /// when none was judged.
    pub fn qos(&self) -> Option<f64> {
        (self.qos_judged > 0).then(|| self.qos_served as f64 / self.qos_judged as f64)
    }
}

async fn get_json(client: &reqwest::Client, url: String) -> anyhow::Result<Value> {
    Ok(client.get(url).send().await?.json().await?)
}

fn applied(stats: &Value) -> u64 {
    let n = &stats["notifications"];
    ["applied", "duplicate", "unknown_event", "rejected"]
        .iter()
        .filter_map(|k| n[*k].as_u64())
        .sum()
}

/// Waits (bounded by `limit`) until the service has handled `target` notifications; with
/// `stall`, gives up sooner when the count has not moved for that long (the events the target
/// counts may include some another service took). Returns the count last seen.
async fn wait_applied(
    client: &reqwest::Client,
    base: &str,
    target: u64,
    limit: Duration,
    stall: Option<Duration>,
) -> u64 {
    let deadline = Instant::now() + limit;
    let (mut seen, mut moved) = (0, Instant::now());
    while Instant::now() < deadline {
        if let Ok(s) = get_json(client, format!("{base}/v1/stats")).await {
            let now = applied(&s);
            if now != seen {
                (seen, moved) = (now, Instant::now());
            }
            if seen >= target || stall.is_some_and(|d| moved.elapsed() >= d) {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    seen
}

/// The service's CPU per event with only the hosts' heartbeats coming (no request), over a
/// window before the run's requests: its threads' CPU (to the nanosecond) over the host-state
/// events it applied meanwhile. What else an idle service does in that time (its backend's
/// rounds or refreshes, the claim sweep) is counted in it too.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Ingestion {
    /// How long the service took to settle after its start before the window opened (see
    /// [`settle`]).
    pub settle_s: f64,
    pub window_s: f64,
    pub events: u64,
    pub cpu_s: f64,
    pub cpu_us_per_event: f64,
}

/// Waits until a freshly started service's start-up work is over: it reads the ledger back,
/// builds its table, applies what queued while no process consumed, and a backend may run its
/// first round or refresh. Settled = two consecutive seconds whose CPU differs by at most a
/// quarter, or a second under 10 ms of CPU; at most `max`. Returns how long it took.
async fn settle(service: &Service, max: Duration) -> anyhow::Result<Duration> {
    const STEP: Duration = Duration::from_secs(1);
    let started = Instant::now();
    let mut last = threads_cpu_seconds(service.pid())?;
    let mut previous: Option<f64> = None;
    while started.elapsed() < max {
        tokio::time::sleep(STEP).await;
        let now = threads_cpu_seconds(service.pid())?;
        let used = now - last;
        last = now;
        if used < 0.010 || previous.is_some_and(|p| (used - p).abs() <= 0.25 * p.max(used)) {
            break;
        }
        previous = Some(used);
    }
    Ok(started.elapsed())
}

/// Measures [`Ingestion`] over `window` once the freshly started service has settled (a start
/// reads the ledger, builds the table, and may apply what queued while no process consumed:
/// counted in the window, that work made the figure read 400–660 µs per event).
async fn measure_ingestion(
    client: &reqwest::Client,
    service: &Service,
    window: Duration,
) -> anyhow::Result<Ingestion> {
    if window.is_zero() {
        return Ok(Ingestion::default());
    }
    let settle_s = settle(service, Duration::from_secs(60))
        .await?
        .as_secs_f64();
    let stats = format!("{}/v1/stats", service.base);
    let applied_before = applied(&get_json(client, stats.clone()).await?);
    let cpu_before = threads_cpu_seconds(service.pid())?;
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let cpu_s = threads_cpu_seconds(service.pid())? - cpu_before;
    let window_s = started.elapsed().as_secs_f64();
    let events = applied(&get_json(client, stats).await?).saturating_sub(applied_before);
    Ok(Ingestion {
        settle_s,
        window_s,
        events,
        cpu_s,
        cpu_us_per_event: if events == 0 {
            f64::NAN
        } else {
            1e6 * cpu_s / events as f64
        },
    })
}

#[allow(clippy::too_many_arguments, clippy::too_many_lines)]
pub async fn run_one(
    env: &Env,
    label: &str,
    cfg: ServiceConfig,
    measured: Option<crate::hosts::Measured>,
    hosts: usize,
    ds: &Dataset,
    requests: &[Request],
    spec: &DriveSpec,
    progress: ProgressBar,
) -> anyhow::Result<RunResult> {
    let dir: PathBuf = env.out_dir.join("runs").join(format!("{label}-{hosts}"));
    // Idle connections are dropped before actix-web's 5 s keep-alive closes them: a request
    // sent on a connection the server is closing fails with "error sending request" (the
    // notifications lost under load in issue 15's runs).
    let client = reqwest::Client::builder()
        .pool_idle_timeout(Duration::from_secs(2))
        .build()?;
    // Hosts register with a first service; the measured one then starts on the registered
    // ledger, as a scheduler does in production (caching, asc and apsr read the host list at
    // start and would otherwise see no host until their first refresh or round). Only the
    // measured one serves RPC.
    let first_cfg = ServiceConfig {
        rpc_topic: None,
        ..cfg.clone()
    };
    // A run of the same name stopped before its end (a benchmark interrupted, a test run
    // killed) leaves its queues on the broker with its hosts' notifications in them, which
    // this run's service would apply as its own (the ledger then differs from the books on
    // every host): start from none.
    delete_broker_state(&cfg).await;
    let first = Service::start(&env.parasol, &first_cfg, &dir).await?;
    let notifier = match env.notify {
        NotifyVia::Amqp => Notifier::amqp(&env.amqp_url, &cfg.exchange, &cfg.queue).await?,
        NotifyVia::Http => Notifier::http(client.clone(), &first.base)?,
    };
    progress.set_message(format!("{label} n={hosts}: registering hosts"));
    let fleet = Arc::new(
        Fleet::start_measured(hosts, ds.host, notifier.clone(), env.heartbeat, measured).await,
    );
    let registered = wait_applied(
        &client,
        &first.base,
        hosts as u64,
        Duration::from_secs(120),
        None,
    )
    .await;
    anyhow::ensure!(
        registered >= hosts as u64,
        "{label}: only {registered} of {hosts} host-state events were applied in 120 s (is the consumer running? see {}/parasol.log)",
        dir.display()
    );
    let applied_before = get_json(&client, format!("{}/v1/stats", first.base))
        .await
        .map_or(registered, |s| applied(&s));
    drop(first);
    // What the measured service is sent starts here. Over HTTP the first service, now stopped,
    // took every event counted sent so far, heartbeats after `applied_before` among them (a
    // target counting those as the second's would never be reached); over RabbitMQ the queue
    // holds what it left, and `applied_before` is the best count there is.
    let to_first = match env.notify {
        NotifyVia::Http => notifier.sent.load(Ordering::Relaxed),
        NotifyVia::Amqp => applied_before,
    };
    let service = Service::start(&env.parasol, &cfg, &dir).await?;
    notifier.retarget(&service.base)?;
    progress.set_message(format!("{label} n={hosts}: ingestion alone"));
    let ingestion = measure_ingestion(&client, &service, env.ingest_window).await?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
    let sampler = env.stats_sample.map(|period| {
        tokio::spawn(driver::sample_params(
            service.base.clone(),
            cfg.backend.clone(),
            period,
            stop_rx,
        ))
    });
    progress.set_message(format!("{label} n={hosts}"));
    let target = match &cfg.rpc_topic {
        Some(topic) => Target::Rpc {
            amqp_url: cfg.amqp_url.clone(),
            exchange: cfg.exchange.clone(),
            topic: topic.clone(),
        },
        None => Target::Http {
            base: service.base.clone(),
        },
    };
    let cpu_before = service.cpu_split()?;
    let own_before = process_cpu_seconds(std::process::id())?;
    let beats_before = fleet.counters.heartbeats.load(Ordering::Relaxed);
    let qos_before = (
        fleet.counters.qos_judged.load(Ordering::Relaxed),
        fleet.counters.qos_served.load(Ordering::Relaxed),
    );
    let result = driver::drive(&target, ds, requests, fleet.clone(), spec, progress).await?;
    let _ = stop_tx.send(());
    let params = match sampler {
        Some(sampler) => sampler.await.unwrap_or_default(),
        None => Vec::new(),
    };
    // Let in-flight boots reach the hosts, then stop the fleet and drain the notifications.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let fleet = Arc::try_unwrap(fleet).map_err(|_| anyhow::anyhow!("fleet still shared"))?;
    let counters = fleet.counters.clone();
    let books = fleet.stop().await;
    let sent = notifier.sent.load(Ordering::Relaxed);
    // The drain ends when every event is handled or none has been for a second: an idle wait
    // would add the idle service's CPU to every decision's.
    let target = sent.saturating_sub(to_first);
    let drained = wait_applied(
        &client,
        &service.base,
        target,
        Duration::from_secs(60),
        Some(Duration::from_secs(1)),
    )
    .await;
    let unhandled_at_end = target.saturating_sub(drained);
    let split = service.cpu_split()? - cpu_before;
    let service_cpu_s = split.user_s + split.system_s;
    let switches_per_decision = split.context_switches as f64 / result.issued.max(1) as f64;
    let service_cpu_us_per_decision = 1e6 * service_cpu_s / (result.issued.max(1) as f64);
    let heartbeats_during_run = counters.heartbeats.load(Ordering::Relaxed) - beats_before;
    let beats_cpu_s = if ingestion.cpu_us_per_event.is_finite() {
        heartbeats_during_run as f64 * ingestion.cpu_us_per_event / 1e6
    } else {
        0.0
    };
    let decision_cpu_us_per_decision =
        1e6 * (service_cpu_s - beats_cpu_s) / (result.issued.max(1) as f64);
    let driver_cpu_us_per_decision = 1e6 * (process_cpu_seconds(std::process::id())? - own_before)
        / (result.issued.max(1) as f64);
    let (service_rss_kb, service_peak_rss_kb) = (
        crate::service::rss_kb(service.pid())?,
        crate::service::peak_rss_kb(service.pid())?,
    );
    let stats = get_json(&client, format!("{}/v1/stats", service.base)).await?;
    let ledger = get_json(&client, format!("{}/v1/hosts", service.base)).await?;
    let mismatch = mismatches(&ledger, &books);
    let service_stats = stats["backends"][&cfg.backend].clone();
    drop(service);
    delete_broker_state(&cfg).await;
    let s = |k: &str| service_stats[k].as_u64().unwrap_or(u64::MAX);
    let accounted = result.placed + result.no_valid_host + result.errors == result.issued
        && result.errors == 0
        && s("placed") + s("no_valid_host") == s("requests")
        && s("requests") == result.issued;
    Ok(RunResult {
        label: label.to_string(),
        backend: cfg.backend.clone(),
        hosts,
        config: cfg,
        driver: result,
        service: service_stats,
        violations: counters.violations.load(Ordering::Relaxed),
        booted: counters.booted.load(Ordering::Relaxed),
        booted_vcpu: counters.booted_vcpu.load(Ordering::Relaxed),
        qos_judged: counters.qos_judged.load(Ordering::Relaxed) - qos_before.0,
        qos_served: counters.qos_served.load(Ordering::Relaxed) - qos_before.1,
        allocation_ratio: measured.map(|m| m.allocation_ratio),
        deleted: counters.deleted.load(Ordering::Relaxed),
        notifications_sent: sent,
        notifications_failed: notifier.failed.load(Ordering::Relaxed),
        unhandled_at_end,
        service_cpu_s,
        service_cpu_us_per_decision,
        service_system_cpu_s: split.system_s,
        service_context_switches_per_decision: switches_per_decision,
        ingestion,
        heartbeats_during_run,
        decision_cpu_us_per_decision,
        driver_cpu_us_per_decision,
        service_rss_kb,
        service_peak_rss_kb,
        ledger_mismatch_hosts: mismatch,
        accounted,
        params,
    })
}

/// Deletes the run's queues and exchange from the broker (nothing without one); a failure is
/// a warning, not the run's.
async fn delete_broker_state(cfg: &ServiceConfig) {
    if cfg.amqp_url.is_empty() {
        return;
    }
    let queues = cfg.broker_queues();
    if let Err(e) = Notifier::cleanup_amqp(&cfg.amqp_url, &queues, &cfg.exchange).await {
        eprintln!("warning: could not delete {}: {e}", queues.join(", "));
    }
}

pub(crate) fn mismatches(ledger: &Value, books: &[parasol::domain::Resources]) -> usize {
    let Some(list) = ledger["hosts"].as_array() else {
        return books.len();
    };
    list.iter()
        .filter(|h| {
            let Some(i) = h["host"].as_str().and_then(crate::wire::host_index) else {
                return false;
            };
            let u = &h["used"];
            let used = [
                u["VCPU"].as_i64(),
                u["MEMORY_MB"].as_i64(),
                u["DISK_GB"].as_i64(),
            ];
            books
                .get(i)
                .is_none_or(|b| used.iter().zip(b.0).any(|(l, b)| *l != Some(b)))
        })
        .count()
}

/// A fresh service configuration for `backend` in this comparison: its own notification
/// queue and, with `--via rpc`, its own RPC topic, so no run consumes another's messages.
pub fn config(env: &Env, backend: &str, label: &str, hosts: usize) -> ServiceConfig {
    let amqp = env.notify == NotifyVia::Amqp || env.via == Via::Rpc;
    // A topic exchange reads `*` and `#` in binding keys as wildcards: keep labels plain.
    let plain: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    ServiceConfig {
        backend: backend.to_string(),
        workers: 4,
        seed: 1,
        time_scale: 1.0,
        refresh_interval_s: 60.0,
        asc_start_interval_s: 60.0,
        asc_min_interval_s: 1.0,
        apsr_epsilon: 0.05,
        apsr_round_interval_s: 10.0,
        amqp_url: if amqp {
            env.amqp_url.clone()
        } else {
            String::new()
        },
        exchange: format!("parasol_bench_{}", env.run_id),
        queue: format!("parasol.bench.{}.{label}.{hosts}", env.run_id),
        rpc_topic: (env.via == Via::Rpc)
            .then(|| format!("scheduler.bench.{}.{plain}.{hosts}", env.run_id)),
        batch_mode: "off".into(),
        window_ms: 10,
        flex_update_period_s: None,
    }
}

/// `bench-results/<run>` under `root`.
pub fn out_dir(root: &Path, run_id: &str) -> anyhow::Result<PathBuf> {
    let dir = root.join(run_id);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
