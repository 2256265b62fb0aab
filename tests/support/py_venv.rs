//! A cached virtualenv for one pinned requirements file, in
//! `$HOME/.cache/parasol/<name>-venv-<hash of the file>`, built (pip) only when the file
//! changes; the same mechanism as `nova_venv.rs`, for tests that need a smaller set.
//! `PARASOL_PYTHON` picks the interpreter.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
    })
}

/// The virtualenv of `requirements` (relative to the crate), built once per its hash.
pub fn venv(name: &str, requirements: &str) -> PathBuf {
    let reqs = Path::new(env!("CARGO_MANIFEST_DIR")).join(requirements);
    let text = std::fs::read(&reqs).expect("requirements file");
    let home = std::env::var("HOME").unwrap_or_else(|_| "/tmp".into());
    let cache = PathBuf::from(home).join(".cache/parasol");
    let venv = cache.join(format!("{name}-venv-{:016x}", fnv1a(&text)));
    if venv.join(".complete").exists() {
        return venv;
    }
    std::fs::create_dir_all(&cache).expect("cache dir");
    // Built aside and renamed, so a concurrent or interrupted run never sees half a venv.
    let building = cache.join(format!("building-{}", uuid::Uuid::new_v4().simple()));
    let python = std::env::var("PARASOL_PYTHON").unwrap_or_else(|_| "python3".into());
    run(Command::new(&python).arg("-m").arg("venv").arg(&building));
    run(Command::new(building.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(&reqs));
    std::fs::write(building.join(".complete"), b"").expect("marker");
    if std::fs::rename(&building, &venv).is_err() {
        let _ = std::fs::remove_dir_all(&building); // another run finished first
    }
    assert!(
        venv.join(".complete").exists(),
        "venv at {}",
        venv.display()
    );
    venv
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
