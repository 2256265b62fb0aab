//! RabbitMQ: the notification consumer (host state, Nova's versioned notifications and
//! nova-compute's fanout casts) with reconnection, exactly-once effects and a dead-letter queue.
//!
//! # Layout
//! - `topology`: the exchanges, queues and bindings Parasol declares (never Nova's own queues).
//! - `session`: what the consumer and the RPC server share: the reconnect loop with backoff
//!   and status, and the publisher-confirmed dead-letter publisher.
//! - `consumer`: the connection's life: declare, consume (reconnected by `session`).
//! - `batch`: decode, apply a batch in one transaction, dead-letter poison, ack after commit.
//! - `status`: [`BrokerStatus`], the connection's state for health and metrics.

mod batch;
mod consumer;
mod session;
mod status;
pub mod topology;

pub use crate::backoff::Backoff;
pub use crate::transport_url::TransportUrl;
pub use batch::REQUEUE_WAIT_MS;
pub use consumer::{connection_name, run_notification_consumer, ConsumerError};
pub use session::{DeadLetterError, DeadLetters, Letter, Link, Sessions};
pub use status::BrokerStatus;

use lapin::types::LongString;

/// `error` (a broker error's text), followed by what to change when it is the broker refusing
/// a declaration that differs from what it holds: a queue of another kind, or Nova's exchange
/// of another durability.
pub fn explain(error: String) -> String {
    let hint = if error.contains("inequivalent arg 'x-queue-type'") {
        "; [amqp] queue_type differs from the kind of the queue on the broker: set it to the \
         queue's kind (Nova's [oslo_messaging_rabbit] rabbit_quorum_queue), or delete the \
         queue to have it declared anew"
    } else if error.contains("inequivalent arg 'durable'") && error.contains("for exchange") {
        "; [amqp] durable_exchange (durable also with queue_type = \"quorum\") differs from \
         the exchange on the broker: it must match Nova's [oslo_messaging_rabbit] \
         amqp_durable_queues and rabbit_quorum_queue"
    } else {
        return error;
    };
    error + hint
}

/// Closes `conn` for a stop and waits until lapin's I/O thread has ended. A clean stop then
/// leaves nothing of the connection running when the service's runtime shuts down: the I/O
/// thread, still flushing after the broker's `close-ok`, found the runtime's reactor gone and
/// logged `error doing IO` (an ERROR at a normal stop). Deliveries not acknowledged go back
/// to their queues. The channels are the caller's to keep until this returns: one dropped
/// while the connection is open closes itself on the I/O thread, racing this close (lapin
/// then fails the whole connection: `Connection error: invalid channel state: Closing`).
pub async fn close(conn: lapin::Connection, reason: &str) {
    if conn.close(200, reason).await.is_err() {
        // Not connected: its I/O thread has stopped or stops on its own.
        return;
    }
    let (ended, wait) = tokio::sync::oneshot::channel();
    // A thread of its own, not the runtime's blocking pool: the join blocks.
    std::thread::spawn(move || {
        let _ = conn.run();
        let _ = ended.send(());
    });
    let _ = wait.await;
}

/// The broker to try first on the next connection (oslo.messaging's round-robin failover).
static NEXT_BROKER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Connects to a broker of `url` (a `transport_url` may name several: they are tried in turn,
/// starting after the one used last, as oslo.messaging fails over) under a name operators see
/// in `rabbitmqctl list_connections`.
pub async fn connect(url: &str, name: &str) -> Result<lapin::Connection, lapin::Error> {
    let brokers = match url.parse::<TransportUrl>() {
        Ok(t) => t.brokers,
        // Let lapin name what is wrong with it.
        Err(_) => vec![url.to_string()],
    };
    let start = NEXT_BROKER.load(std::sync::atomic::Ordering::Relaxed);
    let mut last = None;
    for i in 0..brokers.len() {
        let at = (start + i) % brokers.len();
        // lapin's own executor and reactor (async-global-executor, async-io) would run its
        // futures on threads of their own: every delivery and publish crossed three threads
        // (a futex wake-up and a context switch each), which was 40 % of a service's CPU per
        // decision over Nova's RPC. On the service's tokio runtime they do not.
        let props = lapin::ConnectionProperties::default()
            .with_connection_name(LongString::from(name.to_string()))
            .with_executor(tokio_executor_trait::Tokio::current())
            .with_reactor(tokio_reactor_trait::Tokio);
        match lapin::Connection::connect(&brokers[at], props).await {
            Ok(conn) => {
                NEXT_BROKER.store(at, std::sync::atomic::Ordering::Relaxed);
                return Ok(conn);
            }
            Err(e) => {
                if brokers.len() > 1 {
                    tracing::warn!(broker = %crate::redact::redact_url(&brokers[at]), error = %crate::redact::redact_urls(&e.to_string()), "broker unreachable; trying the next");
                }
                last = Some(e);
            }
        }
    }
    NEXT_BROKER.store(start.wrapping_add(1), std::sync::atomic::Ordering::Relaxed);
    Err(last.expect("a transport URL names at least one broker"))
}
