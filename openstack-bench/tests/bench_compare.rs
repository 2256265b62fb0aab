//! A small `compare` (50 hosts, 500 requests, all four backends, time compressed) through
//! the real binaries and RabbitMQ, checking the report's invariants; and a smaller one with
//! select_destinations over Nova's scheduler RPC (`--via rpc`).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `parasol` binary beside this test's binaries, built first if it is missing.
fn parasol_binary() -> PathBuf {
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_openstack-bench"));
    let dir = bench.parent().expect("target dir").to_path_buf();
    let parasol = dir.join("parasol");
    if !parasol.is_file() {
        let release = dir.ends_with("release");
        let mut build = Command::new(env!("CARGO"));
        build.args(["build", "-p", "parasol", "--bin", "parasol"]);
        if release {
            build.arg("--release");
        }
        let status = build.status().expect("cargo build");
        assert!(status.success(), "building parasol failed");
    }
    parasol
}

/// Runs `openstack-bench compare` with the tests' common workload (100 requests/s, lifetimes
/// of 20 s, time scale 10, 8 callers, seed 1) and the given options, writing under `out`.
fn compare(what: &[&str], size: &[&str], out: &Path) -> std::process::ExitStatus {
    Command::new(env!("CARGO_BIN_EXE_openstack-bench"))
        .arg("compare")
        .args(what)
        .args(size)
        .args(["--rate", "100", "--lifetime", "20", "--time-scale", "10"])
        .args(["--concurrency", "8", "--seed", "1"])
        .arg("--out")
        .arg(out)
        .arg("--parasol")
        .arg(parasol_binary())
        .status()
        .expect("run openstack-bench")
}

#[test]
fn a_small_compare_keeps_every_invariant_and_apsr_reads_fewer_hosts() {
    let out = std::env::temp_dir().join(format!("bench-compare-{}", uuid::Uuid::new_v4()));
    let status = compare(
        &["--backends", "filter,caching,asc,apsr", "--hosts", "50"],
        &["--requests", "500", "--run", "ci"],
        &out,
    );
    assert!(status.success(), "openstack-bench compare failed");
    let dir = out.join("ci");
    for file in [
        "report.md",
        "results.json",
        "throughput.png",
        "throughput.svg",
    ] {
        assert!(dir.join(file).is_file(), "{file} not written");
    }
    let results = results(&dir);
    assert_eq!(results["invariants_hold"], true);
    let runs = results["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 4);
    assert_eq!(results["scenario"]["select_destinations via"], "http");
    let mut reads = std::collections::HashMap::new();
    for r in runs {
        let backend = check_run(r, 500);
        reads.insert(
            backend,
            r["service"]["queries_per_request"].as_f64().unwrap(),
        );
    }
    assert!(
        reads["apsr"] < reads["filter"],
        "host reads per request: {reads:?}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// A run's `results.json`.
fn results(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap()
}

/// The invariants of one run of `requests` requests; returns its backend.
fn check_run(r: &Value, requests: u64) -> String {
    let backend = r["backend"].as_str().unwrap().to_string();
    let s = &r["service"];
    assert_eq!(r["violations"], 0, "{backend}: oversubscription");
    assert_eq!(
        r["driver"]["issued"], requests,
        "{backend}: not every request was sent"
    );
    assert_eq!(r["driver"]["errors"], 0, "{backend}: failed calls");
    assert_eq!(
        r["driver"]["placed"].as_u64().unwrap() + r["driver"]["no_valid_host"].as_u64().unwrap(),
        requests,
        "{backend}: the driver's placed + no_valid_host != requests"
    );
    assert_eq!(
        s["placed"].as_u64().unwrap() + s["no_valid_host"].as_u64().unwrap(),
        s["requests"].as_u64().unwrap(),
        "{backend}: placed + no_valid_host != requests"
    );
    assert_eq!(s["requests"], requests, "{backend}");
    assert_eq!(
        r["ledger_mismatch_hosts"], 0,
        "{backend}: ledger differs from the hosts' books"
    );
    backend
}

/// Over HTTP the measured service's drain counts only what was sent to it: the heartbeats the
/// registering service took after its count was read are not waited for (such a target was
/// never reached, and the idle minute's CPU went into every decision's figure).
#[test]
fn a_compare_over_http_drains_exactly_what_the_measured_service_was_sent() {
    let out = std::env::temp_dir().join(format!("bench-compare-http-{}", uuid::Uuid::new_v4()));
    let status = compare(
        &["--notify", "http", "--backends", "caching", "--hosts", "30"],
        &["--requests", "200", "--run", "ci-http"],
        &out,
    );
    assert!(
        status.success(),
        "openstack-bench compare --notify http failed"
    );
    let results = results(&out.join("ci-http"));
    let runs = results["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1);
    check_run(&runs[0], 200);
    assert_eq!(runs[0]["notifications_failed"], 0);
    assert_eq!(
        runs[0]["unhandled_at_end"], 0,
        "the drain ended with events counted sent to the measured service unhandled"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_small_compare_over_nova_rpc_keeps_every_invariant() {
    let out = std::env::temp_dir().join(format!("bench-compare-rpc-{}", uuid::Uuid::new_v4()));
    // Its own run name: the run id names the bench exchange, which each run deletes at its end.
    let status = compare(
        &["--via", "rpc", "--backends", "filter,apsr", "--hosts", "20"],
        &["--requests", "100", "--run", "ci-rpc"],
        &out,
    );
    assert!(status.success(), "openstack-bench compare --via rpc failed");
    let dir = out.join("ci-rpc");
    let results = results(&dir);
    assert_eq!(results["invariants_hold"], true);
    assert_eq!(results["scenario"]["select_destinations via"], "rpc");
    let runs = results["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    for r in runs {
        let backend = check_run(r, 100);
        assert!(
            r["config"]["rpc_topic"].is_string(),
            "{backend}: the service was not configured to serve RPC"
        );
        let driver = &r["driver"];
        assert!(
            driver["placed"].as_u64().unwrap() > 0,
            "{backend}: nothing placed over RPC: {driver}"
        );
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains("**select_destinations via**: rpc"),
        "{report}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
