//! Issue 45's Prometheus usage poller (`[usage.prometheus]`, `usage_poll`) against a real
//! Prometheus (Debian's `prometheus`, `/usr/bin/prometheus`, run here on a free port with its
//! own configuration and storage): a tiny exporter serves series in the text exposition
//! format, Prometheus scrapes it every second, the poller queries Prometheus' HTTP API, and
//! the readings reach the live table's soft state through the same checks as every other
//! source — taken, refused with a reason and counted, or expired on the injected clock once
//! Prometheus is gone. Every wait is on something observable, with a deadline.

use super::helpers::{host_state_event, settings, TestApp};
use parasol::clock::{Clock, ManualClock};
use parasol::configuration::BackendKind;
use parasol::domain::{ClassId, UsageSource};
use parasol::startup::Application;
use parasol::table::PollOutcome;
use parasol::usage_poll::PrometheusSettings;
use serde_json::Value;
use std::future::Future;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PROMETHEUS: &str = "/usr/bin/prometheus";

/// How long anything here may take on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(60);

/// Why the test cannot run here, as its failure: a message naming the command that sets the
/// machine up (a failed test, not a panic's backtrace).
struct NotInstalled;

impl std::fmt::Debug for NotInstalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{PROMETHEUS} not installed: run the tests with `./test` (README.md), which installs \
             Debian's prometheus package first (without starting its service)"
        )
    }
}

/// Polls `check` until it gives `Some`, at most [`DEADLINE`]; `what` names the wait.
async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let end = Instant::now() + DEADLINE;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// One series the exporter serves: a gauge, or a counter rising at `per_s` from the
/// exporter's start (as libvirt's CPU time of a domain).
#[derive(Clone)]
enum Series {
    Gauge(&'static str, f64),
    Counter(&'static str, f64),
}

/// A scrape target serving its series in Prometheus' text exposition format (any path).
struct Exporter {
    port: u16,
    series: Arc<Mutex<Vec<Series>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Exporter {
    async fn start(series: Vec<Series>) -> Exporter {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let series = Arc::new(Mutex::new(series));
        let served = series.clone();
        let started = Instant::now();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                let body = exposition(&served.lock().unwrap(), started.elapsed());
                tokio::spawn(async move {
                    // One request a connection: read its head, answer, close.
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(answer.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        Exporter { port, series, task }
    }

    fn set(&self, series: Vec<Series>) {
        *self.series.lock().unwrap() = series;
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn exposition(series: &[Series], elapsed: Duration) -> String {
    let mut text = String::new();
    for s in series {
        let (line, value) = match s {
            Series::Gauge(line, v) => (line, *v),
            Series::Counter(line, per_s) => (line, per_s * elapsed.as_secs_f64()),
        };
        // The exposition format writes NaN as `NaN`; Rust's `{}` gives `NaN` too.
        text.push_str(&format!("{line} {value}\n"));
    }
    text
}

/// A real Prometheus scraping one target every second, killed (its process group) on drop.
struct Prometheus {
    port: u16,
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// With TLS: the CA file a client must trust (Prometheus serves https).
    cafile: Option<String>,
    client: reqwest::Client,
}

/// A throw-away CA's certificate and a server certificate and key it signed for 127.0.0.1,
/// PEM, written into `dir` as `ca.pem`, `server.pem` and `server.key`.
fn certificates(dir: &Path) {
    let c = crate::tls_front::certificates();
    std::fs::write(dir.join("ca.pem"), c.ca_pem).unwrap();
    std::fs::write(dir.join("server.pem"), c.server_pem).unwrap();
    std::fs::write(dir.join("server.key"), c.server_key_pem).unwrap();
}

impl Prometheus {
    async fn start(target_port: u16) -> Result<Prometheus, NotInstalled> {
        Self::start_with(target_port, false).await
    }

    /// With `tls`, Prometheus serves https (its `--web.config.file`'s `tls_server_config`)
    /// with a certificate of a throw-away CA.
    async fn start_with(target_port: u16, tls: bool) -> Result<Prometheus, NotInstalled> {
        if !Path::new(PROMETHEUS).is_file() {
            return Err(NotInstalled);
        }
        let dir = tempfile::tempdir().unwrap();
        let mut web = Vec::new();
        let mut client = reqwest::Client::builder();
        let mut cafile = None;
        if tls {
            certificates(dir.path());
            let web_config = dir.path().join("web.yml");
            std::fs::write(
                &web_config,
                format!(
                    "tls_server_config:\n  cert_file: {0}/server.pem\n  key_file: {0}/server.key\n",
                    dir.path().display()
                ),
            )
            .unwrap();
            web.push(format!("--web.config.file={}", web_config.display()));
            let ca = dir.path().join("ca.pem").display().to_string();
            let pem = std::fs::read(&ca).unwrap();
            client = client.add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap());
            cafile = Some(ca);
        }
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: parasol_test\n    static_configs:\n\
                 \x20     - targets: ['127.0.0.1:{target_port}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .args(&web)
            .stdout(Stdio::null())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("{PROMETHEUS}: {e}"));
        let prometheus = Prometheus {
            port,
            child: Some(child),
            dir,
            cafile,
            client: client.build().unwrap(),
        };
        let ready = format!("{}/-/ready", prometheus.url());
        wait_for("Prometheus to be ready", || async {
            let answer = prometheus.client.get(&ready).send().await.ok()?;
            answer.status().is_success().then_some(())
        })
        .await;
        Ok(prometheus)
    }

    fn url(&self) -> String {
        let scheme = if self.cafile.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The values `query` gives now, by the `host` label.
    async fn values(&self, query: &str) -> Vec<(String, String)> {
        let answer: Value = self
            .client
            .get(format!("{}/api/v1/query", self.url()))
            .query(&[("query", query)])
            .send()
            .await
            .expect("Prometheus answers")
            .json()
            .await
            .expect("JSON");
        let result = answer["data"]["result"].as_array().cloned();
        result
            .unwrap_or_default()
            .iter()
            .map(|s| {
                let host = s["metric"]["host"].as_str().unwrap_or("").to_string();
                (host, s["value"][1].as_str().unwrap_or("").to_string())
            })
            .collect()
    }

    /// Waits until `query` gives a series for every host in `hosts` (the target scraped,
    /// twice for a `rate`), or fails with Prometheus' log.
    async fn wait_series(&self, query: &str, hosts: &[&str]) {
        let end = Instant::now() + DEADLINE;
        loop {
            let values = self.values(query).await;
            if hosts.iter().all(|h| values.iter().any(|(v, _)| v == h)) {
                return;
            }
            if Instant::now() > end {
                let log = std::fs::read_to_string(self.dir.path().join("prometheus.log"));
                panic!("{query} gave {values:?} for {hosts:?}; Prometheus' log:\n{log:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Kills Prometheus now.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            let _ = child.wait();
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Prometheus' view of the domains of `compute1` as libvirt exporters give it: CPU time
/// counters per domain (1 and 2 CPU-seconds a second) and memory per domain.
const VCPU_QUERY: &str = "sum by (host) (rate(parasol_test_domain_cpu_seconds_total[5s]))";
const MEMORY_QUERY: &str = "sum by (host) (parasol_test_domain_memory_mb)";

fn domains(memory_mb: [f64; 2]) -> Vec<Series> {
    vec![
        Series::Counter(
            r#"parasol_test_domain_cpu_seconds_total{host="compute1",domain="instance-1"}"#,
            1.0,
        ),
        Series::Counter(
            r#"parasol_test_domain_cpu_seconds_total{host="compute1",domain="instance-2"}"#,
            2.0,
        ),
        Series::Gauge(
            r#"parasol_test_domain_memory_mb{host="compute1",domain="instance-1"}"#,
            memory_mb[0],
        ),
        Series::Gauge(
            r#"parasol_test_domain_memory_mb{host="compute1",domain="instance-2"}"#,
            memory_mb[1],
        ),
    ]
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A service on `clock` with host `compute1` (16 VCPU, 32 GB, 400 GB), readings valid 30 s,
/// and the poller on `prometheus` with `queries`, polling every second of `clock`, started as
/// `parasol serve` starts it: among the application's background parts, stopped with them.
async fn service(
    clock: &ManualClock,
    prometheus: &Prometheus,
    queries: &[(&str, &str)],
) -> TestApp {
    service_with_qos(clock, prometheus, queries, &[]).await
}

/// [`service`] with `qos_queries` too (per QoS signal).
async fn service_with_qos(
    clock: &ManualClock,
    prometheus: &Prometheus,
    queries: &[(&str, &str)],
    qos_queries: &[(&str, &str)],
) -> TestApp {
    service_with(clock, prometheus, queries, &[], qos_queries).await
}

/// [`service`] with `instance_queries` (per class) and `qos_queries` (per QoS signal) too.
async fn service_with(
    clock: &ManualClock,
    prometheus: &Prometheus,
    queries: &[(&str, &str)],
    instance_queries: &[(&str, &str)],
    qos_queries: &[(&str, &str)],
) -> TestApp {
    let owned = |list: &[(&str, &str)]| {
        list.iter()
            .map(|(k, q)| (k.to_string(), q.to_string()))
            .collect()
    };
    let (mut s, db) = settings("sqlite", BackendKind::Filter).await;
    s.usage.max_age_s = 30.0;
    s.usage.prometheus = PrometheusSettings {
        url: prometheus.url(),
        poll_interval_s: 1.0,
        timeout_s: 5.0,
        cafile: prometheus.cafile.clone().unwrap_or_default(),
        queries: owned(queries),
        instance_queries: owned(instance_queries),
        qos_queries: owned(qos_queries),
        ..Default::default()
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let built = Application::build_with(s, listener, Arc::new(clock.clone()))
        .await
        .expect("build app");
    let app = TestApp {
        address: format!("http://127.0.0.1:{}", built.port()),
        client: reqwest::Client::new(),
        scheduler: built.scheduler().clone(),
        handles: built.handles().clone(),
        shutdown: built.shutdown(),
        _db: db,
    };
    // The host first, so that the first poll finds it.
    let event = host_state_event("prom-1", "compute1", 16, 32_768, 400);
    let event = parasol::nova::Notification::from_inner(&event).expect("a host-state event");
    app.handles.ingest.apply(&event).await.expect("applied");
    built.start_background();
    tokio::spawn(built.run_until_stopped());
    app
}

/// The poller's queries that ended `outcome`, read from the table (the HTTP server may be
/// stopped).
fn polls(app: &TestApp, outcome: PollOutcome) -> u64 {
    let counters = app.scheduler.ledger().table().usage_counters().clone();
    counters.polls(UsageSource::Prometheus, outcome)
}

async fn usage_of(app: &TestApp) -> Value {
    app.get_json("/v1/stats").await["usage"].clone()
}

/// Waits until the poller has sent `queries` queries that ended `outcome` (each counted once
/// its samples are in the table), moving `clock` on by the poll interval each time it waits
/// (each move lets one more poll start).
async fn wait_polls(app: &TestApp, clock: &ManualClock, outcome: &str, queries: u64) -> Value {
    wait_for(
        &format!("{queries} {outcome} Prometheus queries"),
        || async {
            let usage = usage_of(app).await;
            if usage["polls"]["prometheus"][outcome].as_u64() >= Some(queries) {
                return Some(usage);
            }
            clock.advance_ms(1_000);
            None
        },
    )
    .await
}

/// Waits until compute1 has a fresh reading of each of `classes`, moving `clock` on by the
/// poll interval each time it waits. A scrape that Prometheus gave up on (its 1 s timeout, on a
/// loaded machine) marks the target's series stale, and the query then gives no series until
/// the next scrape: a poll finds nothing to read, which is no failure of the poller.
async fn wait_measured(app: &TestApp, clock: &ManualClock, classes: &[&str]) -> Value {
    wait_for(&format!("fresh readings of {classes:?}"), || async {
        let m = measured(app).await;
        if classes.iter().all(|c| m["classes"][c]["fresh"] == true) {
            return Some(m);
        }
        clock.advance_ms(1_000);
        None
    })
    .await
}

async fn measured(app: &TestApp) -> Value {
    let hosts = app.get_json("/v1/hosts").await;
    hosts["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["host"] == "compute1")
        .map(|h| h["measured"].clone())
        .expect("compute1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_poller_feeds_prometheus_series_into_the_usage_soft_state() -> Result<(), NotInstalled>
{
    let exporter = Exporter::start(domains([1024.0, 2048.0])).await;
    let prometheus = Prometheus::start(exporter.port).await?;
    // rate() is exact once its 5 s window is full of samples (before, Prometheus'
    // extrapolation covers only part of the window).
    let full = "count_over_time(parasol_test_domain_cpu_seconds_total[5s]) >= 5";
    prometheus.wait_series(full, &["compute1"]).await;
    prometheus.wait_series(MEMORY_QUERY, &["compute1"]).await;
    let clock = ManualClock::new(now_ms());
    let queries = [("VCPU", VCPU_QUERY), ("MEMORY_MB", MEMORY_QUERY)];
    let app = service(&clock, &prometheus, &queries).await;

    let m = wait_measured(&app, &clock, &["VCPU", "MEMORY_MB"]).await;
    let usage = usage_of(&app).await;
    assert_eq!(usage["polls"]["prometheus"]["enabled"], true, "{usage}");
    assert_eq!(usage["polls"]["prometheus"]["failed"], 0, "{usage}");
    assert_eq!(
        usage["polls"]["prometheus"]["last_error"],
        Value::Null,
        "{usage}"
    );
    assert!(
        usage["accepted"]["prometheus"].as_u64() >= Some(2),
        "{usage}"
    );
    assert_eq!(usage["hosts"]["fresh"], 1, "{usage}");
    let vcpu = &m["classes"]["VCPU"];
    assert_eq!(vcpu["source"], "prometheus", "{m}");
    assert_eq!(vcpu["fresh"], true, "{m}");
    // rate() of counters rising at 1 and 2 CPU-seconds a second, summed by host.
    let cpu = vcpu["value"].as_f64().unwrap();
    assert!((cpu - 3.0).abs() < 0.3, "VCPU {cpu}, not about 3: {m}");
    // Timed by Prometheus' evaluation, which happened after the exporter started.
    assert!(
        vcpu["at_ms"].as_i64().unwrap() >= clock.now_ms() - 60_000,
        "{m}"
    );
    assert_eq!(m["classes"]["MEMORY_MB"]["value"], 3072.0, "{m}");
    assert_eq!(m["classes"]["MEMORY_MB"]["source"], "prometheus", "{m}");

    // A new value, once Prometheus has scraped it, is the next poll's reading.
    exporter.set(domains([1024.0, 4096.0]));
    wait_for("Prometheus to scrape the new memory", || async {
        let values = prometheus.values(MEMORY_QUERY).await;
        (values == [("compute1".to_string(), "5120".to_string())]).then_some(())
    })
    .await;
    wait_for("the poller to take the new memory", || async {
        let m = measured(&app).await;
        if m["classes"]["MEMORY_MB"]["value"] == 5120.0 {
            return Some(());
        }
        clock.advance_ms(1_000);
        None
    })
    .await;
    let usage = usage_of(&app).await;
    assert_eq!(usage["refused"]["older"], 0, "{usage}");

    // Stopped with the service: the clock moving on starts no more polls.
    app.shutdown.stop().await;
    let sent = polls(&app, PollOutcome::Ok);
    for _ in 0..5 {
        clock.advance_ms(1_000);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        polls(&app, PollOutcome::Ok),
        sent,
        "polled after the shutdown"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn prometheus_samples_above_total_negative_nan_or_of_an_unknown_host_are_refused_and_counted(
) -> Result<(), NotInstalled> {
    let exporter = Exporter::start(vec![
        Series::Gauge(r#"parasol_test_vcpu_used{host="compute1"}"#, 100.0),
        Series::Gauge(r#"parasol_test_vcpu_used{host="nowhere"}"#, 1.0),
        Series::Gauge(r#"parasol_test_memory_used_mb{host="compute1"}"#, -5.0),
        Series::Gauge(r#"parasol_test_disk_used_gb{host="compute1"}"#, f64::NAN),
    ])
    .await;
    let prometheus = Prometheus::start(exporter.port).await?;
    let queries = [
        ("VCPU", "parasol_test_vcpu_used"),
        ("MEMORY_MB", "parasol_test_memory_used_mb"),
        ("DISK_GB", "parasol_test_disk_used_gb"),
    ];
    for (_, query) in queries {
        prometheus.wait_series(query, &["compute1"]).await;
    }
    prometheus
        .wait_series("parasol_test_vcpu_used", &["nowhere"])
        .await;
    let clock = ManualClock::new(now_ms());
    let app = service(&clock, &prometheus, &queries).await;

    // Each sample refused for its reason (a poll right after a scrape Prometheus gave up on
    // reads no series: the clock moves on to the next).
    let reasons = ["above_total", "unknown_host", "negative", "not_a_number"];
    let usage = wait_for("each sample refused", || async {
        let usage = usage_of(&app).await;
        if reasons
            .iter()
            .all(|r| usage["refused"][r].as_u64() >= Some(1))
        {
            return Some(usage);
        }
        clock.advance_ms(1_000);
        None
    })
    .await;
    assert_eq!(usage["accepted"]["prometheus"], 0, "{usage}");
    assert_eq!(usage["refused"]["older"], 0, "{usage}");
    assert_eq!(usage["hosts"]["none"], 1, "nothing taken: {usage}");
    assert!(measured(&app).await["classes"].is_null());
    let metrics = app
        .client
        .get(format!("{}/metrics", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let counted = |outcome: &str, family: &str| {
        let prefix =
            format!(r#"parasol_{family}_total{{outcome="{outcome}",source="prometheus"}} "#);
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    for reason in reasons {
        assert!(
            counted(reason, "usage_readings") >= 1,
            "{reason}: {metrics}"
        );
    }
    assert!(counted("ok", "usage_polls") >= 3, "{metrics}");
    app.shutdown.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_prometheus_counts_failed_polls_and_its_readings_expire(
) -> Result<(), NotInstalled> {
    let exporter = Exporter::start(domains([1024.0, 2048.0])).await;
    let mut prometheus = Prometheus::start(exporter.port).await?;
    prometheus.wait_series(MEMORY_QUERY, &["compute1"]).await;
    let clock = ManualClock::new(now_ms());
    let app = service(&clock, &prometheus, &[("MEMORY_MB", MEMORY_QUERY)]).await;
    wait_measured(&app, &clock, &["MEMORY_MB"]).await;

    prometheus.stop();
    let usage = wait_polls(&app, &clock, "failed", 1).await;
    let ok = polls(&app, PollOutcome::Ok);
    let error = usage["polls"]["prometheus"]["last_error"].as_str().unwrap();
    assert!(error.starts_with("MEMORY_MB: "), "{error}");
    assert!(error.contains(&prometheus.url()), "names where: {error}");
    // Not expired yet: the reading keeps deciding until max_age_s has passed.
    assert_eq!(usage["hosts"]["fresh"], 1, "{usage}");

    // max_age_s (30 s) of the service's clock later, nothing renewed it: expired, kept, and
    // deciding nothing; every poll meanwhile failed and was counted.
    for _ in 0..31 {
        clock.advance_ms(1_000);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let usage = wait_polls(&app, &clock, "failed", 5).await;
    assert_eq!(usage["hosts"]["fresh"], 0, "{usage}");
    assert_eq!(usage["hosts"]["expired"], 1, "{usage}");
    let m = measured(&app).await;
    assert_eq!(m["classes"]["MEMORY_MB"]["fresh"], false, "{m}");
    assert_eq!(m["classes"]["MEMORY_MB"]["value"], 3072.0, "{m}");
    assert_eq!(polls(&app, PollOutcome::Ok), ok, "no poll succeeded since");
    app.shutdown.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_poller_reads_a_prometheus_served_over_tls_trusting_its_cafile(
) -> Result<(), NotInstalled> {
    let exporter = Exporter::start(domains([1024.0, 2048.0])).await;
    let prometheus = Prometheus::start_with(exporter.port, true).await?;
    prometheus.wait_series(MEMORY_QUERY, &["compute1"]).await;
    assert!(prometheus.url().starts_with("https://"));

    // Without the CA file, the handshake fails: a failed query naming the certificate.
    let untrusting = parasol::usage_poll::PrometheusClient::new(&PrometheusSettings {
        url: prometheus.url(),
        ..Default::default()
    })
    .unwrap();
    let err = untrusting.query(MEMORY_QUERY).await.unwrap_err();
    assert!(err.to_lowercase().contains("certificate"), "{err}");

    let clock = ManualClock::new(now_ms());
    let app = service(&clock, &prometheus, &[("MEMORY_MB", MEMORY_QUERY)]).await;
    let m = wait_measured(&app, &clock, &["MEMORY_MB"]).await;
    assert_eq!(polls(&app, PollOutcome::Failed), 0);
    assert_eq!(m["classes"]["MEMORY_MB"]["value"], 3072.0, "{m}");
    assert_eq!(m["classes"]["MEMORY_MB"]["source"], "prometheus", "{m}");
    app.shutdown.stop().await;
    Ok(())
}

/// Two instances of compute1 as a libvirt exporter with Nova's instance uuid as a label
/// gives them: vCPU delay counters (instance A's vCPU waits 0.3 s a second, B's never) and a
/// memory-pressure gauge.
const INSTANCE_A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const INSTANCE_B: &str = "bbbbbbbb-0000-4000-8000-000000000002";
const CPU_WAIT_QUERY: &str =
    "max by (host, uuid) (rate(parasol_test_domain_vcpu_delay_seconds_total[5s]))";
const MEMORY_PRESSURE_QUERY: &str = "max by (host, uuid) (parasol_test_domain_memory_pressure)";

fn instance_signals(domain_label: &str) -> Vec<Series> {
    per_instance(
        domain_label,
        &[
            (
                "parasol_test_domain_vcpu_delay_seconds_total",
                true,
                [0.3, 0.0],
            ),
            ("parasol_test_domain_memory_pressure", false, [0.0, 0.02]),
        ],
    )
}

/// compute1's instances A and B as an exporter gives them: per (metric, counter or gauge,
/// [A's, B's] rate or value), one series each, labelled `uuid` with Nova's instance uuid, or
/// with libvirt's domain names when `domain_label` is not "uuid".
fn per_instance(domain_label: &str, metrics: &[(&str, bool, [f64; 2])]) -> Vec<Series> {
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let names = match domain_label {
        "uuid" => [INSTANCE_A.to_string(), INSTANCE_B.to_string()],
        _ => [
            "instance-0000000a".to_string(),
            "instance-0000000b".to_string(),
        ],
    };
    let mut series = Vec::new();
    for (metric, counter, values) in metrics {
        for (uuid, value) in names.iter().zip(values) {
            let line = leak(format!(r#"{metric}{{host="compute1",uuid="{uuid}"}}"#));
            series.push(match counter {
                true => Series::Counter(line, *value),
                false => Series::Gauge(line, *value),
            });
        }
    }
    series
}

/// `[usage.prometheus] qos_queries`: per QoS signal a query giving it per host and instance
/// uuid; the answers become compute1's instance QoS report (both instances, each signal),
/// shown in `/v1/hosts` and counted; a series whose uuid label holds no uuid (a libvirt
/// domain name) fails that query, counted and named in `last_error`, and the round's other
/// answers are not taken: the report held stays whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn qos_queries_give_each_hosts_instance_signals() -> Result<(), NotInstalled> {
    let exporter = Exporter::start(instance_signals("uuid")).await;
    let prometheus = Prometheus::start(exporter.port).await?;
    let full = "count_over_time(parasol_test_domain_vcpu_delay_seconds_total[5s]) >= 5";
    prometheus.wait_series(full, &["compute1"]).await;
    prometheus
        .wait_series(MEMORY_PRESSURE_QUERY, &["compute1"])
        .await;
    let clock = ManualClock::new(now_ms());
    let qos = [
        ("cpu_wait", CPU_WAIT_QUERY),
        ("memory_pressure", MEMORY_PRESSURE_QUERY),
    ];
    let app = service_with_qos(&clock, &prometheus, &[], &qos).await;
    let m = wait_for("compute1's instance QoS report", || async {
        let m = measured(&app).await;
        let both = [INSTANCE_A, INSTANCE_B]
            .iter()
            .all(|i| m["qos"]["instances"][i]["memory_pressure"].is_number());
        if both && m["qos"]["instances"][INSTANCE_A]["cpu_wait"].is_number() {
            return Some(m);
        }
        clock.advance_ms(1_000);
        None
    })
    .await;
    let qos_report = &m["qos"];
    assert_eq!(qos_report["source"], "prometheus", "{m}");
    assert_eq!(qos_report["fresh"], true, "{m}");
    let wait_a = qos_report["instances"][INSTANCE_A]["cpu_wait"]
        .as_f64()
        .unwrap();
    assert!((0.25..=0.35).contains(&wait_a), "rate of 0.3 s/s: {m}");
    assert_eq!(qos_report["instances"][INSTANCE_B]["cpu_wait"], 0.0, "{m}");
    assert_eq!(qos_report["instances"][INSTANCE_B]["memory_pressure"], 0.02);
    let usage = usage_of(&app).await;
    assert_eq!(usage["qos_instances"], 2, "{usage}");
    assert_eq!(usage["polls"]["prometheus"]["failed"], 0, "{usage}");

    // The exporter now labels its series with libvirt's domain names: the queries fail,
    // named, and nothing of the report held changes.
    exporter.set(instance_signals("domain"));
    let usage = wait_polls(&app, &clock, "failed", 1).await;
    let error = usage["polls"]["prometheus"]["last_error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("uuid=\"instance-0000000") && error.contains("instance_label"),
        "{usage}"
    );
    // A round with a failed query renews no report. (A round between the exporter's change
    // and Prometheus' next scrape may still have renewed it from the old series: A's rate
    // moves a little, the rest is exact.)
    let held = measured(&app).await["qos"]["instances"].clone();
    let uuids: Vec<_> = held.as_object().unwrap().keys().cloned().collect();
    assert_eq!(uuids, [INSTANCE_A, INSTANCE_B], "{held}");
    assert_eq!(held[INSTANCE_B]["memory_pressure"], 0.02, "{held}");
    app.shutdown.stop().await;
    Ok(())
}

/// compute1's two instances as a libvirt exporter labelled with Nova's uuids gives them: CPU
/// time counters (A uses 1 CPU-second a second, B 2) and memory gauges.
fn instance_usage(domain_label: &str, memory_mb: [f64; 2]) -> Vec<Series> {
    per_instance(
        domain_label,
        &[
            ("parasol_test_instance_cpu_seconds_total", true, [1.0, 2.0]),
            ("parasol_test_instance_memory_mb", false, memory_mb),
        ],
    )
}

const INSTANCE_VCPU_QUERY: &str =
    "sum by (host, uuid) (rate(parasol_test_instance_cpu_seconds_total[5s]))";
const INSTANCE_MEMORY_QUERY: &str = "max by (host, uuid) (parasol_test_instance_memory_mb)";

/// compute1's instances' usage as the table holds it: (uuid, [VCPU, MEMORY_MB]).
fn instance_usage_held(app: &TestApp) -> Vec<(String, [Option<f64>; 2])> {
    let table = app.scheduler.ledger().table();
    let host = table.by_name("compute1", None).expect("compute1");
    let Some(measured) = host.measured else {
        return Vec::new();
    };
    measured
        .instances
        .iter()
        .map(|i| {
            let of = |class: ClassId| i.classes.iter().find(|(c, _)| *c == class).map(|c| c.1);
            (
                i.instance.to_string(),
                [of(ClassId::VCPU), of(ClassId::MEMORY_MB)],
            )
        })
        .collect()
}

/// `[usage.prometheus] instance_queries`: per class a query giving it per host and instance
/// uuid; the answers become compute1's `instance_usage` (both instances, each class), counted
/// in `/v1/stats` and `/v1/hosts`; a series whose uuid label holds no uuid fails that query,
/// named in `last_error`, and the round's other answers are not taken: the list held stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instance_queries_give_each_hosts_instance_usage() -> Result<(), NotInstalled> {
    let exporter = Exporter::start(instance_usage("uuid", [900.0, 1_800.0])).await;
    let prometheus = Prometheus::start(exporter.port).await?;
    let full = "count_over_time(parasol_test_instance_cpu_seconds_total[5s]) >= 5";
    prometheus.wait_series(full, &["compute1"]).await;
    prometheus
        .wait_series(INSTANCE_MEMORY_QUERY, &["compute1"])
        .await;
    let clock = ManualClock::new(now_ms());
    let instance_queries = [
        ("VCPU", INSTANCE_VCPU_QUERY),
        ("MEMORY_MB", INSTANCE_MEMORY_QUERY),
    ];
    let app = service_with(&clock, &prometheus, &[], &instance_queries, &[]).await;
    let held = wait_for("compute1's instance usage", || async {
        let held = instance_usage_held(&app);
        if held.len() == 2 && held.iter().all(|(_, c)| c.iter().all(Option::is_some)) {
            return Some(held);
        }
        clock.advance_ms(1_000);
        None
    })
    .await;
    assert_eq!(held[0].0, INSTANCE_A);
    assert_eq!(held[1].0, INSTANCE_B);
    let (a, b) = (held[0].1, held[1].1);
    assert!(
        (0.9..=1.1).contains(&a[0].unwrap()),
        "1 CPU-second a second: {held:?}"
    );
    assert!(
        (1.8..=2.2).contains(&b[0].unwrap()),
        "2 CPU-seconds a second: {held:?}"
    );
    assert_eq!((a[1], b[1]), (Some(900.0), Some(1_800.0)));
    let usage = usage_of(&app).await;
    assert_eq!(usage["instances"], 2, "{usage}");
    assert_eq!(usage["polls"]["prometheus"]["failed"], 0, "{usage}");
    assert_eq!(measured(&app).await["instances"], 2);

    // The exporter now labels its series with libvirt's domain names (and the memory moves):
    // the queries fail, named, and the list held is not replaced.
    exporter.set(instance_usage("domain", [100.0, 200.0]));
    let usage = wait_polls(&app, &clock, "failed", 1).await;
    let error = usage["polls"]["prometheus"]["last_error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("uuid=\"instance-0000000") && error.contains("instance_label"),
        "{usage}"
    );
    let held = instance_usage_held(&app);
    let uuids: Vec<&str> = held.iter().map(|(u, _)| u.as_str()).collect();
    assert_eq!(uuids, [INSTANCE_A, INSTANCE_B], "{held:?}");
    assert_eq!(held[1].1[1], Some(1_800.0), "{held:?}");
    app.shutdown.stop().await;
    Ok(())
}
