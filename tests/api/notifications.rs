//! `POST /v1/notifications`: host-state registration, duplicates, and instance.delete.end.

use super::helpers::{flavor, host_state_event, spawn_app};
use crate::on_both_engines;
use serde_json::json;

const DELETE_END: &str = include_str!("../fixtures/wire/instance.delete.end-notification.json");

async fn host_state_registers_and_updates_a_host_once(engine: &str) {
    let app = spawn_app(engine).await;
    let event = host_state_event("m1", "compute1", 8, 16384, 100);
    let first: serde_json::Value = app
        .post("/v1/notifications", &event)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(first["outcome"], "applied");
    let again: serde_json::Value = app
        .post("/v1/notifications", &event)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(again["outcome"], "duplicate");
    let bigger = host_state_event("m2", "compute1", 16, 16384, 100);
    app.post("/v1/notifications", &bigger).await;
    let hosts = app.get_json("/v1/hosts").await;
    assert_eq!(hosts["hosts"].as_array().unwrap().len(), 1);
    assert_eq!(hosts["hosts"][0]["usable"]["VCPU"], 16);
    let stats = app.get_json("/v1/stats").await;
    assert_eq!(stats["notifications"]["applied"], 2);
    assert_eq!(stats["notifications"]["duplicate"], 1);
}
on_both_engines!(
    host_state_registers_and_updates_a_host_once,
    super::host_state_registers_and_updates_a_host_once
);

async fn captured_delete_end_releases_the_allocation(engine: &str) {
    let app = spawn_app(engine).await;
    app.register("compute1", 4, 4096, 40).await;
    let captured: serde_json::Value = serde_json::from_str(DELETE_END).unwrap();
    let inner = &captured["decoded_oslo_message"];
    let uuid = inner["payload"]["nova_object.data"]["uuid"]
        .as_str()
        .unwrap()
        .to_string();
    let spec = super::helpers::request_spec(flavor(1, 2048, 20), 1, json!({}));
    let resp = app
        .post(
            "/v1/select_destinations",
            &super::helpers::call_body(spec, &[uuid]),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(app.used().await[0].1, 1);
    // As RabbitMQ carries it: the oslo envelope with the inner message as a JSON string.
    let envelope = json!({"oslo.version": "2.0", "oslo.message": inner.to_string()});
    let out: serde_json::Value = app
        .post("/v1/notifications", &envelope)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(out["outcome"], "applied", "{out}");
    assert_eq!(app.used().await, vec![("compute1".to_string(), 0, 0, 0)]);
    let out: serde_json::Value = app
        .post("/v1/notifications", &envelope)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(out["outcome"], "duplicate");
}
on_both_engines!(
    captured_delete_end_releases_the_allocation,
    super::captured_delete_end_releases_the_allocation
);
