//! The consumer's life: connect, declare, consume both queues, hand ready deliveries to
//! [`super::batch`] a batch at a time; on any broker failure reconnect with capped exponential
//! backoff. Unacknowledged deliveries return to their queue when a connection ends, and their
//! ids make the redelivery a no-op, so nothing is lost or applied twice.

use super::batch::{decode_batch, process_batch, Source};
use super::session::{DeadLetterError, DeadLetters, Link, Sessions};
use super::topology::declare_notification_topology;
use super::{connect, BrokerStatus};
use crate::configuration::AmqpSettings;
use crate::notifications::Ingest;
use futures::StreamExt;
use lapin::options::{BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Why a consumer session ended.
#[derive(Debug, thiserror::Error)]
pub enum ConsumerError {
    #[error("broker: {}", crate::redact::redact_urls(&.0.to_string()))]
    Broker(#[from] lapin::Error),
    #[error("the broker closed the consumer")]
    Closed,
    #[error("dead letters: {0}")]
    DeadLetters(#[from] DeadLetterError),
}

/// How long the consumer waits with nothing delivered before it counts itself caught up.
const IDLE_MS: u64 = 200;

/// The connection name shown by `rabbitmqctl list_connections client_properties`.
pub fn connection_name(amqp: &AmqpSettings) -> String {
    format!("parasol-notifications:{}", amqp.queue)
}

/// Consumes until `shutdown` is cancelled, reconnecting with capped exponential backoff.
/// On shutdown the batch in hand is applied and acknowledged; deliveries not yet taken
/// return to the queue for the next process.
pub async fn run_notification_consumer(
    ingest: Arc<Ingest>,
    broker: Arc<BrokerStatus>,
    amqp: AmqpSettings,
    shutdown: CancellationToken,
) {
    ingest.ledger().ingest_mark().watch();
    let process_id = uuid::Uuid::new_v4().simple().to_string();
    let sessions = Sessions {
        what: "notification consumer",
        broker: broker.clone(),
        clock: ingest.clock().clone(),
        reconnect_min_s: amqp.reconnect_min_s,
        reconnect_max_s: amqp.reconnect_max_s,
    };
    let (ingest, broker, amqp, process_id) = (&*ingest, &*broker, &amqp, process_id.as_str());
    sessions
        .run(
            &shutdown,
            || {},
            |link| session(ingest, broker, amqp, process_id, &shutdown, link),
        )
        .await;
}

/// One connection's life. `Ok` means asked to stop.
async fn session(
    ingest: &Ingest,
    broker: &BrokerStatus,
    amqp: &AmqpSettings,
    process_id: &str,
    shutdown: &CancellationToken,
    link: Link,
) -> Result<(), ConsumerError> {
    let conn = connect(&amqp.url, &connection_name(amqp)).await?;
    // Declarations and dead letters on a confirmed channel; one channel per consumer so
    // that a `multiple` ack covers exactly the deliveries of that queue seen so far.
    let dead_letters = DeadLetters::new(conn.create_channel().await?, &amqp.dead_letter).await?;
    let publisher = dead_letters.channel();
    let queues = declare_notification_topology(publisher, amqp, process_id).await?;
    broker.declared_fanout(&queues.fanout);
    let tag = format!("parasol-{process_id}");
    let mut streams = Vec::new();
    for (source, queue) in [
        (Source::Notifications, &queues.notifications),
        (Source::Fanout, &queues.fanout),
    ] {
        let ch = conn.create_channel().await?;
        ch.basic_qos(amqp.prefetch, BasicQosOptions::default())
            .await?;
        let consumer = ch
            .basic_consume(
                queue,
                &format!("{tag}-{}", source.as_str()),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        streams.push(consumer.map(move |d| (source, d)));
    }
    let mut batches = futures::stream::select_all(streams).ready_chunks(amqp.batch_size);
    link.up();
    tracing::info!(queue = %queues.notifications, fanout = %queues.fanout, "consuming notifications");
    // Two stages, so that the next batch is decoded while the ledger commits this one: the
    // receiver decodes and hands over (at most one batch waiting), the applier applies and
    // acknowledges in order. A batch once handed over is always applied to its end (never
    // dropped halfway between its commit and the live table's update): on shutdown, or when
    // the receiver fails, the receiver stops and the applier finishes what it was handed;
    // when the applier fails, the receiver stops. What was never handed over returns to the
    // queue.
    let stop = shutdown.child_token();
    let (handover, mut handed) = tokio::sync::mpsc::channel(1);
    // How far this consumer has caught up, for the claim sweep (`ledger::IngestMark`).
    let mark = ingest.ledger().ingest_mark();
    mark.new_session();
    let clock = ingest.clock();
    let receive = {
        let stop = stop.clone();
        // Borrowed, not moved (as the dead-letter publisher below): the channels and consumers live until
        // the connection is closed (`super::close`).
        let batches = &mut batches;
        async move {
            loop {
                let waiting_since = clock.now_ms();
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => return Ok(()),
                    next = batches.next() => match next {
                        Some(batch) => {
                            mark.taken(batch.len());
                            if handover.send(decode_batch(batch)?).await.is_err() {
                                return Ok(());
                            }
                        }
                        None => return Err(ConsumerError::Closed),
                    },
                    // Nothing delivered for a while with the prefetch window open: the queues
                    // held nothing more when the wait began.
                    _ = clock.sleep_ms(IDLE_MS) => mark.idle_since(waiting_since),
                }
            }
        }
    };
    let dead_letters = &dead_letters;
    let apply = async move {
        let applied = async {
            while let Some(batch) = handed.recv().await {
                let (n, sent_ms) = (batch.len(), batch.newest_sent_ms());
                process_batch(ingest, dead_letters, amqp, batch).await?;
                mark.applied(n, sent_ms);
            }
            Ok::<(), ConsumerError>(())
        }
        .await;
        if applied.is_err() {
            stop.cancel();
        }
        applied
    };
    let (received, applied) = tokio::join!(receive, apply);
    applied?;
    received?;
    // Unacknowledged deliveries go back to their queues, in order.
    super::close(conn, "parasol stopping").await;
    Ok(())
}
