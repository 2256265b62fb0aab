//! The live page at `/` in a real headless Chromium (Debian's `chromium` and
//! `chromium-driver`, driven over WebDriver with `fantoccini`, jonhoo's maintained W3C
//! WebDriver client, without its TLS features: chromedriver is plain HTTP on loopback).
//! Parasol runs under load, switched from `filter` to `apsr` midway; once the load stops,
//! every number the page shows (its `data-value`) equals `/v1/stats` at that moment, and
//! every resource the page loaded came from Parasol itself. With `PARASOL_UPDATE_DOCS=1` the
//! screenshot is saved as `docs/live-page.png`.

use fantoccini::{Client, ClientBuilder};
use serde_json::{json, Map, Value};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process in its own process group, killed with its group (Chromium under
/// chromedriver) when the test ends however it ends.
struct Group(Child);

impl Drop for Group {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn spawn(cmd: &mut Command) -> Group {
    Group(
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("{cmd:?}: {e}")),
    )
}

/// Why the test cannot run here, as its failure: a message naming the command that sets the
/// machine up (a failed test, not a panic's backtrace).
struct NotInstalled(Vec<&'static str>);

impl std::fmt::Debug for NotInstalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} not installed: run the tests with `./test` (README.md), which installs \
             Debian's chromium and chromium-driver first",
            self.0.join(" and ")
        )
    }
}

/// The browser this test drives and its WebDriver, or what is missing of them.
fn missing_browser() -> Vec<&'static str> {
    let on_path = |name: &str| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(name).is_file()))
    };
    let mut missing = Vec::new();
    if !Path::new(CHROMIUM).is_file() {
        missing.push(CHROMIUM);
    }
    if !on_path("chromedriver") {
        missing.push("chromedriver");
    }
    missing
}

const CHROMIUM: &str = "/usr/bin/chromium";

async fn wait_for(url: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while reqwest::get(url).await.is_err() {
        assert!(Instant::now() < deadline, "{url} did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn config(port: u16, dir: &Path, backend: &str) -> String {
    format!(
        "[server]\nport = {port}\n[ledger]\nurl = \"sqlite://{}/ledger.db\"\n[scheduler]\nbackend = \"{backend}\"\n\
         seed = 5\n[amqp]\nurl = \"\"\n[apsr]\nround_interval_s = 0.5\n\
         [plugins]\nbreaker_failures = 1\nbreaker_open_s = 3600\n\
         [[plugins.chain]]\nname = \"site-rule\"\nevent = \"select\"\nignorable = true\n\
         url = \"http://127.0.0.1:1/select\"\n\
         [flex]\nenabled = true\nupdate_period_s = 1\nqos_source = \"host_saturation\"\n\
         [batch]\nmode = \"call\"\n",
        dir.display()
    )
}

fn request(vcpus: i64) -> Value {
    multi_create(vcpus, 1)
}

/// A call for `n` instances of one flavor (`[batch] mode = "call"` solves it as one round).
fn multi_create(vcpus: i64, n: usize) -> Value {
    let uuids: Vec<String> = (0..n).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    let flavor = json!({"nova_object.name": "Flavor", "nova_object.namespace": "nova", "nova_object.version": "1.2",
        "nova_object.data": {"name": "f", "vcpus": vcpus, "memory_mb": 1024, "root_gb": 1, "ephemeral_gb": 0, "swap": 0}});
    json!({"spec_obj": {"nova_object.name": "RequestSpec", "nova_object.namespace": "nova", "nova_object.version": "1.15",
        "nova_object.data": {"flavor": flavor, "num_instances": n}},
        "instance_uuids": uuids, "return_objects": true, "return_alternates": true})
}

/// Sends calls from 4 tasks for `duration`; one in ten asks for more than any host has.
async fn load(base: &str, duration: Duration) {
    let tasks: Vec<_> = (0..4)
        .map(|t| {
            let base = base.to_string();
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let end = Instant::now() + duration;
                let mut i = 0;
                while Instant::now() < end {
                    let vcpus = if (i + t) % 10 == 0 { 1000 } else { 1 };
                    let r = client
                        .post(format!("{base}/v1/select_destinations"))
                        .json(&request(vcpus))
                        .send()
                        .await
                        .expect("a call");
                    assert!(matches!(r.status().as_u16(), 200 | 409), "{}", r.status());
                    i += 1;
                    tokio::time::sleep(Duration::from_millis(3)).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("load task");
    }
}

async fn stats(base: &str) -> Value {
    reqwest::get(format!("{base}/v1/stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// What the page must show for each backend of a `/v1/stats` answer: `(backend, metric)` →
/// value.
fn expected(stats: &Value) -> Map<String, Value> {
    let mut want = Map::new();
    for (name, b) in stats["backends"].as_object().unwrap() {
        let w = &b["window"];
        let rate = w["requests"].as_f64().unwrap() / w["seconds"].as_f64().unwrap();
        let mut put = |metric: &str, v: Value| {
            want.insert(format!("{name}/{metric}"), v);
        };
        put("decisions_per_s", json!(rate));
        put("decline_ratio", w["decline_ratio"].clone());
        put("queries_per_request", w["queries_per_request"].clone());
        for p in ["p50", "p90", "p99"] {
            put(&format!("latency_{p}_ms"), w["latency_ms"][p].clone());
        }
        put("requests", b["requests"].clone());
        put("placed", b["placed"].clone());
        if let Some(r) = w
            .get("avoidable_decline_ratio")
            .or_else(|| b.get("avoidable_decline_ratio"))
        {
            put("avoidable_decline_ratio", r.clone());
        }
        let causes = w
            .get("declines_by_cause")
            .or_else(|| b.get("declines_by_cause"));
        for (cause, n) in causes.and_then(Value::as_object).into_iter().flatten() {
            put(&format!("declines_by_cause.{cause}"), n.clone());
        }
        if let Some(batch) = b.get("batch") {
            for k in ["rounds", "instances", "unscheduled"] {
                put(&format!("batch.{k}"), batch[k].clone());
            }
            let fallbacks: u64 = batch["fallbacks"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(_, n)| n.as_u64().unwrap())
                .sum();
            put("batch.fallbacks", json!(fallbacks));
            for (k, p) in [
                ("size", "p50"),
                ("size", "max"),
                ("solve_latency_ms", "p50"),
                ("solve_latency_ms", "p99"),
            ] {
                put(&format!("batch.{k}.{p}"), batch[k][p].clone());
            }
        }
    }
    // The service's card: Flex, measured usage, operator plugins, provider trees, rebalancing.
    let mut put = |metric: String, v: Value| {
        want.insert(format!("service/{metric}"), v);
    };
    if let Some(flex) = stats.get("flex") {
        put("flex.penalty".into(), flex["penalty"].clone());
        put("flex.qos".into(), flex["qos"].clone());
        let managed = &flex["allocation_ratio"];
        let on = managed["enabled"] == true;
        put(
            "flex.allocation_ratio.enabled".into(),
            json!(if on { "yes" } else { "no" }),
        );
        for (class, c) in managed["classes"].as_object().into_iter().flatten() {
            put(
                format!("flex.allocation_ratio.classes.{class}.target"),
                c["target"].clone(),
            );
        }
        if on {
            for k in ["writes", "conflicts", "failures", "overridden"] {
                put(format!("flex.allocation_ratio.{k}"), managed[k].clone());
            }
        }
    }
    if let Some(hosts) = stats.get("usage").map(|u| &u["hosts"]) {
        for state in ["fresh", "expired", "none"] {
            put(format!("usage.hosts.{state}"), hosts[state].clone());
        }
    }
    for event in ["select", "filter", "weigh", "claimed", "move"] {
        let names: Vec<&str> = stats["plugin_chains"][event]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["name"].as_str())
            .collect();
        if !names.is_empty() {
            put(format!("plugin_chains.{event}"), json!(names.join(", ")));
        }
    }
    for (event, names) in stats["plugins"].as_object().into_iter().flatten() {
        for (plugin, p) in names.as_object().unwrap() {
            for k in ["calls", "denials", "breaker"] {
                put(format!("plugins.{event}.{plugin}.{k}"), p[k].clone());
            }
            let failures: u64 = ["errors", "timeouts", "refused"]
                .iter()
                .map(|k| p[*k].as_u64().unwrap())
                .sum();
            put(
                format!("plugins.{event}.{plugin}.failures"),
                json!(failures),
            );
        }
    }
    for (outcome, n) in stats["provider_trees"].as_object().into_iter().flatten() {
        put(format!("provider_trees.{outcome}"), n.clone());
    }
    if let Some(rebalance) = stats.get("rebalance") {
        put("rebalance.plans".into(), rebalance["plans"].clone());
        put(
            "rebalance.moves_planned".into(),
            rebalance["moves_planned"].clone(),
        );
        let refused: u64 = rebalance["refused"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, n)| n.as_u64().unwrap())
            .sum();
        put("rebalance.refused".into(), json!(refused));
    }
    want
}

/// A headless Chromium session through the chromedriver on `driver_port`, its profile in
/// `dir`, on the live page of `base` redrawn every 500 ms.
async fn open_page(dir: &Path, driver_port: u16, base: &str) -> Client {
    let profile = dir.join("chromium-profile");
    let mut caps = Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"binary": CHROMIUM, "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
            "--disable-dev-shm-usage", "--window-size=1400,1150", format!("--user-data-dir={}", profile.display())]}),
    );
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{driver_port}"))
        .await
        .expect("a Chromium session through chromedriver");
    client
        .goto(&format!("{base}/?interval_ms=500"))
        .await
        .unwrap();
    client
}

async fn redraws(client: &Client) -> u64 {
    let v = client
        .execute("return Number(document.body.dataset.redraws)", vec![])
        .await
        .unwrap();
    v.as_u64().unwrap_or(0)
}

async fn wait_redraws(client: &Client, more_than: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = redraws(client).await;
        if n > more_than {
            return n;
        }
        assert!(
            Instant::now() < deadline,
            "the page stopped redrawing at {n}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_live_page_shows_what_v1_stats_says_in_a_real_chromium() -> Result<(), NotInstalled> {
    let missing = missing_browser();
    if !missing.is_empty() {
        return Err(NotInstalled(missing));
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let file = dir.path().join("parasol.toml");
    std::fs::write(&file, config(port, dir.path(), "filter")).unwrap();
    let parasol = spawn(
        Command::new(env!("CARGO_BIN_EXE_parasol"))
            .args(["--config", file.to_str().unwrap(), "serve"])
            .env("RUST_LOG", "warn"),
    );
    wait_for(&format!("{base}/healthz")).await;
    let driver_port = free_port();
    let _driver = spawn(Command::new("chromedriver").arg(format!("--port={driver_port}")));
    wait_for(&format!("http://127.0.0.1:{driver_port}/status")).await;

    let http = reqwest::Client::new();
    // Measured usage: the first 8 hosts saturated (62 of 64 VCPU), then 72 idle, so Flex's
    // Q(t) (`host_saturation`) only rises towards 0.9 of the hosts: P grows once (Alg. 3 line
    // 23, from 1.5 to 2) and then holds, and the numbers settle once the load stops.
    for i in 0..80 {
        let vcpu = if i < 8 { 62.0 } else { 4.0 };
        let event = json!({"message_id": format!("m{i}"), "event_type": "compute.host.state", "priority": "INFO",
            "payload": {"host": format!("compute{i:02}"), "compute_node_uuid": uuid::Uuid::new_v4().to_string(),
                "inventory": {"VCPU": {"total": 64}, "MEMORY_MB": {"total": 262144}, "DISK_GB": {"total": 2000}},
                "usage": {"VCPU": vcpu, "MEMORY_MB": 1024}}});
        let r = http
            .post(format!("{base}/v1/notifications"))
            .json(&event)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }

    let client = open_page(dir.path(), driver_port, &base).await;

    // One multi-create of 3 while the hosts are still free (Flex's filter refuses the loaded
    // ones later), solved as one batch round on filter: its size and solve time shown.
    let r = http
        .post(format!("{base}/v1/select_destinations"))
        .json(&multi_create(1, 3))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());

    // Under load: filter, then apsr after a SIGHUP, while the page redraws.
    load(&base, Duration::from_secs(4)).await;
    std::fs::write(&file, config(port, dir.path(), "apsr")).unwrap();
    let pid = parasol.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while stats(&base).await["active_backend"] != "apsr" {
        assert!(Instant::now() < deadline, "SIGHUP did not switch to apsr");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    load(&base, Duration::from_secs(4)).await;

    // Load stopped: the next redraws show numbers that no longer move.
    let n = redraws(&client).await;
    wait_redraws(&client, n + 1).await;
    let before = stats(&base).await;
    let n = redraws(&client).await;
    wait_redraws(&client, n).await;
    let shown = client
        .execute(
            "return [...document.querySelectorAll('[data-metric]')].map(e => \
             [e.dataset.backend + '/' + e.dataset.metric, e.dataset.value, e.textContent])",
            vec![],
        )
        .await
        .unwrap();
    let after = stats(&base).await;
    assert_eq!(
        expected(&before),
        expected(&after),
        "the numbers still moved"
    );

    let want = expected(&after);
    // The plugin nothing answers (port 1): its chain listed, its breaker shown open.
    assert_eq!(want["service/plugin_chains.select"], "site-rule");
    assert_eq!(want["service/plugins.select.site-rule.breaker"], "open");
    // The batch round's figures are numbers on filter's card, and null (shown "—") on apsr's.
    assert_eq!(want["filter/batch.size.max"], 3);
    assert!(want["filter/batch.solve_latency_ms.p50"].as_f64().is_some());
    assert!(want["apsr/batch.size.p50"].is_null());
    let mut seen = Map::new();
    for entry in shown.as_array().unwrap() {
        let key = entry[0].as_str().unwrap().to_string();
        let value: Value = serde_json::from_str(entry[1].as_str().unwrap()).unwrap();
        let text = entry[2].as_str().unwrap();
        assert_eq!(
            text == "—",
            value.is_null(),
            "{key}: shown {text:?} for {value}"
        );
        seen.insert(key, value);
    }
    assert_eq!(
        seen.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (key, value) in &want {
        match (value.as_f64(), seen[key].as_f64()) {
            // Each side divides the same counters, and serde_json (without `float_roundtrip`)
            // may read a quotient back one unit in the last place off: equal to 1e-12.
            (Some(a), Some(b)) => assert!(
                (a - b).abs() <= 1e-12 * a.abs().max(b.abs()),
                "{key}: page shows {b}, stats say {a}"
            ),
            _ => assert_eq!(&seen[key], value, "{key}"),
        }
    }
    for backend in ["filter", "apsr"] {
        assert!(
            want[&format!("{backend}/requests")].as_u64().unwrap() > 0,
            "{backend} ran"
        );
    }
    let active = client
        .execute(
            "return document.getElementById('active').dataset.value",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(active, "apsr");
    // Four charts drawn by uPlot, each with a line per backend, and Flex's.
    let canvases = client
        .execute(
            "return document.querySelectorAll('#charts canvas').length",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(canvases, 5);
    flex_chart_shows_the_services_periods(&client, &base, &want).await;

    // Everything came from Parasol: the page works with no other network.
    let loaded = client
        .execute(
            "return [location.href, ...performance.getEntriesByType('resource').map(e => e.name)]",
            vec![],
        )
        .await
        .unwrap();
    let loaded: Vec<&str> = loaded
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        loaded
            .iter()
            .any(|u| u.ends_with("/assets/uPlot.iife.min.js")),
        "{loaded:?}"
    );
    for url in &loaded {
        assert!(
            url.starts_with(&format!("{base}/")),
            "loaded from elsewhere: {url}"
        );
    }

    let png = client.screenshot().await.unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let out = if std::env::var_os("PARASOL_UPDATE_DOCS").is_some() {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/live-page.png")
    } else {
        dir.path().join("live-page.png")
    };
    std::fs::write(&out, &png).unwrap();
    client.close().await.unwrap();
    Ok(())
}

/// Flex's chart holds the controller's periods as `/v1/stats` keeps them (the page is at most
/// a redraw behind: its periods are the first of the service's), among them the fall of Q(t)
/// to half the hosts and P raised once to 2.
async fn flex_chart_shows_the_services_periods(
    client: &Client,
    base: &str,
    want: &Map<String, Value>,
) {
    assert_eq!(want["service/flex.qos"], json!(0.9));
    assert_eq!(want["service/flex.penalty"], json!(2.0));
    let shown = client
        .execute(
            "return document.getElementById('chart-flex').dataset.periods",
            vec![],
        )
        .await
        .unwrap();
    let shown: Vec<Value> = serde_json::from_str(shown.as_str().expect("data-periods")).unwrap();
    let kept: Vec<Value> = stats(base).await["flex"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| json!([p["at_ms"], p["penalty"], p["qos"]]))
        .collect();
    assert!(shown.len() >= 2, "{shown:?}");
    assert!(kept.len() >= shown.len(), "{kept:?} {shown:?}");
    // As numbers: the page writes 2.0 as 2.
    let number = |v: &Value| v.as_f64();
    for (page, service) in shown.iter().zip(&kept) {
        for k in 0..3 {
            assert_eq!(number(&page[k]), number(&service[k]), "{page} vs {service}");
        }
    }
    assert!(
        shown
            .iter()
            .any(|p| p[2].as_f64() == Some(0.9) && p[1].as_f64() == Some(2.0)),
        "{shown:?}"
    );
}

/// Issue 40, item 11: under token auth the page's own assets load without a token, and the
/// page asks for the token `/v1/stats` needs, then shows the stats with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn under_token_auth_the_page_loads_asks_for_the_token_and_then_draws(
) -> Result<(), NotInstalled> {
    let missing = missing_browser();
    if !missing.is_empty() {
        return Err(NotInstalled(missing));
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let file = dir.path().join("parasol.toml");
    let text = config(port, dir.path(), "filter")
        + "[auth]\nstrategy = \"token\"\ntoken = \"s3cret-live-page-token\"\n";
    std::fs::write(&file, text).unwrap();
    let _parasol = spawn(
        Command::new(env!("CARGO_BIN_EXE_parasol"))
            .args(["--config", file.to_str().unwrap(), "serve"])
            .env("RUST_LOG", "warn"),
    );
    wait_for(&format!("{base}/healthz")).await;
    for asset in ["page.js", "page.css", "uPlot.iife.min.js", "uPlot.min.css"] {
        let r = reqwest::get(format!("{base}/assets/{asset}"))
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{asset} without a token");
    }
    let refused = reqwest::get(format!("{base}/v1/stats")).await.unwrap();
    assert_eq!(refused.status(), 401, "the data still needs the token");
    let driver_port = free_port();
    let _driver = spawn(Command::new("chromedriver").arg(format!("--port={driver_port}")));
    wait_for(&format!("http://127.0.0.1:{driver_port}/status")).await;
    let client = open_page(dir.path(), driver_port, &base).await;
    let shown = |script: &'static str| {
        let client = client.clone();
        async move { client.execute(script, vec![]).await.unwrap() }
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while shown("return document.getElementById('token-form').hidden").await != json!(false) {
        assert!(
            Instant::now() < deadline,
            "the page never asked for the token"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        shown("return typeof uPlot").await,
        json!("function"),
        "the chart library loaded without a token"
    );
    assert_eq!(redraws(&client).await, 0, "nothing drawn without the token");
    client
        .execute(
            "document.getElementById('token').value = 's3cret-live-page-token'; \
             document.getElementById('token-form').requestSubmit();",
            vec![],
        )
        .await
        .unwrap();
    wait_redraws(&client, 0).await;
    assert_eq!(
        shown("return document.getElementById('active').dataset.value").await,
        json!("filter")
    );
    assert_eq!(
        shown("return document.getElementById('error').textContent").await,
        json!("")
    );
    client.close().await.unwrap();
    Ok(())
}
