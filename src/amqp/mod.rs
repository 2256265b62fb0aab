//! RabbitMQ: the notification consumer (host state, Nova's versioned notifications and
//! nova-compute's fanout casts) with reconnection, exactly-once effects and a dead-letter queue.
//!
//! # Layout
//! - `topology`: the exchanges, queues and bindings Parasol declares (never Nova's own queues).
//! - `consumer`: the consume–apply–ack loop and the dead-lettering of poison messages.
//! - `backoff`: capped exponential reconnection delays.

mod backoff;
mod consumer;
pub mod topology;

pub use backoff::Backoff;
pub use consumer::{run_notification_consumer, ConsumerError};

use crate::startup::AppState;
use actix_web::web;
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

/// Connects to the broker.
pub async fn connect(url: &str) -> Result<lapin::Connection, lapin::Error> {
    lapin::Connection::connect(url, lapin::ConnectionProperties::default()).await
}
