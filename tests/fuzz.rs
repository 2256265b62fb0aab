//! Issue 16's fuzz test: 2,200 seeded, generated malformed or hostile inputs against one running
//! service on a real ledger (a SQLite file, then a PostgreSQL database) and the real RabbitMQ — select_destinations bodies and
//! notifications over HTTP, notifications over RabbitMQ, and RPC calls and casts on Nova's
//! scheduler topic. Each input is a valid one mutated (values swapped for hostile ones: huge,
//! negative, fractional, NUL bytes, 70 KB strings, deep nesting, wrong types, future versions;
//! keys removed or added; list entries repeated) or its bytes corrupted. Asserted: no answer
//! ≥ 500 and no RPC `RuntimeError` (there is no outage here), no crash (every input gets its
//! outcome, the service still answers at the end), and `/v1/hosts` unchanged by every input
//! that was rejected. `PARASOL_FUZZ_SEED` replays another seed.

#[path = "support/mod.rs"]
mod support;

#[path = "api/helpers.rs"]
#[allow(dead_code)]
mod helpers;

use helpers::{call_body, flavor, host_state_event, request_spec, spawn_with, TestApp};
use parasol::amqp::run_notification_consumer;
use parasol::configuration::{BackendKind, Settings};
use parasol::nova::encode_envelope;
use parasol::rpc::{run_rpc_server, RpcCounters};
use parasol_rpc_client::RpcClient;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
const DELETE_END: &str = include_str!("fixtures/wire/instance.delete.end-notification.json");
const UPDATE_INFO: &str = include_str!("fixtures/wire/fanout-update_instance_info.json");
const SYNC_INFO: &str = include_str!("fixtures/wire/fanout-sync_instance_info.json");
const DELETE_INFO: &str = include_str!("fixtures/wire/fanout-delete_instance_info.json");
const HOSTS: usize = 8;

/// Seeded generator of hostile values and mutations.
struct Fuzzer {
    rng: ChaCha8Rng,
}

impl Fuzzer {
    /// A UUID from the seed.
    fn uuid(&mut self) -> String {
        uuid::Uuid::from_u128(self.rng.gen()).to_string()
    }

    fn uuids(&mut self, n: usize) -> Vec<String> {
        (0..n).map(|_| self.uuid()).collect()
    }

    fn hostile(&mut self) -> Value {
        let r = &mut self.rng;
        match r.gen_range(0..26) {
            0 => json!(i64::MAX),
            1 => json!(i64::MIN),
            2 => json!(-1),
            3 => json!(0),
            4 => json!((1i64 << 40) + 1),
            5 => json!(1e308),
            6 => json!(-0.5),
            7 => json!(2.5),
            8 => json!(u64::MAX),
            9 => json!(""),
            10 => json!("x".repeat(r.gen_range(256..70_000))),
            11 => json!("compute\u{0}1"),
            12 => json!("'; DROP TABLE hosts; --"),
            13 => json!("🦀".repeat(r.gen_range(1..300))),
            14 => Value::Null,
            15 => json!(r.gen_bool(0.5)),
            16 => json!([]),
            17 => json!({}),
            18 => {
                // Deeper than serde_json's recursion limit, or just deep.
                let depth = r.gen_range(20..200);
                let mut v = json!(1);
                for _ in 0..depth {
                    v = json!([v]);
                }
                v
            }
            19 => json!(vec!["a"; r.gen_range(10_001..12_000)]),
            20 => json!(uuid::Uuid::from_u128(r.gen()).to_string()),
            21 => json!(["9.0", "1.999", "2.0", "0.1", "x.y", "1"][r.gen_range(0..6)]),
            22 => json!(r.gen::<i64>()),
            23 => json!(r.gen::<f64>() * 1e6),
            24 => {
                let n = r.gen_range(0..40);
                json!((0..n)
                    .map(|_| char::from_u32(r.gen_range(0..0x3000)).unwrap_or('?'))
                    .collect::<String>())
            }
            _ => {
                json!({"nova_object.name": "Flavor", "nova_object.version": "9.0", "nova_object.data": {}})
            }
        }
    }

    /// Applies one mutation somewhere in `v` (descending at random).
    fn mutate(&mut self, v: &mut Value, depth: usize) {
        let descend = depth < 16 && self.rng.gen_bool(0.8);
        match v {
            Value::Object(m) if descend && !m.is_empty() => {
                let keys: Vec<String> = m.keys().cloned().collect();
                let k = keys.choose(&mut self.rng).unwrap().clone();
                if self.rng.gen_bool(0.75) {
                    return self.mutate(m.get_mut(&k).unwrap(), depth + 1);
                }
                match self.rng.gen_range(0..3) {
                    0 => {
                        m.remove(&k);
                    }
                    1 => {
                        let h = self.hostile();
                        m.insert(k, h);
                    }
                    _ => {
                        let name = format!("x{}", self.rng.gen_range(0..1000));
                        let h = self.hostile();
                        m.insert(name, h);
                    }
                }
            }
            Value::Array(a) if descend && !a.is_empty() => {
                let i = self.rng.gen_range(0..a.len());
                match self.rng.gen_range(0..4) {
                    0 | 1 => self.mutate(&mut a[i], depth + 1),
                    2 => {
                        let again = a[i].clone();
                        a.push(again);
                    }
                    _ => {
                        a.remove(i);
                    }
                }
            }
            _ => *v = self.hostile(),
        }
    }

    /// `seed` mutated one to three times.
    fn mutated(&mut self, seed: &Value) -> Value {
        let mut v = seed.clone();
        for _ in 0..self.rng.gen_range(1..=3) {
            self.mutate(&mut v, 0);
        }
        v
    }

    /// The bytes of `v`, corrupted one time in ten (cut short, a byte changed, garbage first).
    fn bytes(&mut self, v: &Value) -> Vec<u8> {
        let mut b = serde_json::to_vec(v).unwrap();
        if self.rng.gen_bool(0.1) && !b.is_empty() {
            match self.rng.gen_range(0..3) {
                0 => b.truncate(self.rng.gen_range(0..b.len())),
                1 => {
                    let i = self.rng.gen_range(0..b.len());
                    b[i] = self.rng.gen();
                }
                _ => b.splice(0..0, b"\xff\xfe{{".iter().copied()).for_each(drop),
            }
        }
        b
    }
}

fn captured(text: &str) -> Value {
    let v: Value = serde_json::from_str(text).unwrap();
    v["decoded_oslo_message"].clone()
}

fn instance_event(message_id: String, event_type: &str, instance: &str, host: &str) -> Value {
    let mut m = captured(DELETE_END);
    m["message_id"] = json!(message_id);
    m["event_type"] = json!(event_type);
    let data = &mut m["payload"]["nova_object.data"];
    data["uuid"] = json!(instance);
    data["host"] = json!(host);
    data["node"] = json!(host);
    m
}

struct Service {
    app: TestApp,
    rpc: RpcClient,
    counters: Arc<RpcCounters>,
    topic: String,
    _stop: tokio_util::sync::DropGuard,
}

impl Service {
    async fn hosts(&self) -> Value {
        self.app.get_json("/v1/hosts").await
    }

    /// Notifications settled so far by the consumer (every outcome) and those dead-lettered.
    fn settled(&self) -> (u64, u64) {
        let counts = self.app.handles.ingest.to_json();
        let all = counts
            .as_object()
            .map(|m| m.values().filter_map(Value::as_u64).sum())
            .unwrap_or(0);
        (all, counts["dead_letter"].as_u64().unwrap_or(0))
    }

    /// RPC casts finished so far (each ends in exactly one of these).
    fn casts_done(&self) -> u64 {
        [
            "instance_info",
            "dead_letter",
            "duplicate",
            "update_aggregates",
            "delete_aggregate",
        ]
        .iter()
        .map(|k| self.counters.get(k))
        .sum()
    }
}

async fn spawn(engine: &str) -> Service {
    let db = support::db(engine).await;
    let id = uuid::Uuid::new_v4().simple().to_string();
    let mut s = Settings::default();
    // No log written out per test service (the binary's tests keep the default).
    s.ledger.wal_prewrite_mib = 0;
    s.ledger.url = db.url.clone();
    s.scheduler.backend = BackendKind::Filter;
    s.scheduler.seed = Some(7);
    s.policy.host_timeout_s = 3600;
    s.amqp.url = AMQP_URL.into();
    s.amqp.exchange = format!("fuzz_{id}");
    s.amqp.queue = format!("fuzz_{id}.notifications");
    s.amqp.dead_letter = format!("fuzz_{id}.dead_letter");
    s.amqp.fanout_exchange = format!("fuzz_{id}.scheduler_fanout");
    s.amqp.reconnect_min_s = 0.05;
    s.amqp.reconnect_max_s = 0.5;
    s.rpc.enabled = true;
    s.rpc.topic = format!("scheduler_{id}");
    s.rpc.host = "fuzz".into();
    let (exchange, topic) = (s.amqp.exchange.clone(), s.rpc.topic.clone());
    let app = spawn_with(s, db).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let h = &app.handles;
    tokio::spawn(run_notification_consumer(
        h.ingest.clone(),
        h.broker.clone(),
        h.settings.amqp.clone(),
        stop.clone(),
    ));
    tokio::spawn(run_rpc_server(h.rpc_deps(), stop.clone()));
    let rpc = RpcClient::connect(AMQP_URL, &exchange)
        .await
        .expect("RabbitMQ must be running (`./test` starts it)");
    let service = Service {
        counters: app.handles.rpc.clone(),
        app,
        rpc,
        topic,
        _stop: stop.drop_guard(),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ping =
            service
                .rpc
                .call_message("ping", json!({"arg": 0}), "1.0", Some("baseapi"), None);
        let answered = service
            .rpc
            .call_with(&service.topic, &ping, Duration::from_millis(300))
            .await
            .is_ok();
        if answered && service.app.handles.broker.is_connected() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the service never served RPC and notifications"
        );
    }
    service
}

/// What the fuzz test counts.
#[derive(Debug, Default)]
struct Tally {
    inputs: usize,
    rejected: usize,
    accepted: usize,
}

impl Tally {
    fn add(&mut self, rejected: bool) {
        self.inputs += 1;
        if rejected {
            self.rejected += 1;
        } else {
            self.accepted += 1;
        }
    }
}

/// Waits until `done`, at most 15 s (a missing outcome is a crash or a lost message).
async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_hostile_inputs_never_answer_500_crash_or_change_hosts_when_rejected() {
    fuzz("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_hostile_inputs_on_postgres_never_answer_500_crash_or_change_hosts() {
    fuzz("postgres").await;
}

async fn fuzz(engine: &str) {
    let seed: u64 = std::env::var("PARASOL_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let mut fz = Fuzzer {
        rng: ChaCha8Rng::seed_from_u64(seed),
    };
    let s = spawn(engine).await;
    for i in 0..HOSTS {
        s.app
            .register(&format!("fz{i}"), 100_000, 100_000_000, 1_000_000)
            .await;
    }
    // Instances to delete, update and sync.
    let placed = fz.uuids(20);
    let resp = s
        .app
        .post(
            "/v1/select_destinations",
            &call_body(request_spec(flavor(1, 512, 1), 20, json!({})), &placed),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let mut hosts = s.hosts().await;
    let mut tally = Tally::default();
    let failures = |what: &str, input: &[u8], answer: &str| {
        panic!(
            "seed {seed}: {what}\ninput: {}\nanswer: {answer}",
            String::from_utf8_lossy(&input[..input.len().min(2000)])
        )
    };
    let host = |fz: &mut Fuzzer| format!("fz{}", fz.rng.gen_range(0..HOSTS));
    let pick = |fz: &mut Fuzzer| placed.choose(&mut fz.rng).unwrap().clone();

    // 1. select_destinations bodies over HTTP.
    for _ in 0..700 {
        let n = fz.rng.gen_range(1..4);
        let seed_body = call_body(
            request_spec(
                flavor(fz.rng.gen_range(1..4), 512, 1),
                n,
                json!({"availability_zone": "nova", "scheduler_hints": {"group": ["x"]}}),
            ),
            &fz.uuids(n),
        );
        let body = fz.mutated(&seed_body);
        let bytes = fz.bytes(&body);
        let resp = s
            .app
            .client
            .post(format!("{}/v1/select_destinations", s.app.address))
            .header("content-type", "application/json")
            .body(bytes.clone())
            .send()
            .await
            .expect("an answer");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        if status >= 500 {
            failures(&format!("select answered {status}"), &bytes, &text);
        }
        let now = s.hosts().await;
        if status >= 300 && now != hosts {
            failures("a refused select changed /v1/hosts", &bytes, &text);
        }
        hosts = now;
        tally.add(status >= 300);
    }

    // 2. Notifications over HTTP.
    for _ in 0..600 {
        let seed_body = match fz.rng.gen_range(0..4) {
            0 => host_state_event(&fz.uuid(), &host(&mut fz), 100_000, 100_000_000, 1_000_000),
            1 => instance_event(fz.uuid(), "instance.create.end", &fz.uuid(), &host(&mut fz)),
            2 => instance_event(
                fz.uuid(),
                "instance.delete.end",
                &pick(&mut fz),
                &host(&mut fz),
            ),
            _ => {
                json!({"oslo.version": "2.0", "oslo.message": instance_event(fz.uuid(), "instance.update", &pick(&mut fz), &host(&mut fz)).to_string()})
            }
        };
        let body = fz.mutated(&seed_body);
        let bytes = fz.bytes(&body);
        let resp = s
            .app
            .client
            .post(format!("{}/v1/notifications", s.app.address))
            .header("content-type", "application/json")
            .body(bytes.clone())
            .send()
            .await
            .expect("an answer");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        if status >= 500 {
            failures(&format!("a notification answered {status}"), &bytes, &text);
        }
        let now = s.hosts().await;
        if status >= 300 && now != hosts {
            failures("a refused notification changed /v1/hosts", &bytes, &text);
        }
        hosts = now;
        tally.add(status >= 300);
    }

    // 3. Notifications over RabbitMQ, one at a time so each outcome is known.
    for _ in 0..400 {
        let (key, inner) = match fz.rng.gen_range(0..3) {
            0 => (
                "parasol.host_state.info",
                host_state_event(&fz.uuid(), &host(&mut fz), 100_000, 100_000_000, 1_000_000),
            ),
            1 => (
                "versioned_notifications.info",
                instance_event(fz.uuid(), "instance.create.end", &fz.uuid(), &host(&mut fz)),
            ),
            _ => (
                "versioned_notifications.info",
                instance_event(
                    fz.uuid(),
                    "instance.delete.end",
                    &pick(&mut fz),
                    &host(&mut fz),
                ),
            ),
        };
        let inner = fz.mutated(&inner);
        let envelope = if fz.rng.gen_bool(0.2) {
            // The envelope itself mutated.
            fz.mutated(&json!({"oslo.version": "2.0", "oslo.message": inner.to_string()}))
        } else {
            json!({"oslo.version": "2.0", "oslo.message": inner.to_string()})
        };
        let bytes = fz.bytes(&envelope);
        let (before, dead_before) = s.settled();
        s.rpc.publish(key, &bytes).await.expect("publish");
        wait_until(
            &format!("seed {seed}: a notification on RabbitMQ got no outcome"),
            || s.settled().0 > before,
        )
        .await;
        let (_, dead) = s.settled();
        let rejected = dead > dead_before;
        let now = s.hosts().await;
        if rejected && now != hosts {
            failures("a dead-lettered notification changed /v1/hosts", &bytes, "");
        }
        hosts = now;
        tally.add(rejected);
    }

    // 4. RPC calls: select_destinations with mutated arguments, method, version or namespace.
    for _ in 0..300 {
        let n = fz.rng.gen_range(1..3);
        let args = json!({"spec_obj": request_spec(flavor(1, 512, 1), n, json!({})),
            "instance_uuids": fz.uuids(n), "return_objects": true, "return_alternates": true});
        let mut m = s
            .rpc
            .call_message("select_destinations", args, "4.5", None, None);
        // Mutate everything but the reply address, so that every call is answered.
        for _ in 0..fz.rng.gen_range(1..=3) {
            let key = *[
                "args",
                "args",
                "args",
                "method",
                "version",
                "namespace",
                "_timeout",
            ]
            .choose(&mut fz.rng)
            .unwrap();
            let mut part = m.get(key).cloned().unwrap_or(Value::Null);
            fz.mutate(&mut part, 0);
            m[key] = part;
        }
        // A call too deeply nested for any JSON parser to find its reply address is
        // dead-lettered instead of answered.
        let dead_before = s.counters.get("dead_letter");
        let dead_lettered = async {
            while s.counters.get("dead_letter") == dead_before {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        };
        let reply = tokio::select! {
            r = s.rpc.call_with(&s.topic, &m, Duration::from_secs(15)) => Some(r.unwrap_or_else(|e| {
                let shown: String = m.to_string().chars().take(2000).collect();
                panic!("seed {seed}: no reply ({e}) to {shown}")
            })),
            _ = dead_lettered => None,
        };
        let class = match &reply {
            Some(reply) => reply
                .failure
                .as_ref()
                .map(|f| f["class"].as_str().unwrap_or_default().to_string()),
            None => Some("dead letter".to_string()),
        };
        if class.as_deref() == Some("RuntimeError") {
            failures(
                "an RPC call failed as an outage",
                m.to_string().as_bytes(),
                &format!("{reply:?}"),
            );
        }
        let now = s.hosts().await;
        if class.is_some() && now != hosts {
            failures(
                "a failed RPC call changed /v1/hosts",
                m.to_string().as_bytes(),
                "",
            );
        }
        hosts = now;
        tally.add(class.is_some());
    }

    // 5. RPC casts: nova-compute's instance info, mutated or corrupted.
    for _ in 0..200 {
        let mut seed_cast = match fz.rng.gen_range(0..3) {
            0 => captured(UPDATE_INFO),
            1 => captured(SYNC_INFO),
            _ => captured(DELETE_INFO),
        };
        seed_cast["_unique_id"] = json!(fz.uuid().replace('-', ""));
        let cast = fz.mutated(&seed_cast);
        let bytes = if fz.rng.gen_bool(0.1) {
            fz.bytes(&json!({"oslo.version": "2.0", "oslo.message": cast.to_string()}))
        } else {
            encode_envelope(&cast)
        };
        let (before, dead_before) = (s.casts_done(), s.counters.get("dead_letter"));
        s.rpc.publish(&s.topic, &bytes).await.expect("publish");
        let shown: String = cast.to_string().chars().take(2000).collect();
        wait_until(
            &format!("seed {seed}: an RPC cast got no outcome: {shown}"),
            || s.casts_done() > before,
        )
        .await;
        let rejected = s.counters.get("dead_letter") > dead_before;
        let now = s.hosts().await;
        if rejected && now != hosts {
            failures("a dead-lettered cast changed /v1/hosts", &bytes, "");
        }
        hosts = now;
        tally.add(rejected);
    }

    // Still serving on every transport, and never oversubscribed.
    let ping = s.rpc.call_message(
        "ping",
        json!({"arg": "alive"}),
        "1.0",
        Some("baseapi"),
        None,
    );
    let reply = s
        .rpc
        .call_with(&s.topic, &ping, Duration::from_secs(15))
        .await
        .unwrap();
    assert_eq!(reply.result["arg"], "alive");
    let health = s
        .app
        .client
        .get(format!("{}/readyz", s.app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    for h in s.hosts().await["hosts"].as_array().unwrap() {
        for (class, used) in h["used"].as_object().unwrap_or(&Map::new()) {
            let total = h["inventory"][class]["total"].as_i64().unwrap_or(i64::MAX);
            assert!(used.as_i64().unwrap_or(0) >= 0, "{h}");
            assert!(
                used.as_i64().unwrap_or(0) <= total.max(0).saturating_mul(65_536),
                "{h}"
            );
        }
    }
    eprintln!("{engine}, seed {seed}: {tally:?}");
    // This test's own queues hold ~1,800 dead letters (some of 70 KB): not left on the broker.
    let amqp = &s.app.handles.settings.amqp;
    let conn = lapin::Connection::connect(AMQP_URL, lapin::ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    for queue in [&amqp.dead_letter, &amqp.queue] {
        ch.queue_delete(queue, lapin::options::QueueDeleteOptions::default())
            .await
            .unwrap();
    }
    let _ = conn.close(200, "fuzz done").await;
    assert!(tally.inputs >= 2_000);
    assert!(
        tally.rejected >= 1_000 && tally.accepted >= 100,
        "the inputs should be mostly hostile, some still valid: {tally:?}"
    );
}
