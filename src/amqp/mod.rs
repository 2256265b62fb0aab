//! RabbitMQ: the notification consumer (host state, Nova's versioned notifications and
//! nova-compute's fanout casts) with reconnection, exactly-once effects and a dead-letter queue.
//!
//! # Layout
//! - `topology`: the exchanges, queues and bindings Parasol declares (never Nova's own queues).
//! - `consumer`: the connection's life: declare, consume, reconnect with backoff.
//! - `batch`: decode, apply a batch in one transaction, dead-letter poison, ack after commit.
//! - `status`: [`BrokerStatus`], the connection's state for health and metrics.

mod batch;
mod consumer;
mod status;
pub mod topology;

pub use crate::backoff::Backoff;
pub use consumer::{connection_name, run_notification_consumer, ConsumerError};
pub use status::BrokerStatus;

use lapin::types::LongString;

/// Connects to the broker under a name operators see in `rabbitmqctl list_connections`.
pub async fn connect(url: &str, name: &str) -> Result<lapin::Connection, lapin::Error> {
    let props = lapin::ConnectionProperties::default()
        .with_connection_name(LongString::from(name.to_string()));
    lapin::Connection::connect(url, props).await
}
