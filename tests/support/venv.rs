//! The builder of the tests' cached virtualenvs (Placement, Keystone, networkx, the
//! OpenStack client, all from PyPI; Nova's is the functional harness's, [`nova_venv`]):
//! `$HOME/.cache/parasol/<name>-<hash of the requirements>`, built (pip) only when the
//! requirements change, aside and renamed into place so that a concurrent or interrupted run
//! never sees half a venv. `PARASOL_PYTHON` picks the interpreter.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
    })
}

/// The cached virtualenv `<name>-<hash>` of `requirements` (a requirements file's text),
/// installed with `pip install -r` and `pip_args`.
pub fn cached_venv(name: &str, requirements: &str, pip_args: &[&str]) -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/tmp".into());
    let cache = PathBuf::from(home).join(".cache/parasol");
    let venv = cache.join(format!("{name}-{:016x}", fnv1a(requirements.as_bytes())));
    if venv.join(".complete").exists() {
        return venv;
    }
    std::fs::create_dir_all(&cache).expect("cache dir");
    let building = cache.join(format!("building-{}", uuid::Uuid::new_v4().simple()));
    let python = std::env::var("PARASOL_PYTHON").unwrap_or_else(|_| "python3".into());
    run(Command::new(&python).arg("-m").arg("venv").arg(&building));
    let file = building.join("requirements.txt");
    std::fs::write(&file, requirements).expect("write requirements");
    run(Command::new(building.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .args(pip_args)
        .arg("-r")
        .arg(&file));
    name_the_final_path(&building, &venv);
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

/// A venv's scripts (`bin/keystone-manage`, `bin/openstack`, `bin/activate`) name the folder
/// they were installed in: rewritten to the final path before the rename, so that they run
/// there (a script naming the `building-*` folder fails with "required file not found").
fn name_the_final_path(building: &Path, venv: &Path) {
    let (from, to) = (building.display().to_string(), venv.display().to_string());
    let bin = std::fs::read_dir(building.join("bin")).expect("venv bin");
    for entry in bin.map(|e| e.expect("bin entry").path()) {
        if entry.is_symlink() || !entry.is_file() {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&entry) else {
            continue; // not a script
        };
        if text.contains(&from) {
            std::fs::write(&entry, text.replace(&from, &to)).expect("rewrite venv script");
        }
    }
}

/// The virtualenv of Nova's own code: the one Nova's functional harness runs in
/// (`tests/nova_functional/requirements.txt`, pinned), built by the harness's own builder
/// (`tests/nova_functional/venv.py`), so that every test running Nova's code, the harness's
/// and this crate's, uses one venv built one way. Built once per process.
pub fn nova_venv() -> PathBuf {
    static VENV: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    VENV.get_or_init(|| {
        // The repository's root is this crate's manifest directory, or its parent when
        // openstack-bench's `bench_nova_vs_parasol` example includes this file.
        let tests = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .map(|dir| dir.join("tests"))
            .find(|dir| dir.join("nova_functional/venv.py").exists())
            .expect("tests/nova_functional/venv.py in the repository");
        let python = std::env::var("PARASOL_PYTHON").unwrap_or_else(|_| "python3".into());
        let script = "from nova_functional import venv; print(venv.ensure_venv())";
        let printed = run(Command::new(python)
            .current_dir(&tests)
            .args(["-c", script]));
        let venv = PathBuf::from(printed.trim());
        assert!(
            venv.join(".complete").exists(),
            "the harness's venv at {}",
            venv.display()
        );
        venv
    })
    .clone()
}

/// The virtualenv of Keystone (`tests/keystone/requirements.txt`: its pins name every
/// dependency, `--no-deps`), for tests/keystone and the fake DevStack of tests/devstack.
pub fn keystone_venv() -> PathBuf {
    let requirements = include_str!("../keystone/requirements.txt");
    cached_venv("keystone-venv", requirements, &["--no-deps"])
}

/// The virtualenv of python-openstackclient (`tests/devstack/openstackclient-requirements.txt`,
/// every dependency pinned: `--no-deps`), the `openstack` of tests/devstack's sandbox.
pub fn openstackclient_venv() -> PathBuf {
    let requirements = include_str!("../devstack/openstackclient-requirements.txt");
    cached_venv("openstackclient-venv", requirements, &["--no-deps"])
}

/// Runs `cmd`, failing the test with its output when it fails; its standard output.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs the Python script `script` with `args` in Nova's virtualenv, `input` on its standard
/// input; answers what it printed, and fails the test with its standard error if it failed.
pub fn run_in_nova(script: &Path, args: &[String], input: &[u8]) -> Vec<u8> {
    let mut child = Command::new(nova_venv().join("bin/python"))
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{} {args:?} failed:\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
