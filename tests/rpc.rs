//! Parasol's oslo.messaging RPC server against the real RabbitMQ, driven by Parasol's own
//! oslo client: dispatcher errors, malformed input, duplicates, heartbeats, ping, placement,
//! an operator plugin's denial as Nova's NoValidHost.

#[path = "support/mod.rs"]
mod support;

#[path = "api/helpers.rs"]
#[allow(dead_code)]
mod helpers;

#[path = "support/plugin_server.rs"]
mod plugin_server;

use helpers::{flavor, request_spec, spawn_with_clock, uuids, TestApp};
use lapin::options::BasicGetOptions;
use lapin::types::AMQPValue;
use parasol::amqp::topology::{REASON_HEADER, ROUTING_KEY_HEADER};
use parasol::clock::{Clock, ManualClock, SharedClock, SystemClock};
use parasol::configuration::{BackendKind, Settings};
use parasol::nova::encode_envelope;
use parasol::rpc::{run_rpc_server, RpcCounters};
use parasol_rpc_client::{CallReply, RpcClient};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
const WAIT: Duration = Duration::from_secs(20);

struct Rpc {
    app: TestApp,
    client: RpcClient,
    counters: Arc<RpcCounters>,
    topic: String,
    _stop: tokio_util::sync::DropGuard,
}

/// A service on SQLite with the RPC server on its own exchange and topic, plus a client.
async fn spawn_rpc(debug_delay_s: f64) -> Rpc {
    spawn_rpc_with(|s| s.rpc.debug_delay_s = debug_delay_s).await
}

/// [`spawn_rpc`] with further settings applied last.
async fn spawn_rpc_with(configure: impl FnOnce(&mut Settings)) -> Rpc {
    spawn_rpc_on(Arc::new(SystemClock), configure).await
}

/// [`spawn_rpc_with`] on a clock of the test's choosing.
async fn spawn_rpc_on(clock: SharedClock, configure: impl FnOnce(&mut Settings)) -> Rpc {
    let db = support::sqlite_db();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let mut s = Settings::default();
    // No log written out per test service (the binary's tests keep the default).
    s.ledger.wal_prewrite_mib = 0;
    s.ledger.url = db.url.clone();
    s.scheduler.backend = BackendKind::Filter;
    s.scheduler.seed = Some(7);
    s.amqp.url = AMQP_URL.into();
    s.amqp.exchange = format!("parasol_test_{id}");
    s.rpc.enabled = true;
    s.rpc.topic = format!("scheduler_{id}");
    s.rpc.host = "rpc-test".into();
    configure(&mut s);
    let (exchange, topic) = (s.amqp.exchange.clone(), s.rpc.topic.clone());
    let app = spawn_with_clock(s, db, clock).await;
    let counters = app.handles.rpc.clone();
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(run_rpc_server(app.handles.rpc_deps(), stop.clone()));
    let client = RpcClient::connect(AMQP_URL, &exchange)
        .await
        .expect("RabbitMQ must be running (`./test` starts it)");
    let rpc = Rpc {
        app,
        client,
        counters,
        topic,
        _stop: stop.drop_guard(),
    };
    rpc.wait_until_serving().await;
    rpc
}

impl Rpc {
    /// Pings until the server has declared its queue and answers.
    async fn wait_until_serving(&self) {
        for _ in 0..100 {
            let m =
                self.client
                    .call_message("ping", json!({"arg": 0}), "1.0", Some("baseapi"), None);
            if self
                .client
                .call_with(&self.topic, &m, Duration::from_millis(200))
                .await
                .is_ok()
            {
                return;
            }
        }
        panic!("the RPC server never answered");
    }

    async fn call(&self, method: &str, args: Value, version: &str) -> CallReply {
        self.client
            .call(&self.topic, method, args, version, WAIT)
            .await
            .expect("a reply")
    }

    /// Registers a host and makes a select_destinations call for it with oslo's `_timeout`
    /// of 2 s (so a heartbeat every second).
    async fn timed_select(&self) -> Value {
        self.app.register("c1", 4, 8192, 100).await;
        let args = select_args(1, 1);
        self.client
            .call_message("select_destinations", args, "4.5", None, Some(2))
    }

    /// Waits until `outcome` reached `n`, or fails after 10 s.
    async fn wait_count(&self, outcome: &str, n: u64) {
        for _ in 0..200 {
            if self.counters.get(outcome) >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{outcome} never reached {n}: {}", self.counters.to_json());
    }
}

/// Waits (10 s at most) until every one of `deadlines` is pending on `clock`.
async fn wait_for_deadlines(clock: &ManualClock, deadlines: &[i64]) {
    for _ in 0..1_000 {
        let pending = clock.deadlines();
        if deadlines.iter().all(|d| pending.contains(d)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "{deadlines:?} never pending on the clock: {:?}",
        clock.deadlines()
    );
}

fn failure_class(reply: &CallReply) -> (String, String, String) {
    let f = reply.failure.as_ref().expect("a failure");
    let s = |k: &str| f[k].as_str().unwrap_or_default().to_string();
    (s("class"), s("module"), s("message"))
}

fn select_args(n: usize, vcpus: i64) -> Value {
    json!({"spec_obj": request_spec(flavor(vcpus, 512, 1), n, json!({})), "instance_uuids": uuids(n),
           "return_objects": true, "return_alternates": true})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ping_returns_the_service_and_its_argument_as_nova_s_base_rpc_api() {
    let rpc = spawn_rpc(0.0).await;
    let m = rpc.client.call_message(
        "ping",
        json!({"arg": {"a": [1, "x"]}}),
        "1.1",
        Some("baseapi"),
        None,
    );
    let reply = rpc.client.call_with(&rpc.topic, &m, WAIT).await.unwrap();
    assert_eq!(reply.failure, None);
    assert_eq!(
        reply.result,
        json!({"service": "scheduler", "arg": {"a": [1, "x"]}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn select_destinations_answers_at_every_supported_version_and_raises_no_valid_host() {
    let rpc = spawn_rpc(0.0).await;
    for h in ["c1", "c2", "c3"] {
        rpc.app.register(h, 4, 8192, 100).await;
    }
    let spec = request_spec(flavor(1, 512, 1), 1, json!({}));
    let legacy_spec = json!({"instance_properties": {"uuid": uuids(1)[0], "memory_mb": 512, "vcpus": 1,
        "root_gb": 1, "ephemeral_gb": 0, "project_id": "p"},
        "instance_type": {"memory_mb": 512, "vcpus": 1, "root_gb": 1, "ephemeral_gb": 0, "swap": 0},
        "num_instances": 1, "instance_uuids": uuids(1)});
    let cases = [
        (
            "4.0",
            json!({"request_spec": legacy_spec, "filter_properties": {}}),
        ),
        ("4.3", json!({"spec_obj": spec})),
        ("4.4", json!({"spec_obj": spec, "instance_uuids": uuids(1)})),
        ("4.5", select_args(1, 1)),
    ];
    for (version, args) in cases {
        let reply = rpc.call("select_destinations", args, version).await;
        assert_eq!(reply.failure, None, "{version}");
        if version == "4.5" {
            let per_instance = reply.result.as_array().expect("list per instance");
            assert_eq!(per_instance.len(), 1);
            let sel = &per_instance[0][0];
            assert_eq!(sel["nova_object.name"], "Selection");
            assert_eq!(sel["nova_object.version"], "1.1");
            assert_eq!(
                per_instance[0].as_array().unwrap().len(),
                3,
                "pick + 2 alternates"
            );
        } else {
            let hosts = reply.result.as_array().expect("legacy host list");
            assert_eq!(hosts.len(), 1, "{version}: {}", reply.result);
            assert!(hosts[0]["host"].as_str().unwrap().starts_with('c'));
            assert!(hosts[0].get("nodename").is_some() && hosts[0].get("limits").is_some());
        }
    }
    let reply = rpc
        .call("select_destinations", select_args(1, 64), "4.5")
        .await;
    let (class, module, message) = failure_class(&reply);
    assert_eq!(
        (class.as_str(), module.as_str()),
        ("NoValidHost", "nova.exception")
    );
    assert!(message.starts_with("No valid host was found."), "{message}");
    let used: i64 = rpc.app.used().await.iter().map(|h| h.1).sum();
    assert_eq!(
        used, 4,
        "four placements claimed one VCPU each, the refused one none"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn versions_beyond_4_5_are_unsupported_and_unknown_methods_are_no_such_method() {
    let rpc = spawn_rpc(0.0).await;
    for version in ["4.6", "5.0", "3.0"] {
        let reply = rpc
            .call("select_destinations", select_args(1, 1), version)
            .await;
        assert_eq!(
            failure_class(&reply),
            (
                "UnsupportedVersion".into(),
                "oslo_messaging.rpc.dispatcher".into(),
                format!("Endpoint does not support RPC version {version}. Attempted method: select_destinations")
            )
        );
    }
    let reply = rpc.call("frobnicate", json!({}), "4.0").await;
    assert_eq!(failure_class(&reply).0, "NoSuchMethod");
    assert_eq!(
        failure_class(&reply).2,
        "Endpoint does not support RPC method frobnicate"
    );
    assert_eq!(rpc.counters.get("unsupported_version"), 3);
    assert_eq!(rpc.counters.get("no_such_method"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn malformed_messages_are_answered_or_dead_lettered_and_the_server_keeps_serving() {
    // A dead-letter name of this test's own: the server must use `[amqp] dead_letter`.
    let dead_letter = format!("parasol_test_{}.dead_letter", uuid::Uuid::new_v4().simple());
    let name = dead_letter.clone();
    let rpc = spawn_rpc_with(move |s| s.amqp.dead_letter = name).await;
    let c = &rpc.client;
    // No reply queue can be read: dead-lettered.
    c.publish(&rpc.topic, b"not json at all").await.unwrap();
    c.publish(
        &rpc.topic,
        br#"{"oslo.version": "2.0", "oslo.message": "{\"args\": {}}"}"#,
    )
    .await
    .unwrap();
    // A cast nobody serves: dead-lettered too.
    c.cast(&rpc.topic, "frobnicate", json!({}), "4.0")
        .await
        .unwrap();
    rpc.wait_count("dead_letter", 3).await;
    // A call without a method but with a reply queue: answered with a failure.
    let mut m = c.call_message("x", json!({}), "4.5", None, None);
    m.as_object_mut().unwrap().remove("method");
    let reply = c.call_with(&rpc.topic, &m, WAIT).await.unwrap();
    assert_eq!(failure_class(&reply).0, "ValueError");
    assert!(failure_class(&reply).2.contains("method is missing"));
    // Wrong types inside select_destinations' arguments: a failure naming the field.
    for args in [
        json!({"spec_obj": 3}),
        json!({"spec_obj": request_spec(flavor(1, 512, 1), 1, json!({})), "return_objects": "yes"}),
        json!([1]),
    ] {
        let mut m = c.call_message("select_destinations", json!({}), "4.5", None, None);
        m["args"] = args.clone();
        let reply = c.call_with(&rpc.topic, &m, WAIT).await.unwrap();
        assert_eq!(
            failure_class(&reply).0,
            "ValueError",
            "{args}: {:?}",
            reply.failure
        );
    }
    let dead = rpc.app.scheduler.ledger().dead_letters(10).await.unwrap();
    assert_eq!(dead.iter().filter(|d| d.source == "rpc").count(), 3);
    let letters = take_dead_letters(&dead_letter, 3).await;
    assert!(
        letters
            .iter()
            .all(|(_, reason, key)| !reason.is_empty() && key == &rpc.topic),
        "{letters:?}"
    );
    assert!(letters.iter().any(|(body, _, _)| body == "not json at all"));
    assert!(letters
        .iter()
        .any(|(body, reason, _)| body.contains("frobnicate") && reason.contains("frobnicate")));
    let ping = c.call_message(
        "ping",
        json!({"arg": "still here"}),
        "1.0",
        Some("baseapi"),
        None,
    );
    let reply = c.call_with(&rpc.topic, &ping, WAIT).await.unwrap();
    assert_eq!(reply.result["arg"], "still here");
    assert_eq!(
        rpc.counters.get("malformed"),
        4,
        "three undecodable, one with non-object args"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_duplicate_unique_id_is_answered_once() {
    // One message handled at a time: the ping below is taken only once the duplicate's
    // handling has ended, and its reply follows on the reply queue whatever reply the
    // duplicate got, so that reply has been seen when the ping's arrives.
    let rpc = spawn_rpc_with(|s| s.amqp.prefetch = 1).await;
    rpc.app.register("c1", 4, 8192, 100).await;
    let m = rpc
        .client
        .call_message("select_destinations", select_args(1, 1), "4.5", None, None);
    rpc.client
        .publish(&rpc.topic, &encode_envelope(&m))
        .await
        .unwrap();
    let reply = rpc.client.call_with(&rpc.topic, &m, WAIT).await.unwrap();
    assert_eq!(reply.failure, None);
    rpc.wait_count("duplicate", 1).await;
    let ping = rpc.client.call_message(
        "ping",
        json!({"arg": "after the duplicate"}),
        "1.0",
        Some("baseapi"),
        None,
    );
    let ping = rpc.client.call_with(&rpc.topic, &ping, WAIT).await.unwrap();
    assert_eq!(ping.result["arg"], "after the duplicate");
    assert_eq!(
        rpc.client.stray_replies(),
        0,
        "the duplicate got no second reply"
    );
    // The server counts a reply once its publish has returned: the client may see it first.
    rpc.wait_count("reply", rpc.counters.get("call")).await;
    assert_eq!(rpc.counters.get("reply"), rpc.counters.get("call"));
    assert_eq!(rpc.app.used().await[0].1, 1, "placed once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_call_is_kept_alive_by_heartbeats_every_half_timeout() {
    let rpc = spawn_rpc(2.5).await;
    let m = rpc.timed_select().await;
    let reply = rpc.client.call_with(&rpc.topic, &m, WAIT).await.unwrap();
    assert_eq!(reply.failure, None);
    assert!(
        reply.heartbeats >= 2,
        "1 s apart over 2.5 s: {}",
        reply.heartbeats
    );
    // Without _timeout, no heartbeat (oslo starts no watchdog).
    let m = rpc
        .client
        .call_message("select_destinations", select_args(1, 1), "4.5", None, None);
    let reply = rpc.client.call_with(&rpc.topic, &m, WAIT).await.unwrap();
    assert_eq!(reply.heartbeats, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn heartbeats_and_the_debug_delay_follow_the_injected_clock() {
    let clock = ManualClock::new(1_000_000);
    // Shorter than the client waits (`WAIT`) and than a host stays up unheard (60 s).
    let rpc = spawn_rpc_on(Arc::new(clock.clone()), |s| s.rpc.debug_delay_s = 30.0).await;
    let m = rpc.timed_select().await;
    // The pings of `wait_until_serving` were calls and had replies.
    let (calls, replies) = (rpc.counters.get("call"), rpc.counters.get("reply"));
    let call = rpc.client.call_with(&rpc.topic, &m, WAIT);
    let drive = async {
        rpc.wait_count("call", calls + 1).await;
        // The call's delay and its first heartbeat wait on the injected clock: both deadlines
        // are armed there (on the system's clock they would never show), and until the clock
        // moves nothing was sent.
        let now = clock.now_ms();
        wait_for_deadlines(&clock, &[now + 1_000, now + 30_000]).await;
        assert_eq!(rpc.counters.get("heartbeat"), 0);
        assert_eq!(rpc.counters.get("reply"), replies);
        // A second at a time: each step sends one heartbeat and arms the next.
        for beat in 1..=2 {
            clock.advance_ms(1_000);
            rpc.wait_count("heartbeat", beat).await;
            let now = clock.now_ms();
            wait_for_deadlines(&clock, &[now + 1_000]).await;
        }
        assert_eq!(rpc.counters.get("reply"), replies, "still delayed");
        clock.advance_ms(30_000);
    };
    let (reply, ()) = tokio::join!(call, drive);
    let reply = reply.expect("a reply once the delay passed");
    assert_eq!(reply.failure, None);
    assert!(reply.heartbeats >= 2, "{}", reply.heartbeats);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn aggregate_casts_update_the_aggregates_the_request_filters_read() {
    let dead_letter = format!("parasol_test_{}.dead_letter", uuid::Uuid::new_v4().simple());
    let name = dead_letter.clone();
    let rpc = spawn_rpc_with(move |s| s.amqp.dead_letter = name).await;
    let aggregate = |uuid: &str, zone: &str| {
        json!({"nova_object.name": "Aggregate", "nova_object.namespace": "nova",
               "nova_object.version": "1.3",
               "nova_object.data": {"id": 1, "uuid": uuid, "name": "agg", "hosts": ["h1"],
                                    "metadata": {"availability_zone": zone}}})
    };
    let a = "6f1a2e4b-0000-4000-8000-00000000000a";
    let b = "6f1a2e4b-0000-4000-8000-00000000000b";
    rpc.client
        .cast(
            &rpc.topic,
            "update_aggregates",
            json!({"aggregates": [aggregate(a, "az1"), aggregate(b, "az2")]}),
            "4.1",
        )
        .await
        .unwrap();
    rpc.wait_count("update_aggregates", 1).await;
    rpc.client
        .cast(
            &rpc.topic,
            "delete_aggregate",
            json!({"aggregate": aggregate(a, "az1")}),
            "4.1",
        )
        .await
        .unwrap();
    rpc.wait_count("delete_aggregate", 1).await;
    let known = rpc.app.scheduler.cloud().aggregates();
    assert_eq!(known.len(), 1, "{known:?}");
    assert_eq!(known[0].uuid, b);
    assert_eq!(known[0].metadata["availability_zone"], "az2");
    assert_eq!(rpc.counters.get("dead_letter"), 0);
    // A cast whose aggregate cannot be read is dead-lettered, and changes nothing.
    rpc.client
        .cast(
            &rpc.topic,
            "delete_aggregate",
            json!({"aggregate": {}}),
            "4.1",
        )
        .await
        .unwrap();
    rpc.wait_count("dead_letter", 1).await;
    assert_eq!(rpc.app.scheduler.cloud().aggregates().len(), 1);
    let letters = take_dead_letters(&dead_letter, 1).await;
    assert!(letters[0].1.contains("aggregate"), "{letters:?}");
}

/// Takes `n` messages off the durable queue `queue` (body, reason and routing-key headers),
/// checks nothing more is there, then deletes the queue and its exchange.
async fn take_dead_letters(queue: &str, n: usize) -> Vec<(String, String, String)> {
    let conn = lapin::Connection::connect(AMQP_URL, lapin::ConnectionProperties::default())
        .await
        .expect("RabbitMQ");
    let ch = conn.create_channel().await.expect("channel");
    let header = |h: &Option<lapin::types::FieldTable>, k: &str| match h
        .as_ref()
        .and_then(|h| h.inner().get(k).cloned())
    {
        Some(AMQPValue::LongString(s)) => s.to_string(),
        other => format!("{other:?}"),
    };
    let mut out = Vec::new();
    for _ in 0..500 {
        if out.len() == n {
            break;
        }
        let got = ch
            .basic_get(queue, BasicGetOptions { no_ack: true })
            .await
            .expect("basic.get on the configured dead-letter queue");
        let Some(msg) = got else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let headers = msg.delivery.properties.headers();
        out.push((
            String::from_utf8_lossy(&msg.delivery.data).into_owned(),
            header(headers, REASON_HEADER),
            header(headers, ROUTING_KEY_HEADER),
        ));
    }
    assert_eq!(out.len(), n, "dead letters on {queue}: {out:?}");
    let extra = ch
        .basic_get(queue, BasicGetOptions { no_ack: true })
        .await
        .expect("basic.get");
    assert!(extra.is_none(), "more than {n} dead letters on {queue}");
    let _ = ch.queue_delete(queue, Default::default()).await;
    let _ = ch.exchange_delete(queue, Default::default()).await;
    let _ = conn.close(200, "test done").await;
    out
}

/// A `select` plugin's denial reaches nova-conductor as Nova's own NoValidHost failure with the
/// plugin's reason (docs/plugins.md §4), and a plugin that fails is NoValidHost too, not an
/// error of the RPC server.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_plugin_denial_is_nova_s_no_valid_host_over_rpc() {
    use parasol::plugins::{PluginEvent, PluginSpec, Transport};
    let server = plugin_server::PluginServer::start().await;
    let spec = |name: &str, path: &str| PluginSpec {
        name: name.into(),
        event: PluginEvent::Select,
        order: 0,
        transport: Transport::Http,
        url: server.url(path),
        module: None,
        fuel: None,
        memory_pages: None,
        timeout_ms: 5_000,
        ignorable: false,
        weight_multiplier: 1.0,
        token_file: None,
        ca_file: None,
        cert_file: None,
        key_file: None,
    };
    for (plugin, path, expected) in [
        ("freeze", "/select/deny", plugin_server::DENY_REASON),
        ("broken", "/fail", "plugin broken (select) failed"),
    ] {
        let rpc = spawn_rpc_with(|s| s.plugins.chain = vec![spec(plugin, path)]).await;
        rpc.app.register("c1", 4, 8192, 100).await;
        let reply = rpc
            .call("select_destinations", select_args(1, 1), "4.5")
            .await;
        let (class, module, message) = failure_class(&reply);
        assert_eq!(
            (class.as_str(), module.as_str()),
            ("NoValidHost", "nova.exception"),
            "{path}"
        );
        assert!(message.contains(expected), "{path}: {message}");
        let used: i64 = rpc.app.used().await.iter().map(|h| h.1).sum();
        assert_eq!(used, 0, "{path}: nothing claimed");
    }
}

/// Each verb of an operator's chain changes what nova-conductor is answered over RPC as it does
/// over HTTP, on every backend (issue 47): three hosts the default weighers rank `big`, `mid`,
/// `small` (free RAM), `big` in maintenance. A `select` plugin forbids the maintenance trait for
/// tenant X (`big` neither chosen nor an alternate); a `filter` plugin removes the best-ranked
/// candidate; a `weigh` plugin puts `small` first; a `claimed` plugin is told the chosen hosts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_verb_changes_the_answer_over_rpc_on_every_backend() {
    use parasol::plugins::{PluginEvent, PluginSettings};
    use plugin_server::{plugin, PluginServer, MAINTENANCE_TRAIT};
    let server = PluginServer::start().await;
    let hosts_of = |reply: &CallReply| -> Vec<String> {
        assert_eq!(reply.failure, None, "{:?}", reply.failure);
        helpers::hosts_of(&reply.result)
    };
    let spec_for = |project: &str| {
        json!({"spec_obj": request_spec(flavor(1, 512, 1), 1, json!({"project_id": project})),
               "instance_uuids": uuids(1), "return_objects": true, "return_alternates": true})
    };
    for backend in BackendKind::ALL {
        let on = |event: PluginEvent, name: &str, path: &str| {
            let mut spec = plugin(name, event, server.url(path));
            if event == PluginEvent::Weigh {
                spec.weight_multiplier = 10.0;
            }
            PluginSettings {
                chain: vec![spec],
                ..PluginSettings::default()
            }
        };
        let start = |plugins: PluginSettings| async move {
            let rpc = spawn_rpc_with(|s| {
                s.scheduler.backend = backend;
                s.plugins = plugins;
            })
            .await;
            for (host, ram, traits) in [
                ("big", 16384, json!([MAINTENANCE_TRAIT])),
                ("mid", 8192, json!([])),
                ("small", 4096, json!([])),
            ] {
                let id = uuid::Uuid::new_v4().to_string();
                let mut event = helpers::host_state_event(&id, host, 8, ram, 100);
                event["payload"]["traits"] = traits;
                let resp = rpc.app.post("/v1/notifications", &event).await;
                assert_eq!(resp.status(), 200, "registering {host}");
            }
            rpc.app.rebuild_backend().await;
            rpc
        };

        let rpc = start(on(
            PluginEvent::Select,
            "maintenance",
            "/select/maintenance",
        ))
        .await;
        let reply = rpc
            .call("select_destinations", spec_for("tenant-x"), "4.5")
            .await;
        let hosts = hosts_of(&reply);
        assert!(
            !hosts.contains(&"big".to_string()),
            "{backend:?}: {hosts:?}"
        );
        assert_eq!(hosts.len(), 2, "{backend:?}: {hosts:?}");

        let rpc = start(on(PluginEvent::Filter, "keep-best", "/filter/remove-best")).await;
        let before = server.seen("/filter/remove-best").len();
        let reply = rpc.call("select_destinations", spec_for("p"), "4.5").await;
        let hosts = hosts_of(&reply);
        let sent = server.seen("/filter/remove-best");
        assert_eq!(sent.len(), before + 1, "{backend:?}");
        let removed = sent[before]["candidates"][0]["host"]
            .as_str()
            .unwrap_or("?");
        assert!(
            !hosts.iter().any(|h| h == removed),
            "{backend:?}: {removed} in {hosts:?}"
        );
        assert_eq!(hosts.len(), 2, "{backend:?}: {hosts:?}");

        let rpc = start(on(
            PluginEvent::Weigh,
            "prefer-small",
            "/weigh/prefer/small",
        ))
        .await;
        let reply = rpc.call("select_destinations", spec_for("p"), "4.5").await;
        let hosts = hosts_of(&reply);
        assert_eq!(
            hosts.first().map(String::as_str),
            Some("small"),
            "{backend:?}: {hosts:?}"
        );

        let rpc = start(on(PluginEvent::Claimed, "audit", "/claimed")).await;
        let before = server.seen("/claimed").len();
        let reply = rpc.call("select_destinations", spec_for("p"), "4.5").await;
        let hosts = hosts_of(&reply);
        tokio::time::timeout(WAIT, server.wait_for("/claimed", before + 1))
            .await
            .unwrap_or_else(|_| panic!("{backend:?}: the claimed plugin was never told"));
        let told = &server.seen("/claimed")[before];
        assert_eq!(told["claims"][0]["host"], json!(hosts[0]), "{backend:?}");
        let used: i64 = rpc.app.used().await.iter().map(|h| h.1).sum();
        assert_eq!(used, 1, "{backend:?}: the one placement claimed");
    }
}
