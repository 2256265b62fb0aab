//! Named regression tests of issue 16's seven defects ("Why", items 1–7), one per item. Those
//! whose natural home is another suite are listed here by name:
//! 1. here: `issue_16_item_1_*`.
//! 2. here: `issue_16_item_2_*`.
//! 3. here: `issue_16_item_3_*` (over HTTP); `tests/amqp/poison.rs`:
//!    `a_poison_message_in_a_batch_of_500_on_postgres_is_dead_lettered_alone_without_a_requeue_loop`.
//! 4. `tests/api/claim_ttl.rs`: `unconfirmed_claims_are_released_after_the_ttl_and_counted`,
//!    `claims_a_stopped_process_left_unanswered_expire_after_restart_and_the_ttl`; the process
//!    killed (SIGKILL) in the middle of a multi-create: `tests/sigkill.rs`,
//!    `sigkill_mid_multi_create_leaves_nothing_claimed_after_restart_and_the_ttl`.
//! 5. `tests/api/ready.rs`: `a_removed_sqlite_file_refuses_writes_and_makes_the_service_not_ready`,
//!    `a_sqlite_file_replaced_by_another_ledger_refuses_writes_and_is_not_mixed`,
//!    `a_read_only_sqlite_file_is_not_ready_until_writable_and_the_writer_reconnects`,
//!    `a_held_write_lock_makes_the_service_not_ready_until_it_is_released`,
//!    `an_unreachable_broker_and_placement_are_named_in_the_reason`.
//! 6. here: `issue_16_item_6_*` (over HTTP); the codec's own in `src/nova/hardening_tests.rs`;
//!    `tests/api/redaction.rs` (passwords in URLs); `tests/amqp/health.rs`:
//!    `two_sqlite_ledgers_on_one_broker_each_receive_every_event`.
//! 7. `tests/api/auth.rs` (token strategy, insecure bind refused) and `tests/auth.rs` (Keystone).

use super::claim_ttl::create_end;
use super::helpers::{call_body, flavor, request_spec, spawn_app, uuids};
use crate::on_both_engines;
use serde_json::{json, Value};

/// Item 1: `instance.create.end` with `vcpus = 2^63 − 1`, then one with `vcpus = 1`, on one
/// host, used to store a float in SQLite and make `/v1/hosts` and every select answer 500 from
/// then on, across restarts; deleting both left `vcpu_used = -1`.
async fn issue_16_item_1_an_oversized_vcpus_notification_no_longer_stops_all_scheduling(
    engine: &str,
) {
    let app = spawn_app(engine).await;
    app.register("compute1", 8, 8192, 80).await;
    let (huge, small) = (uuids(1).remove(0), uuids(1).remove(0));
    let refused = app
        .post(
            "/v1/notifications",
            &create_end(&huge, "compute1", (i64::MAX, 512, 1)),
        )
        .await;
    assert_eq!(refused.status().as_u16(), 400, "the caller's fault, named");
    let reason = refused.text().await.unwrap();
    assert!(reason.contains("vcpus"), "{reason}");
    let applied = app
        .post(
            "/v1/notifications",
            &create_end(&small, "compute1", (1, 512, 1)),
        )
        .await;
    assert_eq!(applied.status().as_u16(), 200);
    let hosts = app
        .client
        .get(format!("{}/v1/hosts", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(hosts.status().as_u16(), 200);
    assert_eq!(app.used().await, vec![("compute1".to_string(), 1, 512, 1)]);
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    for id in [&huge, &small] {
        let mut delete = create_end(id, "compute1", (1, 512, 1));
        delete["event_type"] = json!("instance.delete.end");
        let status = app.post("/v1/notifications", &delete).await.status();
        assert_eq!(status.as_u16(), 200);
    }
    // The instance placed above is the only one left: never below zero.
    assert_eq!(app.used().await, vec![("compute1".to_string(), 1, 512, 1)]);
}
on_both_engines!(
    issue_16_item_1_an_oversized_vcpus_notification_no_longer_stops_all_scheduling,
    super::issue_16_item_1_an_oversized_vcpus_notification_no_longer_stops_all_scheduling
);

/// Item 2: a flavor with `vcpus`, `memory_mb` or `root_gb` = 2^63 − 1 on a cloud with a used
/// host wrapped around in `Resources::add`, passed CapacityFilter, and PostgreSQL answered
/// `bigint out of range` as a 500. Now it is the caller's error (400) and nothing changes.
async fn issue_16_item_2_an_oversized_flavor_on_a_used_host_is_refused_not_a_500(engine: &str) {
    let app = spawn_app(engine).await;
    app.register("compute1", 8, 8192, 80).await;
    let (status, _) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200);
    let before = app.get_json("/v1/hosts").await;
    for f in [
        flavor(i64::MAX, 512, 1),
        flavor(1, i64::MAX, 1),
        flavor(1, 512, i64::MAX),
    ] {
        let resp = app
            .post(
                "/v1/select_destinations",
                &call_body(request_spec(f, 1, json!({})), &uuids(1)),
            )
            .await;
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        assert_eq!(status, 400, "{body}");
    }
    assert_eq!(app.get_json("/v1/hosts").await, before);
}
on_both_engines!(
    issue_16_item_2_an_oversized_flavor_on_a_used_host_is_refused_not_a_500,
    super::issue_16_item_2_an_oversized_flavor_on_a_used_host_is_refused_not_a_500
);

/// Item 6 over HTTP: a nested Flavor of version 9.0, `instance_uuids: [X, X]` and a 200 KB
/// host name were accepted (two selections and one allocation; the name stored as it was).
async fn issue_16_item_6_nested_versions_repeated_uuids_and_huge_names_are_refused_over_http(
    engine: &str,
) {
    let app = spawn_app(engine).await;
    app.register("compute1", 8, 8192, 80).await;
    let before = app.get_json("/v1/hosts").await;
    let mut future = flavor(1, 512, 1);
    future["nova_object.version"] = json!("9.0");
    let x = uuids(1).remove(0);
    let huge = "h".repeat(200_000);
    let calls = [
        call_body(request_spec(future, 1, json!({})), &uuids(1)),
        call_body(
            request_spec(flavor(1, 512, 1), 2, json!({})),
            &[x.clone(), x],
        ),
    ];
    for call in &calls {
        let status = app.post("/v1/select_destinations", call).await.status();
        assert_eq!(status.as_u16(), 400, "{call}");
    }
    let event =
        super::helpers::host_state_event(&uuid::Uuid::new_v4().to_string(), &huge, 8, 8192, 80);
    let status = app.post("/v1/notifications", &event).await.status();
    assert!(status.is_client_error(), "{status}");
    assert_eq!(app.get_json("/v1/hosts").await, before);
    assert_eq!(app.scheduler.ledger().allocation_count().await.unwrap(), 0);
}
on_both_engines!(
    issue_16_item_6_nested_versions_repeated_uuids_and_huge_names_are_refused_over_http,
    super::issue_16_item_6_nested_versions_repeated_uuids_and_huge_names_are_refused_over_http
);

/// Item 3 over HTTP: a value PostgreSQL refuses (a NUL byte in a host name) used to be taken
/// for a ledger outage (503). It is the caller's fault: 4xx with the database's reason.
#[tokio::test]
async fn issue_16_item_3_a_value_postgres_refuses_is_the_caller_s_fault_over_http() {
    let app = spawn_app("postgres").await;
    app.register("compute1", 8, 8192, 80).await;
    let before = app.get_json("/v1/hosts").await;
    let poison = create_end(&uuids(1)[0], "compute\u{0}1", (1, 512, 1));
    let resp = app.post("/v1/notifications", &poison).await;
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap();
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("0x00"), "{body}");
    assert_eq!(app.get_json("/v1/hosts").await, before);
}
