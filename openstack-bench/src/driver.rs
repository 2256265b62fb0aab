//! The load driver: replays a workload against `POST /v1/select_destinations` with
//! `concurrency` callers — open loop (Poisson arrivals, scaled), in batches, or closed loop —
//! boots each placed instance on the chosen emulated host, and times every decision.

use crate::hosts::Fleet;
use crate::wire;
use crate::workload::{Dataset, Request};
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use parking_lot::Mutex;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// How requests are released.
#[derive(Clone, Debug)]
pub struct DriveSpec {
    pub concurrency: usize,
    /// Divides every arrival time and lifetime.
    pub time_scale: f64,
    /// Open loop at the workload's arrival times; otherwise as fast as the callers go.
    pub open_loop: bool,
    /// Release requests in batches of this size, each after the previous one finished.
    pub batch: Option<usize>,
    /// Stop issuing after this long (the issued requests still complete).
    pub max_duration: Duration,
}

/// The driver's own measurements.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct DriverResult {
    pub issued: u64,
    pub placed: u64,
    pub no_valid_host: u64,
    pub errors: u64,
    pub unknown_host: u64,
    pub wall_s: f64,
    pub decisions_per_s: f64,
    pub latency_ms: Percentiles,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Default)]
struct Tally {
    placed: AtomicU64,
    nvh: AtomicU64,
    errors: AtomicU64,
    unknown: AtomicU64,
}

struct Ctx {
    client: reqwest::Client,
    url: String,
    fleet: Arc<Fleet>,
    flavors: Vec<parasol::domain::Resources>,
    time_scale: f64,
    tally: Tally,
    latency: Mutex<Histogram<u64>>,
    progress: ProgressBar,
}

/// Runs `requests` against the service at `base`; returns when every issued call answered.
pub async fn drive(
    base: &str,
    ds: &Dataset,
    requests: &[Request],
    fleet: Arc<Fleet>,
    spec: &DriveSpec,
    progress: ProgressBar,
) -> anyhow::Result<DriverResult> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(spec.concurrency)
        .timeout(Duration::from_secs(60))
        .build()?;
    let ctx = Arc::new(Ctx {
        client,
        url: format!("{base}/v1/select_destinations"),
        fleet,
        flavors: ds.flavors.clone(),
        time_scale: spec.time_scale,
        tally: Tally::default(),
        latency: Mutex::new(Histogram::new_with_bounds(1, 600_000_000, 3)?),
        progress,
    });
    let permits = spec.concurrency.max(1);
    let sem = Arc::new(Semaphore::new(permits));
    let start = Instant::now();
    let mut issued = 0u64;
    for (i, req) in requests.iter().enumerate() {
        if start.elapsed() > spec.max_duration {
            break;
        }
        if spec.open_loop {
            let at = start + Duration::from_secs_f64(req.arrival_s / spec.time_scale);
            tokio::time::sleep_until(at.into()).await;
        }
        if spec.batch.is_some_and(|b| i > 0 && i % b == 0) {
            // The whole previous batch must finish first.
            drop(sem.acquire_many(permits as u32).await?);
        }
        let permit = sem.clone().acquire_owned().await?;
        let ctx = ctx.clone();
        let req = req.clone();
        tokio::spawn(async move {
            call(&ctx, &req).await;
            ctx.progress.inc(1);
            drop(permit);
        });
        issued += 1;
    }
    drop(sem.acquire_many(permits as u32).await?);
    let wall_s = start.elapsed().as_secs_f64();
    let h = ctx.latency.lock();
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let t = &ctx.tally;
    Ok(DriverResult {
        issued,
        placed: t.placed.load(Ordering::Relaxed),
        no_valid_host: t.nvh.load(Ordering::Relaxed),
        errors: t.errors.load(Ordering::Relaxed),
        unknown_host: t.unknown.load(Ordering::Relaxed),
        wall_s,
        decisions_per_s: issued as f64 / wall_s.max(1e-9),
        latency_ms: Percentiles {
            p50: ms(0.5),
            p90: ms(0.9),
            p99: ms(0.99),
            max: ms(1.0),
        },
    })
}

async fn call(ctx: &Ctx, req: &Request) {
    let demand = ctx.flavors[req.flavor];
    let uuid = req.uuid.to_string();
    let body = wire::select_body(&uuid, demand);
    let t0 = Instant::now();
    let resp = ctx.client.post(&ctx.url).json(&body).send().await;
    let outcome = match resp {
        Ok(r) if r.status().is_success() => r.json::<Value>().await.ok(),
        Ok(r) if r.status().as_u16() == 409 => {
            let _ = r.bytes().await;
            ctx.tally.nvh.fetch_add(1, Ordering::Relaxed);
            record(ctx, t0);
            return;
        }
        _ => None,
    };
    record(ctx, t0);
    let Some(reply) = outcome else {
        ctx.tally.errors.fetch_add(1, Ordering::Relaxed);
        return;
    };
    ctx.tally.placed.fetch_add(1, Ordering::Relaxed);
    let lifetime = req
        .lifetime_s
        .map(|l| Duration::from_secs_f64(l / ctx.time_scale));
    let booted = wire::chosen_host(&reply)
        .and_then(wire::host_index)
        .is_some_and(|i| ctx.fleet.boot(i, uuid, demand, lifetime));
    if !booted {
        ctx.tally.unknown.fetch_add(1, Ordering::Relaxed);
    }
}

fn record(ctx: &Ctx, t0: Instant) {
    let us = t0.elapsed().as_micros() as u64;
    let _ = ctx.latency.lock().record(us.max(1));
}

/// One sample of the service's live parameters.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ParamSample {
    pub t_s: f64,
    pub refresh_interval_s: Option<f64>,
    pub schedulers: Option<f64>,
    pub hosts_per_scheduler: Option<f64>,
}

/// Samples `/v1/stats` every `period` until `stop` resolves.
pub async fn sample_params(
    base: String,
    backend: String,
    period: Duration,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> Vec<ParamSample> {
    let client = reqwest::Client::new();
    let start = Instant::now();
    let mut out = Vec::new();
    tokio::pin!(stop);
    // Bounded: one sample per period until stopped, and never more than 100,000.
    while out.len() < 100_000 {
        let stats = client.get(format!("{base}/v1/stats")).send().await;
        if let Ok(v) = match stats {
            Ok(r) => r.json::<Value>().await,
            Err(e) => Err(e),
        } {
            let p = &v["backends"][&backend]["params"];
            out.push(ParamSample {
                t_s: start.elapsed().as_secs_f64(),
                refresh_interval_s: p["refresh_interval_s"].as_f64(),
                schedulers: p["schedulers"].as_f64(),
                hosts_per_scheduler: p["hosts_per_scheduler"].as_f64(),
            });
        }
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = &mut stop => break,
        }
    }
    out
}
