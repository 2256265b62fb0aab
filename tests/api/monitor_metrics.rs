//! Nova's `MetricsFilter` and `MetricsWeigher` in the service, fed by real `metrics.update`
//! notifications (made by Nova's `cpu.virt_driver` monitor and notifier in its virtualenv,
//! `tests/flex/metrics_update.py`) posted to `POST /v1/notifications`: no host placed before
//! any reports (`required`, with the filter), the least busy host first, the ranking turned
//! over by the next reports, and nothing placed once the reports expire — on every backend
//! (APSR filters but does not weigh: it picks at random among the hosts that pass).

use super::helpers::{flavor, host_state_event, settings, spawn_with_clock, TestApp};
use parasol::clock::ManualClock;
use parasol::configuration::BackendKind;
use serde_json::{json, Value};
use std::sync::Arc;

/// One `metrics.update` of `host` made by Nova's code, its CPU `busy` percent of the time
/// since boot (user time; the rest idle).
fn nova_report(host: &str, busy: i64) -> Value {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/flex/metrics_update.py");
    let stats = json!({"user": busy * 1_000_000, "kernel": 0, "iowait": 0,
                       "idle": (100 - busy) * 1_000_000, "frequency": 2_400});
    let input = json!({"host": host, "nodename": host, "cpu_stats": stats}).to_string();
    let out = crate::venv::run_in_nova(&script, &[], input.as_bytes());
    let text = String::from_utf8(out).unwrap();
    serde_json::from_str(text.lines().next().expect("one notification")).unwrap()
}

/// The `cpu.percent` Nova's monitor put in `report`.
fn cpu_percent(report: &Value) -> f64 {
    report["payload"]["nova_object.data"]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["nova_object.data"]["name"] == "cpu.percent")
        .and_then(|m| m["nova_object.data"]["value"].as_f64())
        .expect("cpu.percent")
}

async fn post(app: &TestApp, body: &Value) {
    let resp = app.post("/v1/notifications", body).await;
    assert_eq!(resp.status().as_u16(), 200, "{body}");
}

/// Where one instance goes now (`None`: NoValidHost). `caching` and `asc` decide on their
/// snapshot: it is rebuilt first, as a refresh would.
async fn place(app: &TestApp) -> Option<String> {
    app.rebuild_backend().await;
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    match status {
        200 => Some(
            body[0][0]["nova_object.data"]["service_host"]
                .as_str()?
                .to_string(),
        ),
        409 => None,
        _ => panic!("{status}: {body}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nova_metrics_update_ranks_hosts_by_their_monitor_metrics_on_every_backend() {
    // Nova's messages carry the time they were made: the clock starts there.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let first = [nova_report("cmp-a", 80), nova_report("cmp-b", 10)];
    let second = [nova_report("cmp-a", 5), nova_report("cmp-b", 95)];
    assert!(cpu_percent(&first[0]) > cpu_percent(&first[1]));
    assert!(cpu_percent(&second[0]) < cpu_percent(&second[1]));
    for kind in BackendKind::ALL {
        let clock = ManualClock::new(now);
        let (mut s, db) = settings("sqlite", kind).await;
        s.usage.max_age_s = 60.0;
        s.policy.enabled_filters.push("MetricsFilter".into());
        s.policy.weight_classes = vec!["MetricsWeigher".into()];
        s.policy.metrics_weight_setting = vec!["cpu.percent=-1.0".into()];
        s.policy.metrics_required = true;
        let app = spawn_with_clock(s, db, Arc::new(clock.clone())).await;
        for host in ["cmp-a", "cmp-b"] {
            let mut e = host_state_event(&format!("{host}-state"), host, 16, 32_768, 400);
            e["timestamp"] = json!(parasol::nova::oslo_timestamp(now * 1_000));
            post(&app, &e).await;
        }
        assert_eq!(
            place(&app).await,
            None,
            "{kind:?}: no host reports cpu.percent"
        );

        // APSR picks uniformly among the sampled hosts that pass (its rule, §4): the filter
        // applies, the weighers do not.
        let ranks = kind != BackendKind::Apsr;
        for report in &first {
            post(&app, report).await;
        }
        let chosen = place(&app).await;
        assert!(chosen.is_some(), "{kind:?}: both hosts report now");
        if ranks {
            assert_eq!(chosen.as_deref(), Some("cmp-b"), "{kind:?}: less busy");
        }
        let hosts = app.get_json("/v1/hosts").await;
        let a = hosts["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["host"] == "cmp-a")
            .unwrap();
        let cpu = &a["measured"]["metrics"]["values"]["cpu.percent"];
        assert_eq!(cpu["value"].as_f64(), Some(cpu_percent(&first[0])), "{a}");
        assert_eq!(cpu["fresh"], true);

        for report in &second {
            post(&app, report).await;
        }
        let chosen = place(&app).await;
        assert!(chosen.is_some(), "{kind:?}");
        if ranks {
            assert_eq!(
                chosen.as_deref(),
                Some("cmp-a"),
                "{kind:?}: the new reports turn the ranking over"
            );
        }

        clock.advance_ms(60_001);
        assert_eq!(
            place(&app).await,
            None,
            "{kind:?}: expired metrics are unavailable"
        );
    }
}
