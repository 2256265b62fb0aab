//! A `parasol serve` child process for the tests that run the binary: started on a
//! configuration file, waited for until it answers, killed and reaped when dropped (however
//! the test ends), so that no service outlives its test.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `parasol serve`; killed and reaped on drop.
pub struct ServiceProcess {
    pub child: Child,
    pub port: u16,
}

impl ServiceProcess {
    /// Starts `parasol --config file serve` with `RUST_LOG=log_level`, its standard error on
    /// `stderr` and `env` set (serving on `port`, as `file` says), without waiting for it.
    pub fn spawn(
        file: &Path,
        port: u16,
        log_level: &str,
        stderr: Stdio,
        env: &[(&str, &str)],
    ) -> ServiceProcess {
        let child = Command::new(env!("CARGO_BIN_EXE_parasol"))
            .args(["--config", file.to_str().expect("a UTF-8 path"), "serve"])
            .env("RUST_LOG", log_level)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start parasol");
        ServiceProcess { child, port }
    }

    /// [`Self::spawn`] with no extra environment, once `/healthz` answers (30 s at most).
    pub async fn start(file: &Path, port: u16, log_level: &str, stderr: Stdio) -> Self {
        Self::spawn(file, port, log_level, stderr, &[])
            .answering("/healthz")
            .await
    }

    /// Returns once `path` answers (any status), failing the test after 30 s.
    pub async fn answering(self, path: &str) -> Self {
        let url = format!("{}{path}", self.base());
        let deadline = Instant::now() + Duration::from_secs(30);
        while reqwest::get(&url).await.is_err() {
            assert!(Instant::now() < deadline, "parasol did not come up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Kills the process (SIGKILL) and reaps it; nothing if it already ended.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
