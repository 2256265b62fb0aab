//! `[batch] mode = "call"` (issue 44, docs/architecture.md §12.5): a multi-create solved as
//! one assignment over the backend's view, claimed all or nothing in the ledger; `off` and
//! the fallbacks place one instance at a time.

use super::helpers::{call_body, flavor, request_spec, settings, spawn_with, uuids, TestApp};
use crate::on_both_engines;
use parasol::configuration::{BackendKind, BatchMode};
use serde_json::{json, Value};

fn group(policy: &str) -> Value {
    json!({
        "nova_object.name": "InstanceGroup", "nova_object.namespace": "nova", "nova_object.version": "1.11",
        "nova_object.data": {"policy": policy, "hosts": [], "members": [],
                             "uuid": uuid::Uuid::new_v4().to_string()}
    })
}

async fn app(engine: &str, backend: BackendKind, mode: BatchMode) -> TestApp {
    let (mut s, db) = settings(engine, backend).await;
    s.batch.mode = mode;
    s.caching.refresh_interval_s = 3600.0;
    spawn_with(s, db).await
}

/// `big` is the host Nova's weighers rank first (most free RAM and disk) but holds only 4
/// instances of the flavor (4 VCPU); `roomy` holds all 10.
async fn big_and_roomy(app: &TestApp) {
    app.register("big", 4, 65536, 400).await;
    app.register("roomy", 16, 32768, 200).await;
    // A snapshot or sample backend reads the hosts registered since it started.
    app.rebuild_backend().await;
}

/// Calls select_destinations for `ids` with `extra` spec fields: status and body.
async fn call(app: &TestApp, ids: &[String], extra: Value) -> (u16, Value) {
    let spec = request_spec(flavor(1, 1024, 10), ids.len(), extra);
    let resp = app
        .post("/v1/select_destinations", &call_body(spec, ids))
        .await;
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn hosts_of(body: &Value) -> Vec<String> {
    body.as_array()
        .expect("a list per instance")
        .iter()
        .map(|l| {
            l[0]["nova_object.data"]["service_host"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// Where the ledger holds each instance's allocation (`None`: it holds none).
async fn ledger_hosts(app: &TestApp, ids: &[String]) -> Vec<Option<i64>> {
    let mut out = Vec::new();
    for id in ids {
        let a = app.scheduler.ledger().allocation(id).await.unwrap();
        out.push(a.map(|a| a.host_id.0));
    }
    out
}

async fn host_id(app: &TestApp, name: &str) -> i64 {
    let ledger = app.scheduler.ledger();
    ledger.host_id_by_name(name, None).await.unwrap().unwrap().0
}

async fn affinity_of_ten_fails_one_at_a_time_and_lands_whole_on_the_host_that_holds_it(
    engine: &str,
) {
    // off: the first member goes to `big`, the weighers' first; the fifth finds no room
    // there and the call is NoValidHost, as Nova answers it.
    let off = app(engine, BackendKind::Filter, BatchMode::Off).await;
    big_and_roomy(&off).await;
    let ids = uuids(10);
    let (status, body) = call(&off, &ids, json!({"instance_group": group("affinity")})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["class"], "NoValidHost");
    assert_eq!(off.scheduler.ledger().allocation_count().await.unwrap(), 0);
    // The premise: one instance goes to `big`.
    let (status, body) = call(&off, &uuids(1), json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hosts_of(&body), vec!["big"]);

    // call: the affinity group is one unit of 10 instances' demand: only `roomy` holds it.
    let on = app(engine, BackendKind::Filter, BatchMode::Call).await;
    big_and_roomy(&on).await;
    let ids = uuids(10);
    let (status, body) = call(&on, &ids, json!({"instance_group": group("affinity")})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hosts_of(&body), vec!["roomy"; 10]);
    let roomy = host_id(&on, "roomy").await;
    assert_eq!(ledger_hosts(&on, &ids).await, vec![Some(roomy); 10]);
    assert_eq!(on.scheduler.ledger().allocation_count().await.unwrap(), 10);
    assert_eq!(
        on.used().await,
        vec![
            ("big".to_string(), 0, 0, 0),
            ("roomy".to_string(), 10, 10240, 100)
        ]
    );
    // No member has an alternate, as in Nova: the pass after the call keeps only the
    // group's host, which is selected.
    let lists: Vec<usize> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_array().unwrap().len())
        .collect();
    assert!(lists.iter().all(|&n| n == 1), "{lists:?}");
    let stats = on.stats("filter").await;
    assert_eq!(stats["placed"], 10);
    assert_eq!(stats["batch"]["rounds"], 1);
    assert_eq!(stats["batch"]["instances"], 10);
    assert_eq!(stats["batch"]["unscheduled"], 0);
    assert_eq!(stats["batch"]["size"]["max"], 10);
    assert_eq!(stats["batch"]["solve_latency_ms"]["count"], 1);
    let metrics = on.metrics_text().await;
    assert!(
        metrics.contains("parasol_batch_rounds_total{backend=\"filter\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("parasol_batch_size_count{backend=\"filter\"} 1"),
        "{metrics}"
    );
}
on_both_engines!(
    affinity_of_ten_fails_one_at_a_time_and_lands_whole_on_the_host_that_holds_it,
    super::affinity_of_ten_fails_one_at_a_time_and_lands_whole_on_the_host_that_holds_it
);

async fn every_backend_places_the_affinity_batch_on_its_own_view(engine: &str) {
    for backend in [BackendKind::Caching, BackendKind::Asc, BackendKind::Apsr] {
        let on = app(engine, backend, BatchMode::Call).await;
        big_and_roomy(&on).await;
        let ids = uuids(10);
        let (status, body) = call(&on, &ids, json!({"instance_group": group("affinity")})).await;
        assert_eq!(status, 200, "{backend:?}: {body}");
        assert_eq!(hosts_of(&body), vec!["roomy"; 10], "{backend:?}");
        let roomy = host_id(&on, "roomy").await;
        assert_eq!(ledger_hosts(&on, &ids).await, vec![Some(roomy); 10]);
        let stats = on.stats(backend.as_str()).await;
        assert_eq!(stats["batch"]["rounds"], 1, "{backend:?}: {stats}");
        assert_eq!(stats["placed"], 10, "{backend:?}");
    }
}
on_both_engines!(
    every_backend_places_the_affinity_batch_on_its_own_view,
    super::every_backend_places_the_affinity_batch_on_its_own_view
);

async fn anti_affinity_batch_keeps_members_apart_and_claims_nothing_when_hosts_run_out(
    engine: &str,
) {
    let on = app(engine, BackendKind::Filter, BatchMode::Call).await;
    for h in ["c1", "c2", "c3"] {
        on.register(h, 8, 8192, 80).await;
    }
    let ids = uuids(3);
    let (status, body) = call(&on, &ids, json!({"instance_group": group("anti-affinity")})).await;
    assert_eq!(status, 200, "{body}");
    let mut hosts = hosts_of(&body);
    hosts.sort();
    assert_eq!(hosts, vec!["c1", "c2", "c3"]);
    // No alternate names a host another member took.
    for list in body.as_array().unwrap() {
        assert_eq!(list.as_array().unwrap().len(), 1, "{body}");
    }
    let held = ledger_hosts(&on, &ids).await;
    let mut distinct: Vec<_> = held.iter().flatten().collect();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "{held:?}");

    // Four members of another group on three hosts: all or nothing.
    let more = uuids(4);
    let (status, body) = call(
        &on,
        &more,
        json!({"instance_group": group("anti-affinity")}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["class"], "NoValidHost");
    assert_eq!(ledger_hosts(&on, &more).await, vec![None; 4]);
    assert_eq!(on.scheduler.ledger().allocation_count().await.unwrap(), 3);
    let stats = on.stats("filter").await;
    assert_eq!(stats["batch"]["rounds"], 2, "{stats}");
    assert_eq!(stats["batch"]["unscheduled"], 1, "{stats}");
    assert_eq!(stats["no_valid_host"], 4);
}
on_both_engines!(
    anti_affinity_batch_keeps_members_apart_and_claims_nothing_when_hosts_run_out,
    super::anti_affinity_batch_keeps_members_apart_and_claims_nothing_when_hosts_run_out
);

async fn a_batch_over_max_instances_is_placed_one_at_a_time_and_counted(engine: &str) {
    let (mut s, db) = settings(engine, BackendKind::Filter).await;
    s.batch.mode = BatchMode::Call;
    s.batch.max_instances = 2;
    let on = spawn_with(s, db).await;
    on.register("c1", 8, 8192, 80).await;
    let ids = uuids(3);
    let (status, body) = call(&on, &ids, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hosts_of(&body), vec!["c1"; 3]);
    let stats = on.stats("filter").await;
    assert_eq!(stats["batch"]["rounds"], 0, "{stats}");
    assert_eq!(stats["batch"]["fallbacks"]["too_large"], 1, "{stats}");
    assert_eq!(stats["placed"], 3);
    let metrics = on.metrics_text().await;
    assert!(
        metrics
            .contains("parasol_batch_fallbacks_total{backend=\"filter\",reason=\"too_large\"} 1"),
        "{metrics}"
    );
    // Two fit the bound: one round.
    let (status, body) = call(&on, &uuids(2), json!({})).await;
    assert_eq!(status, 200, "{body}");
    let stats = on.stats("filter").await;
    assert_eq!(stats["batch"]["rounds"], 1, "{stats}");
    assert_eq!(stats["batch"]["fallbacks"]["too_large"], 1, "{stats}");
    assert_eq!(on.scheduler.ledger().allocation_count().await.unwrap(), 5);
}
on_both_engines!(
    a_batch_over_max_instances_is_placed_one_at_a_time_and_counted,
    super::a_batch_over_max_instances_is_placed_one_at_a_time_and_counted
);

/// A clock whose every reading is 5 ms after the one before: any solve, however fast, ends
/// past a 1 ms `solve_timeout_ms`. Its sleeps are the system's.
#[derive(Debug)]
struct SteppingClock(std::sync::atomic::AtomicI64);

impl parasol::clock::Clock for SteppingClock {
    fn now_ms(&self) -> i64 {
        self.0.fetch_add(5, std::sync::atomic::Ordering::SeqCst)
    }

    fn sleep_ms(&self, ms: u64) -> parasol::clock::Sleep {
        Box::pin(tokio::time::sleep(std::time::Duration::from_millis(ms)))
    }
}

async fn a_solve_past_its_timeout_is_placed_one_at_a_time_and_counted(engine: &str) {
    let (mut s, db) = settings(engine, BackendKind::Filter).await;
    s.batch.mode = BatchMode::Call;
    s.batch.solve_timeout_ms = 1;
    let t0 = parasol::clock::Clock::now_ms(&parasol::clock::SystemClock);
    let clock = std::sync::Arc::new(SteppingClock(t0.into()));
    let on = super::helpers::spawn_with_clock(s, db, clock).await;
    on.register("c1", 8, 8192, 80).await;
    let ids = uuids(3);
    let (status, body) = call(&on, &ids, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hosts_of(&body), vec!["c1"; 3]);
    let stats = on.stats("filter").await;
    assert_eq!(
        stats["batch"]["rounds"], 1,
        "solved, then discarded: {stats}"
    );
    assert_eq!(stats["batch"]["fallbacks"]["solve_timeout"], 1, "{stats}");
    assert_eq!(
        (&stats["requests"], &stats["placed"]),
        (&json!(3), &json!(3)),
        "{stats}"
    );
    let metrics = on.metrics_text().await;
    assert!(
        metrics.contains(
            "parasol_batch_fallbacks_total{backend=\"filter\",reason=\"solve_timeout\"} 1"
        ),
        "{metrics}"
    );
    let held = ledger_hosts(&on, &ids).await;
    assert_eq!(held, vec![Some(host_id(&on, "c1").await); 3]);
}
on_both_engines!(
    a_solve_past_its_timeout_is_placed_one_at_a_time_and_counted,
    super::a_solve_past_its_timeout_is_placed_one_at_a_time_and_counted
);

async fn a_claim_the_stale_snapshot_made_the_batch_lose_releases_the_batch_and_places_one_at_a_time(
    engine: &str,
) {
    let on = app(engine, BackendKind::Caching, BatchMode::Call).await;
    on.register("c1", 4, 8192, 80).await;
    on.register("c2", 4, 8192, 80).await;
    on.scheduler
        .reconfigure(on.scheduler.settings())
        .await
        .unwrap();
    // Another process takes c1 whole behind the snapshot's back.
    let ledger = on.scheduler.ledger();
    let c1 = ledger.host_id_by_name("c1", None).await.unwrap().unwrap();
    let full = parasol::domain::Resources::new(4, 8192, 80);
    ledger.claim(c1, "someone-else", &full, 1).await.unwrap();
    // The snapshot shows room for eight: the batch sends some of the four to c1, where the
    // ledger declines them; every claim of the batch is released and the call goes one at
    // a time, which moves on from c1 to c2.
    let ids = uuids(4);
    let (status, body) = call(&on, &ids, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hosts_of(&body), vec!["c2"; 4]);
    let c2 = host_id(&on, "c2").await;
    assert_eq!(ledger_hosts(&on, &ids).await, vec![Some(c2); 4]);
    assert_eq!(ledger.allocation_count().await.unwrap(), 5);
    let stats = on.stats("caching").await;
    assert_eq!(stats["batch"]["rounds"], 1, "{stats}");
    assert_eq!(stats["batch"]["fallbacks"]["declined"], 1, "{stats}");
    assert_eq!(stats["placed"], 4, "{stats}");
    assert!(
        stats["declines_by_cause"]["stale_snapshot"]
            .as_u64()
            .unwrap()
            >= 2,
        "the batch's and the one-at-a-time path's: {stats}"
    );
}
on_both_engines!(
    a_claim_the_stale_snapshot_made_the_batch_lose_releases_the_batch_and_places_one_at_a_time,
    super::a_claim_the_stale_snapshot_made_the_batch_lose_releases_the_batch_and_places_one_at_a_time
);

/// Group commits of the ledger's claims so far (`parasol_ledger_commits_total`).
async fn commits(app: &TestApp) -> u64 {
    let v = app.metric("parasol_ledger_commits_total").await;
    v.expect("parasol_ledger_commits_total")
        .parse()
        .expect("a count")
}

async fn single_calls_of_one_window_are_solved_together_and_answered_each_on_its_own(engine: &str) {
    let (mut s, db) = settings(engine, BackendKind::Filter).await;
    s.batch.mode = BatchMode::Window;
    s.batch.window_ms = 50;
    // The window sleeps on this clock: only the test moves it.
    let t0 = parasol::clock::Clock::now_ms(&parasol::clock::SystemClock);
    let clock = parasol::clock::ManualClock::new(t0);
    let on = super::helpers::spawn_with_clock(s, db, std::sync::Arc::new(clock.clone())).await;
    on.register("c1", 4, 8192, 80).await;
    on.register("c2", 4, 8192, 80).await;
    let small: Vec<Vec<String>> = (0..3).map(|_| uuids(1)).collect();
    let huge = uuids(1);
    let mut bodies: Vec<Value> = small
        .iter()
        .map(|ids| call_body(request_spec(flavor(2, 1024, 10), 1, json!({})), ids))
        .collect();
    bodies.push(call_body(
        request_spec(flavor(64, 1024, 10), 1, json!({})),
        &huge,
    ));
    let commits_before = commits(&on).await;
    let calls = futures::future::join_all(
        bodies
            .iter()
            .map(|body| on.post("/v1/select_destinations", body)),
    );
    let window = async {
        // All four calls wait for the window's end, then the clock reaches it.
        let armed = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let end = t0 + 50;
        while clock.deadlines().iter().filter(|&&d| d == end).count() < 4 {
            assert!(std::time::Instant::now() < armed, "{:?}", clock.deadlines());
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        clock.advance_ms(50);
    };
    let (answers, ()) = tokio::join!(calls, window);
    let mut statuses = Vec::new();
    for a in answers {
        statuses.push(a.status().as_u16());
    }
    assert_eq!(
        statuses,
        vec![200, 200, 200, 409],
        "each call answered alone"
    );
    let mut held: Vec<i64> = Vec::new();
    for ids in &small {
        held.extend(ledger_hosts(&on, ids).await.into_iter().flatten());
    }
    assert_eq!(held.len(), 3, "{held:?}");
    assert_eq!(
        commits(&on).await - commits_before,
        1,
        "the round's three claims commit as one group"
    );
    assert_eq!(ledger_hosts(&on, &huge).await, vec![None]);
    let stats = on.stats("filter").await;
    assert_eq!(stats["batch"]["rounds"], 1, "{stats}");
    assert_eq!(stats["batch"]["size"]["max"], 3, "{stats}");
    assert_eq!(stats["batch"]["fallbacks"]["unscheduled"], 1, "{stats}");
    assert_eq!(
        (
            &stats["requests"],
            &stats["placed"],
            &stats["no_valid_host"]
        ),
        (&json!(4), &json!(3), &json!(1)),
        "{stats}"
    );
}
on_both_engines!(
    single_calls_of_one_window_are_solved_together_and_answered_each_on_its_own,
    super::single_calls_of_one_window_are_solved_together_and_answered_each_on_its_own
);
