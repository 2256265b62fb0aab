//! Nova 34's own scheduler and Parasol side by side, both claiming in the same real Placement
//! for the same 1,000 compute nodes, both served over oslo.messaging on the real RabbitMQ and
//! called with Nova's own `SchedulerQueryClient` (issue 13's benchmark).
//!
//! One command does everything and kills every process it starts:
//! 1. one `openstack-placement` 16.0.0 (`tests/support/placement_server.rs`'s launcher: noauth2,
//!    SQLite, single-threaded `wsgiref`) with `--hosts` root providers (64 VCPU × 16, 256 GiB,
//!    2 TB, trait `OWNER_NOVA` as nova-compute reports it, name = node name);
//! 2. Nova's API, cell0 and cell1 databases (SQLite files: the cached nova venv has no MySQL
//!    driver) made by `nova-manage`, and for every provider a `nova-compute` service and its
//!    compute node (host `cmpNNNN`, node `cmpNNNN.bench.example.org`, uuid = provider uuid)
//!    made with Nova's objects by `tests/nova_db/seed.py`, which also checks that Nova's
//!    `HostManager` sees all of them up, then `nova-manage cell_v2 discover_hosts`;
//! 3. **Nova**: `nova-scheduler` itself (`nova.cmd.scheduler.main`, unchanged, default filters
//!    and weighers, claims in Placement, Nova's other defaults but `[scheduler] workers = 1`) on its own exchange;
//!    `openstack-bench/placement_claims/driver.py` calls it with `SchedulerQueryClient`
//!    (Selection objects with alternates), the same seeded series of instances for every
//!    scheduler, `--warmup` untimed calls then `--decisions` timed ones by 1, then 8 (or
//!    `--callers`) concurrent callers;
//! 4. after each run: every provider's usage equals what the
//!    run placed there (no leak), none is over capacity; then the run's allocations are
//!    deleted, so every run starts from an empty Placement;
//! 5. **Parasol**: `parasol serve` (`--parasol`, default: the `parasol` binary beside this
//!    example's directory) with `[placement] claims`, `[nova_db]` on the same API and cell
//!    databases and `[rpc] enabled` on its own exchange, the same driver, the same series;
//! 6. the baseline: `--decisions` `PUT /allocations/{consumer}` of new consumers made directly,
//!    one at a time (and `GET /allocation_candidates` of the same request, which Nova makes
//!    before its claim and Parasol does not).
//!
//! Prints, per scheduler and number of callers: decisions/s, mean/p50/p99 per decision, the
//! mean Placement PUT inside a decision (the baseline, and for Parasol its own
//! `parasol_placement_claim_duration_seconds`, which is its `GET` + `PUT`), the time the
//! scheduler adds on top of the PUT, and the CPU time per decision of the scheduler's
//! processes and of Placement's (from `/proc/<pid>/stat`, the process and its children).
//!
//! ```text
//! cargo build --release -p parasol -p openstack-bench --bin parasol --example bench_nova_vs_parasol
//! target/release/examples/bench_nova_vs_parasol --hosts 1000 --decisions 200 --callers 1,8
//! ```

#[path = "../../tests/support/placement_server.rs"]
mod placement_server;
use placement_server::venv;

use clap::Parser;
use placement_server::PlacementServer;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TRANSPORT_URL: &str = "rabbit://guest:guest@127.0.0.1:5672/";
const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
const VCPU_TOTAL: i64 = 64;
const VCPU_RATIO: f64 = 16.0;
const MEMORY_MB: i64 = 262_144;
const DISK_GB: i64 = 2000;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 1000)]
    hosts: usize,
    /// Timed decisions per run.
    #[arg(long, default_value_t = 200)]
    decisions: usize,
    /// Untimed calls before each run (one at a time).
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Concurrent callers of each run, comma-separated.
    #[arg(long, default_value = "1,8", value_delimiter = ',')]
    callers: Vec<usize>,
    /// Seed of the instance series (the same for both schedulers).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The `parasol` binary (default: `target/release/parasol` beside this example).
    #[arg(long)]
    parasol: Option<PathBuf>,
    /// Only Nova, or only Parasol.
    #[arg(long, default_value = "nova,parasol", value_delimiter = ',')]
    schedulers: Vec<String>,
}

/// The processes this benchmark started, killed (and reaped) however it ends.
struct Processes(Vec<(String, Child)>);

impl Processes {
    fn stop(&mut self, name: &str) {
        if let Some(i) = self.0.iter().position(|(n, _)| n == name) {
            let (_, mut child) = self.0.remove(i);
            kill_tree(child.id());
            let _ = child.wait();
        }
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            kill_tree(child.id());
            let _ = child.wait();
        }
    }
}

/// The ids of `pid`'s descendants (from `/proc/*/stat`'s parent field).
fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Some(fields) = stat_fields(p) {
                if let Ok(ppid) = fields[1].parse::<u32>() {
                    parents.push((p, ppid));
                }
            }
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// `/proc/<pid>/stat` fields after the command name (field 3, state, is index 0).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// User + system CPU seconds of `pid` and its living descendants.
fn cpu_s(pid: u32) -> f64 {
    let tick = 100.0; // USER_HZ on Linux
    std::iter::once(pid)
        .chain(descendants(pid))
        .filter_map(stat_fields)
        .map(|f| {
            // utime and stime are fields 14 and 15: indexes 11 and 12 here.
            let t = |i: usize| f[i].parse::<f64>().unwrap_or(0.0);
            (t(11) + t(12)) / tick
        })
        .sum()
}

fn kill_tree(pid: u32) {
    for p in descendants(pid).into_iter().chain(std::iter::once(pid)) {
        let _ = Command::new("kill")
            .args(["-9", &p.to_string()])
            .stderr(Stdio::null())
            .status();
    }
}

/// A file of the repository (this example lives in `openstack-bench/examples/`).
fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// Runs a command that must succeed; its stdout.
fn check(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn provider_uuid(i: usize) -> String {
    format!("b0000000-0000-4000-8000-{i:012}")
}

fn host(i: usize) -> String {
    format!("cmp{i:04}")
}

fn node(i: usize) -> String {
    format!("cmp{i:04}.bench.example.org")
}

/// Registers `hosts` providers as nova-compute would (inventory, `OWNER_NOVA`).
async fn register(placement: &PlacementServer, hosts: usize) {
    for i in 0..hosts {
        let uuid = provider_uuid(i);
        placement
            .call(
                Method::POST,
                "/resource_providers",
                Some(json!({"name": node(i), "uuid": uuid})),
            )
            .await;
        let body = json!({"resource_provider_generation": 0, "inventories": {
            "VCPU": {"total": VCPU_TOTAL, "allocation_ratio": VCPU_RATIO},
            "MEMORY_MB": {"total": MEMORY_MB}, "DISK_GB": {"total": DISK_GB}}});
        let path = format!("/resource_providers/{uuid}/inventories");
        placement.call(Method::PUT, &path, Some(body)).await;
        let body = json!({"resource_provider_generation": 1, "traits": ["OWNER_NOVA"]});
        let path = format!("/resource_providers/{uuid}/traits");
        placement.call(Method::PUT, &path, Some(body)).await;
    }
}

/// Nova's databases and its config for nova-scheduler.
struct Nova {
    venv: PathBuf,
    conf: PathBuf,
    api_url: String,
}

fn nova_manage(venv: &Path, conf: &Path, args: &[&str]) {
    check(
        Command::new(venv.join("bin/python"))
            .args([
                "-c",
                "import sys; from nova.cmd.manage import main; sys.exit(main())",
            ])
            .arg("--config-file")
            .arg(conf)
            .args(args),
    );
}

/// Makes the API, cell0 and cell1 databases and seeds a service + compute node per provider.
fn make_nova(dir: &Path, placement_url: &str, hosts: usize, exchange: &str) -> Nova {
    let venv = venv::nova_venv();
    let db = |name: &str| format!("sqlite:///{}/{name}.sqlite", dir.display());
    let conf_for = |cell: &str| {
        format!(
            "[DEFAULT]\ntransport_url = {TRANSPORT_URL}\ncontrol_exchange = {exchange}\n\
             host = placebench-nova-scheduler\nservice_down_time = 3600\n\
             log_file = {log}\n\
             [api_database]\nconnection = {api}\n[database]\nconnection = {cell}\n\
             [oslo_messaging_notifications]\ndriver = noop\n\
             [scheduler]\nworkers = 1\n\
             [placement]\nauth_type = admin_token\nendpoint = {placement_url}\ntoken = admin\n\
             endpoint_override = {placement_url}\n",
            log = dir.join("nova-scheduler.log").display(),
            api = db("api"),
            cell = db(cell),
        )
    };
    let conf = dir.join("nova.conf");
    std::fs::write(&conf, conf_for("cell1")).expect("nova.conf");
    let conf0 = dir.join("nova-cell0.conf");
    std::fs::write(&conf0, conf_for("cell0")).expect("nova-cell0.conf");
    nova_manage(&venv, &conf, &["api_db", "sync"]);
    nova_manage(&venv, &conf, &["db", "sync", "--local_cell"]);
    nova_manage(&venv, &conf0, &["db", "sync", "--local_cell"]);
    let services: Vec<Value> = (0..hosts)
        .map(|i| {
            json!({"host": host(i), "nodes": [{
                "uuid": provider_uuid(i), "name": node(i), "hypervisor_type": "QEMU",
                "hypervisor_version": 8002000, "supported_instances": [["x86_64", "kvm", "hvm"]],
                "cpu_info": {"arch": "x86_64", "model": "Nehalem", "vendor": "Intel",
                             "topology": {"sockets": 1, "cores": 4, "threads": 2},
                             "features": ["vmx", "sse4.2"]},
                "numa": false, "pci_pools": 0, "mapped": 0}]})
        })
        .collect();
    let spec = json!({"cell0": db("cell0"), "cells": [{
        "name": "cell1", "database_connection": db("cell1"), "transport_url": TRANSPORT_URL,
        "disabled": false, "services": services}]});
    let spec_path = dir.join("spec.json");
    std::fs::write(&spec_path, spec.to_string()).expect("spec");
    let view: Value = serde_json::from_slice(&check(
        Command::new(venv.join("bin/python"))
            .arg(repo("tests/nova_db/seed.py"))
            .arg(&conf)
            .arg(&spec_path),
    ))
    .expect("seed.py prints JSON");
    // Host mappings, as a deployment makes them once compute nodes exist.
    nova_manage(&venv, &conf, &["cell_v2", "discover_hosts"]);
    let seen = view["hosts"].as_array().expect("hosts");
    let up = seen.iter().filter(|h| h["up"] == json!(true)).count();
    assert_eq!(
        (seen.len(), up),
        (hosts, hosts),
        "Nova's HostManager must see every compute node, up"
    );
    Nova {
        venv,
        conf,
        api_url: db("api"),
    }
}

/// One driver run's figures.
struct Run {
    scheduler: String,
    callers: usize,
    decisions: usize,
    errors: usize,
    wall_s: f64,
    latencies_ms: Vec<f64>,
    placed: BTreeMap<String, i64>,
    instances: Vec<String>,
    scheduler_cpu_s: f64,
    placement_cpu_s: f64,
    calls: usize,
    claim_ms: Option<f64>,
    hosts_used: usize,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Runs the driver against the scheduler on `exchange`, measuring the CPU of `pid` and of
/// Placement over the whole run (warm-up included: the CPU per decision divides by every call).
#[allow(clippy::too_many_arguments)]
fn drive(
    venv: &Path,
    exchange: &str,
    args: &Args,
    callers: usize,
    run_seed: u64,
    scheduler: &str,
    pid: u32,
    placement_pid: u32,
) -> Run {
    let (cpu0, pcpu0) = (cpu_s(pid), cpu_s(placement_pid));
    let out = check(
        Command::new(venv.join("bin/python"))
            .arg(repo("openstack-bench/placement_claims/driver.py"))
            .args([
                TRANSPORT_URL,
                exchange,
                &args.decisions.to_string(),
                &callers.to_string(),
                &run_seed.to_string(),
                &args.warmup.to_string(),
            ])
            .stderr(Stdio::null()),
    );
    let (cpu1, pcpu1) = (cpu_s(pid), cpu_s(placement_pid));
    let result: Value = serde_json::from_slice(&out).expect("driver prints JSON");
    let mut placed = BTreeMap::new();
    let mut instances = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    let all: Vec<&Value> = result["warmup"]
        .as_array()
        .expect("warmup")
        .iter()
        .chain(result["calls"].as_array().expect("calls"))
        .collect();
    for call in &all {
        if let Some(cn) = call["compute_node_uuid"].as_str() {
            *placed.entry(cn.to_string()).or_insert(0) += 1;
            instances.push(call["instance"].as_str().expect("instance").to_string());
        } else {
            errors += 1;
            first_error.get_or_insert_with(|| call["error"].to_string());
        }
    }
    if let Some(e) = first_error {
        eprintln!("{scheduler}: {errors} calls failed, the first: {e}");
    }
    let mut latencies_ms: Vec<f64> = result["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| c["ms"].as_f64().expect("ms"))
        .collect();
    latencies_ms.sort_by(f64::total_cmp);
    Run {
        scheduler: scheduler.to_string(),
        callers,
        decisions: args.decisions,
        errors,
        wall_s: result["wall_s"].as_f64().expect("wall_s"),
        latencies_ms,
        hosts_used: placed.len(),
        placed,
        instances,
        scheduler_cpu_s: cpu1 - cpu0,
        placement_cpu_s: pcpu1 - pcpu0,
        calls: all.len(),
        claim_ms: None,
    }
}

/// Every provider's usage equals what `run` placed on it (one flavor each) and none is over
/// capacity: each provider the run placed on is read, and the project's total usage
/// (`GET /usages?project_id=`, every provider) equals their sum, so no other provider holds
/// any of it. Then the run's allocations are deleted and the project's usage is back to zero.
async fn check_and_clean(placement: &PlacementServer, run: &Run) {
    for (uuid, &n) in &run.placed {
        let usages = placement.usages(uuid).await;
        let got = |c: &str| usages[c].as_i64().unwrap_or(0);
        assert_eq!(
            (got("VCPU"), got("MEMORY_MB"), got("DISK_GB")),
            (n, 512 * n, n),
            "{}: Placement's usage of {uuid} differs from the {n} decisions placed there",
            run.scheduler,
        );
        assert!(
            (got("VCPU") as f64) <= VCPU_TOTAL as f64 * VCPU_RATIO
                && got("MEMORY_MB") <= MEMORY_MB
                && got("DISK_GB") <= DISK_GB,
            "{uuid} over capacity: {usages}"
        );
    }
    let placed = run.instances.len() as i64;
    assert_eq!(run.placed.values().sum::<i64>(), placed);
    assert_eq!(
        project_usage(placement).await,
        (placed, 512 * placed, placed),
        "{}: Placement's usage of the project differs from the decisions placed",
        run.scheduler
    );
    for instance in &run.instances {
        let (status, body) = placement
            .request(Method::DELETE, &format!("/allocations/{instance}"), None)
            .await;
        assert_eq!(status, 204, "delete {instance}: {body}");
    }
    assert_eq!(project_usage(placement).await, (0, 0, 0));
}

/// The benchmark project's usage over every provider (VCPU, MEMORY_MB, DISK_GB).
async fn project_usage(placement: &PlacementServer) -> (i64, i64, i64) {
    let body = placement
        .call(Method::GET, "/usages?project_id=placebench", None)
        .await;
    let got = |c: &str| body["usages"][c].as_i64().unwrap_or(0);
    (got("VCPU"), got("MEMORY_MB"), got("DISK_GB"))
}

/// Placement's own cost: `n` PUTs of new consumers one at a time (round-robin over the
/// providers), then (at most 20) `GET /allocation_candidates` of Nova's query for the flavor; mean ms
/// of each. The PUTs' allocations are deleted afterwards.
async fn baseline(placement: &PlacementServer, hosts: usize, n: usize) -> (f64, f64) {
    let consumers: Vec<String> = (0..n)
        .map(|i| format!("c0000000-0000-4000-8000-{i:012}"))
        .collect();
    let started = Instant::now();
    for (i, consumer) in consumers.iter().enumerate() {
        let rp = provider_uuid(i % hosts);
        let body = json!({"allocations": {rp.clone(): {"resources": {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}}},
                          "project_id": "placebench", "user_id": "placebench", "consumer_generation": null});
        let (status, text) = placement
            .request(Method::PUT, &format!("/allocations/{consumer}"), Some(body))
            .await;
        assert_eq!(status, 204, "{text}");
    }
    let put_ms = started.elapsed().as_secs_f64() * 1000.0 / n as f64;
    for consumer in &consumers {
        placement
            .request(Method::DELETE, &format!("/allocations/{consumer}"), None)
            .await;
    }
    let query =
        "/allocation_candidates?limit=1000&resources=DISK_GB%3A1%2CMEMORY_MB%3A512%2CVCPU%3A1\
                 &root_required=OWNER_NOVA%2C%21COMPUTE_STATUS_DISABLED";
    let gets = n.min(20);
    let started = Instant::now();
    for _ in 0..gets {
        let (status, body) = placement.request(Method::GET, query, None).await;
        assert_eq!(status, 200);
        assert_eq!(
            body["allocation_requests"].as_array().map(Vec::len),
            Some(hosts.min(1000))
        );
    }
    let candidates_ms = started.elapsed().as_secs_f64() * 1000.0 / gets as f64;
    (put_ms, candidates_ms)
}

async fn parasol_claim_seconds(http: &reqwest::Client, base: &str) -> (f64, f64) {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (
        value("parasol_placement_claim_duration_seconds_sum "),
        value("parasol_placement_claim_duration_seconds_count "),
    )
}

/// One table row: `put_ms` is the baseline PUT.
fn row(r: &Run, put_ms: f64) -> String {
    let n = r.latencies_ms.len() as f64;
    let mean = r.latencies_ms.iter().sum::<f64>() / n;
    let put = match r.claim_ms {
        Some(claim) => format!("{put_ms:.1} (own GET+PUT: {claim:.1})"),
        None => format!("{put_ms:.1}"),
    };
    format!(
        "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.1} | {:.0} | {:.0} | {} | {} |",
        r.scheduler,
        r.callers,
        r.decisions as f64 / r.wall_s,
        mean,
        percentile(&r.latencies_ms, 50.0),
        percentile(&r.latencies_ms, 99.0),
        put,
        mean - put_ms,
        r.scheduler_cpu_s / r.calls as f64 * 1e6,
        r.placement_cpu_s / r.calls as f64 * 1e6,
        r.hosts_used,
        r.errors,
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut processes = Processes(Vec::new());
    let parasol_bin = args.parasol.clone().unwrap_or_else(|| {
        let exe = std::env::current_exe().expect("current exe");
        exe.parent()
            .and_then(Path::parent)
            .expect("target/<profile>/examples")
            .join("parasol")
    });

    let placement = PlacementServer::start().await;
    let placement_pid = placement.pid().expect("placement pid");
    let nova_exchange = format!("placebench_nova_{run_id}");
    let parasol_exchange = format!("placebench_parasol_{run_id}");
    // Nova's databases are made (Python, nova-manage) while the providers are registered.
    let started = Instant::now();
    let making_nova = {
        let (dir, url, hosts, exchange) = (
            dir.path().to_path_buf(),
            placement.url.clone(),
            args.hosts,
            nova_exchange.clone(),
        );
        tokio::task::spawn_blocking(move || make_nova(&dir, &url, hosts, &exchange))
    };
    register(&placement, args.hosts).await;
    eprintln!(
        "{} providers in Placement in {:.0} s",
        args.hosts,
        started.elapsed().as_secs_f64()
    );
    let nova = making_nova.await.expect("nova databases");
    eprintln!(
        "Nova's databases with {} compute nodes after {:.0} s",
        args.hosts,
        started.elapsed().as_secs_f64()
    );
    let mut runs: Vec<Run> = Vec::new();

    if args.schedulers.iter().any(|s| s == "nova") {
        let log = std::fs::File::create(dir.path().join("nova-scheduler.out")).expect("log");
        let child = Command::new(nova.venv.join("bin/python"))
            .args([
                "-c",
                "import sys; sys.argv[0] = 'nova-scheduler'; \
                 from nova.cmd.scheduler import main; main()",
            ])
            .arg("--config-file")
            .arg(&nova.conf)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("nova-scheduler");
        let pid = child.id();
        processes.0.push(("nova".into(), child));
        for (k, &callers) in args.callers.iter().enumerate() {
            let (venv, exchange) = (nova.venv.clone(), nova_exchange.clone());
            let run = drive(
                &venv,
                &exchange,
                &args,
                callers,
                args.seed * 100 + k as u64,
                "Nova 34 nova-scheduler",
                pid,
                placement_pid,
            );
            check_and_clean(&placement, &run).await;
            eprintln!("checked, cleaned: {}", row(&run, f64::NAN));
            runs.push(run);
        }
        processes.stop("nova");
    }

    if args.schedulers.iter().any(|s| s == "parasol") {
        assert!(
            parasol_bin.exists(),
            "{} missing: cargo build --release --bin parasol",
            parasol_bin.display()
        );
        let port = free_port();
        let config = format!(
            r#"[server]
host = "127.0.0.1"
port = {port}
http_workers = 1
[ledger]
url = "sqlite://{ledger}"
[scheduler]
backend = "filter"
seed = {seed}
[amqp]
url = "{AMQP_URL}"
exchange = "{parasol_exchange}"
queue = "parasol.notifications.{parasol_exchange}"
[rpc]
enabled = true
host = "placebench-parasol"
topic = "scheduler"
[placement]
enabled = true
url = "{placement_url}"
auth = "noauth"
sync_interval_s = 60.0
timeout_s = 30.0
claims = true
[nova_db]
enabled = true
api_database_url = "{api}"
service_down_time_s = 3600.0
refresh_interval_s = 60.0
[log]
level = "warn"
"#,
            ledger = dir.path().join("ledger.db").display(),
            seed = args.seed,
            placement_url = placement.url,
            api = nova.api_url,
        );
        let path = dir.path().join("parasol.toml");
        std::fs::write(&path, config).expect("parasol.toml");
        let log = std::fs::File::create(dir.path().join("parasol.log")).expect("log");
        let child = Command::new(&parasol_bin)
            .arg("--config")
            .arg(&path)
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("parasol serve");
        let pid = child.id();
        processes.0.push(("parasol".into(), child));
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let health: Option<Value> = match http.get(format!("{base}/healthz")).send().await {
                Ok(r) => r.json().await.ok(),
                Err(_) => None,
            };
            let nodes = health
                .as_ref()
                .and_then(|h| h["nova_db"]["nodes"].as_u64())
                .unwrap_or(0);
            let hosts = match http.get(format!("{base}/v1/hosts")).send().await {
                Ok(r) => r
                    .json::<Value>()
                    .await
                    .ok()
                    .and_then(|v| v["hosts"].as_array().map(Vec::len))
                    .unwrap_or(0),
                Err(_) => 0,
            };
            if nodes as usize == args.hosts && hosts == args.hosts {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "parasol never saw {} hosts and Nova records (health {health:?}, {hosts} hosts); log: {}",
                args.hosts,
                std::fs::read_to_string(dir.path().join("parasol.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        for (k, &callers) in args.callers.iter().enumerate() {
            let (sum0, count0) = parasol_claim_seconds(&http, &base).await;
            let mut run = drive(
                &nova.venv,
                &parasol_exchange,
                &args,
                callers,
                args.seed * 100 + k as u64,
                "Parasol (parasol serve)",
                pid,
                placement_pid,
            );
            let (sum1, count1) = parasol_claim_seconds(&http, &base).await;
            if count1 > count0 {
                run.claim_ms = Some((sum1 - sum0) / (count1 - count0) * 1000.0);
            }
            check_and_clean(&placement, &run).await;
            eprintln!("checked, cleaned: {}", row(&run, f64::NAN));
            runs.push(run);
        }
        processes.stop("parasol");
    }

    let (put_ms, candidates_ms) = baseline(&placement, args.hosts, args.decisions).await;
    drop(processes);
    drop(placement);

    println!(
        "hosts={} decisions per run={} (+{} untimed warm-up calls) seed={}",
        args.hosts, args.decisions, args.warmup, args.seed
    );
    println!(
        "Placement alone, one caller: PUT /allocations {put_ms:.1} ms, \
         GET /allocation_candidates ({} providers) {candidates_ms:.1} ms",
        args.hosts
    );
    println!();
    println!(
        "| scheduler | callers | decisions/s | mean ms | p50 ms | p99 ms | Placement PUT ms (baseline) | \
         adds on top of the PUT ms | scheduler CPU µs/decision | Placement CPU µs/decision | hosts used | failed |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &runs {
        println!("{}", row(r, put_ms));
    }
    println!();
    println!(
        "after each run: Placement usages = the decisions placed on every provider, none over capacity (checked)"
    );
}
