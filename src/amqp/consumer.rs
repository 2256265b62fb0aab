//! Consume, apply, then acknowledge: a message's effect and id are committed together before
//! its ack, so a redelivery after a crash or a lost connection changes nothing. Poison
//! messages go to `parasol.dead_letter` with the reason in header `x-parasol-reason`.

use super::topology::{declare_notification_topology, DEAD_LETTER};
use super::{connect, Backoff};
use crate::configuration::AmqpSettings;
use crate::notifications::{apply, ApplyError};
use crate::nova::Notification;
use crate::startup::AppState;
use futures::StreamExt;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Why a consumer session ended.
#[derive(Debug, thiserror::Error)]
pub enum ConsumerError {
    #[error("broker: {0}")]
    Broker(#[from] lapin::Error),
    #[error("the broker closed the consumer")]
    Closed,
}

/// Consumes until `shutdown` turns true, reconnecting with capped exponential backoff.
pub async fn run_notification_consumer(
    state: Arc<AppState>,
    amqp: AmqpSettings,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut backoff = Backoff::new(
        Duration::from_secs_f64(amqp.reconnect_min_s),
        Duration::from_secs_f64(amqp.reconnect_max_s),
    );
    let process_id = uuid::Uuid::new_v4().simple().to_string();
    loop {
        if *shutdown.borrow() {
            return;
        }
        let result = session(&state, &amqp, &process_id, &mut shutdown, &mut backoff).await;
        state.broker.connected.store(false, Ordering::Relaxed);
        state.scheduler.stats().metrics().broker_connected.set(0);
        match result {
            Ok(()) => return,
            Err(e) => {
                let delay = backoff.next_delay();
                tracing::warn!(error = %e, retry_in_s = delay.as_secs_f64(), "broker unavailable; HTTP keeps serving");
                *state.broker.last_error.lock() = Some(e.to_string());
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.changed() => {}
                }
            }
        }
    }
}

/// One connection's life: declare, consume, apply, ack. `Ok` means asked to stop.
async fn session(
    state: &AppState,
    amqp: &AmqpSettings,
    process_id: &str,
    shutdown: &mut watch::Receiver<bool>,
    backoff: &mut Backoff,
) -> Result<(), ConsumerError> {
    let conn = connect(&amqp.url).await?;
    let ch = conn.create_channel().await?;
    ch.basic_qos(amqp.prefetch, BasicQosOptions::default())
        .await?;
    ch.confirm_select(ConfirmSelectOptions::default()).await?;
    let fanout_queue = declare_notification_topology(&ch, amqp, process_id).await?;
    let tag = format!("parasol-{process_id}");
    let notifications = ch
        .basic_consume(
            &amqp.queue,
            &format!("{tag}-n"),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let fanout = ch
        .basic_consume(
            &fanout_queue,
            &format!("{tag}-f"),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let mut deliveries = futures::stream::select(notifications, fanout);
    state.broker.connected.store(true, Ordering::Relaxed);
    state.scheduler.stats().metrics().broker_connected.set(1);
    *state.broker.last_error.lock() = None;
    backoff.reset();
    tracing::info!(queue = %amqp.queue, fanout = %fanout_queue, "consuming notifications");
    loop {
        tokio::select! {
            _ = shutdown.changed() => {
                if *shutdown.borrow() {
                    let _ = conn.close(200, "parasol stopping").await;
                    return Ok(());
                }
            }
            next = deliveries.next() => match next {
                Some(Ok(delivery)) => handle(state, &ch, delivery).await?,
                Some(Err(e)) => return Err(e.into()),
                None => return Err(ConsumerError::Closed),
            }
        }
    }
}

async fn handle(state: &AppState, ch: &Channel, delivery: Delivery) -> Result<(), ConsumerError> {
    let notification = match Notification::decode(&delivery.data) {
        Ok(n) => n,
        Err(e) => return dead_letter(state, ch, delivery, &e.to_string()).await,
    };
    let now = state.scheduler.clock().now_ms();
    match apply(state.scheduler.ledger(), &notification, now).await {
        Ok(outcome) => {
            state.count_notification(outcome.as_str());
            delivery.ack(BasicAckOptions::default()).await?;
        }
        Err(ApplyError::Rejected(reason)) => {
            let reason = format!(
                "{} {}: {reason}",
                notification.event_type, notification.message_id
            );
            return dead_letter(state, ch, delivery, &reason).await;
        }
        Err(ApplyError::Ledger(e)) => {
            tracing::error!(error = %e, "ledger unavailable; message requeued");
            tokio::time::sleep(Duration::from_millis(500)).await;
            delivery
                .nack(BasicNackOptions {
                    requeue: true,
                    ..Default::default()
                })
                .await?;
        }
    }
    Ok(())
}

/// Publishes the message to the dead-letter queue with its reason, waits for the broker's
/// confirmation, then acknowledges the original: nothing is lost, nothing silently dropped.
async fn dead_letter(
    state: &AppState,
    ch: &Channel,
    delivery: Delivery,
    reason: &str,
) -> Result<(), ConsumerError> {
    tracing::warn!(%reason, routing_key = %delivery.routing_key, "message dead-lettered");
    let mut headers = FieldTable::default();
    headers.insert(
        "x-parasol-reason".into(),
        AMQPValue::LongString(LongString::from(reason.to_string())),
    );
    headers.insert(
        "x-parasol-routing-key".into(),
        AMQPValue::LongString(LongString::from(delivery.routing_key.as_str().to_string())),
    );
    let props = BasicProperties::default()
        .with_headers(headers)
        .with_delivery_mode(2);
    ch.basic_publish(
        DEAD_LETTER,
        "",
        BasicPublishOptions::default(),
        &delivery.data,
        props,
    )
    .await?
    .await?;
    let body = String::from_utf8_lossy(&delivery.data);
    let now = state.scheduler.clock().now_ms();
    if let Err(e) = state
        .scheduler
        .ledger()
        .dead_letter("amqp", reason, &body, now)
        .await
    {
        tracing::warn!(error = %e, "dead letter not recorded in the ledger (it is on the queue)");
    }
    state.count_notification("dead_letter");
    delivery.ack(BasicAckOptions::default()).await?;
    Ok(())
}
