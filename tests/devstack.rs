//! The DevStack plugin and the packaging in `etc/`: shellcheck, the phase harness
//! (`tests/devstack/harness.sh`) and the commands the operator docs give.

use std::path::Path;
use std::process::Command;

const REPO: &str = env!("CARGO_MANIFEST_DIR");
const PARASOL: &str = env!("CARGO_BIN_EXE_parasol");

/// shellcheck, installed with apt when missing (CI runs as root on this machine).
fn shellcheck() -> &'static str {
    let found = |_: ()| Command::new("shellcheck").arg("--version").output().is_ok();
    if !found(()) {
        let _ = Command::new("apt-get").arg("update").arg("-qq").status();
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-qq", "shellcheck"])
            .status();
    }
    assert!(
        found(()),
        "shellcheck is missing and `apt-get install shellcheck` failed: install it to run this test"
    );
    "shellcheck"
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

#[test]
fn plugin_and_harness_pass_shellcheck() {
    run(Command::new(shellcheck()).current_dir(REPO).args([
        "-x",
        "devstack/plugin.sh",
        "devstack/settings",
        "tests/devstack/harness.sh",
        "tests/devstack/stubs.sh",
    ]));
}

#[test]
fn every_plugin_phase_produces_its_files_and_commands() {
    let out = run(Command::new("bash")
        .arg(Path::new(REPO).join("tests/devstack/harness.sh"))
        .arg(PARASOL));
    assert!(out.contains("devstack harness: all phases ok"), "{out}");
    assert!(!out.contains("FAIL"), "{out}");
}

#[test]
fn the_shipped_configuration_passes_config_check() {
    let out =
        run(Command::new(PARASOL)
            .current_dir(REPO)
            .args(["config", "check", "etc/parasol.toml"]));
    assert!(out.contains("valid (backend filter)"), "{out}");
}

#[test]
fn config_check_refuses_an_enabled_placement_sync_without_credentials() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("parasol.toml");
    std::fs::write(&file, "[placement]\nenabled = true\nauth = \"keystone\"\n").expect("write");
    let out = Command::new(PARASOL)
        .args(["config", "check"])
        .arg(&file)
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("placement.keystone_url"));
}

#[test]
fn the_systemd_unit_checks_the_config_logs_to_journald_and_reloads_with_sighup() {
    let unit = std::fs::read_to_string(Path::new(REPO).join("etc/parasol.service")).expect("unit");
    for line in [
        "ExecStartPre=/usr/local/bin/parasol config check /etc/parasol/parasol.toml",
        "ExecStart=/usr/local/bin/parasol --config /etc/parasol/parasol.toml serve",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "StandardOutput=journal",
        "StandardError=journal",
        "StateDirectory=parasol",
        "WantedBy=multi-user.target",
    ] {
        assert!(unit.lines().any(|l| l == line), "missing {line}");
    }
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok()
    {
        let dir = tempfile::tempdir().expect("temp dir");
        let copy = dir.path().join("parasol.service");
        // Verify the unit's syntax with the binary path pointing at the freshly built one.
        std::fs::write(&copy, unit.replace("/usr/local/bin/parasol", PARASOL)).expect("copy");
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&copy)
            .output()
            .expect("systemd-analyze");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(
            !text.contains("parasol.service:"),
            "systemd-analyze found problems in the unit:\n{text}"
        );
    }
}
