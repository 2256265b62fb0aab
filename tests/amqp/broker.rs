//! A Parasol service with its notification consumer on the real RabbitMQ, every name it
//! declares unique to the test, and a publisher that sends exactly what oslo.messaging sends.

use crate::support::{self, TestDb};
use futures::StreamExt;
use lapin::options::{
    BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use parasol::amqp::run_notification_consumer;
use parasol::amqp::topology::{declare_fanout_exchange, declare_nova_exchange, REASON_HEADER};
use parasol::clock::{SharedClock, SystemClock};
use parasol::configuration::{AmqpSettings, Settings};
use parasol::ledger::Ledger;
use parasol::startup::{Application, Handles};
use serde_json::{json, Value};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const BROKER: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// `[amqp]` settings whose exchange, queues and dead-letter names belong to this test alone.
pub fn isolated_amqp() -> AmqpSettings {
    let id = uuid::Uuid::new_v4().simple().to_string();
    AmqpSettings {
        url: BROKER.into(),
        exchange: format!("test.{id}.nova"),
        queue: format!("test.{id}.notifications"),
        dead_letter: format!("test.{id}.dead_letter"),
        fanout_exchange: format!("test.{id}.scheduler_fanout"),
        reconnect_min_s: 0.05,
        reconnect_max_s: 0.5,
        ..AmqpSettings::default()
    }
}

/// A running service (HTTP + ledger) and, while started, its notification consumer.
pub struct Service {
    pub address: String,
    pub client: reqwest::Client,
    pub handles: Handles,
    pub amqp: AmqpSettings,
    pub db_url: String,
    consumer: Option<(CancellationToken, JoinHandle<()>)>,
    _db: TestDb,
}

/// Builds the service on a fresh database of `engine` and starts its consumer.
pub async fn spawn_service(engine: &str, amqp: AmqpSettings) -> Service {
    let db = support::db(engine).await;
    let url = db.url.clone();
    spawn_service_on(db, &url, amqp).await
}

/// The same on `db`, reached through `url` (the test's URL with options added, say).
pub async fn spawn_service_on(db: TestDb, url: &str, amqp: AmqpSettings) -> Service {
    spawn_service_with_clock(db, url, amqp, Arc::new(SystemClock)).await
}

/// The same on a clock of the test's choosing (the consumer's waits sleep on it).
pub async fn spawn_service_with_clock(
    db: TestDb,
    url: &str,
    amqp: AmqpSettings,
    clock: SharedClock,
) -> Service {
    let mut settings = Settings::default();
    // No log written out per test service (the binary's tests keep the default).
    settings.ledger.wal_prewrite_mib = 0;
    settings.ledger.url = url.to_string();
    settings.scheduler.seed = Some(7);
    settings.amqp = amqp.clone();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let app = Application::build_with(settings, listener, clock)
        .await
        .expect("build app");
    let address = format!("http://127.0.0.1:{}", app.port());
    let handles = app.handles().clone();
    tokio::spawn(app.run_until_stopped());
    let mut service = Service {
        address,
        client: reqwest::Client::new(),
        handles,
        amqp,
        db_url: db.url.clone(),
        consumer: None,
        _db: db,
    };
    service.start_consumer();
    service
}

impl Service {
    pub fn ledger(&self) -> &Ledger {
        self.handles.scheduler.ledger()
    }

    pub fn start_consumer(&mut self) {
        assert!(self.consumer.is_none(), "consumer already running");
        let stop = CancellationToken::new();
        // The service's own settings: it may have named the queue after its ledger.
        let task = tokio::spawn(run_notification_consumer(
            self.handles.ingest.clone(),
            self.handles.broker.clone(),
            self.handles.settings.amqp.clone(),
            stop.clone(),
        ));
        self.consumer = Some((stop, task));
    }

    /// Asks the consumer to stop and waits until it has.
    pub async fn stop_consumer(&mut self) {
        let (stop, task) = self.consumer.take().expect("consumer running");
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("consumer stops within 10 s")
            .expect("consumer task");
    }

    pub fn connected(&self) -> bool {
        self.handles.broker.is_connected()
    }

    pub async fn wait_connected(&self) {
        wait_until("the consumer connects", || async { self.connected() }).await;
    }

    /// Notifications counted so far by outcome.
    pub fn counts(&self) -> Value {
        self.handles.ingest.to_json()
    }

    pub fn count(&self, outcome: &str) -> u64 {
        self.counts()[outcome].as_u64().unwrap_or(0)
    }

    /// Messages settled so far (applied, duplicate, unknown or dead-lettered).
    pub fn settled(&self) -> u64 {
        self.counts()
            .as_object()
            .map(|m| m.values().filter_map(Value::as_u64).sum())
            .unwrap_or(0)
    }

    pub async fn wait_settled(&self, n: u64) {
        wait_until(&format!("{n} messages settled"), || async {
            self.settled() >= n
        })
        .await;
        assert_eq!(
            self.settled(),
            n,
            "more messages than published: {}",
            self.counts()
        );
    }

    pub async fn get_json(&self, path: &str) -> (u16, Value) {
        let resp = self
            .client
            .get(format!("{}{path}", self.address))
            .send()
            .await
            .expect("request");
        let status = resp.status().as_u16();
        (status, resp.json().await.expect("json"))
    }
}

impl Drop for Service {
    /// Deletes what this test declared, so runs do not pile queues up on the shared broker.
    fn drop(&mut self) {
        if let Some((stop, _)) = self.consumer.take() {
            stop.cancel();
        }
        let amqp = self.amqp.clone();
        let cleanup = std::thread::spawn(move || {
            futures::executor::block_on(async {
                let conn = Connection::connect(BROKER, ConnectionProperties::default()).await?;
                let ch = conn.create_channel().await?;
                for queue in [&amqp.queue, &amqp.dead_letter] {
                    ch.queue_delete(queue, Default::default()).await?;
                }
                for exchange in [&amqp.exchange, &amqp.dead_letter, &amqp.fanout_exchange] {
                    ch.exchange_delete(exchange, Default::default()).await?;
                }
                conn.close(200, "test done").await
            })
        });
        let _ = cleanup.join();
    }
}

/// Polls `cond` every 5 ms for up to 60 s.
pub async fn wait_until<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Publishes as oslo.messaging does, with publisher confirms so a test knows the broker has
/// every message before it goes on.
pub struct Publisher {
    pub conn: Connection,
    pub ch: Channel,
    amqp: AmqpSettings,
}

impl Publisher {
    pub async fn connect(amqp: &AmqpSettings) -> Publisher {
        let conn = Connection::connect(BROKER, ConnectionProperties::default())
            .await
            .expect("RabbitMQ must be running (`./test` starts it)");
        let ch = conn.create_channel().await.expect("channel");
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirm mode");
        declare_nova_exchange(&ch, amqp)
            .await
            .expect("nova exchange");
        declare_fanout_exchange(&ch, amqp)
            .await
            .expect("fanout exchange");
        Publisher {
            conn,
            ch,
            amqp: amqp.clone(),
        }
    }

    /// The oslo envelope around `inner`.
    pub fn envelope(inner: &Value) -> Vec<u8> {
        json!({"oslo.version": "2.0", "oslo.message": inner.to_string()})
            .to_string()
            .into_bytes()
    }

    pub async fn publish_raw(&self, exchange: &str, routing_key: &str, body: &[u8]) {
        let props = BasicProperties::default().with_content_type("application/json".into());
        let confirm = self
            .ch
            .basic_publish(
                exchange,
                routing_key,
                BasicPublishOptions::default(),
                body,
                props,
            )
            .await
            .expect("publish")
            .await
            .expect("confirm");
        assert!(confirm.is_ack(), "broker refused the message");
    }

    /// A versioned notification (`versioned_notifications.info`, or `.error` for an error
    /// event, as oslo.messaging routes by priority) or, for Parasol's own `compute.host.state`,
    /// a host-state event (`parasol.host_state.info`).
    pub async fn notify(&self, inner: &Value) {
        self.publish_raw(
            &self.amqp.exchange,
            Self::key(inner),
            &Self::envelope(inner),
        )
        .await;
    }

    /// The routing key Nova (or an emulated host) publishes `inner` with.
    fn key(inner: &Value) -> &'static str {
        let event = inner["event_type"].as_str().unwrap_or_default();
        if event == "compute.host.state" {
            "parasol.host_state.info"
        } else if event.ends_with(".error") {
            "versioned_notifications.error"
        } else {
            "versioned_notifications.info"
        }
    }

    /// Many messages, confirmed together (fast enough for 10,000).
    pub async fn notify_all(&self, inners: &[Value]) {
        let mut confirms = Vec::with_capacity(inners.len());
        for inner in inners {
            let key = Self::key(inner);
            let props = BasicProperties::default().with_content_type("application/json".into());
            let confirm = self
                .ch
                .basic_publish(
                    &self.amqp.exchange,
                    key,
                    BasicPublishOptions::default(),
                    &Self::envelope(inner),
                    props,
                )
                .await
                .expect("publish");
            confirms.push(confirm);
        }
        let confirmed = futures::stream::iter(confirms)
            .then(|c| async move { c.await.expect("confirm").is_ack() })
            .filter(|ack| std::future::ready(*ack))
            .count()
            .await;
        assert_eq!(confirmed, inners.len(), "broker refused messages");
    }

    /// A cast on the scheduler fanout exchange, as nova-compute sends it (routing key = topic).
    pub async fn fanout(&self, inner: &Value) {
        self.publish_raw(
            &self.amqp.fanout_exchange,
            "scheduler",
            &Self::envelope(inner),
        )
        .await;
    }

    /// Takes `n` messages off the dead-letter queue: body and reason header each.
    pub async fn dead_letters(&self, n: usize) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while out.len() < n {
            assert!(
                Instant::now() < deadline,
                "only {} dead letters of {n}",
                out.len()
            );
            let got = self
                .ch
                .basic_get(&self.amqp.dead_letter, BasicGetOptions { no_ack: true })
                .await
                .expect("basic.get");
            let Some(msg) = got else {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            let reason = msg
                .delivery
                .properties
                .headers()
                .as_ref()
                .and_then(|h| h.inner().get(REASON_HEADER).cloned())
                .map(|v| match v {
                    AMQPValue::LongString(s) => s.to_string(),
                    other => format!("{other:?}"),
                })
                .unwrap_or_default();
            out.push((
                String::from_utf8_lossy(&msg.delivery.data).into_owned(),
                reason,
            ));
        }
        out
    }

    /// Ready messages in a queue (passive declare).
    pub async fn ready(&self, queue: &str) -> u32 {
        let ch = self.conn.create_channel().await.expect("channel");
        let q = ch
            .queue_declare(
                queue,
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("queue exists");
        q.message_count()
    }
}
