//! `/healthz` and `/v1/stats` report the broker connection; without a broker the service
//! serves HTTP and keeps retrying with capped exponential backoff; the topology has oslo's flags.

use crate::broker::{
    isolated_amqp, spawn_service, spawn_service_with_clock, wait_until, Publisher,
};
use crate::messages::host_state;
use lapin::options::{ExchangeDeclareOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::ExchangeKind;
use parasol::clock::{Clock, ManualClock};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_and_stats_say_whether_the_broker_is_connected() {
    let mut s = spawn_service("sqlite", isolated_amqp()).await;
    s.wait_connected().await;
    for path in ["/healthz", "/v1/stats"] {
        let (status, body) = s.get_json(path).await;
        assert_eq!(status, 200);
        assert_eq!(body["broker"]["configured"], true, "{path}: {body}");
        assert_eq!(body["broker"]["connected"], true, "{path}: {body}");
    }
    s.stop_consumer().await;
    for path in ["/healthz", "/v1/stats"] {
        let (_, body) = s.get_json(path).await;
        assert_eq!(body["broker"]["connected"], false, "{path}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_broker_leaves_http_serving_and_retries_with_capped_backoff() {
    let mut amqp = isolated_amqp();
    amqp.url = "amqp://guest:guest@127.0.0.1:1/%2f".into();
    amqp.reconnect_min_s = 0.05;
    amqp.reconnect_max_s = 0.2;
    // The retries sleep on the service's clock: moved here by hand, 10 ms at a time, so that
    // the gap between two attempts is measured on it, whatever the machine's speed.
    let clock = ManualClock::new(1_800_000_000_000);
    let db = crate::support::db("sqlite").await;
    let url = db.url.clone();
    let s = spawn_service_with_clock(db, &url, amqp, Arc::new(clock.clone())).await;
    let attempts = || async {
        let (_, health) = s.get_json("/healthz").await;
        health["broker"]["connect_attempts"].as_u64().unwrap_or(0)
    };
    wait_until("the first attempt", || async { attempts().await == 1 }).await;
    let mut gaps = Vec::new();
    for k in 1..=5u64 {
        let started = clock.now_ms();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while attempts().await == k {
            assert!(std::time::Instant::now() < deadline, "attempt {}", k + 1);
            clock.advance_ms(10);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(attempts().await, k + 1, "one attempt per delay");
        gaps.push(clock.now_ms() - started);
    }
    // Each delay passed on the clock before the next attempt: 50, 100, then capped at 200 ms
    // (an attempt may wait a step longer than its delay when the clock moved before it slept).
    for (gap, delay) in gaps.iter().zip([50, 100, 200, 200, 200]) {
        assert!(*gap >= delay, "{gaps:?}");
    }
    let (status, health) = s.get_json("/healthz").await;
    assert_eq!(status, 200, "{health}");
    let broker = &health["broker"];
    assert_eq!(broker["configured"], true);
    assert_eq!(broker["connected"], false);
    assert!(broker["last_error"].is_string(), "{broker}");
    assert_eq!(broker["retry_in_s"], 0.2, "{broker}");
    let resp = s
        .client
        .post(format!("{}/v1/notifications", s.address))
        .json(&host_state("compute1", 8, 16384, 100, true, false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (_, hosts) = s.get_json("/v1/hosts").await;
    assert_eq!(hosts["hosts"].as_array().unwrap().len(), 1);
    let (_, stats) = s.get_json("/v1/stats").await;
    assert_eq!(stats["broker"]["connected"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nova_exchanges_keep_oslo_flags_and_parasol_queues_are_durable() {
    let amqp = isolated_amqp();
    let s = spawn_service("sqlite", amqp.clone()).await;
    s.wait_connected().await;
    let p = Publisher::connect(&amqp).await;
    // Redeclaring with other flags closes the channel with PRECONDITION_FAILED.
    let exchange_with = |name: String, kind: ExchangeKind, durable: bool, auto_delete: bool| {
        let conn = &p.conn;
        async move {
            let ch = conn.create_channel().await.unwrap();
            let opts = ExchangeDeclareOptions {
                durable,
                auto_delete,
                ..Default::default()
            };
            ch.exchange_declare(&name, kind, opts, FieldTable::default())
                .await
                .is_ok()
        }
    };
    assert!(exchange_with(amqp.exchange.clone(), ExchangeKind::Topic, false, false).await);
    assert!(!exchange_with(amqp.exchange.clone(), ExchangeKind::Topic, true, false).await);
    let fanout = amqp.fanout_exchange.clone();
    assert!(exchange_with(fanout.clone(), ExchangeKind::Fanout, false, true).await);
    assert!(!exchange_with(fanout, ExchangeKind::Fanout, false, false).await);
    assert!(exchange_with(amqp.dead_letter.clone(), ExchangeKind::Fanout, true, false).await);
    for queue in [&amqp.queue, &amqp.dead_letter] {
        let ch = p.conn.create_channel().await.unwrap();
        let durable = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        assert!(ch
            .queue_declare(queue, durable, FieldTable::default())
            .await
            .is_ok());
        let ch = p.conn.create_channel().await.unwrap();
        let transient = QueueDeclareOptions::default();
        let refused = ch
            .queue_declare(queue, transient, FieldTable::default())
            .await;
        assert!(refused.is_err(), "{queue} must be durable");
    }
}

/// Nova's `transport_url` as nova.conf writes it: several brokers in `rabbit://` form. The
/// first is down; the consumer fails over to the second and applies what is published there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nova_transport_url_with_a_dead_first_broker_fails_over_to_the_next() {
    let mut amqp = isolated_amqp();
    amqp.url = "rabbit://guest:guest@127.0.0.1:1,guest:guest@127.0.0.1:5672/".into();
    let s = spawn_service("sqlite", amqp.clone()).await;
    s.wait_connected().await;
    let publisher = Publisher::connect(&amqp).await;
    publisher
        .notify(&host_state("c1", 8, 8192, 80, true, false))
        .await;
    crate::broker::wait_until("the host registered through the second broker", || async {
        s.ledger().host_ids().await.map(|h| h.len()).unwrap_or(0) == 1
    })
    .await;
}

/// Two Parasol processes on two SQLite ledgers and one broker, both with the default queue
/// name: each gets its own queue (named after its ledger) and so every event, instead of
/// splitting one queue's events between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sqlite_ledgers_on_one_broker_each_receive_every_event() {
    let mut amqp = isolated_amqp();
    amqp.queue = parasol::configuration::AmqpSettings::default().queue;
    let a = spawn_service("sqlite", amqp.clone()).await;
    let b = spawn_service("sqlite", amqp.clone()).await;
    a.wait_connected().await;
    b.wait_connected().await;
    let publisher = Publisher::connect(&amqp).await;
    for i in 0..20 {
        publisher
            .notify(&host_state(&format!("c{i}"), 8, 8192, 80, true, false))
            .await;
    }
    for s in [&a, &b] {
        crate::broker::wait_until("every host registered in both ledgers", || async {
            s.ledger().host_ids().await.map(|h| h.len()).unwrap_or(0) == 20
        })
        .await;
    }
    // Their queues are their own: delete them.
    let conn = lapin::Connection::connect(crate::broker::BROKER, Default::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    for s in [&a, &b] {
        let id = s.ledger().ledger_id().await.unwrap();
        let queue = format!("{}.{id}", amqp.queue);
        ch.queue_delete(&queue, Default::default())
            .await
            .expect("the ledger's own queue exists");
    }
}
