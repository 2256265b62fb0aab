//! Issue 46 item 3 over HTTP: `POST /v1/rebalance/plan` on the service's real state (hosts
//! registered by their events, instances placed by `select_destinations`, measured usage from
//! the events' `usage` blocks), a dry run that moves nothing; bad requests refused naming the
//! problem and counted; `parasol rebalance plan` (the binary) printing the same plan; and
//! the plan in Watcher's form run through the repository's Watcher strategy with the real
//! `python-watcher` 17, every action validated against its `migrate` action's schema.

use super::helpers::TestApp;
use super::helpers::{
    call_body, flavor, host_state_event, request_spec, settings, spawn_with_clock,
};
use crate::on_both_engines;
use crate::venv;
use parasol::clock::ManualClock;
use parasol::configuration::BackendKind;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;

const SENT: &str = "2026-11-25 21:13:16.777260";

fn t0() -> i64 {
    parasol::nova::time_ms(SENT).unwrap()
}

/// A host-state event of a host of 2 VCPUs at ratio 2 (16 GB, 100 GB at ratio 1) sent
/// `after_ms` after [`SENT`], with `usage` and `instances` (`null`: none) as its measured
/// usage.
fn event(host: &str, after_ms: i64, usage: Value, instances: Value) -> Value {
    let id = uuid::Uuid::new_v4().to_string();
    let mut e = host_state_event(&id, host, 2, 16_384, 100);
    e["payload"]["inventory"]["VCPU"]["allocation_ratio"] = json!(2.0);
    if !usage.is_null() {
        e["payload"]["usage"] = usage;
    }
    if !instances.is_null() {
        e["payload"]["instance_usage"] = instances;
    }
    e["timestamp"] = json!(parasol::nova::oslo_timestamp((t0() + after_ms) * 1_000));
    e
}

async fn notify(app: &TestApp, body: &Value) {
    let resp = app.post("/v1/notifications", body).await;
    assert_eq!(resp.status(), 200, "{body}");
}

/// cmp1 runs four 1-VCPU instances on its 2 VCPUs, each getting half (hungry); cmp2 and cmp3
/// are idle. Returns the app, its clock and the instances.
async fn hot_cloud(engine: &str) -> (TestApp, ManualClock, Vec<String>) {
    let clock = ManualClock::new(t0());
    let (mut s, db) = settings(engine, BackendKind::Filter).await;
    s.usage.max_age_s = 600.0;
    let app = spawn_with_clock(s, db, Arc::new(clock.clone())).await;
    seed_hot_cloud(app, clock).await
}

/// Fills `app` as [`hot_cloud`] describes.
async fn seed_hot_cloud(app: TestApp, clock: ManualClock) -> (TestApp, ManualClock, Vec<String>) {
    notify(&app, &event("cmp1", 0, Value::Null, Value::Null)).await;
    let vms: Vec<String> = (0..4).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    let resp = app
        .post(
            "/v1/select_destinations",
            &call_body(request_spec(flavor(1, 1_024, 10), 4, json!({})), &vms),
        )
        .await;
    assert_eq!(
        resp.status(),
        200,
        "{}",
        resp.text().await.unwrap_or_default()
    );
    let busy: serde_json::Map<String, Value> = vms
        .iter()
        .map(|v| (v.clone(), json!({"VCPU": 0.5})))
        .collect();
    notify(
        &app,
        &event("cmp1", 1_000, json!({"VCPU": 2.0}), Value::Object(busy)),
    )
    .await;
    for host in ["cmp2", "cmp3"] {
        notify(&app, &event(host, 1_000, json!({"VCPU": 0.0}), Value::Null)).await;
    }
    clock.advance_ms(2_000);
    (app, clock, vms)
}

async fn plan(app: &TestApp, body: Value) -> (u16, Value) {
    let resp = app.post("/v1/rebalance/plan", &body).await;
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn moves(plan: &Value) -> Vec<Value> {
    plan["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .flat_map(|s| s.as_array().expect("a step").clone())
        .collect()
}

async fn a_plan_relieves_the_hot_host_moves_nothing_and_is_counted(engine: &str) {
    let (app, _clock, vms) = hot_cloud(engine).await;
    let used = app.used().await;
    let (status, body) = plan(&app, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["dry_run"], true);
    assert_eq!(body["solver"], "gbm");
    assert_eq!(
        (body["hosts"].as_u64(), body["instances"].as_u64()),
        (Some(3), Some(4))
    );
    let planned = moves(&body);
    assert!(!planned.is_empty(), "{body}");
    assert_eq!(body["moves"], planned.len());
    for m in &planned {
        assert_eq!(m["source"], "cmp1", "{m}");
        assert!(
            m["destination"] == "cmp2" || m["destination"] == "cmp3",
            "{m}"
        );
        assert!(vms.contains(&m["instance"].as_str().unwrap().to_string()));
        assert!(m["delta_cost"].as_f64().unwrap() < 0.0, "{m}");
        assert!(m["delta_utilization"].is_f64() && m["delta_fairness"].is_f64());
    }
    // One move out of cmp1 per step: [rebalance] max_concurrent_per_source = 1.
    assert!(body["steps"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s.as_array().unwrap().len() == 1));
    let (before, after) = (&body["before"], &body["after"]);
    assert!(after["cost"].as_f64() < before["cost"].as_f64(), "{body}");
    assert!(
        after["fairness"].as_f64() >= before["fairness"].as_f64(),
        "{body}"
    );
    assert_eq!(app.used().await, used, "a plan moves nothing");

    // The same seed and state give the same plan; the figures count both.
    let (_, again) = plan(&app, json!({})).await;
    assert_eq!(again["steps"], body["steps"]);
    let stats = app.get_json("/v1/stats").await;
    assert_eq!(stats["rebalance"]["plans"], 2, "{stats}");
    assert_eq!(stats["rebalance"]["moves_planned"], 2 * planned.len());
    assert_eq!(
        app.metric("parasol_rebalance_plans_total").await.as_deref(),
        Some("2")
    );
    assert_eq!(
        app.metric("parasol_rebalance_moves_planned_total").await,
        Some((2 * planned.len()).to_string())
    );

    // `parasol rebalance plan` asks the running service: the same plan, as JSON and as a table.
    let json = cli(&app, &["--json"]);
    let cli_plan: Value = serde_json::from_str(&json).expect("the CLI prints JSON");
    assert_eq!(cli_plan["steps"], body["steps"]);
    let table = cli(&app, &[]);
    let first = planned[0]["instance"].as_str().unwrap();
    assert!(
        table.contains("ΔU") && table.contains("ΔF") && table.contains("ΔC"),
        "{table}"
    );
    assert!(
        table.contains(first) && table.contains("dry run: nothing moved"),
        "{table}"
    );
    let refused = cli_output(&app, &["--host", "nohost"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("unknown hosts: nohost"), "{stderr}");
    assert_eq!(app.used().await, used, "still nothing moved");
}
on_both_engines!(
    plan_over_http,
    super::a_plan_relieves_the_hot_host_moves_nothing_and_is_counted
);

fn cli_output(app: &TestApp, flags: &[&str]) -> std::process::Output {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("parasol.toml");
    std::fs::write(&config, "").expect("config");
    std::process::Command::new(env!("CARGO_BIN_EXE_parasol"))
        .current_dir(dir.path())
        .args(["--config", config.to_str().unwrap(), "rebalance", "plan"])
        .args(["--url", &app.address])
        .args(flags)
        .env_remove("PARASOL_TOKEN")
        .output()
        .expect("run parasol rebalance plan")
}

fn cli(app: &TestApp, flags: &[&str]) -> String {
    let out = cli_output(app, flags);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

async fn refused(app: &TestApp, body: Value, status: u16, reason: &str, named: &str) {
    let (got, answer) = plan(app, body.clone()).await;
    assert_eq!(got, status, "{body}: {answer}");
    assert_eq!(answer["error"]["reason"], reason, "{body}: {answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains(named), "{body}: {message}");
}

async fn bad_plan_requests_are_refused_naming_the_problem(engine: &str) {
    let (app, clock, _) = hot_cloud(engine).await;
    notify(&app, &event("cmp4", 1_500, Value::Null, Value::Null)).await;
    let used = app.used().await;
    refused(
        &app,
        json!({"hosts": ["cmp1", "nohost"]}),
        400,
        "unknown_hosts",
        "nohost",
    )
    .await;
    refused(
        &app,
        json!({"hosts": ["cmp1", "cmp4"]}),
        409,
        "no_usage",
        "cmp4",
    )
    .await;
    refused(
        &app,
        json!({"solver": "dbp"}),
        400,
        "invalid_request",
        "solver",
    )
    .await;
    refused(
        &app,
        json!({"max_moves": 0}),
        400,
        "invalid_request",
        "max_moves",
    )
    .await;
    let (status, answer) = plan(&app, json!({"format": "xml"})).await;
    assert_eq!(
        (status, &answer["error"]["reason"]),
        (400, &json!("invalid_request"))
    );
    assert_eq!(app.used().await, used, "a refused plan moves nothing");

    // The plan's base: a placement since makes it stale; refused, or planned again.
    let (_, first) = plan(&app, json!({})).await;
    let revision = first["base_revision"].as_str().unwrap().to_string();
    let (_, same) = plan(&app, json!({"base_revision": revision})).await;
    assert_eq!(
        same["base_revision"],
        revision.as_str(),
        "the state did not change"
    );
    assert!(same["replanned"].is_null());
    let (status, _) = app.place(flavor(1, 1_024, 10), 1, json!({})).await;
    assert_eq!(status, 200);
    refused(
        &app,
        json!({"base_revision": revision}),
        409,
        "stale_plan",
        &revision,
    )
    .await;
    let (status, again) = plan(&app, json!({"base_revision": revision, "replan": true})).await;
    assert_eq!(status, 200, "{again}");
    assert_ne!(again["base_revision"], revision.as_str());
    assert!(
        again["replanned"].as_str().unwrap().contains(&revision),
        "{again}"
    );

    // Readings older than [usage] max_age_s decide nothing: no host has usage left.
    clock.advance_ms(601_000);
    refused(&app, json!({}), 409, "no_usage", "cmp1").await;

    let stats = app.get_json("/v1/stats").await;
    let r = &stats["rebalance"]["refused"];
    assert_eq!(
        (
            &r["unknown_hosts"],
            &r["no_usage"],
            &r["invalid_request"],
            &r["stale_plan"]
        ),
        (&json!(1), &json!(2), &json!(3), &json!(1)),
        "{stats}"
    );
    assert_eq!(stats["rebalance"]["replans"], 1);
    assert_eq!(
        app.metric("parasol_rebalance_refusals_total{reason=\"stale_plan\"}")
            .await
            .as_deref(),
        Some("1")
    );
}
on_both_engines!(
    bad_requests_over_http,
    super::bad_plan_requests_are_refused_naming_the_problem
);

/// The repository's Watcher strategy, run by the real `python-watcher` against this service:
/// it subclasses Watcher's `workload_balancing` base strategy, and every action it adds passes
/// Watcher's `migrate` input schema (`Migrate.validate_parameters`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_watcher_strategy_adds_actions_watcher_validates() {
    let (app, _clock, _) = hot_cloud("sqlite").await;
    let (status, watcher) = {
        let resp = app
            .post("/v1/rebalance/plan?format=watcher", &json!({"seed": 1}))
            .await;
        (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
    };
    assert_eq!(status, 200, "{watcher}");
    assert_eq!(watcher["goal"], "workload_balancing");
    let actions = watcher["actions"].as_array().unwrap().clone();
    assert!(!actions.is_empty(), "{watcher}");

    let venv = venv::cached_venv(
        "watcher-venv",
        include_str!("../watcher/requirements.txt"),
        &[],
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let address = app.address.clone();
    let out = tokio::task::spawn_blocking(move || {
        venv::run(
            std::process::Command::new(venv.join("bin/python"))
                .arg(root.join("tests/watcher/check_plan.py"))
                .arg(&address)
                .arg(root.join("devstack/watcher")),
        )
    })
    .await
    .expect("the check ran");
    let checked: Value = serde_json::from_str(&out).expect("the check prints JSON");
    let expected: Vec<Value> = actions
        .iter()
        .map(|a| a["input_parameters"].clone())
        .collect();
    assert_eq!(checked["actions"], Value::Array(expected), "{checked}");
    assert_eq!(
        checked["indicators"]["instance_migrations_count"],
        actions.len()
    );
    assert_eq!(checked["indicators"]["instances_count"], 4);
}

/// `hot_cloud` with a `move` plugin at `path` of `server`.
async fn hot_cloud_with_move_plugin(
    server: &crate::plugin_server::PluginServer,
    path: &str,
    ignorable: bool,
) -> (TestApp, ManualClock, Vec<String>) {
    let clock = ManualClock::new(t0());
    let (mut s, db) = settings("sqlite", BackendKind::Filter).await;
    s.usage.max_age_s = 600.0;
    let mut spec = crate::plugin_server::plugin(
        "change-freeze",
        parasol::plugins::PluginEvent::Move,
        server.url(path),
    );
    spec.ignorable = ignorable;
    s.plugins.chain = vec![spec];
    let app = spawn_with_clock(s, db, Arc::new(clock.clone())).await;
    seed_hot_cloud(app, clock).await
}

/// The instances a plan left where they are, by uuid, with why.
fn kept(plan: &Value) -> Vec<(String, String)> {
    plan["not_movable"]
        .as_array()
        .expect("not_movable")
        .iter()
        .map(|k| {
            (
                k["instance"].as_str().unwrap_or_default().to_string(),
                k["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Issue 47's `move` event: a plugin that denies every move leaves every instance where it
/// is, each named with the plugin's reason; each move it was shown was a new one; the denials
/// are counted as the plugin's; nothing moved.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_plugin_that_denies_keeps_each_instance_where_it_is() {
    let server = crate::plugin_server::PluginServer::start().await;
    let (app, _clock, vms) = hot_cloud_with_move_plugin(&server, "/move/deny", false).await;
    let used = app.used().await;
    let (status, body) = plan(&app, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["moves"], 0, "{body}");
    let seen = server.seen("/move/deny");
    assert!(!seen.is_empty(), "the chain was asked");
    let asked: Vec<&str> = seen
        .iter()
        .map(|b| b["move"]["instance_uuid"].as_str().expect("an instance"))
        .collect();
    let mut distinct = asked.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        asked.len(),
        "each instance asked once: {asked:?}"
    );
    crate::plugins::assert_schema_keys("MovePluginRequest", &seen[0]);
    crate::plugins::assert_schema_keys("Move", &seen[0]["move"]);
    crate::plugins::assert_schema_keys("PlanSummary", &seen[0]["plan"]);
    for b in &seen {
        assert_eq!(b["event"], "move");
        assert_eq!(b["move"]["source"], "cmp1", "{b}");
        assert!(vms.contains(&b["move"]["instance_uuid"].as_str().unwrap().to_string()));
    }
    let kept = kept(&body);
    for instance in &asked {
        let why = kept
            .iter()
            .find(|(k, _)| k == instance)
            .map(|(_, why)| why.clone())
            .unwrap_or_else(|| panic!("{instance} listed as kept: {body}"));
        assert!(
            why.contains("change-freeze") && why.contains(crate::plugin_server::MOVE_DENY_REASON),
            "{why}"
        );
    }
    let stats = app.get_json("/v1/stats").await;
    let figures = stats["plugins"]["move"]["change-freeze"].clone();
    assert_eq!(figures["denials"], asked.len(), "{stats}");
    assert_eq!(app.used().await, used, "a plan moves nothing");
}

/// A plugin that sends every move to cmp3: the plan's moves all go there, within what cmp3
/// may hold (4 VCPUs at ratio 2); the replayed plan stays within the ratio.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_plugin_that_changes_the_destination_is_followed_within_the_rules() {
    let server = crate::plugin_server::PluginServer::start().await;
    let (app, _clock, _vms) = hot_cloud_with_move_plugin(&server, "/move/to/cmp3", false).await;
    let (status, body) = plan(&app, json!({})).await;
    assert_eq!(status, 200, "{body}");
    let planned = moves(&body);
    assert!(!planned.is_empty(), "{body}");
    for m in &planned {
        assert_eq!(m["destination"], "cmp3", "{m}");
    }
    assert!(planned.len() <= 4, "cmp3 holds at most 4 VCPUs: {body}");
    let stats = app.get_json("/v1/stats").await;
    assert!(
        stats["plugins"]["move"]["change-freeze"]["modifications"].as_u64() >= Some(1),
        "{stats}"
    );
}

/// A destination the rules refuse (the instance's own host) keeps the instance where it is,
/// with both reasons; a destination that is no host of the plan is the plugin's failure: the
/// plan is refused naming the plugin (503), or, when the plugin is ignorable, made without
/// its word.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_plugin_s_impossible_destinations_keep_the_instance_or_fail_the_plugin() {
    let server = crate::plugin_server::PluginServer::start().await;
    let (app, _clock, _vms) = hot_cloud_with_move_plugin(&server, "/move/to/cmp1", false).await;
    let (status, body) = plan(&app, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["moves"], 0, "{body}");
    let kept = kept(&body);
    assert!(
        !kept.is_empty()
            && kept
                .iter()
                .all(|(_, why)| why.contains("cmp1") && why.contains("there already")),
        "{body}"
    );

    let (app, _clock, _vms) = hot_cloud_with_move_plugin(&server, "/move/to/nowhere", false).await;
    let (status, body) = plan(&app, json!({})).await;
    assert_eq!(status, 503, "{body}");
    let message = body.to_string();
    assert!(
        message.contains("change-freeze") && message.contains("nowhere"),
        "{message}"
    );
    let stats = app.get_json("/v1/stats").await;
    assert_eq!(stats["rebalance"]["refused"]["plugin"], 1, "{stats}");

    let (app, _clock, _vms) = hot_cloud_with_move_plugin(&server, "/move/to/nowhere", true).await;
    let (status, body) = plan(&app, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert!(!moves(&body).is_empty(), "made without the plugin: {body}");
}
