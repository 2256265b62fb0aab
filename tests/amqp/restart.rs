//! 10,000 events, the consumer interrupted in the middle (stopped, or its connection closed by
//! the broker): the ledger ends exactly in the state that applying each event once leaves,
//! computed independently of the ledger while generating the events.

use crate::broker::{isolated_amqp, spawn_service, wait_until, Publisher, Service};
use crate::messages::{host_state, instance_event, new_id, uuid_for};
use crate::support::queue_types;
use parasol::amqp::connection_name;
use parasol::configuration::{AmqpSettings, QueueType};
use rand::{Rng, SeedableRng};
use serde_json::Value;
use sqlx::SqlitePool;
use std::process::Command;

const EVENTS: usize = 10_000;
const HOSTS: usize = 50;
const FLAVORS: [(i64, i64, i64); 3] = [(1, 512, 1), (2, 4096, 40), (8, 16384, 160)];

type HostRow = (
    String,
    String,
    bool,
    bool,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
);
type AllocationRow = (String, String, i64, i64, i64, bool);

/// The ledger's content that matters: hosts by name (without ids and `last_seen_ms`),
/// allocations by instance, and the number of applied message ids.
#[derive(Debug, PartialEq)]
struct Snapshot {
    hosts: Vec<HostRow>,
    allocations: Vec<AllocationRow>,
    processed: i64,
}

/// Host registrations, then a seeded mix of inventory/status updates, creates and deletes;
/// with the state that applying each of them once must leave.
fn events(seed: u64) -> (Vec<Value>, Snapshot) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let host = |i: usize| format!("h{i:03}");
    let mut out: Vec<Value> = (0..HOSTS)
        .map(|i| host_state(&host(i), 64, 262_144, 4000, true, false))
        .collect();
    // (vcpu total, up, disabled) per host; instances live at the end.
    let mut status: Vec<(i64, bool, bool)> = vec![(64, true, false); HOSTS];
    let mut live: Vec<(String, usize, (i64, i64, i64))> = Vec::new();
    while out.len() < EVENTS {
        let roll = rng.gen_range(0..100);
        if roll < 30 {
            let h = rng.gen_range(0..HOSTS);
            status[h] = (
                32 * rng.gen_range(1..4),
                rng.gen_bool(0.9),
                rng.gen_bool(0.1),
            );
            let (vcpu, up, disabled) = status[h];
            out.push(host_state(&host(h), vcpu, 262_144, 4000, up, disabled));
        } else if roll < 70 || live.is_empty() {
            let (vm, h, f) = (
                new_id(),
                rng.gen_range(0..HOSTS),
                FLAVORS[rng.gen_range(0..3)],
            );
            out.push(instance_event("instance.create.end", &vm, &host(h), f));
            live.push((vm, h, f));
        } else {
            let (vm, h, f) = live.swap_remove(rng.gen_range(0..live.len()));
            out.push(instance_event("instance.delete.end", &vm, &host(h), f));
        }
    }
    let hosts = (0..HOSTS)
        .map(|h| {
            let on_host: Vec<_> = live.iter().filter(|(_, at, _)| *at == h).collect();
            let sum = |k: fn(&(i64, i64, i64)) -> i64| on_host.iter().map(|(_, _, f)| k(f)).sum();
            let (vcpu, up, disabled) = status[h];
            (
                host(h),
                uuid_for(&host(h)),
                up,
                disabled,
                vcpu,
                262_144,
                4000,
                sum(|f| f.0),
                sum(|f| f.1),
                sum(|f| f.2),
                on_host.len() as i64,
            )
        })
        .collect();
    let mut allocations: Vec<AllocationRow> = live
        .iter()
        .map(|(vm, h, f)| (vm.clone(), host(*h), f.0, f.1, f.2, true))
        .collect();
    allocations.sort();
    let expected = Snapshot {
        hosts,
        allocations,
        processed: EVENTS as i64,
    };
    (out, expected)
}

async fn snapshot(url: &str) -> Snapshot {
    let pool = SqlitePool::connect(url).await.expect("open ledger");
    let class = |what: &str, class: &str| {
        format!(
            "COALESCE((SELECT {what} FROM inventories i WHERE i.host_id = h.id \
             AND i.resource_class = '{class}'), 0)"
        )
    };
    let sql = format!(
        "SELECT h.host, h.uuid, h.up, h.disabled, {}, {}, {}, {}, {}, {}, \
         (SELECT COUNT(*) FROM allocations a WHERE a.host_id = h.id) FROM hosts h ORDER BY h.host",
        class("usable", "VCPU"),
        class("usable", "MEMORY_MB"),
        class("usable", "DISK_GB"),
        class("used", "VCPU"),
        class("used", "MEMORY_MB"),
        class("used", "DISK_GB"),
    );
    let hosts = sqlx::query_as(&sql).fetch_all(&pool).await.expect("hosts");
    let allocations = sqlx::query_as(
        "SELECT a.instance_uuid, h.host, json_extract(a.resources, '$.VCPU'), \
         json_extract(a.resources, '$.MEMORY_MB'), json_extract(a.resources, '$.DISK_GB'), \
         a.confirmed FROM allocations a JOIN hosts h ON h.id = a.host_id \
         ORDER BY a.instance_uuid",
    )
    .fetch_all(&pool)
    .await
    .expect("allocations");
    let processed = sqlx::query_scalar("SELECT COUNT(*) FROM processed_messages")
        .fetch_one(&pool)
        .await
        .expect("processed");
    pool.close().await;
    Snapshot {
        hosts,
        allocations,
        processed,
    }
}

/// Publishes the events, runs `interrupt` once a fifth of them are applied, waits for the
/// rest, and compares the ledger with applying each event once.
async fn survives<F, Fut>(seed: u64, interrupt: F)
where
    F: FnOnce(Service, Publisher) -> Fut,
    Fut: std::future::Future<Output = (Service, Publisher)>,
{
    survives_on(seed, isolated_amqp(), interrupt).await
}

/// [`survives`] with these `[amqp]` settings.
async fn survives_on<F, Fut>(seed: u64, amqp: AmqpSettings, interrupt: F)
where
    F: FnOnce(Service, Publisher) -> Fut,
    Fut: std::future::Future<Output = (Service, Publisher)>,
{
    let (events, expected) = events(seed);
    let s = spawn_service("sqlite", amqp.clone()).await;
    s.wait_connected().await;
    let p = Publisher::connect(&amqp).await;
    let (first, rest) = events.split_at(EVENTS / 2);
    p.notify_all(first).await;
    wait_until("a fifth applied", || async {
        s.settled() >= (EVENTS / 5) as u64
    })
    .await;
    let (s, p) = interrupt(s, p).await;
    p.notify_all(rest).await;
    // Each id is counted `applied` once; redeliveries of committed ones count as duplicates.
    wait_until("every event applied", || async {
        s.count("applied") >= EVENTS as u64
    })
    .await;
    wait_until("the queue drained", || async {
        p.ready(&amqp.queue).await == 0
    })
    .await;
    assert!(
        expected.allocations.len() > 500,
        "a real mix of creates and deletes"
    );
    let got = snapshot(&s.db_url).await;
    assert_eq!(got.processed, expected.processed);
    assert_eq!(
        got.hosts, expected.hosts,
        "hosts differ from applying each event once"
    );
    assert!(
        got.allocations == expected.allocations,
        "allocations differ from applying each event once: {} vs {} expected",
        got.allocations.len(),
        expected.allocations.len()
    );
    assert_eq!(s.count("applied"), EVENTS as u64, "{}", s.counts());
    assert_eq!(s.count("dead_letter"), 0, "{}", s.counts());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_consumer_midway_loses_nothing_and_applies_nothing_twice() {
    survives(1, |mut s, p| async move {
        s.stop_consumer().await;
        let at_stop = s.settled();
        assert!(at_stop < EVENTS as u64, "stopped before the end");
        s.start_consumer();
        (s, p)
    })
    .await;
}

/// The pid of the consumer's connection, found by its name.
fn connection_pid(name: &str) -> Option<String> {
    let out = Command::new("rabbitmqctl")
        .args([
            "list_connections",
            "-q",
            "--no-table-headers",
            "pid",
            "client_properties",
        ])
        .output()
        .expect("rabbitmqctl runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.contains(name))
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_broker_connection_midway_loses_nothing_and_applies_nothing_twice() {
    survives(2, |s, p| async move {
        let name = connection_name(&s.amqp);
        let pid = connection_pid(&name).expect("the consumer's connection is listed by name");
        let attempts = || {
            s.handles.broker.to_json()["connect_attempts"]
                .as_u64()
                .unwrap_or(0)
        };
        let before = attempts();
        let closed = Command::new("rabbitmqctl")
            .args(["close_connection", &pid, "test: broker closes the consumer"])
            .status()
            .expect("rabbitmqctl runs");
        assert!(closed.success());
        // The disconnected spell lasts one reconnect delay (50 ms), which a loaded machine's
        // poll can miss: the attempt counter, which only grows, tells that it came.
        wait_until("the consumer notices and tries again", || async {
            attempts() > before
        })
        .await;
        wait_until("the consumer reconnects", || async { s.connected() }).await;
        (s, p)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_queue_consumer_stopped_midway_loses_nothing_and_applies_nothing_twice() {
    let amqp = AmqpSettings {
        queue_type: QueueType::Quorum,
        ..isolated_amqp()
    };
    let (queue, dead_letter) = (amqp.queue.clone(), amqp.dead_letter.clone());
    let prefix = queue.trim_end_matches("notifications").to_string();
    survives_on(3, amqp, |mut s, p| async move {
        // Parasol's durable queues are quorum queues; its per-process fanout queue is not.
        let kinds = queue_types(&prefix);
        for durable in [&dead_letter, &queue] {
            assert!(
                kinds.iter().any(|(n, k)| n == durable && k == "quorum"),
                "{durable} is a quorum queue: {kinds:?}"
            );
        }
        s.stop_consumer().await;
        assert!(s.settled() < EVENTS as u64, "stopped before the end");
        s.start_consumer();
        (s, p)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_declared_as_another_kind_is_named_in_the_broker_status_and_left_as_it_is() {
    // A durable exchange, as Nova's is with quorum queues: only the queue's kind differs.
    let amqp = AmqpSettings {
        durable_exchange: true,
        ..isolated_amqp()
    };
    // The queue as an earlier, classic Parasol left it, holding one notification.
    let p = Publisher::connect(&amqp).await;
    parasol::amqp::topology::declare_notification_topology(&p.ch, &amqp, "earlier")
        .await
        .expect("classic topology");
    p.notify(&host_state("h1", 8, 16384, 100, true, false))
        .await;
    let quorum = AmqpSettings {
        queue_type: QueueType::Quorum,
        ..amqp.clone()
    };
    let s = spawn_service("sqlite", quorum).await;
    wait_until("the consumer gives up this attempt", || async {
        s.handles.broker.to_json()["last_error"].is_string()
    })
    .await;
    let status = s.handles.broker.to_json();
    let error = status["last_error"].as_str().unwrap_or_default();
    for needle in [
        "PRECONDITION_FAILED",
        "x-queue-type",
        &amqp.queue,
        "[amqp] queue_type differs",
    ] {
        assert!(error.contains(needle), "{needle} in {error:?}");
    }
    assert_eq!(status["connected"], false);
    assert_eq!(
        queue_types(&amqp.queue),
        vec![(amqp.queue.clone(), "classic".to_string())]
    );
    assert_eq!(
        p.ready(&amqp.queue).await,
        1,
        "the notification is still queued"
    );
    assert_eq!(s.settled(), 0);
}
