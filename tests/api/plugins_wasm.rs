//! The in-process WebAssembly transport (feature `wasm-plugins`; docs/plugins.md §8), through
//! the real service as the webhook tests: issue 47's first two examples as modules
//! (`tests/wasm/*.wat`) change the outcome as their webhooks do, and a module that runs out of
//! fuel, grows past its memory, traps or answers what is not JSON fails as a webhook that
//! errs — NoValidHost naming it, or skipped when ignorable — counted the same way.

use super::helpers::{flavor, hosts_of};
use super::plugin_examples;
use super::plugins::{
    app_with, figures, nothing_claimed, tenant_x_is_kept_off_hosts_in_maintenance,
};
use crate::plugin_server::{wasm_module, wasm_plugin, GPU_TRAIT};
use parasol::plugins::{PluginEvent, PluginSettings, PluginSpec};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wasm_select_plugin_keeps_tenant_x_off_hosts_in_maintenance() {
    let module = wasm_module("maintenance");
    let app = app_with(
        "sqlite",
        vec![wasm_plugin("maintenance", PluginEvent::Select, &module)],
    )
    .await;
    tenant_x_is_kept_off_hosts_in_maintenance(&app).await;
    let chain = &app.get_json("/v1/stats").await["plugin_chains"]["select"][0];
    assert_eq!(chain["transport"], "wasm", "{chain}");
    assert_eq!(chain["module"], module.display().to_string(), "{chain}");
    assert_eq!(chain["instances"], "kept and reset", "{chain}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wasm_select_plugin_adds_a_trait_for_a_flavor_family() {
    let module = wasm_module("flavor_family");
    let app = plugin_examples::app_with(
        vec![wasm_plugin("gpu-family", PluginEvent::Select, &module)],
        &[
            ("big", 16384, json!([])),
            ("gpu", 8192, json!([GPU_TRAIT])),
            ("small", 4096, json!([])),
        ],
    )
    .await;
    plugin_examples::the_gpu_family_gets_only_the_host_with_its_trait(&app).await;
}

/// Each way a module can fail: NoValidHost naming the plugin and what went wrong, counted as
/// an error, nothing claimed — and the same module made ignorable lets the call on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_wasm_plugin_that_is_not_ignorable_is_no_valid_host_naming_it() {
    let cases = [
        ("endless", "ran out of fuel (100000 units)"),
        ("greedy", "went past its memory limit of 4 pages"),
        ("trap", "trapped in filter"),
        ("garbage", "not JSON"),
    ];
    for (name, detail) in cases {
        let module = wasm_module(name);
        let failing = PluginSpec {
            fuel: Some(100_000),
            memory_pages: Some(4),
            ..wasm_plugin("site-rule", PluginEvent::Filter, &module)
        };
        let app = app_with("sqlite", vec![failing.clone()]).await;
        let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
        assert_eq!(status, 409, "{name}: {body}");
        assert_eq!(body["error"]["class"], "NoValidHost", "{name}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("plugin site-rule (filter)") && message.contains(detail),
            "{name}: {message}"
        );
        nothing_claimed(&app).await;
        assert_eq!(figures(&app, "filter", "site-rule").await["errors"], 1);
        let ignorable = PluginSpec {
            ignorable: true,
            ..failing
        };
        let app = app_with("sqlite", vec![ignorable]).await;
        let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
        assert_eq!(status, 200, "{name} ignorable: {body}");
        assert_eq!(hosts_of(&body)[0], "big", "{name} ignorable");
        assert_eq!(figures(&app, "filter", "site-rule").await["skipped"], 1);
    }
}

/// `config check` and start refuse a module that cannot be run, naming `module`: missing, not
/// WebAssembly, or without the export its event needs.
#[test]
fn a_wasm_plugin_whose_module_cannot_serve_its_event_is_refused() {
    let maintenance = wasm_module("maintenance");
    let not_wasm = tempfile::NamedTempFile::new().expect("a temporary file");
    std::fs::write(not_wasm.path(), "not a module").expect("write");
    let cases = [
        (
            wasm_plugin("x", PluginEvent::Select, "/nonexistent.wasm".as_ref()),
            "cannot read",
        ),
        (
            wasm_plugin("x", PluginEvent::Select, not_wasm.path()),
            "not a valid WebAssembly module",
        ),
        (
            wasm_plugin("x", PluginEvent::Filter, &maintenance),
            "exports no function filter(i32, i32) -> i64",
        ),
    ];
    for (spec, detail) in cases {
        let settings = PluginSettings {
            chain: vec![spec],
            ..PluginSettings::default()
        };
        let (key, message) = settings.validate().expect_err(detail);
        assert_eq!(key, "chain[0].module", "{message}");
        assert!(message.contains(detail), "{message}");
    }
    let fine = PluginSettings {
        chain: vec![wasm_plugin("x", PluginEvent::Select, &maintenance)],
        ..PluginSettings::default()
    };
    assert_eq!(fine.validate(), Ok(()));
}
