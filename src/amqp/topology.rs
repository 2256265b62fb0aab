//! What Parasol declares on the broker. Nova's exchanges are declared with oslo.messaging's
//! own flags (a mismatch would close the channel); Parasol's queues are its own, so it never
//! competes with Nova's consumers.

use crate::configuration::AmqpSettings;
use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, ExchangeKind};

/// Routing key of Nova's versioned notifications.
pub const NOVA_NOTIFICATIONS: &str = "versioned_notifications.info";
/// Routing key of Parasol's host-state events.
pub const HOST_STATE: &str = "parasol.host_state.info";
/// nova-compute's fanout exchange for the scheduler topic.
pub const SCHEDULER_FANOUT: &str = "scheduler_fanout";
/// Where poison messages go, with the reason in header `x-parasol-reason`.
pub const DEAD_LETTER: &str = "parasol.dead_letter";

/// Declares Nova's topic exchange as oslo.messaging does (not durable unless
/// `amqp_durable_queues`, not auto-deleted).
pub async fn declare_nova_exchange(ch: &Channel, amqp: &AmqpSettings) -> Result<(), lapin::Error> {
    ch.exchange_declare(
        &amqp.exchange,
        ExchangeKind::Topic,
        ExchangeDeclareOptions {
            durable: amqp.durable_exchange,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
}

/// Declares `scheduler_fanout` as oslo.messaging does (fanout, not durable, auto-deleted).
pub async fn declare_fanout_exchange(ch: &Channel) -> Result<(), lapin::Error> {
    ch.exchange_declare(
        SCHEDULER_FANOUT,
        ExchangeKind::Fanout,
        ExchangeDeclareOptions {
            durable: false,
            auto_delete: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
}

/// Parasol's durable notification queue bound to both routing keys, its per-process fanout
/// queue (expires 30 min after the process is gone, as oslo's), and the dead-letter queue.
/// Returns the fanout queue's name.
pub async fn declare_notification_topology(
    ch: &Channel,
    amqp: &AmqpSettings,
    process_id: &str,
) -> Result<String, lapin::Error> {
    declare_nova_exchange(ch, amqp).await?;
    let durable = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.queue_declare(&amqp.queue, durable, FieldTable::default())
        .await?;
    for key in [NOVA_NOTIFICATIONS, HOST_STATE] {
        ch.queue_bind(
            &amqp.queue,
            &amqp.exchange,
            key,
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    }
    declare_fanout_exchange(ch).await?;
    let fanout_queue = format!("{SCHEDULER_FANOUT}_parasol_{process_id}");
    let mut args = FieldTable::default();
    args.insert("x-expires".into(), AMQPValue::LongInt(1_800_000));
    ch.queue_declare(&fanout_queue, QueueDeclareOptions::default(), args)
        .await?;
    ch.queue_bind(
        &fanout_queue,
        SCHEDULER_FANOUT,
        "",
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    ch.exchange_declare(
        DEAD_LETTER,
        ExchangeKind::Fanout,
        ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await?;
    ch.queue_declare(DEAD_LETTER, durable, FieldTable::default())
        .await?;
    ch.queue_bind(
        DEAD_LETTER,
        DEAD_LETTER,
        "",
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    Ok(fanout_queue)
}
