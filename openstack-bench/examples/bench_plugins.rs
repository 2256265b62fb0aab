//! What one `filter` plugin adds to a decision (docs/plugins.md §8), in process on the same
//! `Scheduler` the service runs: no plugin; one WebAssembly filter (feature `wasm-plugins`)
//! that answers at once (`pass`: the transport's cost: the request built and encoded, copied
//! into an instance put back as instantiated, the answer read) or reads the whole request
//! first (`scan`, tests/wasm/scan_filter.wat); one webhook filter on loopback, a keep-alive
//! HTTP/1.1 server in a thread of its own answering `{}`. Each plugin sees K candidates. CPU is
//! the process' less the webhook server's thread: what the service spends; "on the deciding
//! thread" is the part spent by the thread that runs the decisions (the rest is the ledger's
//! writer and SQLite's, whose cost per claim grows as one caller's claims come slower and its
//! batches shrink).
//!
//! `cargo run --profile perf -p openstack-bench --features wasm-plugins --example bench_plugins -- --hosts 10000 --candidates 64`

use clap::Parser;
use parasol::configuration::{BackendKind, Settings};
use parasol::domain::{RequestContext, Resources};
use parasol::plugins::{PluginEvent, PluginSpec, Transport};
use parasol::stats::Stats;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;
use common::{ledger_with_hosts, pct, scheduler_on};

/// The service's allocator (`src/main.rs`), so that this measures what the service runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 10_000)]
    hosts: usize,
    /// K: the candidates the plugin sees.
    #[arg(long, default_value_t = 64)]
    candidates: usize,
    #[arg(long, default_value = "filter")]
    backend: BackendKind,
    /// Plugins to measure: none, wasm-pass, wasm-scan, webhook.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "none,wasm-pass,wasm-scan,webhook"
    )]
    plugins: Vec<String>,
    /// Decisions measured per plugin, after `warmup` unmeasured.
    #[arg(long, default_value_t = 2000)]
    decisions: usize,
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Decisions per block when the plugins' decisions alternate in blocks (A B B A …, each on a
    /// scheduler of its own, started together); 0: one plugin after another.
    #[arg(long, default_value_t = 0)]
    interleave: usize,
}

/// CPU time in µs on `clock`: the process' (`CLOCK_PROCESS_CPUTIME_ID`) or a thread's.
fn cpu_us(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to; a bad clock id only returns an error.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// A loopback webhook answering `{}` to every request, keep-alive, `TCP_NODELAY`, on a thread
/// and runtime of its own; its URL and the thread's CPU clock.
fn start_webhook() -> (String, libc::clockid_t) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/filter", listener.local_addr().expect("addr"));
    let (tell, told) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut clock: libc::clockid_t = 0;
        // SAFETY: the calling thread's own handle, and a valid place for its clock id.
        unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) };
        let _ = tell.send(clock);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            listener.set_nonblocking(true).expect("nonblocking");
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(serve(stream));
            }
        });
    });
    (url, told.recv().expect("the webhook's thread"))
}

async fn serve(mut stream: tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::with_capacity(1 << 16);
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 16384];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 16384];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..head_end + length);
        let answer =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        if stream.write_all(answer).await.is_err() {
            return;
        }
    }
}

/// The test module `name` (tests/wasm), compiled to a file in `dir`.
#[cfg(feature = "wasm-plugins")]
fn wasm_module(dir: &std::path::Path, name: &str) -> String {
    let wat = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/wasm");
    let read = |f: &str| std::fs::read_to_string(format!("{wat}/{f}")).expect("a .wat file");
    let text = match name {
        // Answers `{}` at once.
        "pass" => format!(
            "(module\n{}\n(func (export \"filter\") (param i32 i32) (result i64) \
             (call $answer (i32.const 288) (i32.const 2))))",
            read("prelude.wat")
        ),
        _ => format!(
            "(module\n{}\n{}\n)",
            read("prelude.wat"),
            read(&format!("{name}.wat"))
        ),
    };
    let path = dir.join(format!("{name}.wasm"));
    std::fs::write(&path, wat::parse_str(text).expect("valid WAT")).expect("write");
    path.display().to_string()
}

#[cfg(not(feature = "wasm-plugins"))]
fn wasm_module(_: &std::path::Path, _: &str) -> String {
    panic!("the wasm plugins need --features wasm-plugins")
}

fn spec(name: &str, transport: Transport, url: String, module: Option<String>) -> PluginSpec {
    PluginSpec {
        name: name.into(),
        event: PluginEvent::Filter,
        order: 0,
        transport,
        url,
        module,
        fuel: None,
        memory_pages: None,
        timeout_ms: 5_000,
        ignorable: false,
        weight_multiplier: 1.0,
        token_file: None,
        ca_file: None,
        cert_file: None,
        key_file: None,
    }
}

/// One plugin's scheduler and what its decisions cost.
struct Arm {
    plugin: String,
    scheduler: parasol::scheduling::Scheduler,
    stats: Arc<Stats>,
    lat: Vec<u64>,
    /// The service's CPU over the measured decisions, µs.
    cpu: u64,
    decided: usize,
    /// CPU per decision of each measured block, in order (`--interleave`).
    blocks: Vec<f64>,
    /// The deciding thread's CPU over the measured decisions, µs, and per decision of each
    /// block.
    own: u64,
    own_blocks: Vec<f64>,
    /// Page faults over the measured decisions (a fresh page the kernel zeroes is CPU too).
    faults: u64,
}

/// A scheduler for `plugin` on `ledger`, as the service starts one.
async fn arm(
    args: &Args,
    ledger: &parasol::ledger::Ledger,
    plugin: &str,
    dir: &std::path::Path,
    webhook: &str,
) -> Arm {
    let chain = match plugin {
        "none" => vec![],
        "wasm-pass" => vec![spec(
            plugin,
            Transport::Wasm,
            String::new(),
            Some(wasm_module(dir, "pass")),
        )],
        "wasm-scan" => vec![spec(
            plugin,
            Transport::Wasm,
            String::new(),
            Some(wasm_module(dir, "scan_filter")),
        )],
        "webhook" => vec![spec(plugin, Transport::Http, webhook.to_string(), None)],
        other => panic!("unknown plugin {other:?}: none, wasm-pass, wasm-scan, webhook"),
    };
    let mut settings = Settings::default();
    settings.scheduler.backend = args.backend;
    settings.scheduler.workers = 1;
    settings.scheduler.seed = Some(args.seed);
    settings.amqp.url = String::new();
    settings.policy.host_timeout_s = 0;
    settings.plugins.candidates = args.candidates;
    settings.plugins.chain = chain;
    let (scheduler, stats) = scheduler_on(settings, ledger).await;
    Arm {
        plugin: plugin.to_string(),
        scheduler,
        stats,
        lat: Vec::with_capacity(args.decisions),
        cpu: 0,
        decided: 0,
        blocks: Vec::new(),
        own: 0,
        own_blocks: Vec::new(),
        faults: 0,
    }
}

/// Runs `n` decisions on `arm` (measured unless `warm`), then releases what they claimed
/// (not measured); `tag` keeps instance names unique.
async fn decide(
    arm: &mut Arm,
    ledger: &parasol::ledger::Ledger,
    n: usize,
    warm: bool,
    tag: &str,
    webhook_clock: libc::clockid_t,
) {
    let process = libc::CLOCK_PROCESS_CPUTIME_ID;
    let names: Vec<String> = (0..n).map(|i| format!("{tag}-{i}")).collect();
    let thread = libc::CLOCK_THREAD_CPUTIME_ID;
    let cpu = (cpu_us(process), cpu_us(webhook_clock), cpu_us(thread));
    let faults = page_faults();
    for name in &names {
        let req = RequestContext::with_demand(name.clone(), "m1.tiny", Resources::new(1, 512, 1));
        let t = Instant::now();
        arm.scheduler.schedule(vec![req]).await.expect("placed");
        if !warm {
            arm.lat.push(t.elapsed().as_micros() as u64);
        }
    }
    let own = cpu_us(thread) - cpu.2;
    let spent = (cpu_us(process) - cpu.0) - (cpu_us(webhook_clock) - cpu.1);
    if !warm {
        arm.faults += page_faults() - faults;
        arm.cpu += spent;
        arm.own += own;
        arm.decided += n;
        arm.blocks.push(spent as f64 / n as f64);
        arm.own_blocks.push(own as f64 / n as f64);
    }
    for name in names {
        ledger.release(&name).await.expect("release");
    }
}

/// The process' page faults so far, minor and major.
fn page_faults() -> u64 {
    // SAFETY: an all-zero rusage is valid, and getrusage only writes into it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid rusage to write to.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    (usage.ru_minflt + usage.ru_majflt) as u64
}

fn report(arm: &mut Arm) {
    let call = arm.stats.plugin("filter", &arm.plugin).to_json();
    let us = |q: &str| (call["latency_ms"][q].as_f64().unwrap_or(0.0) * 1000.0).round();
    let calls = call["calls"].as_u64().unwrap_or(0);
    assert_eq!(call["errors"], 0, "{}: {call}", arm.plugin);
    println!(
        "| {} | {} | {} | {:.1} | {:.1} | {:.3} | {} |",
        arm.plugin,
        pct(&mut arm.lat, 0.5),
        pct(&mut arm.lat, 0.99),
        arm.cpu as f64 / arm.decided as f64,
        arm.own as f64 / arm.decided as f64,
        arm.faults as f64 / arm.decided as f64,
        if calls > 0 {
            format!("{} / {}", us("p50"), us("p99"))
        } else {
            "—".into()
        }
    );
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let dir = tempfile::tempdir().expect("tempdir");
    let ledger = ledger_with_hosts(dir.path(), args.hosts).await;
    let (webhook, webhook_clock) = start_webhook();
    println!("# bench_plugins: one filter plugin's cost per decision, one caller, in process, SQLite ledger");
    println!(
        "# hosts {}, backend {}, K = {} candidates, {} decisions after {} of warm-up, flavor 1 VCPU / 512 MB / 1 GB, seed {}{}",
        args.hosts,
        args.backend.as_str(),
        args.candidates,
        args.decisions,
        args.warmup,
        args.seed,
        match args.interleave {
            0 => String::new(),
            b => format!(", interleaved in blocks of {b}"),
        }
    );
    println!("| plugin | p50 decision (µs) | p99 decision (µs) | CPU per decision (µs) | of it on the deciding thread (µs) | page faults per decision | plugin call p50 / p99 (µs, Parasol's count) |");
    println!("|---|---|---|---|---|---|---|");
    if args.interleave == 0 {
        // One plugin after another, each on a scheduler of its own.
        for (round, plugin) in args.plugins.iter().enumerate() {
            let mut arm = arm(&args, &ledger, plugin, dir.path(), &webhook).await;
            let tag = format!("r{round}");
            decide(
                &mut arm,
                &ledger,
                args.warmup,
                true,
                &format!("{tag}w"),
                webhook_clock,
            )
            .await;
            decide(
                &mut arm,
                &ledger,
                args.decisions,
                false,
                &tag,
                webhook_clock,
            )
            .await;
            report(&mut arm);
            arm.scheduler.backend().stop();
        }
        return;
    }
    // Every plugin's scheduler at once, their decisions in alternating blocks (A B B A …):
    // what drifts over a run (the allocator's arenas, caches, the machine) falls on each arm
    // alike, where one arm after another gives the first the cold start.
    let mut plugins: Vec<&String> = Vec::new();
    for p in &args.plugins {
        if !plugins.contains(&p) {
            plugins.push(p);
        }
    }
    let mut arms = Vec::new();
    for plugin in &plugins {
        arms.push(arm(&args, &ledger, plugin, dir.path(), &webhook).await);
    }
    for (a, arm) in arms.iter_mut().enumerate() {
        decide(
            arm,
            &ledger,
            args.warmup,
            true,
            &format!("w{a}"),
            webhook_clock,
        )
        .await;
    }
    let block = args.interleave;
    let rounds = args.decisions.div_ceil(block);
    for round in 0..rounds {
        let n = block.min(args.decisions - round * block);
        let order: Vec<usize> = if round % 2 == 0 {
            (0..arms.len()).collect()
        } else {
            (0..arms.len()).rev().collect()
        };
        for a in order {
            decide(
                &mut arms[a],
                &ledger,
                n,
                false,
                &format!("b{round}-{a}"),
                webhook_clock,
            )
            .await;
        }
    }
    for arm in &mut arms {
        report(arm);
    }
    // Each plugin against the first arm, block by block: the mean difference and its spread.
    for arm in &arms[1..] {
        for (what, blocks, base) in [
            ("CPU", &arm.blocks, &arms[0].blocks),
            (
                "CPU on the deciding thread",
                &arm.own_blocks,
                &arms[0].own_blocks,
            ),
        ] {
            let (mean, error) = paired(blocks, base);
            println!(
                "# {} adds {:+.1} µs {what} per decision to {} (mean of {} paired blocks, standard error {:.1} µs)",
                arm.plugin,
                mean,
                arms[0].plugin,
                blocks.len(),
                error
            );
        }
    }
    for arm in &arms {
        arm.scheduler.backend().stop();
    }
}

/// The mean of the block-by-block differences `blocks − base` and its standard error.
fn paired(blocks: &[f64], base: &[f64]) -> (f64, f64) {
    let d: Vec<f64> = blocks.iter().zip(base).map(|(x, b)| x - b).collect();
    let mean = d.iter().sum::<f64>() / d.len() as f64;
    let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (d.len() as f64 - 1.0).max(1.0);
    (mean, (var / d.len() as f64).sqrt())
}
