//! Issue 45 over the service's own HTTP ingestion (`POST /v1/notifications`) and
//! `select_destinations`: measured usage as soft state (taken, refused with a reason and
//! counted, expired on the injected clock), Nova's real `metrics.update` (made by Nova's own
//! objects in its virtualenv) in the usage table, and Flex's filter and weigher in the
//! pipeline: a host refused on P·L̂ + r > total − reserved that the allocations alone would
//! admit, never a placement past the allocation ratio.

use super::helpers::{flavor, host_state_event, settings, spawn_with_clock, TestApp};
use crate::on_both_engines;
use parasol::clock::ManualClock;
use parasol::configuration::BackendKind;
use serde_json::{json, Value};
use std::sync::Arc;

/// The helper's events are sent at this time; the tests' clock starts there.
const SENT: &str = "2026-11-25 21:13:16.777260";

fn t0() -> i64 {
    parasol::nova::time_ms(SENT).unwrap()
}

/// A host-state event of `host` (16 VCPU at ratio 4, 32 GB at ratio 1), sent `after_ms`
/// after [`SENT`], with `usage` as its `usage` block (`null`: none).
fn event(id: &str, host: &str, after_ms: i64, usage: Value) -> Value {
    let mut e = host_state_event(id, host, 16, 32_768, 400);
    e["payload"]["inventory"]["VCPU"]["allocation_ratio"] = json!(4.0);
    if !usage.is_null() {
        e["payload"]["usage"] = usage;
    }
    e["timestamp"] = json!(parasol::nova::oslo_timestamp((t0() + after_ms) * 1_000));
    e
}

async fn post(app: &TestApp, body: &Value) -> Value {
    let resp = app.post("/v1/notifications", body).await;
    assert_eq!(resp.status().as_u16(), 200, "{body}");
    resp.json().await.unwrap()
}

async fn measured(app: &TestApp, host: &str) -> Value {
    let hosts = app.get_json("/v1/hosts").await;
    hosts["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["host"] == host)
        .map(|h| h["measured"].clone())
        .expect("the host")
}

async fn spawn(engine: &str, flex: bool, clock: &ManualClock) -> TestApp {
    let (mut s, db) = settings(engine, BackendKind::Filter).await;
    s.usage.max_age_s = 60.0;
    s.flex.enabled = flex;
    spawn_with_clock(s, db, Arc::new(clock.clone())).await
}

async fn usage_is_soft_state_refused_whole_and_counted(engine: &str) {
    let clock = ManualClock::new(t0());
    let app = spawn(engine, false, &clock).await;
    let usage = json!({"VCPU": 3.5, "MEMORY_MB": 2048});
    let mut first = event("u-1", "cmp1", 0, usage);
    first["payload"]["instance_usage"] =
        json!({"178b0921-8f85-4257-88b6-2e743b5a975c": {"VCPU": 0.5, "MEMORY_MB": 1024}});
    let body = post(&app, &first).await;
    assert_eq!(body["outcome"], "applied");
    let m = measured(&app, "cmp1").await;
    assert_eq!(m["classes"]["VCPU"]["value"], 3.5, "{m}");
    assert_eq!(m["classes"]["VCPU"]["source"], "host_state");
    assert_eq!(m["classes"]["VCPU"]["at_ms"], t0());
    assert_eq!(m["classes"]["MEMORY_MB"]["value"], 2048.0);
    assert_eq!(m["classes"]["VCPU"]["fresh"], true);
    let stats = app.get_json("/v1/stats").await;
    assert_eq!(stats["usage"]["accepted"]["host_state"], 1, "{stats}");
    assert_eq!(stats["usage"]["hosts"]["fresh"], 1);
    assert_eq!(
        stats["usage"]["instances"], 1,
        "per instance where reported"
    );
    assert_eq!(m["instances"], 1);

    // Each bad reading is refused whole, with its reason, counted; the event's heartbeat
    // and inventory still apply (the outcome is the registration's), the reading stays.
    let unknown_host = {
        let mut e = nova_metrics_update("nohost", "nohost", 50);
        e["message_id"] = json!("u-unknown");
        e
    };
    let cases = [
        (
            event("u-2", "cmp1", 1_000, json!({"VCPU": 16.5})),
            "above_total",
        ),
        (
            event("u-3", "cmp1", 2_000, json!({"VCPU": 1, "MEMORY_MB": -1})),
            "negative",
        ),
        (
            event("u-4", "cmp1", -3_600_000, json!({"VCPU": 1})),
            "older",
        ),
        (
            event("u-5", "cmp1", 3_000, json!({"CUSTOM_GPU": 1})),
            "unknown_class",
        ),
        (unknown_host, "unknown_host"),
    ];
    for (body, reason) in cases {
        post(&app, &body).await;
        let stats = app.get_json("/v1/stats").await;
        assert_eq!(stats["usage"]["refused"][reason], 1, "{reason}: {stats}");
        assert_eq!(measured(&app, "cmp1").await, m, "{reason} changed nothing");
    }
    let stats = app.get_json("/v1/stats").await;
    assert_eq!(stats["usage"]["accepted"]["host_state"], 1);
    let metrics = app.metrics_text().await;
    assert!(
        metrics.contains(
            "parasol_usage_readings_total{outcome=\"above_total\",source=\"host_state\"} 1"
        ),
        "{metrics}"
    );

    // A stalled source: past max_age_s the reading is expired (kept, deciding nothing).
    clock.advance_ms(60_001);
    let m = measured(&app, "cmp1").await;
    assert_eq!(m["classes"]["VCPU"]["fresh"], false);
    let stats = app.get_json("/v1/stats").await;
    assert_eq!(stats["usage"]["hosts"]["expired"], 1, "{stats}");
    assert_eq!(stats["usage"]["hosts"]["fresh"], 0);
    assert_eq!(
        app.metric("parasol_usage_hosts{state=\"expired\"}")
            .await
            .as_deref(),
        Some("1")
    );
}
on_both_engines!(
    usage_over_http,
    super::usage_is_soft_state_refused_whole_and_counted
);

/// Nova's `metrics.update` shape, for the unknown-host case (the real one, made by Nova, is
/// in `nova_metrics_update_reaches_the_usage_table`).
fn nova_metrics_update(host: &str, node: &str, percent: i64) -> Value {
    let metric = json!({"nova_object.name": "MetricPayload", "nova_object.namespace": "nova",
        "nova_object.version": "1.0",
        "nova_object.data": {"name": "cpu.percent", "value": percent, "numa_membw_values": null,
                             "timestamp": "2026-11-25T21:13:16Z", "source": "fake.FakeDriver"}});
    json!({"message_id": "m", "publisher_id": format!("nova-compute:{host}"),
        "event_type": "metrics.update", "priority": "INFO", "timestamp": SENT,
        "payload": {"nova_object.name": "MetricsPayload", "nova_object.namespace": "nova",
            "nova_object.version": "1.0",
            "nova_object.data": {"host": host, "host_ip": "10.0.0.2", "nodename": node,
                                 "metrics": [metric]}}})
}

async fn flex_refuses_what_allocations_admit_and_never_passes_the_ratio(engine: &str) {
    let clock = ManualClock::new(t0());
    let app = spawn(engine, true, &clock).await;
    let stats = app.get_json("/v1/stats").await;
    assert_eq!(stats["flex"]["enabled"], true, "{stats}");
    assert_eq!(stats["flex"]["penalty"], 1.5);
    assert_eq!(stats["flex"]["qos_source"], "none");
    assert_eq!(
        app.metric("parasol_flex_penalty").await.as_deref(),
        Some("1.5")
    );

    // 16 VCPU, ratio 4: the allocations admit 64. Measured 8: 1.5 × 8 + 4 = 16 ≤ 16 fits,
    // measured 9: 17.5 > 16 does not, though nothing is allocated.
    post(&app, &event("f-1", "cmp1", 0, json!({"VCPU": 9}))).await;
    let (status, body) = app.place(flavor(4, 512, 1), 1, json!({})).await;
    assert_eq!(
        status, 409,
        "Flex refuses on P·L̂ + r > total − reserved: {body}"
    );
    post(&app, &event("f-2", "cmp1", 1_000, json!({"VCPU": 8}))).await;
    let (status, body) = app.place(flavor(4, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    // That claim counts at its request until the next reading: 1.5 × 12 + 4 > 16.
    let (status, _) = app.place(flavor(4, 512, 1), 1, json!({})).await;
    assert_eq!(status, 409);
    // A stalled source: once the reading expires, the allocations decide alone.
    clock.advance_ms(61_001);
    let (status, body) = app.place(flavor(4, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "expired usage decides nothing: {body}");

    // Idle instances: each new reading says the host is idle, so Flex admits; the
    // allocation check still stops at (16 − 0) × 4 = 64 VCPU.
    let mut placed = 2;
    for i in 0.. {
        let at = 61_001 + 1_000 * (i + 1);
        clock.set_ms(t0() + at);
        post(
            &app,
            &event(&format!("idle-{i}"), "cmp1", at, json!({"VCPU": 0})),
        )
        .await;
        let (status, _) = app.place(flavor(4, 512, 1), 1, json!({})).await;
        if status != 200 {
            assert_eq!(status, 409);
            break;
        }
        placed += 1;
        assert!(placed <= 16, "past the allocation ratio");
    }
    assert_eq!(placed, 16, "exactly (16 − 0) × 4 / 4 instances");
    let used = app.used().await;
    assert_eq!(
        used.iter().find(|u| u.0 == "cmp1").unwrap().1,
        64,
        "{used:?}"
    );
}
on_both_engines!(
    flex_admission,
    super::flex_refuses_what_allocations_admit_and_never_passes_the_ratio
);

async fn flex_weigher_prefers_the_host_with_less_measured_usage(engine: &str) {
    let clock = ManualClock::new(t0());
    let app = spawn(engine, true, &clock).await;
    post(&app, &event("w-1", "hot", 0, json!({"VCPU": 6}))).await;
    post(&app, &event("w-2", "calm", 0, json!({"VCPU": 1}))).await;
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body[0][0]["nova_object.data"]["service_host"], "calm",
        "{body}"
    );
}
on_both_engines!(
    flex_weigher,
    super::flex_weigher_prefers_the_host_with_less_measured_usage
);

/// The real `metrics.update`: Nova's `cpu.virt_driver` monitor over its fake driver, sent by
/// `nova.compute.utils.notify_about_metrics_update` (tests/flex/metrics_update.py), posted
/// as the message nova-compute puts on the bus; its `cpu.percent` of the node's VCPU total
/// lands in the usage table, by service host and node name.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nova_metrics_update_reaches_the_usage_table() {
    let (s, db) = settings("sqlite", BackendKind::Filter).await;
    let app = super::helpers::spawn_with(s, db).await;
    post(&app, &event("n-1", "cmp7", 0, Value::Null)).await;

    let message = nova_message("cmp7", "cmp7");
    assert_eq!(message["event_type"], "metrics.update");
    assert_eq!(message["publisher_id"], "nova-compute:cmp7");
    let percent = message["payload"]["nova_object.data"]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["nova_object.data"]["name"] == "cpu.percent")
        .map(|m| m["nova_object.data"]["value"].as_f64().unwrap())
        .expect("Nova's CPU monitor sends cpu.percent");
    let body = post(&app, &message).await;
    assert_eq!(body["outcome"], "applied", "{body}");
    let m = measured(&app, "cmp7").await;
    assert_eq!(m["classes"]["VCPU"]["source"], "nova_metrics", "{m}");
    assert_eq!(m["classes"]["VCPU"]["value"], percent / 100.0 * 16.0);
    assert_eq!(m["classes"]["VCPU"]["fresh"], true);
    assert!(
        m["classes"].get("MEMORY_MB").is_none(),
        "host CPU only: {m}"
    );
    let stats = app.get_json("/v1/stats").await;
    assert_eq!(stats["usage"]["accepted"]["nova_metrics"], 1, "{stats}");
    // The same message again is a duplicate: nothing counted twice.
    post(&app, &message).await;
    let stats = app.get_json("/v1/stats").await;
    assert_eq!(stats["usage"]["accepted"]["nova_metrics"], 1, "{stats}");
}

/// One `metrics.update` made by Nova's code in its virtualenv.
fn nova_message(host: &str, node: &str) -> Value {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/flex/metrics_update.py");
    let input = json!({"host": host, "nodename": node}).to_string();
    let out = crate::venv::run_in_nova(&script, &[], input.as_bytes());
    let text = String::from_utf8(out).unwrap();
    let line = text.lines().next().expect("one notification");
    serde_json::from_str(line).unwrap()
}

/// Every backend takes Flex's filter: the host measured busy is refused, then taken once a
/// new reading says it has room. `caching` and `asc` decide on their snapshot, which holds
/// the readings as they were at its refresh (rebuilt here, as a refresh would).
async fn every_backend_applies_flex(engine: &str) {
    for kind in BackendKind::ALL {
        let clock = ManualClock::new(t0());
        let (mut s, db) = settings(engine, kind).await;
        s.usage.max_age_s = 60.0;
        s.flex.enabled = true;
        let app = spawn_with_clock(s, db, Arc::new(clock.clone())).await;
        post(&app, &event("b-1", "cmp1", 0, json!({"VCPU": 9}))).await;
        app.rebuild_backend().await;
        let (status, body) = app.place(flavor(4, 512, 1), 1, json!({})).await;
        assert_eq!(status, 409, "{kind:?}: 1.5 × 9 + 4 > 16: {body}");
        post(&app, &event("b-2", "cmp1", 1_000, json!({"VCPU": 8}))).await;
        app.rebuild_backend().await;
        let (status, body) = app.place(flavor(4, 512, 1), 1, json!({})).await;
        assert_eq!(status, 200, "{kind:?}: 1.5 × 8 + 4 ≤ 16: {body}");
    }
}
on_both_engines!(every_backend, super::every_backend_applies_flex);

/// `[flex] qos_source = "host_saturation"`: at each period's end on the injected clock, Q(t)
/// is the share of measured hosts loaded at most `qos_saturation_threshold`, from the readings
/// posted; one of two hosts saturated (15 of 16 VCPU) gives Q = 0.5, below the target, so P
/// grows by β(P − 1) — in `/v1/stats` and `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn host_saturation_qos_moves_p_in_the_service() {
    let clock = ManualClock::new(t0());
    let (mut s, db) = settings("sqlite", BackendKind::Filter).await;
    s.usage.max_age_s = 60.0;
    s.flex.enabled = true;
    s.flex.update_period_s = 10.0;
    s.flex.qos_source = parasol::configuration::QosSource::HostSaturation;
    let app = spawn_with_clock(s, db, Arc::new(clock.clone())).await;
    post(&app, &event("q-1", "hot", 0, json!({"VCPU": 15}))).await;
    post(&app, &event("q-2", "calm", 0, json!({"VCPU": 2}))).await;
    let stats = first_period(&app, &clock).await;
    assert_eq!(stats["flex"]["qos_source"], "host_saturation");
    assert_eq!(stats["flex"]["qos"], 0.5, "{stats}");
    assert_eq!(stats["flex"]["penalty"], 2.0, "1.5 + β(1.5 − 1)");
    assert_eq!(app.metric("parasol_flex_qos").await.as_deref(), Some("0.5"));
    assert_eq!(
        app.metric("parasol_flex_penalty").await.as_deref(),
        Some("2.0")
    );
}

/// Ends Flex's first period of 10 s on `clock` (once its task has armed it) and returns
/// `/v1/stats` once the period is counted.
async fn first_period(app: &TestApp, clock: &ManualClock) -> Value {
    for _ in 0..1_000 {
        if clock.deadlines().contains(&(t0() + 10_000)) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    clock.advance_ms(10_000);
    let mut stats = Value::Null;
    for _ in 0..1_000 {
        stats = app.get_json("/v1/stats").await;
        if stats["flex"]["periods"] == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(stats["flex"]["periods"], 1, "{stats}");
    stats
}

/// `[flex] qos_source = "instance_signals"`: the hosts' `instance_qos` blocks (per instance,
/// the share of the interval it waited for a CPU or stalled on memory) are taken whole as
/// soft state, shown in `/v1/hosts`, refused whole with a reason when bad (the event's
/// heartbeat still applies); at the period's end Q(t) is the share of instances within both
/// thresholds: 3 of 4 → below the target, P grows by β(P − 1).
async fn instance_signals_qos_moves_p_in_the_service(engine: &str) {
    let clock = ManualClock::new(t0());
    let (mut s, db) = settings(engine, BackendKind::Filter).await;
    s.usage.max_age_s = 60.0;
    s.flex.enabled = true;
    s.flex.update_period_s = 10.0;
    s.flex.qos_source = parasol::configuration::QosSource::InstanceSignals;
    let app = spawn_with_clock(s, db, Arc::new(clock.clone())).await;
    let (a, b, c, d) = (
        "178b0921-8f85-4257-88b6-2e743b5a975c",
        "278b0921-8f85-4257-88b6-2e743b5a975c",
        "378b0921-8f85-4257-88b6-2e743b5a975c",
        "478b0921-8f85-4257-88b6-2e743b5a975c",
    );
    let mut one = event("s-1", "cmp1", 0, Value::Null);
    one["payload"]["instance_qos"] = json!({
        a: {"cpu_wait": 0.2, "memory_pressure": 0.0},
        b: {"cpu_wait": 0.0},
    });
    let mut two = event("s-2", "cmp2", 0, Value::Null);
    two["payload"]["instance_qos"] = json!({c: {"memory_pressure": 0.01}, d: {"cpu_wait": 0.05}});
    post(&app, &one).await;
    post(&app, &two).await;
    let m = measured(&app, "cmp1").await;
    assert_eq!(m["qos"]["instances"][a]["cpu_wait"], 0.2, "{m}");
    assert_eq!(m["qos"]["source"], "host_state");
    assert_eq!(m["qos"]["fresh"], true);

    // A signal that is no share of the interval: refused whole, counted; the event itself
    // applies (its registration and heartbeat), the report held stays.
    let mut bad = event("s-3", "cmp1", 500, Value::Null);
    bad["payload"]["instance_qos"] = json!({a: {"cpu_wait": 0.0}, b: {"cpu_wait": 1.5}});
    let body = post(&app, &bad).await;
    assert_eq!(body["outcome"], "applied", "{body}");
    let stats = app.get_json("/v1/stats").await;
    assert_eq!(stats["usage"]["refused"]["above_total"], 1, "{stats}");
    assert_eq!(stats["usage"]["qos_instances"], 4);
    assert_eq!(
        measured(&app, "cmp1").await,
        m,
        "the refused report changed nothing"
    );

    let stats = first_period(&app, &clock).await;
    assert_eq!(stats["flex"]["qos_source"], "instance_signals");
    assert_eq!(stats["flex"]["qos_measured_on"], 4, "{stats}");
    assert_eq!(stats["flex"]["qos"], 0.75, "{stats}");
    assert_eq!(stats["flex"]["penalty"], 2.0, "1.5 + β(1.5 − 1)");
    assert_eq!(
        app.metric("parasol_flex_qos").await.as_deref(),
        Some("0.75")
    );
}
on_both_engines!(
    instance_signals,
    super::instance_signals_qos_moves_p_in_the_service
);
