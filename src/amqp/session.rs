//! What the notification consumer and the RPC server share about a broker connection: the
//! reconnect loop (capped exponential backoff on the service's clock, the state reported in
//! [`BrokerStatus`]) and the dead-letter publisher (publisher-confirmed: a dead letter is on
//! the broker before anyone counts it sent).

use super::topology::{REASON_HEADER, ROUTING_KEY_HEADER};
use super::{Backoff, BrokerStatus};
use crate::clock::SharedClock;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Who runs the sessions, for the log and the status.
pub struct Sessions {
    /// Names the user in the log line of a lost connection (`notification consumer`, …).
    pub what: &'static str,
    pub broker: Arc<BrokerStatus>,
    pub clock: SharedClock,
    /// `[amqp] reconnect_min_s` and `reconnect_max_s`.
    pub reconnect_min_s: f64,
    pub reconnect_max_s: f64,
}

/// Handed to each session: it says when the session is up (consuming), which the status
/// reports and which resets the backoff.
#[derive(Clone)]
pub struct Link {
    broker: Arc<BrokerStatus>,
    up: Arc<AtomicBool>,
}

impl Link {
    /// The session is connected and consuming.
    pub fn up(&self) {
        self.broker.connected();
        self.up.store(true, Ordering::Relaxed);
    }
}

impl Sessions {
    /// Runs `session` until it returns `Ok` (asked to stop) or `shutdown` is cancelled; after
    /// an `Err` it waits the next backoff delay (reset by a session that came up) on the
    /// service's clock, reports the error, calls `on_retry` and runs a new session.
    pub async fn run<E, F, Fut>(
        self,
        shutdown: &CancellationToken,
        mut on_retry: impl FnMut(),
        mut session: F,
    ) where
        E: std::fmt::Display,
        F: FnMut(Link) -> Fut,
        Fut: Future<Output = Result<(), E>>,
    {
        let mut backoff = Backoff::new(
            Duration::from_secs_f64(self.reconnect_min_s),
            Duration::from_secs_f64(self.reconnect_max_s),
        );
        self.broker.set_configured();
        loop {
            if shutdown.is_cancelled() {
                return;
            }
            self.broker.attempt();
            let link = Link {
                broker: self.broker.clone(),
                up: Arc::new(AtomicBool::new(false)),
            };
            let result = session(link.clone()).await;
            self.broker.disconnected();
            if link.up.load(Ordering::Relaxed) {
                backoff.reset();
            }
            let Err(e) = result else { return };
            let delay_ms = backoff.next_delay_ms();
            let error = super::explain(e.to_string());
            tracing::warn!(who = self.what, %error, retry_in_s = delay_ms as f64 / 1000.0,
                "broker unavailable; reconnecting (HTTP keeps serving)");
            self.broker.failed(error, delay_ms);
            on_retry();
            tokio::select! {
                _ = self.clock.sleep_ms(delay_ms) => {}
                _ = shutdown.cancelled() => return,
            }
        }
    }
}

/// Why dead letters were not all taken.
#[derive(Debug, thiserror::Error)]
pub enum DeadLetterError {
    #[error("broker: {}", crate::redact::redact_urls(&.0.to_string()))]
    Broker(#[from] lapin::Error),
    #[error("the broker refused to take dead letter on {0}")]
    Refused(String),
}

/// One message that cannot be served, and why.
pub struct Letter<'a> {
    pub body: &'a [u8],
    /// The routing key it arrived with.
    pub routing_key: &'a str,
    pub reason: &'a str,
}

/// Publishes to `[amqp] dead_letter` on a channel of its own in confirm mode.
#[derive(Clone)]
pub struct DeadLetters {
    channel: Channel,
    exchange: Arc<str>,
}

impl DeadLetters {
    /// Puts `channel` in confirm mode; letters go to the exchange `exchange` (declared by the
    /// caller's topology).
    pub async fn new(channel: Channel, exchange: &str) -> Result<Self, lapin::Error> {
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        Ok(DeadLetters {
            channel,
            exchange: exchange.into(),
        })
    }

    /// The confirmed channel (declarations may share it).
    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    /// Publishes every letter with its reason and routing key in headers, and returns once
    /// the broker confirmed them all: only then may the originals be acknowledged.
    pub async fn publish(&self, letters: &[Letter<'_>]) -> Result<(), DeadLetterError> {
        let mut confirms = Vec::with_capacity(letters.len());
        for letter in letters {
            tracing::warn!(reason = %letter.reason, routing_key = %letter.routing_key, "message dead-lettered");
            let mut headers = FieldTable::default();
            headers.insert(
                REASON_HEADER.into(),
                AMQPValue::LongString(LongString::from(letter.reason.to_string())),
            );
            headers.insert(
                ROUTING_KEY_HEADER.into(),
                AMQPValue::LongString(LongString::from(letter.routing_key.to_string())),
            );
            let props = BasicProperties::default()
                .with_headers(headers)
                .with_content_type("application/json".into())
                .with_delivery_mode(2);
            let confirm = self
                .channel
                .basic_publish(
                    &self.exchange,
                    "",
                    BasicPublishOptions::default(),
                    letter.body,
                    props,
                )
                .await?;
            confirms.push(confirm);
        }
        for confirm in confirms {
            if confirm.await?.is_nack() {
                return Err(DeadLetterError::Refused(self.exchange.to_string()));
            }
        }
        Ok(())
    }
}
