//! A small `compare` (50 hosts, 500 requests, all four backends, time compressed) through
//! the real binaries and RabbitMQ, checking the report's invariants.

use serde_json::Value;
use std::path::PathBuf;
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

#[test]
fn a_small_compare_keeps_every_invariant_and_apsr_reads_fewer_hosts() {
    let out = std::env::temp_dir().join(format!("bench-compare-{}", uuid::Uuid::new_v4()));
    let status = Command::new(env!("CARGO_BIN_EXE_openstack-bench"))
        .args([
            "compare",
            "--backends",
            "filter,caching,asc,apsr",
            "--hosts",
            "50",
        ])
        .args(["--requests", "500", "--rate", "100", "--lifetime", "20"])
        .args([
            "--time-scale",
            "10",
            "--concurrency",
            "8",
            "--seed",
            "1",
            "--run",
            "ci",
        ])
        .arg("--out")
        .arg(&out)
        .arg("--parasol")
        .arg(parasol_binary())
        .status()
        .expect("run openstack-bench");
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
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["invariants_hold"], true);
    let runs = results["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 4);
    let mut reads = std::collections::HashMap::new();
    for r in runs {
        let backend = r["backend"].as_str().unwrap().to_string();
        let s = &r["service"];
        assert_eq!(r["violations"], 0, "{backend}: oversubscription");
        assert_eq!(
            r["driver"]["issued"], 500,
            "{backend}: not every request was sent"
        );
        assert_eq!(
            s["placed"].as_u64().unwrap() + s["no_valid_host"].as_u64().unwrap(),
            s["requests"].as_u64().unwrap(),
            "{backend}: placed + no_valid_host != requests"
        );
        assert_eq!(s["requests"], 500, "{backend}");
        assert_eq!(
            r["ledger_mismatch_hosts"], 0,
            "{backend}: ledger differs from the hosts' books"
        );
        reads.insert(backend, s["queries_per_request"].as_f64().unwrap());
    }
    assert!(
        reads["apsr"] < reads["filter"],
        "host reads per request: {reads:?}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
