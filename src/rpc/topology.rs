//! What the RPC server declares, with oslo.messaging's own flags so Parasol and nova-scheduler
//! can share a broker: the topic exchange (durable only with `amqp_durable_queues`), queue
//! `<topic>` shared by every scheduler process (round-robin) and `<topic>.<host>`.

use crate::amqp::topology::{declare_nova_exchange, DEAD_LETTER};
use crate::configuration::{AmqpSettings, RpcSettings};
use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{Channel, ExchangeKind};

/// The server-specific queue, `<topic>.<host>`.
pub fn server_queue(rpc: &RpcSettings) -> String {
    format!("{}.{}", rpc.topic, rpc.host)
}

/// Declares the exchange, both queues (bound with their own names as routing keys) and the
/// dead-letter queue; returns the queue names to consume.
pub async fn declare_rpc_topology(
    ch: &Channel,
    amqp: &AmqpSettings,
    rpc: &RpcSettings,
) -> Result<[String; 2], lapin::Error> {
    declare_nova_exchange(ch, amqp).await?;
    let queues = [rpc.topic.clone(), server_queue(rpc)];
    let options = QueueDeclareOptions {
        durable: amqp.durable_exchange,
        ..Default::default()
    };
    for q in &queues {
        ch.queue_declare(q, options, FieldTable::default()).await?;
        ch.queue_bind(
            q,
            &amqp.exchange,
            q,
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    }
    // The same declarations as the notification consumer's, so either may come first.
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
    let durable = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
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
    Ok(queues)
}
