//! Operator plugins (docs/plugins.md) against a real webhook (`support/plugin_server.rs`, an
//! actix-web server in the test process): each event changes the outcome as documented, a
//! failing plugin is skipped when ignorable and otherwise ends the call with NoValidHost naming
//! it, nothing stays claimed after a denial, and every call is counted per plugin.

use super::helpers::{flavor, host_state_event, hosts_of, settings, spawn_with, TestApp};
use crate::on_both_engines;
use crate::plugin_server::{plugin, PluginServer, DENY_REASON, MAINTENANCE_TRAIT};
use parasol::configuration::BackendKind;
use parasol::plugins::{PluginEvent, PluginSettings, PluginSpec};
use serde_json::{json, Value};

/// A filter-backend app with `chain`, and three hosts the default (Nova) weighers rank
/// `big`, `mid`, `small` by free RAM; `big` carries the maintenance trait.
pub(super) async fn app_with(engine: &str, chain: Vec<PluginSpec>) -> TestApp {
    let plugins = PluginSettings {
        chain,
        ..PluginSettings::default()
    };
    app_with_plugins(engine, plugins).await
}

async fn app_with_plugins(engine: &str, plugins: PluginSettings) -> TestApp {
    app_on(engine, BackendKind::Filter, plugins).await
}

/// [`app_with_plugins`] on `backend`; a snapshot backend is rebuilt once the hosts are
/// registered, so that its first snapshot holds them.
async fn app_on(engine: &str, backend: BackendKind, plugins: PluginSettings) -> TestApp {
    let (mut s, db) = settings(engine, backend).await;
    s.plugins = plugins;
    let app = spawn_with(s, db).await;
    for (host, ram, traits) in [
        ("big", 16384, json!([MAINTENANCE_TRAIT])),
        ("mid", 8192, json!([])),
        ("small", 4096, json!([])),
    ] {
        let mut event = host_state_event(&uuid::Uuid::new_v4().to_string(), host, 8, ram, 100);
        event["payload"]["traits"] = traits;
        let resp = app.post("/v1/notifications", &event).await;
        assert_eq!(resp.status(), 200, "registering {host}");
    }
    app.rebuild_backend().await;
    app
}

/// `value` has exactly the keys `etc/plugin-schema.json` requires of definition `def` (every
/// definition Parasol sends lists all its keys as required and allows no others).
pub(crate) fn assert_schema_keys(def: &str, value: &Value) {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/etc/plugin-schema.json"
        ))
        .expect("etc/plugin-schema.json"),
    )
    .expect("the schema is JSON");
    let def = &schema["$defs"][def];
    let mut required: Vec<&str> = def["required"]
        .as_array()
        .expect("required keys")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let mut sent: Vec<&str> = value
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    required.sort();
    sent.sort();
    assert_eq!(sent, required, "{value}");
    for key in &sent {
        assert!(
            def["properties"].get(*key).is_some(),
            "{key} is not described"
        );
    }
}

pub(super) async fn figures(app: &TestApp, event: &str, name: &str) -> Value {
    app.get_json("/v1/stats").await["plugins"][event][name].clone()
}

pub(super) async fn nothing_claimed(app: &TestApp) {
    let used = app.used().await;
    assert!(
        used.iter().all(|(_, v, m, d)| (*v, *m, *d) == (0, 0, 0)),
        "claims left: {used:?}"
    );
}

async fn a_select_plugin_that_denies_is_no_valid_host_with_its_reason(engine: &str) {
    let server = PluginServer::start().await;
    let app = app_with(
        engine,
        vec![plugin(
            "freeze",
            PluginEvent::Select,
            server.url("/select/deny"),
        )],
    )
    .await;
    let (status, body) = app.place(flavor(1, 512, 1), 2, json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["class"], "NoValidHost");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(DENY_REASON), "{message}");
    assert!(message.contains("freeze"), "{message}");
    nothing_claimed(&app).await;
    // The plugin saw the call as Nova asked it.
    let sent = server.seen("/select/deny");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["event"], "select");
    assert_eq!(sent[0]["request"]["num_instances"], 2);
    assert_eq!(sent[0]["request"]["flavor"]["memory_mb"], 512);
    assert_schema_keys("SelectRequest", &sent[0]["request"]);
    let f = figures(&app, "select", "freeze").await;
    assert_eq!(
        (f["calls"].as_u64(), f["denials"].as_u64()),
        (Some(1), Some(1)),
        "{f}"
    );
    assert_eq!(f["latency_ms"]["count"], 1);
    let metrics = app.metrics_text().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("parasol_plugin_calls_total{")
                && l.contains("plugin=\"freeze\"")
                && l.contains("outcome=\"denied\"")
                && l.ends_with(" 1")),
        "{metrics}"
    );
    assert!(metrics.contains("parasol_plugin_call_duration_seconds_count{"));
}
on_both_engines!(
    a_select_plugin_that_denies_is_no_valid_host_with_its_reason,
    super::a_select_plugin_that_denies_is_no_valid_host_with_its_reason
);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_select_plugin_forbidding_a_trait_keeps_the_tenant_off_hosts_with_it() {
    let server = PluginServer::start().await;
    let app = app_with(
        "sqlite",
        vec![plugin(
            "maintenance",
            PluginEvent::Select,
            server.url("/select/maintenance"),
        )],
    )
    .await;
    tenant_x_is_kept_off_hosts_in_maintenance(&app).await;
}

/// The `maintenance` select plugin's outcome, whatever its transport: another tenant gets the
/// best host as without the plugin (approved); tenant X has the maintenance trait forbidden, so
/// `big`, which carries it, is neither chosen nor an alternate (approved, modified).
pub(super) async fn tenant_x_is_kept_off_hosts_in_maintenance(app: &TestApp) {
    let (status, body) = app
        .place(flavor(1, 512, 1), 1, json!({"project_id": "other"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hosts_of(&body)[0], "big");
    let (status, body) = app
        .place(flavor(1, 512, 1), 1, json!({"project_id": "tenant-x"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hosts_of(&body), ["mid", "small"]);
    let f = figures(app, "select", "maintenance").await;
    assert_eq!(
        (f["approvals"].as_u64(), f["modifications"].as_u64()),
        (Some(1), Some(1)),
        "{f}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_select_plugin_changing_the_flavor_is_refused_and_counted() {
    let server = PluginServer::start().await;
    let app = app_with(
        "sqlite",
        vec![plugin(
            "resizer",
            PluginEvent::Select,
            server.url("/select/change-flavor"),
        )],
    )
    .await;
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 409, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("resizer") && message.contains("flavor"),
        "{message}"
    );
    nothing_claimed(&app).await;
    let f = figures(&app, "select", "resizer").await;
    assert_eq!(
        (f["refused"].as_u64(), f["skipped"].as_u64()),
        (Some(1), Some(0)),
        "{f}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_filter_plugin_removing_the_best_host_moves_the_choice_to_the_next() {
    let server = PluginServer::start().await;
    let app = app_with(
        "sqlite",
        vec![plugin(
            "keep-best",
            PluginEvent::Filter,
            server.url("/filter/remove-best"),
        )],
    )
    .await;
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hosts_of(&body), ["mid", "small"]);
    // It was offered Parasol's ranking: all three hosts (K = 2 × max(3, 1) = 6), best first.
    let sent = server.seen("/filter/remove-best");
    assert_eq!(sent.len(), 1);
    let offered: Vec<&str> = sent[0]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["host"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["big", "mid", "small"]);
    assert_eq!(sent[0]["request"]["resources"]["MEMORY_MB"], 512);
    assert_schema_keys("PluginRequest", &{
        let mut top = sent[0].clone();
        top.as_object_mut().unwrap().remove("candidates");
        top
    });
    assert_schema_keys("InstanceRequest", &sent[0]["request"]);
    assert_schema_keys("Candidate", &sent[0]["candidates"][0]);
    let f = figures(&app, "filter", "keep-best").await;
    assert_eq!(f["modifications"], 1, "{f}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_weigh_plugin_reorders_the_candidates_by_its_weights_times_its_multiplier() {
    let server = PluginServer::start().await;
    let prefer = |multiplier: f64| PluginSpec {
        weight_multiplier: multiplier,
        ..plugin(
            "carbon",
            PluginEvent::Weigh,
            server.url("/weigh/prefer/small"),
        )
    };
    // Multiplier 2: `small` (Parasol's last, rank score 0) gets 2 and passes `big` (1).
    let app = app_with("sqlite", vec![prefer(2.0)]).await;
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hosts_of(&body), ["small", "big", "mid"]);
    assert_eq!(figures(&app, "weigh", "carbon").await["modifications"], 1);
    // Multiplier 0.25: not enough to pass anyone; Parasol's order stands.
    let app = app_with("sqlite", vec![prefer(0.25)]).await;
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hosts_of(&body), ["big", "mid", "small"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_ignorable_plugin_is_skipped_and_counted() {
    let server = PluginServer::start().await;
    let slow = PluginSpec {
        timeout_ms: 100,
        ignorable: true,
        ..plugin("slow", PluginEvent::Filter, server.url("/slow"))
    };
    let app = app_with("sqlite", vec![slow]).await;
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hosts_of(&body)[0], "big");
    let f = figures(&app, "filter", "slow").await;
    assert_eq!(
        (f["timeouts"].as_u64(), f["skipped"].as_u64()),
        (Some(1), Some(1)),
        "{f}"
    );
    let metrics = app.metrics_text().await;
    assert!(
        metrics.lines().any(|l| l.contains("plugin=\"slow\"")
            && l.contains("outcome=\"skipped\"")
            && l.ends_with(" 1")),
        "{metrics}"
    );
}

/// Each failure of a plugin that is not ignorable: NoValidHost naming the plugin, counted
/// under its outcome, nothing claimed — and the same plugin made ignorable lets the call on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_plugin_that_is_not_ignorable_is_no_valid_host_naming_it() {
    let server = PluginServer::start().await;
    let cases = [
        (PluginEvent::Weigh, "/fail", "errors", "500"),
        (PluginEvent::Filter, "/garbage", "errors", "not JSON"),
        (
            PluginEvent::Filter,
            "/filter/remove-unknown",
            "refused",
            "not offered",
        ),
        (PluginEvent::Select, "/slow", "timeouts", "did not answer"),
        (PluginEvent::Select, "/nowhere", "errors", "404"),
    ];
    for (event, path, counter, detail) in cases {
        let failing = PluginSpec {
            timeout_ms: 100,
            ..plugin("site-rule", event, server.url(path))
        };
        let app = app_with("sqlite", vec![failing.clone()]).await;
        let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
        assert_eq!(status, 409, "{path}: {body}");
        assert_eq!(body["error"]["class"], "NoValidHost", "{path}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("plugin site-rule") && message.contains(detail),
            "{path}: {message}"
        );
        nothing_claimed(&app).await;
        let f = figures(&app, event.as_str(), "site-rule").await;
        assert_eq!(f[counter], 1, "{path}: {f}");
        let ignorable = PluginSpec {
            ignorable: true,
            ..failing
        };
        let app = app_with("sqlite", vec![ignorable]).await;
        let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
        assert_eq!(status, 200, "{path} ignorable: {body}");
        assert_eq!(
            figures(&app, event.as_str(), "site-rule").await["skipped"],
            1
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chains_run_in_order_each_plugin_seeing_what_the_previous_passed_on() {
    let server = PluginServer::start().await;
    let first = PluginSpec {
        order: 10,
        ..plugin(
            "maintenance",
            PluginEvent::Select,
            server.url("/select/maintenance"),
        )
    };
    let second = PluginSpec {
        order: 20,
        ..plugin("audit", PluginEvent::Select, server.url("/select/approve"))
    };
    // Listed out of order: `order` decides.
    let app = app_with("sqlite", vec![second, first]).await;
    let (status, body) = app
        .place(flavor(1, 512, 1), 1, json!({"project_id": "tenant-x"}))
        .await;
    assert_eq!(status, 200, "{body}");
    let audit = server.seen("/select/approve");
    assert_eq!(audit.len(), 1);
    // Nova's own forbidden trait, then the first plugin's addition.
    assert_eq!(
        audit[0]["request"]["forbidden_traits"],
        json!(["COMPUTE_STATUS_DISABLED", MAINTENANCE_TRAIT]),
        "the second plugin sees the first one's change"
    );
    let chains = &app.get_json("/v1/stats").await["plugin_chains"];
    let names: Vec<&str> = chains["select"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["maintenance", "audit"]);
    assert_eq!(chains["candidates"], 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claimed_plugins_are_told_each_placed_call_s_claims_after_the_answer() {
    let server = PluginServer::start().await;
    let app = app_with(
        "sqlite",
        vec![plugin(
            "ledger-audit",
            PluginEvent::Claimed,
            server.url("/claimed"),
        )],
    )
    .await;
    let (status, body) = app.place(flavor(1, 512, 1), 2, json!({})).await;
    assert_eq!(status, 200, "{body}");
    // A call that claims nothing is not told: the next notification is the next placed call's.
    let (status, _) = app.place(flavor(64, 512, 1), 1, json!({})).await;
    assert_eq!(status, 409);
    let (status, third) = app.place(flavor(2, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{third}");
    server.wait_for("/claimed", 2).await;
    let told = server.seen("/claimed");
    assert_eq!(told.len(), 2);
    assert_eq!(told[0]["event"], "claimed");
    assert_schema_keys("ClaimedRequest", &told[0]["request"]);
    assert_schema_keys("Claim", &told[0]["claims"][0]);
    assert_schema_keys("PluginRequest", &{
        let mut top = told[0].clone();
        top.as_object_mut().unwrap().remove("claims");
        top
    });
    let claims = told[0]["claims"].as_array().unwrap();
    assert_eq!(claims.len(), 2);
    let told_hosts: Vec<&str> = claims.iter().map(|c| c["host"].as_str().unwrap()).collect();
    let chosen: Vec<&str> = (0..2)
        .map(|i| {
            body[i][0]["nova_object.data"]["service_host"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(told_hosts, chosen);
    assert_eq!(told[1]["claims"][0]["resources"]["VCPU"], 2);
    let chains = &app.get_json("/v1/stats").await["plugin_chains"];
    assert_eq!(chains["claimed"][0]["name"], "ledger-audit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_claimed_queue_drops_and_counts_without_delaying_calls() {
    let server = PluginServer::start().await;
    let gated = PluginSpec {
        timeout_ms: 30_000,
        ..plugin("slow-audit", PluginEvent::Claimed, server.url("/gate"))
    };
    let app = app_with_plugins(
        "sqlite",
        PluginSettings {
            claimed_queue: 1,
            chain: vec![gated],
            ..PluginSettings::default()
        },
    )
    .await;
    // The plugin answers none of them yet: one notification is in its hands at most, one
    // waits in the queue, the rest are dropped; every call is answered meanwhile.
    for _ in 0..3 {
        let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
        assert_eq!(status, 200, "{body}");
    }
    let f = figures(&app, "claimed", "slow-audit").await;
    let dropped = f["dropped"].as_u64().unwrap();
    assert!((1..=2).contains(&dropped), "{f}");
    let metrics = app.metrics_text().await;
    assert!(
        metrics.lines().any(|l| l.contains("plugin=\"slow-audit\"")
            && l.contains("outcome=\"dropped\"")
            && l.ends_with(&format!(" {dropped}"))),
        "{metrics}"
    );
    server.open_gate(3);
    server.wait_for("/gate", 3 - dropped as usize).await;
    assert_eq!(server.seen("/gate").len(), 3 - dropped as usize);
}

/// The hook is the placement loop every backend shares: on each, the host a filter plugin
/// removes is neither chosen nor an alternate.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_filter_plugin_removes_its_host_on_every_backend() {
    let server = PluginServer::start().await;
    for backend in BackendKind::ALL {
        let plugins = PluginSettings {
            chain: vec![plugin(
                "keep-best",
                PluginEvent::Filter,
                server.url("/filter/remove-best"),
            )],
            ..PluginSettings::default()
        };
        let app = app_on("sqlite", backend, plugins).await;
        let before = server.seen("/filter/remove-best").len();
        let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
        assert_eq!(status, 200, "{backend:?}: {body}");
        let sent = server.seen("/filter/remove-best");
        assert_eq!(sent.len(), before + 1, "{backend:?}");
        let removed = sent[before]["candidates"][0]["host"]
            .as_str()
            .unwrap()
            .to_string();
        let chosen = hosts_of(&body);
        assert!(
            !chosen.contains(&removed),
            "{backend:?}: {removed} in {chosen:?}"
        );
        assert_eq!(
            chosen.len(),
            sent[before]["candidates"].as_array().unwrap().len() - 1,
            "{backend:?}: every other candidate is the pick or an alternate"
        );
    }
}

/// A chain of one webhook plugin.
fn chain_of(spec: PluginSpec) -> PluginSettings {
    PluginSettings {
        chain: vec![spec],
        ..PluginSettings::default()
    }
}

/// The other verbs on every backend, as the filter's above (issue 47: "each verb changes the
/// outcome as documented, on every backend"): a `select` plugin that forbids the maintenance
/// trait keeps tenant X off `big` (neither chosen nor an alternate) while another tenant may
/// still get it; a `weigh` plugin whose weight outweighs the backend's ranking puts `small`
/// first on every call; a `claimed` plugin is told the hosts each call was answered with.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn select_weigh_and_claimed_plugins_change_the_outcome_on_every_backend() {
    let server = PluginServer::start().await;
    for backend in BackendKind::ALL {
        let select = plugin(
            "maintenance",
            PluginEvent::Select,
            server.url("/select/maintenance"),
        );
        let app = app_on("sqlite", backend, chain_of(select)).await;
        let mut others = Vec::new();
        for _ in 0..3 {
            let (status, body) = app
                .place(flavor(1, 512, 1), 1, json!({"project_id": "tenant-x"}))
                .await;
            assert_eq!(status, 200, "{backend:?}: {body}");
            let hosts = hosts_of(&body);
            assert!(
                !hosts.contains(&"big".to_string()),
                "{backend:?}: {hosts:?}"
            );
            assert_eq!(hosts.len(), 2, "{backend:?}: mid and small, {hosts:?}");
            let (status, body) = app
                .place(flavor(1, 512, 1), 1, json!({"project_id": "other"}))
                .await;
            assert_eq!(status, 200, "{backend:?}: {body}");
            others.extend(hosts_of(&body));
        }
        assert!(
            others.contains(&"big".to_string()),
            "{backend:?}: another tenant is offered big: {others:?}"
        );
        let f = figures(&app, "select", "maintenance").await;
        assert_eq!(
            (f["approvals"].as_u64(), f["modifications"].as_u64()),
            (Some(3), Some(3)),
            "{backend:?}: {f}"
        );

        // A weight of 1 × 10 beats any ranking's spread (a backend's own scores lie in [0, 1]).
        let weigh = PluginSpec {
            weight_multiplier: 10.0,
            ..plugin(
                "prefer-small",
                PluginEvent::Weigh,
                server.url("/weigh/prefer/small"),
            )
        };
        let app = app_on("sqlite", backend, chain_of(weigh)).await;
        for _ in 0..3 {
            let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
            assert_eq!(status, 200, "{backend:?}: {body}");
            let hosts = hosts_of(&body);
            assert_eq!(
                hosts.first().map(String::as_str),
                Some("small"),
                "{backend:?}: {hosts:?}"
            );
            assert_eq!(
                hosts.len(),
                3,
                "{backend:?}: the others stay alternates, {hosts:?}"
            );
        }
        let f = figures(&app, "weigh", "prefer-small").await;
        assert_eq!(f["modifications"], 3, "{backend:?}: {f}");

        let claimed = plugin("audit", PluginEvent::Claimed, server.url("/claimed"));
        let app = app_on("sqlite", backend, chain_of(claimed)).await;
        let before = server.seen("/claimed").len();
        let (status, body) = app.place(flavor(1, 512, 1), 2, json!({})).await;
        assert_eq!(status, 200, "{backend:?}: {body}");
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            server.wait_for("/claimed", before + 1),
        )
        .await
        .unwrap_or_else(|_| panic!("{backend:?}: the claimed plugin was never told"));
        let told = &server.seen("/claimed")[before];
        let told: Vec<&str> = told["claims"]
            .as_array()
            .expect("claims")
            .iter()
            .map(|c| c["host"].as_str().unwrap_or("?"))
            .collect();
        let chosen: Vec<&str> = (0..2)
            .map(|i| {
                body[i][0]["nova_object.data"]["service_host"]
                    .as_str()
                    .unwrap_or("?")
            })
            .collect();
        assert_eq!(told, chosen, "{backend:?}");
    }
}

/// Batch placement solves a multi-create as one assignment, where no instance's candidates
/// are shown to a filter plugin: with filter or weigh plugins every call goes one instance
/// at a time, so the plugin's removal holds for each instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_candidate_plugins_a_batch_multi_create_is_placed_one_instance_at_a_time() {
    let server = PluginServer::start().await;
    let (mut s, db) = settings("sqlite", BackendKind::Filter).await;
    s.batch.mode = parasol::configuration::BatchMode::Call;
    s.plugins.chain = vec![plugin(
        "no-big",
        PluginEvent::Filter,
        server.url("/filter/remove-best"),
    )];
    let app = spawn_with(s, db).await;
    for (host, ram) in [("big", 16384), ("mid", 8192), ("small", 4096)] {
        app.register(host, 8, ram, 100).await;
    }
    let (status, body) = app.place(flavor(1, 512, 1), 2, json!({})).await;
    assert_eq!(status, 200, "{body}");
    let sent = server.seen("/filter/remove-best");
    assert_eq!(sent.len(), 2, "one filter call per instance");
    for (i, call) in sent.iter().enumerate() {
        let removed = call["candidates"][0]["host"].as_str().unwrap();
        let chosen = body[i][0]["nova_object.data"]["service_host"]
            .as_str()
            .unwrap();
        assert_ne!(chosen, removed, "instance {i}");
    }
}
