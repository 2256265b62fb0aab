//! RabbitMQ: the notification consumer (host state, Nova's versioned notifications and
//! nova-compute's fanout casts) with reconnection, exactly-once effects and a dead-letter queue.
//!
//! # Layout
//! - `topology`: the exchanges, queues and bindings Parasol declares (never Nova's own queues).
//! - `consumer`: the connection's life: declare, consume, reconnect with backoff.
//! - `batch`: decode, apply a batch in one transaction, dead-letter poison, ack after commit.
//! - `backoff`: capped exponential reconnection delays.

mod backoff;
mod batch;
mod consumer;
pub mod topology;

pub use backoff::Backoff;
pub use consumer::{connection_name, run_notification_consumer, ConsumerError};

use crate::startup::AppState;
use actix_web::web;
use lapin::types::LongString;
use std::sync::atomic::Ordering;

/// Starts the notification consumer when `[amqp] url` is set; it reconnects forever.
pub fn spawn_consumers(state: web::Data<AppState>) {
    let settings = state.scheduler.settings();
    if settings.amqp.url.is_empty() {
        tracing::info!("no [amqp] url: notifications only over HTTP");
        return;
    }
    state.broker.configured.store(true, Ordering::Relaxed);
    let amqp = settings.amqp.clone();
    let shared = state.into_inner();
    // The sender lives as long as the task: the consumer runs until the process ends.
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        run_notification_consumer(shared, amqp, shutdown).await;
        drop(stop);
    });
}

/// Connects to the broker under a name operators see in `rabbitmqctl list_connections`.
pub async fn connect(url: &str, name: &str) -> Result<lapin::Connection, lapin::Error> {
    let props = lapin::ConnectionProperties::default()
        .with_connection_name(LongString::from(name.to_string()));
    lapin::Connection::connect(url, props).await
}
