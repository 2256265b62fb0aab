//! The DevStack plugin and the packaging in `etc/`: shellcheck, the phase harness
//! (`tests/devstack/harness.sh`), and the operator docs' commands run verbatim in a sandbox
//! (`tests/devstack/docs.sh`): every ```sh block of README.md's "Replacing nova-scheduler" and
//! of devstack/README.md.
//!
//! What runs here is not DevStack: DevStack itself (its git repository and `stack.sh`, and the
//! git repositories it installs the services from) cannot be fetched on this project's
//! machines, where only the package registries are reachable. So in the docs' sandbox:
//! - real: Parasol (the binary built here, run by the plugin's unit), RabbitMQ (a private
//!   broker), Keystone (`keystone` from PyPI, the virtualenv `tests/keystone` uses, serving
//!   `http://127.0.0.1/identity` as DevStack's does, initialised and bootstrapped as DevStack's
//!   `lib/keystone` does, with DevStack's `ADMIN_PASSWORD`) and the `openstack` client
//!   (`python-openstackclient` from PyPI, pinned in `tests/devstack/openstackclient-requirements.txt`):
//!   the accounts the fake DevStack and the plugin's `create_service_user` create are real
//!   Keystone users, projects and role assignments, the docs' `openstack token issue` gets a
//!   real token, and Parasol validates it with Keystone (200 for the admin, 403 for a member,
//!   401 for a token Keystone never issued or none);
//! - stubbed: DevStack itself (`fake-devstack/`: its `stack.sh`, `unstack.sh`, `clean.sh`,
//!   `functions` and `openrc` do what DevStack's do for the plugin), systemd (`sbin/systemctl`
//!   and `sbin/journalctl`: no systemd runs in the sandbox), `sudo`, `sudoedit`, `cargo` (copies
//!   the binary built here), and the Nova services, which only sleep (Nova needs a database,
//!   Placement and libvirt that the sandbox does not have; Placement is not run, so `/healthz`
//!   says Placement `stale`). The phase harness stubs every DevStack function it calls
//!   (`tests/devstack/stubs.sh`) and only records the calls.
//!
//! What DevStack would read of what the plugin writes is checked by the real readers where one
//! runs here: `systemd-analyze verify` on the units, Nova's own oslo.config options (in the Nova
//! test virtualenv) on the nova.conf keys, `parasol config check` on the configuration,
//! shellcheck on the scripts. That real DevStack runs the plugin is not shown here.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/venv.rs"]
mod venv;

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
        "tests/devstack/docs.sh",
        "tests/devstack/sbin/cargo",
        "tests/devstack/sbin/journalctl",
        "tests/devstack/sbin/sudo",
        "tests/devstack/sbin/sudoedit",
        "tests/devstack/sbin/systemctl",
        "tests/devstack/fake-devstack/functions",
        "tests/devstack/fake-devstack/openrc",
        "tests/devstack/fake-devstack/lib/rabbit",
        "tests/devstack/fake-devstack/lib/keystone",
        "tests/devstack/fake-devstack/stack.sh",
        "tests/devstack/fake-devstack/unstack.sh",
        "tests/devstack/fake-devstack/clean.sh",
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

/// What the operator sees for the mistakes of issue 18: each refusal names the key and what
/// would be valid, and what `serve` would refuse at start is refused by `config check`.
#[test]
fn config_check_explains_each_refusal() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("parasol.toml");
    let cases = [
        (
            "[scheduler]\nbackend = \"fastest\"\n",
            "key `scheduler.backend` unknown value \"fastest\"; valid values: filter, caching, asc, apsr",
        ),
        (
            "[scheduler]\nbakend = \"apsr\"\n",
            "did you mean `scheduler.backend`?",
        ),
        (
            "[ledger]\nurl = \"mysql://nova@db/parasol\"\n",
            "key `ledger.url` has scheme \"mysql\"",
        ),
        (
            "[amqp]\nurl = \"kafka://nova:pw@ctl:9092/\"\n",
            "key `amqp.url` has scheme \"kafka\"",
        ),
    ];
    for (text, want) in cases {
        std::fs::write(&file, text).expect("write");
        let out = Command::new(PARASOL)
            .args(["config", "check"])
            .arg(&file)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text}");
        assert!(stderr.contains(want), "{text}: {stderr}");
        assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    }
}

#[test]
fn the_systemd_unit_checks_the_config_logs_to_journald_and_reloads_with_sighup() {
    let unit = std::fs::read_to_string(Path::new(REPO).join("etc/parasol.service")).expect("unit");
    for line in [
        "Type=notify",
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
    // Verify the unit's syntax with the binary path pointing at the freshly built one.
    let dir = tempfile::tempdir().expect("temp dir");
    let copy = dir.path().join("parasol.service");
    std::fs::write(&copy, unit.replace("/usr/local/bin/parasol", PARASOL)).expect("copy");
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&copy)
        .output()
        .expect("systemd-analyze is missing: install systemd to verify etc/parasol.service");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        !text.contains("parasol.service:"),
        "systemd-analyze found problems in the unit:\n{text}"
    );
}

/// The operator docs whose commands `tests/devstack/docs.sh` runs: `(file, scenario, text)`.
fn operator_docs() -> Vec<(&'static str, &'static str, String)> {
    let read = |file: &str| std::fs::read_to_string(Path::new(REPO).join(file)).expect(file);
    let readme = read("README.md");
    let start = readme
        .find("\n## Replacing nova-scheduler\n")
        .expect("README.md has a section \"## Replacing nova-scheduler\"");
    let end = readme[start + 1..]
        .find("\n## ")
        .map_or(readme.len(), |n| start + 1 + n);
    vec![
        ("README.md", "cloud", readme[start..end].to_string()),
        ("devstack/README.md", "devstack", read("devstack/README.md")),
    ]
}

/// The ```sh blocks of a doc as `(name, commands)`: each must follow a line
/// `<!-- docs-test: NAME -->` naming the step of docs.sh that runs it.
fn tagged_blocks(file: &str, text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut previous = "";
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if let Some(info) = trimmed.strip_prefix("```") {
            assert_eq!(
                info, "sh",
                "{file}: a code block opens with {trimmed:?}: operator commands go in ```sh \
                 blocks, which tests/devstack/docs.sh runs"
            );
            let name = previous
                .strip_prefix("<!-- docs-test: ")
                .and_then(|rest| rest.strip_suffix(" -->"))
                .unwrap_or_else(|| {
                    panic!(
                        "{file}: the ```sh block after {previous:?} has no \
                         `<!-- docs-test: NAME -->` line: add one and run it in \
                         tests/devstack/docs.sh"
                    )
                });
            let body: Vec<&str> = lines
                .by_ref()
                .take_while(|l| l.trim() != "```")
                .map(str::trim)
                .collect();
            blocks.push((name.to_string(), body.join("\n")));
        }
        if !trimmed.is_empty() {
            previous = trimmed;
        }
    }
    blocks
}

/// Inline `code` outside the blocks that reads as a command an operator would run.
fn inline_commands(text: &str) -> Vec<String> {
    const COMMANDS: [&str; 14] = [
        "sudo",
        "sudoedit",
        "parasol",
        "curl",
        "systemctl",
        "journalctl",
        "cargo",
        "kill",
        "install",
        "useradd",
        "cp",
        "sed",
        "git",
        "cd",
    ];
    let mut found = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        for span in line.split('`').skip(1).step_by(2) {
            let first = span.split_whitespace().next().unwrap_or("");
            // The tests' own commands (the docs' "Tests" paragraphs) are not operator steps.
            let test_command = span.starts_with("cargo test") || span.contains("tests/devstack/");
            if (COMMANDS.contains(&first) || first.starts_with("./")) && !test_command {
                found.push(span.to_string());
            }
        }
    }
    found
}

#[test]
fn every_command_of_the_operator_docs_is_in_a_tagged_block() {
    let docs = operator_docs();
    let mut names = std::collections::HashSet::new();
    let mut all_blocks = String::new();
    for (file, _, text) in &docs {
        let blocks = tagged_blocks(file, text);
        assert!(!blocks.is_empty(), "{file}: no ```sh block found");
        for (name, body) in blocks {
            assert!(
                names.insert(name.clone()),
                "{file}: two blocks named {name}"
            );
            assert!(!body.trim().is_empty(), "{file}: block {name} is empty");
            all_blocks.push_str(&body);
            all_blocks.push('\n');
        }
    }
    for (file, _, text) in &docs {
        for command in inline_commands(text) {
            assert!(
                all_blocks.contains(&command),
                "{file}: `{command}` is a command outside any ```sh block, so no test runs \
                 it: put it in a tagged block that tests/devstack/docs.sh runs"
            );
        }
    }
}

/// Files the docs' commands would change on a real host: the sandbox must leave them as found.
fn host_state() -> Vec<(&'static str, Option<Vec<u8>>)> {
    [
        "/etc/passwd",
        "/etc/group",
        "/etc/shadow",
        "/etc/gshadow",
        "/usr/local/bin/parasol",
        "/usr/local/sbin/systemctl",
        "/usr/local/sbin/sudo",
        "/usr/local/bin/openstack",
        "/etc/keystone",
        "/etc/systemd/system/parasol.service",
        "/etc/systemd/system/devstack@parasol.service",
        "/etc/systemd/system/nova-scheduler.service",
        "/etc/parasol/parasol.toml",
        "/etc/nova/nova.conf",
        "/var/lib/parasol",
        "/opt/stack",
        "/root/parasol",
    ]
    .into_iter()
    .map(|path| {
        let meta = std::fs::metadata(path).ok();
        let content = meta.map(|m| {
            if m.is_dir() {
                b"<dir>".to_vec()
            } else {
                std::fs::read(path).unwrap_or_default()
            }
        });
        (path, content)
    })
    .collect()
}

/// Runs `docs.sh SCENARIO` and checks that it ran every block of the scenario's doc and left
/// the host as it found it.
fn run_docs_scenario(scenario: &str) {
    let (file, _, text) = operator_docs()
        .into_iter()
        .find(|(_, s, _)| *s == scenario)
        .expect("scenario");
    // DevStack's Keystone and openstack client, and Nova's code to read nova.conf: the real
    // ones, from the cached virtualenvs (built here, outside the sandbox, which has no network).
    let venvs: Vec<PathBuf> = if scenario == "devstack" {
        vec![
            venv::keystone_venv(),
            venv::openstackclient_venv(),
            venv::nova_venv(),
        ]
    } else {
        Vec::new()
    };
    let before = host_state();
    let out = run(Command::new("bash")
        .arg(Path::new(REPO).join("tests/devstack/docs.sh"))
        .arg(scenario)
        .arg(PARASOL)
        .args(&venvs));
    assert!(
        out.contains(&format!("docs sandbox: {scenario} ok")),
        "{out}"
    );
    assert!(!out.contains("FAIL"), "{out}");
    for (name, _) in tagged_blocks(file, &text) {
        let ran = format!("ran block {name} in ");
        assert!(
            out.lines().any(|l| l.starts_with(&ran)),
            "{file}: block {name} was not run by tests/devstack/docs.sh {scenario}:\n{out}"
        );
    }
    for ((path, was), (_, is)) in before.iter().zip(host_state()) {
        assert!(*was == is, "the docs sandbox changed {path} on the host");
    }
}

#[test]
fn the_readme_commands_replace_nova_scheduler_on_an_existing_cloud() {
    run_docs_scenario("cloud");
}

#[test]
fn the_devstack_readme_commands_stack_check_switch_and_clean() {
    run_docs_scenario("devstack");
}
