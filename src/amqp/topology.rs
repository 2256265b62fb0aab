//! What Parasol declares on the broker. Nova's exchanges are declared with oslo.messaging's
//! own flags (a mismatch would close the channel); Parasol's queues are its own, so it never
//! competes with Nova's consumers. Every name comes from `[amqp]`, so several Parasol
//! instances (or parallel tests) can share one broker.

use crate::configuration::AmqpSettings;
use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, ExchangeKind};

/// Routing key of Nova's versioned notifications.
pub const NOVA_NOTIFICATIONS: &str = "versioned_notifications.info";
/// Routing key of Nova's versioned notifications of priority ERROR (oslo.messaging's
/// `<topic>.<priority>`): `instance.create.error`, `instance.rebuild.error`, the conductor's
/// `compute_task.*.error`.
pub const NOVA_ERROR_NOTIFICATIONS: &str = "versioned_notifications.error";
/// Routing key of Parasol's host-state events.
pub const HOST_STATE: &str = "parasol.host_state.info";
/// Default of `[amqp] fanout_exchange`: nova-compute's fanout exchange for the scheduler topic.
pub const SCHEDULER_FANOUT: &str = "scheduler_fanout";
/// Default of `[amqp] dead_letter`.
pub const DEAD_LETTER: &str = "parasol.dead_letter";
/// Header carrying the reason a message was dead-lettered.
pub const REASON_HEADER: &str = "x-parasol-reason";
/// Header carrying the routing key a dead-lettered message arrived with.
pub const ROUTING_KEY_HEADER: &str = "x-parasol-routing-key";
/// oslo's per-process fanout queues expire 30 minutes after their consumer is gone.
const FANOUT_QUEUE_EXPIRES_MS: i32 = 1_800_000;

/// The queues a consumer reads.
#[derive(Clone, Debug)]
pub struct Queues {
    /// Parasol's durable queue of notifications and host-state events.
    pub notifications: String,
    /// This process's queue on the fanout exchange.
    pub fanout: String,
}

/// Declares Nova's topic exchange as oslo.messaging does (not durable unless
/// `amqp_durable_queues` or `rabbit_quorum_queue`, not auto-deleted).
pub async fn declare_nova_exchange(ch: &Channel, amqp: &AmqpSettings) -> Result<(), lapin::Error> {
    ch.exchange_declare(
        &amqp.exchange,
        ExchangeKind::Topic,
        ExchangeDeclareOptions {
            durable: amqp.durable(),
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
}

/// Declares the scheduler fanout exchange as oslo.messaging does (not durable, auto-deleted).
pub async fn declare_fanout_exchange(
    ch: &Channel,
    amqp: &AmqpSettings,
) -> Result<(), lapin::Error> {
    ch.exchange_declare(
        &amqp.fanout_exchange,
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

/// Declares Parasol's durable dead-letter exchange and its durable queue of the same name
/// (of `[amqp] queue_type`).
pub async fn declare_dead_letter(ch: &Channel, amqp: &AmqpSettings) -> Result<(), lapin::Error> {
    let name = amqp.dead_letter.as_str();
    ch.exchange_declare(
        name,
        ExchangeKind::Fanout,
        ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await?;
    ch.queue_declare(name, durable(), amqp.queue_arguments())
        .await?;
    bind(ch, name, name, "").await
}

/// The name of this process's fanout queue (oslo: `<exchange>_<uuid hex>`).
pub fn fanout_queue_name(amqp: &AmqpSettings, process_id: &str) -> String {
    format!("{}_parasol_{process_id}", amqp.fanout_exchange)
}

/// Parasol's durable notification queue (of `[amqp] queue_type`) bound to Nova's versioned
/// notifications (info and error) and Parasol's host-state events,
/// its per-process fanout queue (classic, as oslo's are by default), and the dead-letter
/// exchange and queue.
pub async fn declare_notification_topology(
    ch: &Channel,
    amqp: &AmqpSettings,
    process_id: &str,
) -> Result<Queues, lapin::Error> {
    declare_nova_exchange(ch, amqp).await?;
    ch.queue_declare(&amqp.queue, durable(), amqp.queue_arguments())
        .await?;
    for key in [NOVA_NOTIFICATIONS, NOVA_ERROR_NOTIFICATIONS, HOST_STATE] {
        bind(ch, &amqp.queue, &amqp.exchange, key).await?;
    }
    declare_fanout_exchange(ch, amqp).await?;
    let fanout = fanout_queue_name(amqp, process_id);
    let mut args = FieldTable::default();
    args.insert(
        "x-expires".into(),
        AMQPValue::LongInt(FANOUT_QUEUE_EXPIRES_MS),
    );
    ch.queue_declare(&fanout, QueueDeclareOptions::default(), args)
        .await?;
    bind(ch, &fanout, &amqp.fanout_exchange, "").await?;
    declare_dead_letter(ch, amqp).await?;
    Ok(Queues {
        notifications: amqp.queue.clone(),
        fanout,
    })
}

fn durable() -> QueueDeclareOptions {
    QueueDeclareOptions {
        durable: true,
        ..Default::default()
    }
}

async fn bind(ch: &Channel, queue: &str, exchange: &str, key: &str) -> Result<(), lapin::Error> {
    ch.queue_bind(
        queue,
        exchange,
        key,
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
}
