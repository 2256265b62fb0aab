//! `GET /metrics` read by a Prometheus text parser (the `prometheus-parse` crate), and the
//! declines by cause of README "Declines by cause": a stale pick is avoidable, a request
//! too big for any host moves `no_valid_host` and never `avoidable_decline_ratio`.

use super::helpers::{flavor, settings, spawn_with, TestApp};
use crate::on_both_engines;
use parasol::configuration::BackendKind;
use parasol::domain::Resources;
use parasol::policy::Algorithm;
use prometheus_parse::{Scrape, Value as Sample};
use serde_json::json;

async fn scrape(app: &TestApp) -> Scrape {
    let resp = app
        .client
        .get(format!("{}/metrics", app.address))
        .send()
        .await
        .expect("GET /metrics");
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.expect("body");
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("a Prometheus exposition")
}

/// The value of the counter or gauge `name` with exactly the labels `labels` (absent: 0).
fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<f64> = s
        .samples
        .iter()
        .filter(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(v)))
        .map(|x| match x.value {
            Sample::Counter(v) | Sample::Gauge(v) | Sample::Untyped(v) => v,
            _ => panic!("{name} is not a single value"),
        })
        .collect();
    assert!(found.len() <= 1, "{name} {labels:?} matches {found:?}");
    found.first().copied().unwrap_or(0.0)
}

/// The observation count of the histogram `name` with the labels `labels`.
fn observations(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let hist = s
        .samples
        .iter()
        .find(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(v)))
        .unwrap_or_else(|| panic!("no histogram {name} {labels:?}"));
    match &hist.value {
        Sample::Histogram(buckets) => {
            let inf = buckets
                .iter()
                .find(|b| b.less_than.is_infinite())
                .expect("a +Inf bucket");
            inf.count
        }
        other => panic!("{name} is not a histogram: {other:?}"),
    }
}

async fn metrics_follow_prometheus_conventions_and_declines_by_cause(engine: &str) {
    // A cache that never refreshes by itself: the test makes its snapshot stale on purpose.
    let (mut s, db) = settings(engine, BackendKind::Caching).await;
    s.policy.algorithm = Algorithm::FirstFit;
    s.caching.refresh_interval_s = 3600.0;
    let app = spawn_with(s, db).await;
    app.register("c1", 4, 4096, 40).await;
    app.register("c2", 4, 4096, 40).await;
    app.rebuild_backend().await;
    // Another process fills c1 behind the cache's back: the cached c1 is stale, its claim
    // is declined (avoidable: a fresh scheduler would have picked c2).
    let ledger = app.scheduler.ledger();
    let c1 = ledger.host_id_by_name("c1", None).await.unwrap().unwrap();
    ledger
        .claim(c1, "someone-else", &Resources::new(4, 4096, 40), 1)
        .await
        .unwrap();
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    let before = app.stats("caching").await;
    assert_eq!(before["declines_by_cause"]["stale_snapshot"], 1);
    assert_eq!(before["attempts"], 2);
    assert_eq!(before["decline_ratio"], 0.5);
    assert_eq!(before["avoidable_decline_ratio"], 0.5);

    // Too big for any host: NoValidHost, one unavoidable decline.
    let (status, body) = app.place(flavor(64, 512, 1), 1, json!({})).await;
    assert!(status >= 400, "{status} {body}");
    let after = app.stats("caching").await;
    assert_eq!(after["declines_by_cause"]["no_valid_host"], 1);
    assert_eq!(after["no_valid_host"], 1);
    assert_eq!(after["attempts"], 3);
    assert_eq!(
        after["decline_ratio"],
        2.0 / 3.0,
        "the papers' ratio counts it"
    );
    assert_eq!(
        after["avoidable_decline_ratio"], before["avoidable_decline_ratio"],
        "a request too big for any host never moves avoidable_decline_ratio"
    );

    let m = scrape(&app).await;
    let b = ("backend", "caching");
    for (result, want) in [("scheduled", 1.0), ("unschedulable", 1.0), ("error", 0.0)] {
        assert_eq!(
            value(
                &m,
                "parasol_schedule_attempts_total",
                &[b, ("result", result)]
            ),
            want,
            "{result}"
        );
    }
    for (cause, want) in [
        ("claim_conflict", 0.0),
        ("placement_conflict", 0.0),
        ("stale_snapshot", 1.0),
        ("empty_sample", 0.0),
        ("no_valid_host", 1.0),
    ] {
        assert_eq!(
            value(&m, "parasol_declines_total", &[b, ("cause", cause)]),
            want,
            "{cause}"
        );
    }
    assert_eq!(value(&m, "parasol_placement_attempts_total", &[b]), 3.0);
    assert_eq!(value(&m, "parasol_avoidable_declines_total", &[b]), 1.0);
    assert!(value(&m, "parasol_queries_total", &[b]) >= 2.0);
    // First fit is not a policy the sorted walk answers: every ranking read every host.
    let scans = value(&m, "parasol_sorted_scans_total", &[b]);
    assert!(scans >= 2.0, "{scans}");
    assert_eq!(value(&m, "parasol_sorted_walks_total", &[b]), 0.0);
    assert_eq!(after["ranked_by"]["scan"], scans as u64);
    assert_eq!(after["ranked_by"]["sorted_walk"], 0);
    // Not a walk that gave up: no walk was tried, and none is skipped.
    assert_eq!(after["ranked_by"]["scan_without_walk"], 0);
    assert_eq!(value(&m, "parasol_sorted_walks_skipped_total", &[b]), 0.0);
    for (result, want) in [("scheduled", 1.0), ("unschedulable", 1.0)] {
        assert_eq!(
            observations(
                &m,
                "parasol_scheduling_attempt_duration_seconds",
                &[b, ("result", result)]
            ),
            want,
            "{result}"
        );
    }
    assert_eq!(
        observations(&m, "parasol_scheduling_algorithm_duration_seconds", &[b]),
        2.0
    );
    // Two claims of the caching backend (the test's own claim went to the ledger directly).
    assert_eq!(
        observations(&m, "parasol_claim_duration_seconds", &[b]),
        2.0
    );
    // Two claims committed: the test's own and the placed one. The stale pick was declined by
    // the live table before reaching the database.
    let claims = value(&m, "parasol_ledger_committed_claims_total", &[]);
    let commits = value(&m, "parasol_ledger_commits_total", &[]);
    assert_eq!(claims, 2.0);
    assert!((1.0..=2.0).contains(&commits), "{commits} group commits");
    // The RPC server's family is there with its help text, samples once it serves.
    assert!(m.docs.contains_key("parasol_rpc_messages"), "{:?}", m.docs);
    // Seconds, not microseconds: every call of this test took well under a minute.
    // Summed over the result series: the family holds one per result, in no fixed order, and
    // the ones no call ended in have a sum of 0.
    let sums: Vec<f64> = m
        .samples
        .iter()
        .filter(|x| x.metric == "parasol_scheduling_attempt_duration_seconds_sum")
        .map(|x| match x.value {
            Sample::Untyped(v) | Sample::Counter(v) | Sample::Gauge(v) => v,
            _ => f64::NAN,
        })
        .collect();
    assert!(!sums.is_empty(), "a _sum sample");
    let sum: f64 = sums.iter().sum();
    assert!(sum > 0.0 && sum < 60.0, "sums {sums:?}");
}
on_both_engines!(
    metrics_follow_prometheus_conventions_and_declines_by_cause,
    super::metrics_follow_prometheus_conventions_and_declines_by_cause
);

/// Under Nova's weighers (the default policy) a caching ranking is the sorted walk's: it
/// proves the top k of the snapshot without reading every host, and says so in `/metrics` and
/// `/v1/stats` (a policy the walk does not take, first fit, counts scans: the test above).
async fn snapshot_rankings_say_whether_the_sorted_walk_answered(engine: &str) {
    let (mut s, db) = settings(engine, BackendKind::Caching).await;
    s.caching.refresh_interval_s = 3600.0;
    let app = spawn_with(s, db).await;
    for i in 0..6 {
        app.register(&format!("w{i}"), 8 + i, 8192, 80).await;
    }
    app.rebuild_backend().await;
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    let stats = app.stats("caching").await;
    let m = scrape(&app).await;
    let b = ("backend", "caching");
    assert_eq!(value(&m, "parasol_sorted_walks_total", &[b]), 1.0);
    assert_eq!(value(&m, "parasol_sorted_scans_total", &[b]), 0.0);
    assert_eq!(value(&m, "parasol_sorted_walks_skipped_total", &[b]), 0.0);
    assert_eq!(
        stats["ranked_by"],
        json!({"sorted_walk": 1, "scan": 0, "scan_without_walk": 0})
    );
}
on_both_engines!(
    snapshot_rankings_say_whether_the_sorted_walk_answered,
    super::snapshot_rankings_say_whether_the_sorted_walk_answered
);
