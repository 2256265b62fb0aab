//! How emulated hosts tell Parasol what happened: on RabbitMQ (the design: oslo envelope on
//! the configured exchange) or, with `--notify http`, `POST /v1/notifications`.

use crate::wire;
use anyhow::Context;
use lapin::options::{BasicPublishOptions, ExchangeDeclareOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The transport of notifications.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NotifyVia {
    Amqp,
    Http,
}

/// A cloneable publisher; counts what it sent and what failed.
#[derive(Clone)]
pub struct Notifier {
    via: Via,
    pub sent: Arc<AtomicU64>,
    pub failed: Arc<AtomicU64>,
}

#[derive(Clone)]
enum Via {
    Amqp {
        channel: Channel,
        exchange: String,
        _conn: Arc<Connection>,
    },
    Http {
        client: reqwest::Client,
        /// Parsed once per target: a `&str` would be parsed (and IDNA-checked) per event.
        url: Arc<parking_lot::RwLock<reqwest::Url>>,
    },
}

impl Notifier {
    /// Connects to the broker, declares `exchange` as the service does (topic, transient) and
    /// the service's durable `queue` bound to both routing keys, so no event published before
    /// the service's consumer is up is dropped.
    pub async fn amqp(url: &str, exchange: &str, queue: &str) -> anyhow::Result<Notifier> {
        let conn = Connection::connect(url, ConnectionProperties::default())
            .await
            .context("connecting to RabbitMQ")?;
        let channel = conn.create_channel().await?;
        channel
            .exchange_declare(
                exchange,
                ExchangeKind::Topic,
                ExchangeDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .context("declaring the bench exchange")?;
        let durable = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        channel
            .queue_declare(queue, durable, FieldTable::default())
            .await?;
        for key in [wire::HOST_STATE_KEY, wire::NOVA_KEY] {
            channel
                .queue_bind(
                    queue,
                    exchange,
                    key,
                    Default::default(),
                    FieldTable::default(),
                )
                .await?;
        }
        Ok(Notifier::new(Via::Amqp {
            channel,
            exchange: exchange.to_string(),
            _conn: Arc::new(conn),
        }))
    }

    pub fn http(client: reqwest::Client, base: &str) -> anyhow::Result<Notifier> {
        Ok(Notifier::new(Via::Http {
            client,
            url: Arc::new(parking_lot::RwLock::new(notifications_url(base)?)),
        }))
    }

    /// Points HTTP notifications at another service (no-op on RabbitMQ).
    pub fn retarget(&self, base: &str) -> anyhow::Result<()> {
        if let Via::Http { url, .. } = &self.via {
            *url.write() = notifications_url(base)?;
        }
        Ok(())
    }

    fn new(via: Via) -> Notifier {
        Notifier {
            via,
            sent: Arc::default(),
            failed: Arc::default(),
        }
    }

    /// Publishes one inner message with `routing_key` (ignored over HTTP).
    pub async fn publish(&self, routing_key: &str, inner: &str) {
        let ok = match &self.via {
            Via::Amqp {
                channel, exchange, ..
            } => {
                let body = parasol::nova::encode_envelope_str(inner);
                channel
                    .basic_publish(
                        exchange,
                        routing_key,
                        BasicPublishOptions::default(),
                        &body,
                        BasicProperties::default().with_content_type("application/json".into()),
                    )
                    .await
                    .is_ok()
            }
            Via::Http { client, url } => {
                // A host's events outlive a service restart (the bench restarts the service
                // between registration and the measured run, and the fleet keeps beating): a
                // request without an answer is retried for up to 10 s against the current target,
                // as a compute's oslo.messaging notifier keeps its events until the broker
                // takes them. Any answer other than 2xx is a failure and is reported.
                let mut attempt = 0;
                loop {
                    let target = url.read().clone();
                    let sent = client
                        .post(target.clone())
                        .header(reqwest::header::CONTENT_TYPE, "application/json")
                        .body(inner.to_owned())
                        .send()
                        .await;
                    match sent {
                        Ok(r) if r.status().is_success() => break true,
                        Ok(r) => {
                            let status = r.status();
                            let body = r.text().await.unwrap_or_default();
                            report_failure(&format!("{target}: {status}: {body}"));
                            break false;
                        }
                        // No answer (refused, or reset by a service that is stopping): the
                        // event carries its message_id, which the service applies once, so
                        // sending it again is safe.
                        Err(e) if (e.is_connect() || e.is_request()) && attempt < 100 => {
                            attempt += 1;
                            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        }
                        Err(e) => {
                            report_failure(&format!("{target}: {e:?}"));
                            break false;
                        }
                    }
                }
            }
        };
        let counter = if ok { &self.sent } else { &self.failed };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Publishes `body` as it is, with no oslo envelope (the soak's malformed messages);
    /// false over HTTP or when the broker refused it. Not counted in `sent`.
    pub async fn publish_raw(&self, routing_key: &str, body: &[u8]) -> bool {
        match &self.via {
            Via::Amqp {
                channel, exchange, ..
            } => channel
                .basic_publish(
                    exchange,
                    routing_key,
                    BasicPublishOptions::default(),
                    body,
                    BasicProperties::default().with_content_type("application/json".into()),
                )
                .await
                .is_ok(),
            Via::Http { .. } => false,
        }
    }

    /// Deletes the bench's queues and exchange once its service is gone.
    pub async fn cleanup_amqp(url: &str, queues: &[String], exchange: &str) -> anyhow::Result<()> {
        let conn = Connection::connect(url, ConnectionProperties::default()).await?;
        let ch = conn.create_channel().await?;
        for queue in queues {
            ch.queue_delete(queue, Default::default()).await?;
        }
        ch.exchange_delete(exchange, Default::default()).await?;
        conn.close(0, "bench done").await?;
        Ok(())
    }
}

/// `POST /v1/notifications` of the service at `base`.
fn notifications_url(base: &str) -> anyhow::Result<reqwest::Url> {
    reqwest::Url::parse(&format!("{base}/v1/notifications"))
        .with_context(|| format!("the service's base URL {base}"))
}

/// Prints the first few failed notifications with their reason (the run's result counts all).
fn report_failure(what: &str) {
    static PRINTED: AtomicU64 = AtomicU64::new(0);
    if PRINTED.fetch_add(1, Ordering::Relaxed) < 5 {
        eprintln!("notification failed: {what}");
    }
}
