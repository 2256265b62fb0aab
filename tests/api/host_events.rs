//! Issue 40 over `POST /v1/notifications`, with the counts in `/v1/stats` and `/metrics`:
//! a compute node re-created under a new uuid (same host and node) is registered, never
//! refused (defect 3), and an event older than its host's newest changes no inventory
//! (defect 5). `tests/ledger/host_events.rs` takes both through every path of the ledger.

use super::helpers::{flavor, host_state_event, spawn_app, TestApp};
use crate::on_both_engines;
use serde_json::{json, Value};

async fn post(app: &TestApp, event: &Value) -> (u16, Value) {
    let resp = app.post("/v1/notifications", event).await;
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn hosts_named(app: &TestApp, host: &str) -> Vec<Value> {
    app.get_json("/v1/hosts").await["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .filter(|h| h["host"] == host)
        .cloned()
        .collect()
}

async fn a_re_created_node_and_an_older_event_over_http(engine: &str) {
    let app = spawn_app(engine).await;
    app.register("re", 4, 4096, 40).await;
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");

    // The service deleted and created again: same host and node, a new compute node uuid.
    let new_uuid = uuid::Uuid::new_v4().to_string();
    for id in ["re-created-1", "re-created-2"] {
        let mut event = host_state_event(id, "re", 8, 8192, 80);
        event["payload"]["compute_node_uuid"] = json!(new_uuid);
        let (status, body) = post(&app, &event).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["outcome"], "applied");
    }
    let hosts = hosts_named(&app, "re").await;
    assert_eq!(hosts.len(), 2, "{hosts:?}");
    let new = hosts
        .iter()
        .find(|h| h["compute_node_uuid"] == new_uuid.as_str())
        .expect("the new node");
    assert_eq!(new["node"], "re");
    assert_eq!(new["up"], true);
    let old = hosts
        .iter()
        .find(|h| h["compute_node_uuid"] != new_uuid.as_str())
        .expect("the old node");
    assert_eq!(old["used"]["VCPU"], 1, "the old node keeps its allocation");
    assert_eq!(old["up"], false);
    assert_eq!(old["forced_down"], true);
    assert_ne!(old["node"], "re");
    let stats = app.get_json("/v1/stats").await;
    assert_eq!(stats["hosts"]["node_replaced"], 1, "{stats}");
    assert_eq!(
        app.metric("parasol_hosts_node_replaced_total")
            .await
            .as_deref(),
        Some("1")
    );
    // The next instance lands on the new node.
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    let new = &hosts_named(&app, "re").await;
    let new = new
        .iter()
        .find(|h| h["compute_node_uuid"] == new_uuid.as_str())
        .unwrap();
    assert_eq!(new["used"]["VCPU"], 1);

    // The helper's events are sent at 2026-11-25 21:13:16; this one four hours before.
    let mut older = host_state_event("older", "re", 2, 2048, 20);
    older["payload"]["compute_node_uuid"] = json!(new_uuid);
    older["timestamp"] = json!("2026-11-25 17:13:16.000000");
    let (status, body) = post(&app, &older).await;
    assert_eq!(status, 200, "{body}");
    let hosts = hosts_named(&app, "re").await;
    let new = hosts
        .iter()
        .find(|h| h["compute_node_uuid"] == new_uuid.as_str())
        .unwrap();
    assert_eq!(new["inventories"]["VCPU"]["total"], 8, "{new}");
    let stats = app.get_json("/v1/stats").await;
    assert_eq!(stats["hosts"]["older_events"], 1, "{stats}");
    assert_eq!(
        app.metric("parasol_host_events_older_total")
            .await
            .as_deref(),
        Some("1")
    );
}
on_both_engines!(
    a_re_created_node_and_an_older_event_over_http,
    super::a_re_created_node_and_an_older_event_over_http
);
