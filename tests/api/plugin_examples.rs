//! Issue 47's examples as webhooks the tests run (and, with the feature `wasm-plugins`, the
//! first two as WebAssembly modules: `plugins_wasm.rs`) (`support/plugin_server.rs`): a `select`
//! plugin that adds a trait for a flavor family, and a `weigh` plugin that follows an outside
//! carbon-intensity feed (a file the test writes and rewrites). The first example, keeping a
//! tenant off hosts in maintenance, is `plugins.rs`'
//! `a_select_plugin_forbidding_a_trait_keeps_the_tenant_off_hosts_with_it`.

use super::helpers::hosts_of;
use super::helpers::{flavor, host_state_event, settings, spawn_with, TestApp};
use crate::plugin_server::{plugin, PluginServer, GPU_TRAIT};
use parasol::configuration::BackendKind;
use parasol::plugins::{PluginEvent, PluginSpec};
use serde_json::{json, Value};

/// A filter-backend app with `chain` and `hosts` (name, MiB of RAM, traits); Nova's default
/// weighers rank them by free RAM.
pub(super) async fn app_with(chain: Vec<PluginSpec>, hosts: &[(&str, i64, Value)]) -> TestApp {
    let (mut s, db) = settings("sqlite", BackendKind::Filter).await;
    s.plugins.chain = chain;
    let app = spawn_with(s, db).await;
    for (host, ram, traits) in hosts {
        let mut event = host_state_event(&uuid::Uuid::new_v4().to_string(), host, 8, *ram, 100);
        event["payload"]["traits"] = traits.clone();
        let resp = app.post("/v1/notifications", &event).await;
        assert_eq!(resp.status(), 200, "registering {host}");
    }
    app
}

pub(super) fn named(name: &str) -> Value {
    let mut f = flavor(1, 512, 1);
    f["nova_object.data"]["name"] = json!(name);
    f
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_select_plugin_adds_a_trait_for_a_flavor_family() {
    let server = PluginServer::start().await;
    let app = app_with(
        vec![plugin(
            "gpu-family",
            PluginEvent::Select,
            server.url("/select/flavor-family"),
        )],
        &[
            ("big", 16384, json!([])),
            ("gpu", 8192, json!([GPU_TRAIT])),
            ("small", 4096, json!([])),
        ],
    )
    .await;
    the_gpu_family_gets_only_the_host_with_its_trait(&app).await;
}

/// The `gpu-family` select plugin's outcome, whatever its transport: another family is
/// approved with Parasol's ranking as without the plugin; the `gpu.` family gets only the host
/// with the family's trait, chosen and no alternate (approved, modified).
pub(super) async fn the_gpu_family_gets_only_the_host_with_its_trait(app: &TestApp) {
    let (status, body) = app.place(named("m1.small"), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hosts_of(&body), ["big", "gpu", "small"]);
    let (status, body) = app.place(named("gpu.large"), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hosts_of(&body), ["gpu"]);
    let f = &app.get_json("/v1/stats").await["plugins"]["select"]["gpu-family"];
    assert_eq!(
        (f["approvals"].as_u64(), f["modifications"].as_u64()),
        (Some(1), Some(1)),
        "{f}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_weigh_plugin_follows_a_carbon_intensity_feed() {
    let server = PluginServer::start().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let feed = dir.path().join("carbon.json");
    server.set_carbon_feed(&feed);
    let carbon = PluginSpec {
        weight_multiplier: 2.0,
        ..plugin("carbon", PluginEvent::Weigh, server.url("/weigh/carbon"))
    };
    let hosts = [
        ("big", 16384, json!([])),
        ("mid", 8192, json!([])),
        ("small", 4096, json!([])),
    ];
    let app = app_with(vec![carbon], &hosts).await;
    // gCO2/kWh: mid's grid is the cleanest. Rank scores big 1, mid 0.5, small 0; the feed's
    // normalised weights × 2: big 0, mid 2, small 0.91.
    std::fs::write(&feed, r#"{"big": 450, "mid": 120, "small": 300}"#).expect("write the feed");
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hosts_of(&body), ["mid", "big", "small"]);
    // The feed changes: big's grid is now the cleanest, mid's the dirtiest.
    std::fs::write(&feed, r#"{"big": 50, "mid": 400, "small": 300}"#).expect("write the feed");
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hosts_of(&body), ["big", "small", "mid"]);
    assert_eq!(
        app.get_json("/v1/stats").await["plugins"]["weigh"]["carbon"]["modifications"],
        2
    );
}
