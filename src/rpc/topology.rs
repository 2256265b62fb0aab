//! What the RPC server declares, with oslo.messaging's own flags so Parasol and nova-scheduler
//! can share a broker: the topic exchange (durable only with `amqp_durable_queues` or quorum
//! queues), queue `<topic>` shared by every scheduler process (round-robin) and
//! `<topic>.<host>`, both of `[amqp] queue_type` (`x-queue-type: quorum` as oslo declares them
//! with `rabbit_quorum_queue`).

use crate::amqp::topology::{declare_dead_letter, declare_nova_exchange};
use crate::configuration::{AmqpSettings, RpcSettings};
use lapin::options::{QueueBindOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::Channel;

/// The server-specific queue, `<topic>.<host>`.
pub fn server_queue(rpc: &RpcSettings) -> String {
    format!("{}.{}", rpc.topic, rpc.host)
}

/// Declares the exchange, both queues (bound with their own names as routing keys) and the
/// `[amqp] dead_letter` exchange and queue; returns the queue names to consume.
pub async fn declare_rpc_topology(
    ch: &Channel,
    amqp: &AmqpSettings,
    rpc: &RpcSettings,
) -> Result<[String; 2], lapin::Error> {
    declare_nova_exchange(ch, amqp).await?;
    let queues = [rpc.topic.clone(), server_queue(rpc)];
    let options = QueueDeclareOptions {
        durable: amqp.durable(),
        ..Default::default()
    };
    for q in &queues {
        ch.queue_declare(q, options, amqp.queue_arguments()).await?;
        ch.queue_bind(
            q,
            &amqp.exchange,
            q,
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    }
    // The notification consumer's own declaration of `[amqp] dead_letter`, so either may
    // come first and both dead-letter to the same place.
    declare_dead_letter(ch, amqp).await?;
    Ok(queues)
}
