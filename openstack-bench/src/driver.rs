//! The load driver: replays a workload through select_destinations — `POST
//! /v1/select_destinations` or Nova's scheduler RPC on RabbitMQ — with `concurrency` callers
//! — open loop (Poisson arrivals, scaled), in batches, or closed loop — boots each placed
//! instance on the chosen emulated host, and times every decision.

use crate::hosts::Fleet;
use crate::wire;
use crate::workload::{Dataset, Request};
use anyhow::Context;
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use parasol_rpc_client::RpcClient;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// How select_destinations is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// `POST /v1/select_destinations`.
    Http,
    /// Nova's scheduler RPC on RabbitMQ, as nova-conductor calls it: `select_destinations` at
    /// version 4.5 with objects and alternates on the run's own topic (`--amqp-url`).
    Rpc,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Http => "http",
            Via::Rpc => "rpc",
        }
    }
}

/// Where one run's select_destinations calls go.
#[derive(Clone, Debug)]
pub enum Target {
    /// The service's HTTP base URL.
    Http { base: String },
    /// The service's RPC server: broker, exchange (`[amqp] exchange`) and `[rpc] topic`.
    Rpc {
        amqp_url: String,
        exchange: String,
        topic: String,
    },
}

/// Nova's scheduler RPC version with `return_objects` and `return_alternates`.
const RPC_VERSION: &str = "4.5";
/// Seconds a caller waits for an answer, on either path.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// `_timeout` of each RPC call (Nova sends `rpc_response_timeout`, 60 s): the server
/// heartbeats every half of it while deciding.
const CALL_MONITOR_TIMEOUT_S: u64 = 60;
/// How long the RPC server may take to declare its queues and answer a ping.
const RPC_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The connection the callers share.
enum Caller {
    Http {
        client: reqwest::Client,
        /// Parsed once: a `&str` would be parsed (and its host name IDNA-checked) per call.
        url: reqwest::Url,
    },
    Rpc {
        client: Box<RpcClient>,
        topic: String,
    },
}

/// What one select_destinations call came back with.
enum Outcome {
    /// The first Selection's host, when the reply has one.
    Placed(Option<String>),
    NoValidHost,
    Error,
}

impl Caller {
    async fn connect(target: &Target, concurrency: usize) -> anyhow::Result<Caller> {
        match target {
            Target::Http { base } => Ok(Caller::Http {
                client: reqwest::Client::builder()
                    .pool_max_idle_per_host(concurrency)
                    // Below actix-web's 5 s keep-alive (see run.rs).
                    .pool_idle_timeout(Duration::from_secs(2))
                    .timeout(CALL_TIMEOUT)
                    .build()?,
                url: reqwest::Url::parse(&format!("{base}/v1/select_destinations"))
                    .with_context(|| format!("the service's base URL {base}"))?,
            }),
            Target::Rpc {
                amqp_url,
                exchange,
                topic,
            } => {
                let client = RpcClient::connect(amqp_url, exchange)
                    .await
                    .with_context(|| {
                        format!("connecting the RPC client to RabbitMQ (exchange {exchange})")
                    })?;
                wait_until_serving(&client, topic).await?;
                Ok(Caller::Rpc {
                    client: Box::new(client),
                    topic: topic.clone(),
                })
            }
        }
    }

    /// One select_destinations call with the same RequestSpec body on either path.
    async fn select(&self, body: Value) -> Outcome {
        match self {
            Caller::Http { client, url } => match client.post(url.clone()).json(&body).send().await
            {
                Ok(r) if r.status().is_success() => match r.bytes().await {
                    Ok(body) => wire::chosen_host_in(&body).map_or(Outcome::Error, Outcome::Placed),
                    Err(_) => Outcome::Error,
                },
                Ok(r) if r.status().as_u16() == 409 => {
                    let _ = r.bytes().await;
                    Outcome::NoValidHost
                }
                _ => Outcome::Error,
            },
            Caller::Rpc { client, topic } => {
                let m = client.call_message(
                    "select_destinations",
                    body,
                    RPC_VERSION,
                    None,
                    Some(CALL_MONITOR_TIMEOUT_S),
                );
                match client.call_with(topic, &m, CALL_TIMEOUT).await {
                    Ok(reply) => match &reply.failure {
                        None => Outcome::Placed(wire::chosen_host(&reply.result).map(String::from)),
                        Some(f) if f["class"] == "NoValidHost" => Outcome::NoValidHost,
                        Some(_) => Outcome::Error,
                    },
                    Err(_) => Outcome::Error,
                }
            }
        }
    }

    /// Closes the broker connection (and with it the exclusive reply queue).
    async fn close(&self) {
        if let Caller::Rpc { client, .. } = self {
            client.close().await;
        }
    }
}

/// Pings `topic` (oslo's base API) until the service has declared its queues and answers:
/// a call published before the queue is bound would be dropped by the exchange.
async fn wait_until_serving(client: &RpcClient, topic: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + RPC_READY_TIMEOUT;
    while Instant::now() < deadline {
        let ping = client.call_message("ping", json!({"arg": 0}), "1.0", Some("baseapi"), None);
        if client
            .call_with(topic, &ping, Duration::from_millis(300))
            .await
            .is_ok_and(|r| r.failure.is_none())
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!(
        "the service's RPC server on topic {topic} did not answer a ping within {} s",
        RPC_READY_TIMEOUT.as_secs()
    )
}

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
    /// Open loop: how long after its scheduled arrival each request was released: the release
    /// thread's own lateness plus any wait for a free caller (`--concurrency`); its latency
    /// includes both.
    pub release_late_ms: Option<Percentiles>,
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
    caller: Caller,
    fleet: Arc<Fleet>,
    flavors: Vec<parasol::domain::Resources>,
    time_scale: f64,
    tally: Tally,
    latency: Mutex<Histogram<u64>>,
    progress: ProgressBar,
}

/// Runs `requests` against `target`; returns when every issued call answered.
pub async fn drive(
    target: &Target,
    ds: &Dataset,
    requests: &[Request],
    fleet: Arc<Fleet>,
    spec: &DriveSpec,
    progress: ProgressBar,
) -> anyhow::Result<DriverResult> {
    let caller = Caller::connect(target, spec.concurrency).await?;
    let ctx = Arc::new(Ctx {
        caller,
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
    let (issued, late) = if spec.open_loop {
        // On a thread of its own: tokio's timer fires on whole milliseconds, which would
        // release arrivals up to 1 ms late and in bursts, and count that in their latency.
        let (ctx, sem, spec) = (ctx.clone(), sem.clone(), spec.clone());
        let requests = requests.to_vec();
        let handle = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || dispatch(&handle, &ctx, &sem, &requests, &spec, start))
            .await??
    } else {
        (release(&ctx, &sem, requests, spec, start).await?, None)
    };
    drop(sem.acquire_many(permits as u32).await?);
    let wall_s = start.elapsed().as_secs_f64();
    ctx.caller.close().await;
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
        release_late_ms: late,
    })
}

/// Closed loop or batches: each request as soon as a caller is free (and, in batches, once
/// the previous batch finished). Returns how many were issued.
async fn release(
    ctx: &Arc<Ctx>,
    sem: &Arc<Semaphore>,
    requests: &[Request],
    spec: &DriveSpec,
    start: Instant,
) -> anyhow::Result<u64> {
    let permits = spec.concurrency.max(1);
    let mut issued = 0u64;
    for (i, req) in requests.iter().enumerate() {
        if start.elapsed() > spec.max_duration {
            break;
        }
        let scheduled = Instant::now();
        if spec.batch.is_some_and(|b| i > 0 && i % b == 0) {
            // The whole previous batch must finish first.
            drop(sem.acquire_many(permits as u32).await?);
        }
        let permit = sem.clone().acquire_owned().await?;
        spawn_call(
            ctx,
            req,
            scheduled,
            permit,
            &tokio::runtime::Handle::current(),
        );
        issued += 1;
    }
    Ok(issued)
}

/// Open loop, on a blocking thread: releases each request at its scheduled arrival (the
/// thread sleeps to it: `nanosleep`, tens of microseconds late, not tokio's millisecond
/// timer). Each latency counts from the scheduled arrival, so time spent waiting for a free
/// caller is in it (no coordinated omission). Returns how many were issued and how late
/// they were released (ms).
fn dispatch(
    handle: &tokio::runtime::Handle,
    ctx: &Arc<Ctx>,
    sem: &Arc<Semaphore>,
    requests: &[Request],
    spec: &DriveSpec,
    start: Instant,
) -> anyhow::Result<(u64, Option<Percentiles>)> {
    let mut late = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)?;
    let mut issued = 0u64;
    for req in requests {
        if start.elapsed() > spec.max_duration {
            break;
        }
        let at = start + Duration::from_secs_f64(req.arrival_s / spec.time_scale);
        if let Some(wait) = at.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let permit = handle.block_on(sem.clone().acquire_owned())?;
        let _ = late.record((at.elapsed().as_micros() as u64).max(1));
        spawn_call(ctx, req, at, permit, handle);
        issued += 1;
    }
    let ms = |q: f64| late.value_at_quantile(q) as f64 / 1000.0;
    Ok((
        issued,
        Some(Percentiles {
            p50: ms(0.5),
            p90: ms(0.9),
            p99: ms(0.99),
            max: ms(1.0),
        }),
    ))
}

fn spawn_call(
    ctx: &Arc<Ctx>,
    req: &Request,
    scheduled: Instant,
    permit: tokio::sync::OwnedSemaphorePermit,
    handle: &tokio::runtime::Handle,
) {
    let ctx = ctx.clone();
    let req = req.clone();
    handle.spawn(async move {
        call(&ctx, &req, scheduled).await;
        ctx.progress.inc(1);
        drop(permit);
    });
}

async fn call(ctx: &Ctx, req: &Request, scheduled: Instant) {
    let demand = ctx.flavors[req.flavor];
    let uuid = req.uuid.to_string();
    let body = wire::select_body(&uuid, demand);
    let outcome = ctx.caller.select(body).await;
    record(ctx, scheduled);
    let reply = match outcome {
        Outcome::Placed(reply) => reply,
        Outcome::NoValidHost => {
            ctx.tally.nvh.fetch_add(1, Ordering::Relaxed);
            return;
        }
        Outcome::Error => {
            ctx.tally.errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    ctx.tally.placed.fetch_add(1, Ordering::Relaxed);
    let lifetime = req
        .lifetime_s
        .map(|l| Duration::from_secs_f64(l / ctx.time_scale));
    let booted = reply
        .as_deref()
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
