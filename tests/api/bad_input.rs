//! Every bad input is answered 4xx with a JSON error naming what is wrong, and changes nothing.

use super::helpers::{call_body, expect_error, flavor, request_spec, spawn_app, uuids, TestApp};
use crate::on_both_engines;
use serde_json::{json, Value};

async fn ledger_unchanged(app: &TestApp) {
    assert_eq!(app.used().await, vec![("c1".to_string(), 0, 0, 0)]);
    let placed = app.stats("filter").await["placed"].as_u64().unwrap_or(0);
    assert_eq!(placed, 0);
}

async fn bad_select_destinations_bodies_get_400_and_change_nothing(engine: &str) {
    let app = spawn_app(engine).await;
    app.register("c1", 4, 4096, 40).await;
    expect_error(
        app.post_raw("/v1/select_destinations", "{not json").await,
        400,
        "not valid JSON",
    )
    .await;

    let mut wrong_name = request_spec(flavor(1, 512, 1), 1, json!({}));
    wrong_name["nova_object.name"] = json!("Instance");
    expect_error(
        app.post("/v1/select_destinations", &call_body(wrong_name, &uuids(1)))
            .await,
        400,
        "RequestSpec",
    )
    .await;

    let mut no_flavor = request_spec(flavor(1, 512, 1), 1, json!({}));
    no_flavor["nova_object.data"]
        .as_object_mut()
        .unwrap()
        .remove("flavor");
    expect_error(
        app.post("/v1/select_destinations", &call_body(no_flavor, &uuids(1)))
            .await,
        400,
        "flavor",
    )
    .await;

    let negative = request_spec(flavor(-1, 512, 1), 1, json!({}));
    expect_error(
        app.post("/v1/select_destinations", &call_body(negative, &uuids(1)))
            .await,
        400,
        "vcpus",
    )
    .await;

    let mut fractional = request_spec(flavor(1, 512, 1), 1, json!({}));
    fractional["nova_object.data"]["flavor"]["nova_object.data"]["memory_mb"] = json!(512.5);
    expect_error(
        app.post("/v1/select_destinations", &call_body(fractional, &uuids(1)))
            .await,
        400,
        "memory_mb",
    )
    .await;

    let mut major = request_spec(flavor(1, 512, 1), 1, json!({}));
    major["nova_object.version"] = json!("2.0");
    expect_error(
        app.post("/v1/select_destinations", &call_body(major, &uuids(1)))
            .await,
        400,
        "2.0",
    )
    .await;

    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(2 << 20));
    let resp = app
        .client
        .post(format!("{}/v1/select_destinations", app.address))
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 413);
    let body: Value = resp.json().await.unwrap();
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("max_body_bytes"));

    ledger_unchanged(&app).await;
    assert_eq!(app.stats("filter").await["requests"], json!(0));
}
on_both_engines!(
    bad_select_destinations_bodies_get_400_and_change_nothing,
    super::bad_select_destinations_bodies_get_400_and_change_nothing
);

async fn bad_notifications_get_4xx_and_change_nothing(engine: &str) {
    let app = spawn_app(engine).await;
    app.register("c1", 4, 4096, 40).await;
    expect_error(
        app.post_raw("/v1/notifications", "[1, 2").await,
        400,
        "not valid JSON",
    )
    .await;

    let mut negative = super::helpers::host_state_event("m-neg", "c1", 4, 4096, 40);
    negative["payload"]["inventory"]["VCPU"]["total"] = json!(-4);
    let resp = app.post("/v1/notifications", &negative).await;
    assert!(resp.status().is_client_error(), "{}", resp.status());

    let release_unknown = json!({
        "message_id": "m-unknown", "event_type": "instance.delete.end", "priority": "INFO", "publisher_id": "nova-compute:ghost",
        "payload": {"nova_object.name": "InstanceActionPayload", "nova_object.namespace": "nova", "nova_object.version": "1.9",
                    "nova_object.data": {"uuid": "178b0921-8f85-4257-88b6-2e743b5a975c", "host": "ghost", "node": "ghost",
                    "flavor": {"nova_object.name": "FlavorPayload", "nova_object.namespace": "nova", "nova_object.version": "1.4",
                               "nova_object.data": {"memory_mb": 512, "vcpus": 1, "root_gb": 1, "ephemeral_gb": 0, "swap": 0}}}}
    });
    expect_error(
        app.post("/v1/notifications", &release_unknown).await,
        404,
        "ghost",
    )
    .await;

    let wrong_envelope = json!({"oslo.version": "1.0", "oslo.message": "{}"});
    expect_error(
        app.post("/v1/notifications", &wrong_envelope).await,
        400,
        "oslo.version",
    )
    .await;

    ledger_unchanged(&app).await;
    let hosts = app.get_json("/v1/hosts").await;
    assert_eq!(
        hosts["hosts"][0]["usable"]["VCPU"], 4,
        "the negative inventory was not applied"
    );
}
on_both_engines!(
    bad_notifications_get_4xx_and_change_nothing,
    super::bad_notifications_get_4xx_and_change_nothing
);
