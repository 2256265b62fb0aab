//! A fresh `parasol serve` per run: a generated configuration (every interval divided by the
//! time scale; with `--via rpc` Nova's scheduler RPC on the run's own topic), a fresh SQLite
//! ledger in the run's folder, a free port, logs to a file.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What one service run is configured with.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ServiceConfig {
    pub backend: String,
    pub workers: usize,
    pub seed: u64,
    pub time_scale: f64,
    /// Caching's fixed interval, unscaled seconds.
    pub refresh_interval_s: f64,
    pub asc_start_interval_s: f64,
    pub asc_min_interval_s: f64,
    pub apsr_epsilon: f64,
    pub apsr_round_interval_s: f64,
    /// Empty = no broker (HTTP notifications and HTTP select_destinations).
    pub amqp_url: String,
    pub exchange: String,
    pub queue: String,
    /// `[rpc] topic` when the service serves Nova's scheduler RPC (`--via rpc`), else off.
    pub rpc_topic: Option<String>,
    /// `[batch] mode` (`off`, `call` or `window`) and `window_ms`.
    pub batch_mode: String,
    pub window_ms: u64,
    /// `[flex]` on, judging QoS from the hosts' reports (`qos_source = "instance_signals"`),
    /// its penalty moved every this many seconds (real time, as the hosts' heartbeats);
    /// `None`: Flex off, the default.
    pub flex_update_period_s: Option<f64>,
}

/// `[rpc] host` of the bench's services: the server also consumes `<topic>.<host>`.
pub const RPC_HOST: &str = "openstack-bench";

impl ServiceConfig {
    /// The queues the service declares on the broker and leaves there when it stops: its
    /// notification queue and, serving RPC, `<topic>` and `<topic>.<host>`.
    pub fn broker_queues(&self) -> Vec<String> {
        let mut queues = vec![self.queue.clone()];
        if let Some(topic) = &self.rpc_topic {
            queues.push(topic.clone());
            queues.push(format!("{topic}.{RPC_HOST}"));
        }
        queues
    }

    /// The TOML the service reads.
    pub fn to_toml(&self, port: u16, data_dir: &Path) -> String {
        let ts = self.time_scale;
        // The scheduler's minimum interval should not fall below one refresh (a few ms here).
        let floor = |s: f64| (s / ts).max(0.005);
        format!(
            r#"[server]
host = "127.0.0.1"
port = {port}
[ledger]
data_dir = "{data}"
[scheduler]
backend = "{backend}"
workers = {workers}
seed = {seed}
[caching]
refresh_interval_s = {refresh}
[asc]
start_interval_s = {asc_start}
min_interval_s = {asc_min}
[apsr]
epsilon = {eps}
round_interval_s = {round}
[amqp]
url = "{amqp}"
exchange = "{exchange}"
queue = "{queue}"
[rpc]
enabled = {rpc}
host = "{rpc_host}"
topic = "{topic}"
{batch}{flex}"#,
            data = data_dir.display(),
            backend = self.backend,
            workers = self.workers,
            seed = self.seed,
            refresh = floor(self.refresh_interval_s),
            asc_start = floor(self.asc_start_interval_s),
            asc_min = floor(self.asc_min_interval_s),
            eps = self.apsr_epsilon,
            round = floor(self.apsr_round_interval_s),
            amqp = self.amqp_url,
            exchange = self.exchange,
            queue = self.queue,
            rpc = self.rpc_topic.is_some(),
            rpc_host = RPC_HOST,
            topic = self.rpc_topic.as_deref().unwrap_or("scheduler"),
            batch = self.batch_section(),
            flex = self
                .flex_update_period_s
                .map_or_else(String::new, |p| format!(
                "[flex]\nenabled = true\nqos_source = \"instance_signals\"\nupdate_period_s = {p}\n"
            )),
        )
    }

    /// `[batch]`, written only when batching is on: without it the service's default (`off`)
    /// applies, and a binary from before `[batch]` existed accepts the configuration, so an
    /// A/B can drive an older build (`--parasol`).
    fn batch_section(&self) -> String {
        if self.batch_mode == "off" {
            return String::new();
        }
        format!(
            "[batch]\nmode = \"{}\"\nwindow_ms = {}\n",
            self.batch_mode, self.window_ms
        )
    }
}

/// A running service; killed on drop.
pub struct Service {
    child: Child,
    pub base: String,
    /// Already waited for: its pid may belong to another process now.
    reaped: bool,
}

impl Drop for Service {
    /// Stops the service as systemd would: SIGTERM (it finishes what it has in flight), then
    /// SIGKILL if it is still there after 10 s.
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        // SAFETY: signals our own child, which has not been waited for yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `parasol` binary: `explicit`, else next to this executable (or its parent folder,
/// for test binaries in `deps/`).
pub fn find_parasol(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let exe = std::env::current_exe()?;
    for dir in exe.ancestors().skip(1).take(2) {
        let candidate = dir.join("parasol");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!(
        "no `parasol` binary next to {}; build it or pass --parasol PATH",
        exe.display()
    )
}

/// `bin` and the Cargo profile it was built with, as its folder names it (`target/release`,
/// `target/perf`, `target/debug`): the benchmark's figures are release builds'; a figure of
/// another build says so beside it.
pub fn describe_build(bin: &Path) -> String {
    let profile = bin
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|d| d.to_str())
        .filter(|d| ["release", "perf", "debug"].contains(d))
        .map_or_else(|| "profile unknown".to_string(), |d| format!("{d} profile"));
    format!("{} ({profile})", bin.display())
}

pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl Service {
    /// CPU seconds (user + system) the service process has used so far, from
    /// `/proc/<pid>/stat` (fields 14 and 15, in clock ticks): the service's own cost, whatever
    /// else shares the machine.
    /// Its CPU so far split into user and system time, and its threads' context switches.
    pub fn cpu_split(&self) -> anyhow::Result<CpuSplit> {
        process_cpu_split(self.child.id())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, as a crash or the OOM killer would stop it, and reaps it.
    pub fn kill_hard(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.reaped = true;
    }

    /// Writes the configuration into `dir`, starts the service, waits for `/healthz`.
    pub async fn start(bin: &Path, cfg: &ServiceConfig, dir: &Path) -> anyhow::Result<Service> {
        Service::start_on(bin, cfg, dir, free_port()?, &[]).await
    }

    /// [`Service::start`] on `port`, with `env` (`PARASOL__SECTION__KEY` overrides of keys
    /// the generated file does not set) added to its environment; its log is appended to, so
    /// that a restarted process (the soak's) keeps what the killed one wrote.
    pub async fn start_on(
        bin: &Path,
        cfg: &ServiceConfig,
        dir: &Path,
        port: u16,
        env: &[(String, String)],
    ) -> anyhow::Result<Service> {
        std::fs::create_dir_all(dir)?;
        let config_path = dir.join("parasol.toml");
        std::fs::write(&config_path, cfg.to_toml(port, &dir.join("ledger")))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("parasol.log"))?;
        let child = dies_with_parent(&mut Command::new(bin))
            .arg("--config")
            .arg(&config_path)
            .arg("serve")
            .env("RUST_LOG", "warn")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let mut service = Service {
            child,
            base: format!("http://127.0.0.1:{port}"),
            reaped: false,
        };
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = service.child.try_wait()? {
                bail!(
                    "parasol exited with {status}; see {}/parasol.log",
                    dir.display()
                );
            }
            let health = client.get(format!("{}/healthz", service.base)).send().await;
            if health.is_ok_and(|r| r.status().is_success()) {
                return Ok(service);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!(
            "parasol did not answer /healthz within 30 s; see {}/parasol.log",
            dir.display()
        )
    }
}

/// Has the child started by `cmd` sent SIGTERM when the thread that starts it ends (Linux's
/// `PR_SET_PDEATHSIG`): a run interrupted by Ctrl-C or killed leaves no `parasol serve`
/// consuming from the broker's shared queues (the soak, interrupted, left its two). The
/// services are started from the runtime's worker threads, which live as long as the run.
pub fn dies_with_parent(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec the closure only calls prctl and getppid, both
    // async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before the line above: no signal will come.
            if libc::getppid() == 1 {
                return Err(std::io::Error::other("the parent has already exited"));
            }
            Ok(())
        })
    }
}

/// Resident memory of process `pid` in kB (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_kb(pid: u32) -> anyhow::Result<u64> {
    proc_kb(pid, "status", "VmRSS")
}

/// The most resident memory process `pid` has held, in kB (`VmHWM` of `/proc/<pid>/status`).
pub fn peak_rss_kb(pid: u32) -> anyhow::Result<u64> {
    proc_kb(pid, "status", "VmHWM")
}

/// Anonymous memory of process `pid` the kernel backs with transparent huge pages, in kB
/// (`AnonHugePages` of `/proc/<pid>/smaps_rollup`): a 2 MiB page stays whole in the RSS while
/// any byte of it is in use.
pub fn anon_huge_kb(pid: u32) -> anyhow::Result<u64> {
    proc_kb(pid, "smaps_rollup", "AnonHugePages")
}

/// The `<field>:  <n> kB` line of `/proc/<pid>/<file>`.
fn proc_kb(pid: u32, file: &str, field: &str) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .with_context(|| format!("reading /proc/{pid}/{file}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no {field} in /proc/<pid>/{file}"))
}

/// CPU seconds the threads of process `pid` now running have used, to the nanosecond (the
/// first field of each `/proc/<pid>/task/<tid>/schedstat`): for short windows, where
/// `/proc/<pid>/stat`'s clock ticks (10 ms) are too coarse. Threads that ended are not
/// counted: measure differences over windows in which the service's threads stay.
pub fn threads_cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let dir = format!("/proc/{pid}/task");
    let mut ns: u64 = 0;
    for task in std::fs::read_dir(&dir).with_context(|| format!("reading {dir}"))? {
        let path = task?.path().join("schedstat");
        // A thread that ended since the listing has no file any more.
        let Ok(line) = std::fs::read_to_string(&path) else {
            continue;
        };
        ns += line
            .split_whitespace()
            .next()
            .and_then(|f| f.parse::<u64>().ok())
            .with_context(|| format!("{}: {line:?}", path.display()))?;
    }
    Ok(ns as f64 / 1e9)
}

/// User + system CPU seconds of process `pid` (Linux `/proc/<pid>/stat`).
pub fn process_cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    parse_cpu_seconds(&proc_stat(pid)?, clock_ticks_per_second())
}

/// The `/proc/<pid>/stat` line of process `pid`.
fn proc_stat(pid: u32) -> anyhow::Result<String> {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))
}

/// A process' CPU seconds in user and in system (kernel) mode, and the context switches of
/// its threads (voluntary and not): where a difference in CPU between two builds that run the
/// same instructions goes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuSplit {
    pub user_s: f64,
    pub system_s: f64,
    pub context_switches: u64,
}

impl std::ops::Sub for CpuSplit {
    type Output = CpuSplit;
    fn sub(self, o: CpuSplit) -> CpuSplit {
        CpuSplit {
            user_s: self.user_s - o.user_s,
            system_s: self.system_s - o.system_s,
            context_switches: self.context_switches.saturating_sub(o.context_switches),
        }
    }
}

/// [`CpuSplit`] of process `pid`: `/proc/<pid>/stat`, and each `/proc/<pid>/task/*/status`
/// (a thread that has exited no longer counts its switches).
pub fn process_cpu_split(pid: u32) -> anyhow::Result<CpuSplit> {
    let (user_s, system_s) = parse_cpu_times(&proc_stat(pid)?, clock_ticks_per_second())?;
    let mut context_switches = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))?.flatten() {
        if let Ok(status) = std::fs::read_to_string(task.path().join("status")) {
            context_switches += parse_context_switches(&status);
        }
    }
    Ok(CpuSplit {
        user_s,
        system_s,
        context_switches,
    })
}

/// `voluntary_ctxt_switches` + `nonvoluntary_ctxt_switches` of a `/proc/.../status` text.
fn parse_context_switches(status: &str) -> u64 {
    status
        .lines()
        .filter(|l| l.contains("ctxt_switches:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// utime + stime of one `/proc/<pid>/stat` line.
fn parse_cpu_seconds(stat: &str, ticks_per_s: f64) -> anyhow::Result<f64> {
    let (user, system) = parse_cpu_times(stat, ticks_per_s)?;
    Ok(user + system)
}

/// (utime, stime) in seconds of one `/proc/<pid>/stat` line. The command name (field 2) may
/// hold spaces and parentheses, so fields are counted after its last `)`.
fn parse_cpu_times(stat: &str, ticks_per_s: f64) -> anyhow::Result<(f64, f64)> {
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("no `)` in /proc stat line")?;
    // After `)`: field 3 (state) is index 0, so utime (14) is index 11 and stime (15) 12.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> anyhow::Result<f64> {
        fields
            .get(i)
            .context("short /proc stat line")?
            .parse::<f64>()
            .context("non-numeric /proc stat field")
    };
    Ok((field(11)? / ticks_per_s, field(12)? / ticks_per_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child started through [`dies_with_parent`] is sent SIGTERM when the thread that
    /// started it ends; one started without it runs on.
    #[test]
    fn a_child_is_terminated_when_its_starting_thread_ends() {
        use std::os::unix::process::ExitStatusExt;
        let start = |tied: bool| {
            std::thread::spawn(move || {
                let mut cmd = Command::new("sleep");
                cmd.arg("30");
                if tied {
                    dies_with_parent(&mut cmd);
                }
                cmd.spawn().expect("sleep starts")
            })
            .join()
            .expect("the starting thread")
        };
        let mut tied = start(true);
        let status = tied.wait().expect("the tied child ends");
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
        let mut free = start(false);
        std::thread::sleep(Duration::from_millis(200));
        assert!(free.try_wait().expect("try_wait").is_none(), "runs on");
        free.kill().expect("kill");
        free.wait().expect("reaped");
    }

    /// The configuration a run writes is one the service accepts, with the run's batch mode.
    #[test]
    fn the_generated_configuration_is_one_the_service_accepts() {
        let cfg = ServiceConfig {
            backend: "caching".into(),
            workers: 2,
            seed: 7,
            time_scale: 1.0,
            refresh_interval_s: 60.0,
            asc_start_interval_s: 60.0,
            asc_min_interval_s: 1.0,
            apsr_epsilon: 0.05,
            apsr_round_interval_s: 10.0,
            amqp_url: String::new(),
            exchange: "x".into(),
            queue: "q".into(),
            rpc_topic: None,
            batch_mode: "window".into(),
            window_ms: 25,
            flex_update_period_s: None,
        };
        let text = cfg.to_toml(8999, Path::new("/tmp/ledger"));
        let s = parasol::configuration::Settings::from_toml(&text).expect("accepted");
        assert_eq!(s.batch.mode, parasol::configuration::BatchMode::Window);
        assert_eq!(s.batch.window_ms, 25);
        assert_eq!(s.server.port, 8999);
        let off = ServiceConfig {
            batch_mode: "off".into(),
            ..cfg
        };
        let text = off.to_toml(8999, Path::new("/tmp/ledger"));
        assert!(!text.contains("[batch]"), "{text}");
        let s = parasol::configuration::Settings::from_toml(&text).expect("accepted");
        assert_eq!(s.batch.mode, parasol::configuration::BatchMode::Off);
        assert!(!s.flex.enabled);
        let flex = ServiceConfig {
            flex_update_period_s: Some(30.0),
            time_scale: 10.0,
            ..off
        };
        let text = flex.to_toml(8999, Path::new("/tmp/ledger"));
        let s = parasol::configuration::Settings::from_toml(&text).expect("accepted");
        assert!(s.flex.enabled, "{text}");
        assert_eq!(s.flex.update_period_s, 30.0, "real time, not scaled");
    }

    #[test]
    fn cpu_seconds_are_utime_plus_stime_after_the_command_name() {
        let line =
            "4242 (parasol (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 9 0 1 0 0";
        assert_eq!(parse_cpu_seconds(line, 100.0).unwrap(), 3.0);
        assert_eq!(parse_cpu_times(line, 100.0).unwrap(), (2.5, 0.5));
        assert!(parse_cpu_seconds("4242 parasol S", 100.0).is_err());
    }

    #[test]
    fn context_switches_are_the_voluntary_and_the_involuntary_summed() {
        let status =
            "Name:\tparasol\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(parse_context_switches(status), 127);
        assert_eq!(parse_context_switches("Name:\tparasol\n"), 0);
    }

    /// This process' own split: some user time spent, and switches counted over its threads.
    #[test]
    fn this_process_splits_its_cpu_into_user_and_system() {
        let spin = (0..2_000_000u64).fold(0u64, |a, b| a.wrapping_add(b * b));
        assert!(spin > 0);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let s = process_cpu_split(std::process::id()).unwrap();
        assert!(s.user_s > 0.0 && s.system_s >= 0.0, "{s:?}");
        assert!(s.context_switches > 0, "{s:?}");
    }

    #[test]
    fn this_process_has_used_some_cpu() {
        let spin = (0..2_000_000u64).fold(0u64, |a, b| a.wrapping_add(b * b));
        assert!(spin > 0);
        let s = process_cpu_seconds(std::process::id()).unwrap();
        assert!(s > 0.0 && s < 3_600.0, "{s}");
    }

    #[test]
    fn the_threads_cpu_grows_by_what_this_thread_spins() {
        let pid = std::process::id();
        let before = threads_cpu_seconds(pid).unwrap();
        let start = std::time::Instant::now();
        let mut spin = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(50) {
            spin = (0..10_000u64).fold(spin, |a, b| a.wrapping_add(b * b));
        }
        assert!(spin > 0);
        let used = threads_cpu_seconds(pid).unwrap() - before;
        // 50 ms of wall time spinning: on a loaded machine the thread gets part of it.
        assert!(used > 0.001 && used < 10.0, "{used}");
    }
}
