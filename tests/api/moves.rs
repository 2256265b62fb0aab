//! Issue 40, items 1 and 2: Nova's races that used to oversubscribe a host.
//! 1. nova-compute's periodic `sync_instance_info` lists instances by `instance.host`, which a
//!    build in flight does not name yet: it must never release (or move) a claim.
//! 2. A move holds two allocations until it ends (`ledger::moves`): the source stays held until
//!    the move is confirmed, reverted, rolled back or fails, whatever the move's kind (cold
//!    migration, resize on another or on the same host, live migration).
//!
//! Every test on a fresh SQLite file and on its own PostgreSQL database, over HTTP.

use super::claim_ttl::create_end;
use super::helpers::{call_body, flavor, request_spec, spawn_app, TestApp};
use crate::on_both_engines;
use crate::support::update_instance_info;
use serde_json::{json, Value};

const SMALL: (i64, i64, i64) = (2, 1024, 10);

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// `select_destinations` for the one instance `uuid`; answers (status, chosen host).
async fn select_for(app: &TestApp, uuid: &str, f: (i64, i64, i64), extra: Value) -> (u16, String) {
    let body = call_body(
        request_spec(flavor(f.0, f.1, f.2), 1, extra),
        &[uuid.to_string()],
    );
    let resp = app.post("/v1/select_destinations", &body).await;
    let status = resp.status().as_u16();
    let answer: Value = resp.json().await.unwrap_or(Value::Null);
    let host = answer[0][0]["nova_object.data"]["service_host"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (status, host)
}

/// Nova's instance notification `event_type` for `instance` on `host` with flavor `f`.
fn instance_event(event_type: &str, instance: &str, host: &str, f: (i64, i64, i64)) -> Value {
    let mut m = create_end(instance, host, f);
    m["event_type"] = json!(event_type);
    m
}

/// nova-compute's fanout `sync_instance_info` for `host`.
fn sync_instance_info(host: &str, instances: &[&str]) -> Value {
    json!({"method": "sync_instance_info", "_unique_id": new_id().replace('-', ""),
        "args": {"host_name": host, "instance_uuids": instances}, "namespace": null,
        "version": "4.0"})
}

/// nova-compute's fanout `delete_instance_info` from `host` (sent by `confirm_resize` from a
/// move's source once it dropped the source's allocation).
fn delete_instance_info(host: &str, instance: &str) -> Value {
    json!({"method": "delete_instance_info", "_unique_id": new_id().replace('-', ""),
        "args": {"host_name": host, "instance_uuid": instance}, "namespace": null,
        "version": "4.2"})
}

async fn notify(app: &TestApp, message: &Value) {
    let resp = app.post("/v1/notifications", message).await;
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap_or_default();
    assert_eq!(status, 200, "{message}: {body}");
    assert!(body.contains("applied"), "{message}: {body}");
}

/// Nova's `event_type` for `instance` on `host` with flavor `f`, applied.
async fn tell(app: &TestApp, event_type: &str, instance: &str, host: &str, f: (i64, i64, i64)) {
    notify(app, &instance_event(event_type, instance, host, f)).await;
}

/// VCPU used per host name.
async fn vcpus(app: &TestApp) -> Vec<(String, i64)> {
    app.used()
        .await
        .into_iter()
        .map(|(h, v, _, _)| (h, v))
        .collect()
}

fn on(hosts: &[(&str, i64)]) -> Vec<(String, i64)> {
    hosts.iter().map(|(h, v)| (h.to_string(), *v)).collect()
}

/// `/v1/hosts`' instance count per host name.
async fn instances(app: &TestApp) -> Vec<(String, i64)> {
    let hosts = app.get_json("/v1/hosts").await;
    hosts["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["host"].as_str().unwrap().to_string(),
                h["num_instances"].as_i64().unwrap_or(-1),
            )
        })
        .collect()
}

/// The moves `/v1/hosts` shows held on `host`.
async fn held_on(app: &TestApp, host: &str) -> Vec<Value> {
    let hosts = app.get_json("/v1/hosts").await;
    hosts["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["host"] == host)
        .map(|h| h["held_moves"].as_array().cloned().unwrap_or_default())
        .unwrap_or_default()
}

/// Item 1: one host of 2 VCPU; A is placed there (its claim not yet confirmed: the compute
/// has not claimed it, so `instance.host` is unset); the periodic sync of that host lists no
/// instance. It used to release A's claim, and B then landed on the full host.
async fn issue_40_item_1_sync_instance_info_never_frees_a_claim_in_flight(engine: &str) {
    let app = spawn_app(engine).await;
    app.register("h", 2, 2048, 20).await;
    let a = new_id();
    assert_eq!(
        select_for(&app, &a, SMALL, json!({})).await,
        (200, "h".into())
    );
    notify(&app, &sync_instance_info("h", &[])).await;
    assert_eq!(vcpus(&app).await, on(&[("h", 2)]), "A's claim stays");
    let (status, body) = app.place(flavor(2, 1024, 10), 1, json!({})).await;
    assert_eq!(status, 409, "B must not land on the full host: {body}");
    // Confirmed by its build, A stays whatever a later sync (one taken before the build's
    // claim, or by a compute that lost its view) lists.
    notify(&app, &create_end(&a, "h", SMALL)).await;
    notify(&app, &sync_instance_info("h", &[])).await;
    assert_eq!(vcpus(&app).await, on(&[("h", 2)]));
    let ledger = app.scheduler.ledger();
    let held = ledger
        .allocation(&a)
        .await
        .unwrap()
        .expect("A's allocation");
    assert!(held.confirmed);
}
on_both_engines!(
    issue_40_item_1_sync_instance_info_never_frees_a_claim_in_flight,
    super::issue_40_item_1_sync_instance_info_never_frees_a_claim_in_flight
);

/// Item 1, the other way round: the source's sync lists an instance whose move the ledger has
/// already claimed elsewhere (`instance.host` changes only at `finish_resize`). It used to move
/// the allocation back to the source, freeing the destination's claim.
async fn issue_40_item_1_sync_instance_info_never_moves_a_claim(engine: &str) {
    let app = spawn_app(engine).await;
    app.register("ma", 2, 2048, 20).await;
    let x = new_id();
    assert_eq!(select_for(&app, &x, SMALL, json!({})).await.0, 200);
    notify(&app, &create_end(&x, "ma", SMALL)).await;
    app.register("mb", 2, 2048, 20).await;
    let moved = select_for(&app, &x, SMALL, json!({"ignore_hosts": ["ma"]})).await;
    assert_eq!(moved, (200, "mb".into()));
    notify(&app, &sync_instance_info("ma", &[&x])).await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 2)]));
    let (status, body) = app.place(flavor(2, 1024, 10), 1, json!({})).await;
    assert_eq!(status, 409, "both hosts hold X: {body}");
}
on_both_engines!(
    issue_40_item_1_sync_instance_info_never_moves_a_claim,
    super::issue_40_item_1_sync_instance_info_never_moves_a_claim
);

/// X runs on `ma` (full) and `mb` joins; X is migrated. Until Nova confirms the resize, `ma`
/// still holds X: a new instance must not land there.
async fn moved_instance_on_ma(app: &TestApp) -> String {
    app.register("ma", 2, 2048, 20).await;
    let x = new_id();
    assert_eq!(
        select_for(app, &x, SMALL, json!({})).await,
        (200, "ma".into())
    );
    notify(app, &create_end(&x, "ma", SMALL)).await;
    app.register("mb", 2, 2048, 20).await;
    let moved = select_for(app, &x, SMALL, json!({"ignore_hosts": ["ma"]})).await;
    assert_eq!(moved, (200, "mb".into()));
    x
}

async fn issue_40_item_2_a_cold_migration_holds_its_source_until_confirmed(engine: &str) {
    let app = spawn_app(engine).await;
    let x = moved_instance_on_ma(&app).await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 2)]));
    let (status, body) = app.place(flavor(2, 1024, 10), 1, json!({})).await;
    assert_eq!(status, 409, "ma still runs X: {body}");
    let held = held_on(&app, "ma").await;
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0]["instance_uuid"], x.as_str());
    assert_eq!(held[0]["started"], false);
    assert_eq!(app.metric("parasol_held_moves").await.as_deref(), Some("1"));
    // The destination took it: the source is still held.
    notify(
        &app,
        &instance_event("instance.resize_finish.end", &x, "mb", SMALL),
    )
    .await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 2)]));
    assert_eq!(held_on(&app, "ma").await[0]["started"], true);
    // Nova counts X where `instance.host` is, which `finish_resize` set to mb: ma keeps X's
    // amounts until the confirmation, not X (NumInstancesFilter and IoOpsFilter read the
    // count). Read back from the ledger too, as a restart would.
    assert_eq!(
        instances(&app).await,
        on(&[("ma", 0), ("mb", 1)]),
        "instance counts once the destination took X"
    );
    let reloaded: Vec<(String, i64)> = app
        .scheduler
        .ledger()
        .load_hosts(None)
        .await
        .unwrap()
        .into_iter()
        .map(|h| (h.profile.host.to_string(), h.num_instances))
        .collect();
    assert_eq!(
        reloaded,
        on(&[("ma", 0), ("mb", 1)]),
        "the ledger's own count"
    );
    // Confirmed: the source is free, and a new instance lands there.
    notify(
        &app,
        &instance_event("instance.resize_confirm.end", &x, "mb", SMALL),
    )
    .await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 0), ("mb", 2)]));
    assert_eq!(
        instances(&app).await,
        on(&[("ma", 0), ("mb", 1)]),
        "instance counts after the confirm"
    );
    assert!(held_on(&app, "ma").await.is_empty());
    assert_eq!(app.metric("parasol_held_moves").await.as_deref(), Some("0"));
    let (status, body) = app.place(flavor(2, 1024, 10), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 2)]));
    assert_eq!(
        app.metric("parasol_oversubscribed_hosts").await.as_deref(),
        Some("0")
    );
}
on_both_engines!(
    issue_40_item_2_a_cold_migration_holds_its_source_until_confirmed,
    super::issue_40_item_2_a_cold_migration_holds_its_source_until_confirmed
);

/// A deployment whose instance notifications do not reach Parasol (Nova's functional
/// `MultiCellSchedulerTestCase` runs so) still follows a cold migration through nova-compute's
/// casts: the destination's `update_instance_info` after `finish_resize` starts the move (X
/// counts there, not on its source, whose amounts stay held), and the source's
/// `delete_instance_info` from `confirm_resize` ends it.
async fn issue_40_item_2_a_cold_migration_followed_by_the_casts_alone(engine: &str) {
    let app = spawn_app(engine).await;
    let x = moved_instance_on_ma(&app).await;
    assert_eq!(instances(&app).await, on(&[("ma", 1), ("mb", 1)]));
    notify(&app, &update_instance_info("mb", &x)).await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 2)]));
    assert_eq!(
        instances(&app).await,
        on(&[("ma", 0), ("mb", 1)]),
        "finished on mb: Nova counts X there"
    );
    let held = held_on(&app, "ma").await;
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0]["started"], true, "no TTL frees the source now");
    let ledger = app.scheduler.ledger();
    assert!(ledger.allocation(&x).await.unwrap().unwrap().confirmed);
    // The source's periodic sync (no X: `instance.host` is mb) changes nothing.
    notify(&app, &sync_instance_info("ma", &[])).await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 2)]));
    // Confirmed: the source's cast releases the held source, X stays on mb.
    notify(&app, &delete_instance_info("ma", &x)).await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 0), ("mb", 2)]));
    assert_eq!(instances(&app).await, on(&[("ma", 0), ("mb", 1)]));
    assert!(held_on(&app, "ma").await.is_empty());
    let a = ledger.allocation(&x).await.unwrap().expect("X stays on mb");
    assert_eq!(ledger.allocation_count().await.unwrap(), 1);
    assert!(a.confirmed);
}
on_both_engines!(
    issue_40_item_2_a_cold_migration_followed_by_the_casts_alone,
    super::issue_40_item_2_a_cold_migration_followed_by_the_casts_alone
);

async fn issue_40_item_2_a_reverted_resize_releases_the_destination(engine: &str) {
    let app = spawn_app(engine).await;
    let x = moved_instance_on_ma(&app).await;
    notify(
        &app,
        &instance_event("instance.resize_finish.end", &x, "mb", SMALL),
    )
    .await;
    notify(
        &app,
        &instance_event("instance.resize_revert.end", &x, "ma", SMALL),
    )
    .await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 0)]));
    assert_eq!(
        instances(&app).await,
        on(&[("ma", 1), ("mb", 0)]),
        "X counts on its source again"
    );
    assert!(held_on(&app, "ma").await.is_empty());
    let ledger = app.scheduler.ledger();
    let a = ledger
        .allocation(&x)
        .await
        .unwrap()
        .expect("X's allocation");
    assert!(a.confirmed);
    assert_eq!(ledger.allocation_count().await.unwrap(), 1);
    let (status, _) = select_for(&app, &new_id(), SMALL, json!({})).await;
    assert_eq!(status, 200, "mb is free again");
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 2)]));
}
on_both_engines!(
    issue_40_item_2_a_reverted_resize_releases_the_destination,
    super::issue_40_item_2_a_reverted_resize_releases_the_destination
);

/// `allow_resize_to_same_host`: `ignore_hosts` is empty and the one host holds both flavors
/// until the resize is confirmed, or only the old one once it is reverted.
async fn issue_40_item_2_a_resize_on_the_same_host_holds_both_flavors(engine: &str) {
    let app = spawn_app(engine).await;
    app.register("h", 4, 4096, 40).await;
    let (small, big) = ((1, 512, 5), (2, 1024, 10));
    let x = new_id();
    assert_eq!(
        select_for(&app, &x, small, json!({})).await,
        (200, "h".into())
    );
    notify(&app, &create_end(&x, "h", small)).await;
    assert_eq!(
        select_for(&app, &x, big, json!({})).await,
        (200, "h".into())
    );
    assert_eq!(vcpus(&app).await, on(&[("h", 3)]));
    let (status, body) = app.place(flavor(2, 512, 5), 1, json!({})).await;
    assert_eq!(status, 409, "1 VCPU left: {body}");
    notify(
        &app,
        &instance_event("instance.resize_finish.end", &x, "h", big),
    )
    .await;
    assert_eq!(vcpus(&app).await, on(&[("h", 3)]));
    assert_eq!(
        instances(&app).await,
        on(&[("h", 1)]),
        "one instance, both flavors"
    );
    notify(
        &app,
        &instance_event("instance.resize_confirm.end", &x, "h", big),
    )
    .await;
    assert_eq!(vcpus(&app).await, on(&[("h", 2)]));
    // Resized back, then reverted: the old (big) flavor is what remains.
    assert_eq!(
        select_for(&app, &x, small, json!({})).await,
        (200, "h".into())
    );
    assert_eq!(vcpus(&app).await, on(&[("h", 3)]));
    notify(
        &app,
        &instance_event("instance.resize_finish.end", &x, "h", small),
    )
    .await;
    notify(
        &app,
        &instance_event("instance.resize_revert.end", &x, "h", big),
    )
    .await;
    assert_eq!(vcpus(&app).await, on(&[("h", 2)]));
    assert_eq!(instances(&app).await, on(&[("h", 1)]));
    let a = app
        .scheduler
        .ledger()
        .allocation(&x)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.demand.to_map()["VCPU"], 2);
}
on_both_engines!(
    issue_40_item_2_a_resize_on_the_same_host_holds_both_flavors,
    super::issue_40_item_2_a_resize_on_the_same_host_holds_both_flavors
);

/// A resize on the same host, confirmed: nova-compute's `_confirm_resize` casts
/// `delete_instance_info` from `self.host`, which is also where the instance stays. Whether the
/// cast comes before or after `instance.resize_confirm.end` (a fanout queue and a notification
/// queue: either order), the host keeps the new flavor. The cast used to release the
/// instance's own allocation when it came second: the host counted nothing (Nova's functional
/// `test_resize_confirm_server`, `VDPAServersTest.test_resize_same_host`: Placement 1 VCPU,
/// Parasol's ledger 0).
async fn a_confirmed_resize_on_the_same_host_keeps_the_new_flavor_whatever_the_order(engine: &str) {
    let app = spawn_app(engine).await;
    app.register("h", 4, 4096, 40).await;
    let (small, big) = ((1, 512, 5), (2, 1024, 10));
    for cast_first in [false, true] {
        let x = new_id();
        assert_eq!(
            select_for(&app, &x, small, json!({})).await,
            (200, "h".into())
        );
        notify(&app, &create_end(&x, "h", small)).await;
        assert_eq!(
            select_for(&app, &x, big, json!({})).await,
            (200, "h".into())
        );
        tell(&app, "instance.resize_finish.end", &x, "h", big).await;
        assert_eq!(vcpus(&app).await, on(&[("h", 3)]), "both flavors held");
        let confirm = instance_event("instance.resize_confirm.end", &x, "h", big);
        if cast_first {
            notify(&app, &delete_instance_info("h", &x)).await;
            notify(&app, &confirm).await;
        } else {
            notify(&app, &confirm).await;
            notify(&app, &delete_instance_info("h", &x)).await;
        }
        assert_eq!(
            vcpus(&app).await,
            on(&[("h", 2)]),
            "the new flavor stays (cast first: {cast_first})"
        );
        let ledger = app.scheduler.ledger();
        let a = ledger.allocation(&x).await.unwrap().expect("X stays on h");
        assert_eq!(a.demand.to_map()["VCPU"], 2);
        assert!(held_on(&app, "h").await.is_empty());
        // Deleted: its own notification releases it.
        tell(&app, "instance.delete.end", &x, "h", big).await;
        assert_eq!(vcpus(&app).await, on(&[("h", 0)]));
    }
}
on_both_engines!(
    a_confirmed_resize_on_the_same_host_keeps_the_new_flavor_whatever_the_order,
    super::a_confirmed_resize_on_the_same_host_keeps_the_new_flavor_whatever_the_order
);

/// An operator aborts a live migration still queued on its source (Nova's
/// `LiveMigrationQueuedAbortTest*`): nova-compute drops it, gives the source back and deletes
/// the destination's allocation, and sends `instance.live_migration_abort.end` with no
/// rollback notification. The destination's claim used to stay until its TTL or the repair.
/// An abort of a migration that started changes nothing: its rollback (or its end) follows.
async fn an_aborted_queued_live_migration_releases_its_destination(engine: &str) {
    let app = spawn_app(engine).await;
    let x = moved_instance_on_ma(&app).await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 2)]));
    tell(&app, "instance.live_migration_abort.end", &x, "ma", SMALL).await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 0)]));
    assert!(held_on(&app, "ma").await.is_empty());
    let ledger = app.scheduler.ledger();
    let a = ledger.allocation(&x).await.unwrap().expect("X on ma");
    assert!(a.confirmed);
    assert_eq!(ledger.allocation_count().await.unwrap(), 1);
    // Moved again, started (pre_live_migration ran), then aborted: both stay held until the
    // rollback says it is undone.
    let moved = select_for(&app, &x, SMALL, json!({"ignore_hosts": ["ma"]})).await;
    assert_eq!(moved, (200, "mb".into()));
    tell(&app, "instance.live_migration_pre.end", &x, "ma", SMALL).await;
    tell(&app, "instance.live_migration_abort.end", &x, "ma", SMALL).await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 2)]));
    tell(
        &app,
        "instance.live_migration_rollback.end",
        &x,
        "ma",
        SMALL,
    )
    .await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 0)]));
}
on_both_engines!(
    an_aborted_queued_live_migration_releases_its_destination,
    super::an_aborted_queued_live_migration_releases_its_destination
);

async fn issue_40_item_2_a_live_migration_holds_its_source_until_post_or_rollback(engine: &str) {
    let app = spawn_app(engine).await;
    let x = moved_instance_on_ma(&app).await;
    notify(
        &app,
        &instance_event("instance.live_migration_pre.end", &x, "ma", SMALL),
    )
    .await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 2)]));
    // A live migration's `instance.host` is the source until it ends: X still counts there.
    assert_eq!(instances(&app).await, on(&[("ma", 1), ("mb", 1)]));
    let ledger = app.scheduler.ledger();
    assert!(
        ledger.allocation(&x).await.unwrap().unwrap().confirmed,
        "the destination took it: its claim no longer expires"
    );
    notify(
        &app,
        &instance_event("instance.live_migration_rollback.end", &x, "ma", SMALL),
    )
    .await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 0)]));
    let a = ledger.allocation(&x).await.unwrap().unwrap();
    assert_eq!(
        app.scheduler
            .ledger()
            .table()
            .get(a.host_id)
            .unwrap()
            .host()
            .as_ref(),
        "ma"
    );
    // Again, to its end this time.
    let again = select_for(&app, &x, SMALL, json!({"ignore_hosts": ["ma"]})).await;
    assert_eq!(again, (200, "mb".into()));
    notify(
        &app,
        &instance_event("instance.live_migration_pre.end", &x, "ma", SMALL),
    )
    .await;
    notify(
        &app,
        &instance_event("instance.live_migration_post.end", &x, "ma", SMALL),
    )
    .await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 0), ("mb", 2)]));
    assert_eq!(instances(&app).await, on(&[("ma", 0), ("mb", 1)]));
    assert!(held_on(&app, "ma").await.is_empty());
}
on_both_engines!(
    issue_40_item_2_a_live_migration_holds_its_source_until_post_or_rollback,
    super::issue_40_item_2_a_live_migration_holds_its_source_until_post_or_rollback
);

/// Neither `resize_finish.end` nor `live_migration_pre.end` within the TTL: the move failed;
/// the destination is released and the instance keeps its source. Once the destination took
/// the instance, no TTL frees anything.
async fn issue_40_item_2_a_move_that_never_starts_keeps_its_source_after_the_ttl(engine: &str) {
    let app = spawn_app(engine).await;
    let x = moved_instance_on_ma(&app).await;
    let ledger = app.scheduler.ledger();
    let far = i64::MAX / 2;
    let expired = ledger.expire_claims(far).await.unwrap();
    assert_eq!(expired.len(), 1, "the destination's claim");
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 0)]));
    let a = ledger
        .allocation(&x)
        .await
        .unwrap()
        .expect("X keeps its source");
    assert!(a.confirmed);
    assert!(held_on(&app, "ma").await.is_empty());
    assert_eq!(ledger.allocation_count().await.unwrap(), 1);
    // Started this time: nothing expires, however long the confirmation takes.
    assert_eq!(
        select_for(&app, &x, SMALL, json!({"ignore_hosts": ["ma"]})).await,
        (200, "mb".into())
    );
    notify(
        &app,
        &instance_event("instance.resize_finish.end", &x, "mb", SMALL),
    )
    .await;
    assert!(ledger.expire_claims(far).await.unwrap().is_empty());
    assert_eq!(vcpus(&app).await, on(&[("ma", 2), ("mb", 2)]));
    // A deletion of the moving instance releases both.
    notify(
        &app,
        &instance_event("instance.delete.end", &x, "mb", SMALL),
    )
    .await;
    assert_eq!(vcpus(&app).await, on(&[("ma", 0), ("mb", 0)]));
    assert_eq!(ledger.allocation_count().await.unwrap(), 0);
}
on_both_engines!(
    issue_40_item_2_a_move_that_never_starts_keeps_its_source_after_the_ttl,
    super::issue_40_item_2_a_move_that_never_starts_keeps_its_source_after_the_ttl
);
