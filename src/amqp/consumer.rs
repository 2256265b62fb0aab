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

/// Completes a batch begun with `first`: the deliveries that come within `[amqp]
/// batch_timeout_ms` of it join it, up to `batch_size` (oslo.messaging's batch notification
/// listener, `batch_size` and `batch_timeout`). Messages that arrive one at a time (a cloud's
/// heartbeats: 167 a second at 10,000 hosts) would otherwise each pay a whole batch's
/// transaction, acknowledgement and thread hand-offs. The consumer does not wait on the
/// deliveries meanwhile (each would wake it): it looks at what is ready after 1 ms, then after
/// twice as long each time up to a quarter of the timeout, so that a batch that fills fast (a
/// backlog, a burst of builds) leaves within a few milliseconds of its first delivery, and a
/// trickle wakes the consumer about eight times a batch. Returns the batch and the deliveries
/// taken that would have made it larger than `batch_size`, which begin the next one. Ends at
/// once on `stop` (the batch in hand is still applied) and when the deliveries end (the next
/// read reports it).
async fn gather<S, T>(
    mut batch: Vec<T>,
    batches: &mut S,
    clock: &crate::clock::SharedClock,
    amqp: &AmqpSettings,
    stop: &CancellationToken,
) -> (Vec<T>, Option<Vec<T>>)
where
    S: futures::Stream<Item = Vec<T>> + Unpin,
{
    use futures::FutureExt;
    let timeout = amqp.batch_timeout_ms;
    if timeout == 0 {
        return (batch, None);
    }
    let longest = (timeout / 4).max(1);
    let (start, mut nap) = (clock.now_ms(), 1);
    loop {
        while batch.len() < amqp.batch_size {
            match batches.next().now_or_never() {
                Some(Some(more)) if batch.len() + more.len() <= amqp.batch_size => {
                    batch.extend(more)
                }
                Some(Some(more)) => return (batch, Some(more)),
                Some(None) => return (batch, None),
                None => break,
            }
        }
        let waited = u64::try_from(clock.now_ms() - start).unwrap_or(0);
        if waited >= timeout || batch.len() >= amqp.batch_size {
            return (batch, None);
        }
        tokio::select! {
            biased;
            _ = stop.cancelled() => return (batch, None),
            _ = clock.sleep_ms(nap.min(timeout - waited)) => {}
        }
        nap = (nap * 2).min(longest);
    }
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
            // Deliveries taken while a batch was gathered that did not fit in it: the next
            // batch starts with them.
            let mut carried = None;
            loop {
                let first = match carried.take() {
                    Some(first) => first,
                    None => {
                        let waiting_since = clock.now_ms();
                        tokio::select! {
                            biased;
                            _ = stop.cancelled() => return Ok(()),
                            next = batches.next() => match next {
                                Some(first) => first,
                                None => return Err(ConsumerError::Closed),
                            },
                            // Nothing delivered for a while with the prefetch window open: the
                            // queues held nothing more when the wait began.
                            _ = clock.sleep_ms(IDLE_MS) => {
                                mark.idle_since(waiting_since);
                                continue;
                            }
                        }
                    }
                };
                let (batch, rest) = gather(first, batches, clock, amqp, &stop).await;
                carried = rest;
                mark.taken(batch.len());
                if handover.send(decode_batch(batch)?).await.is_err() {
                    return Ok(());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock, SharedClock};
    use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
    use std::time::Duration;

    type Gathered = (Vec<u32>, Option<Vec<u32>>);
    /// A `gather` on its own task; it gives the deliveries back with its answer.
    type Gathering = tokio::task::JoinHandle<(Gathered, UnboundedReceiver<Vec<u32>>)>;

    fn settings(batch_size: usize, batch_timeout_ms: u64) -> AmqpSettings {
        AmqpSettings {
            batch_size,
            batch_timeout_ms,
            ..AmqpSettings::default()
        }
    }

    /// Runs `gather` from `first` on its own task; it gives the deliveries back with its answer.
    fn spawn_gather(
        first: Vec<u32>,
        mut deliveries: UnboundedReceiver<Vec<u32>>,
        clock: &ManualClock,
        amqp: AmqpSettings,
        stop: CancellationToken,
    ) -> Gathering {
        let clock: SharedClock = Arc::new(clock.clone());
        tokio::spawn(async move {
            let gathered = gather(first, &mut deliveries, &clock, &amqp, &stop).await;
            (gathered, deliveries)
        })
    }

    /// Waits (in real time, briefly) until `gather` sleeps on the clock past its present time
    /// (a sleep the clock has ended may still be pending until `gather` runs again).
    async fn asleep(clock: &ManualClock) {
        for _ in 0..1_000 {
            if clock.deadlines().iter().any(|&d| d > clock.now_ms()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("gather never waited on the clock");
    }

    /// `gather` of a batch begun with `[1]`, `[2]` ready behind it, batches of up to 10 and
    /// `batch_timeout_ms`; the clock stands at 0.
    fn one_with_two_ready(
        batch_timeout_ms: u64,
    ) -> (ManualClock, UnboundedSender<Vec<u32>>, Gathering) {
        let clock = ManualClock::new(0);
        let (tx, rx) = unbounded();
        tx.unbounded_send(vec![2]).unwrap();
        let stop = CancellationToken::new();
        let task = spawn_gather(vec![1], rx, &clock, settings(10, batch_timeout_ms), stop);
        (clock, tx, task)
    }

    #[tokio::test]
    async fn deliveries_within_the_timeout_join_the_batch_and_later_ones_begin_the_next() {
        let (clock, tx, task) = one_with_two_ready(100);
        asleep(&clock).await;
        clock.advance_ms(25);
        tx.unbounded_send(vec![3, 4]).unwrap();
        for _ in 0..3 {
            asleep(&clock).await;
            clock.advance_ms(25);
        }
        let ((batch, carried), mut rx) = task.await.unwrap();
        assert_eq!((batch, carried), (vec![1, 2, 3, 4], None));
        // What comes after the timeout is the next batch's.
        tx.unbounded_send(vec![5]).unwrap();
        assert_eq!(rx.next().await, Some(vec![5]));
    }

    #[tokio::test]
    async fn a_full_batch_leaves_at_once_and_what_would_overfill_it_begins_the_next() {
        let clock = ManualClock::new(0);
        let stop = CancellationToken::new();
        let (tx, rx) = unbounded();
        tx.unbounded_send(vec![3, 4]).unwrap();
        let task = spawn_gather(vec![1, 2], rx, &clock, settings(4, 100), stop.clone());
        let ((batch, carried), rx) = task.await.unwrap();
        assert_eq!((batch, carried), (vec![1, 2, 3, 4], None));

        tx.unbounded_send(vec![7, 8, 9]).unwrap();
        let task = spawn_gather(vec![5, 6], rx, &clock, settings(4, 100), stop);
        let ((batch, carried), _) = task.await.unwrap();
        assert_eq!((batch, carried), (vec![5, 6], Some(vec![7, 8, 9])));
        assert_eq!(clock.now_ms(), 0, "neither batch waited");
    }

    #[tokio::test]
    async fn without_a_timeout_a_batch_is_what_was_ready_and_a_stop_ends_the_wait() {
        let (clock, tx, task) = one_with_two_ready(0);
        let ((batch, carried), rx) = task.await.unwrap();
        // `first` is what the stream had ready; a timeout of 0 adds nothing to it.
        assert_eq!((batch, carried), (vec![1], None));

        let stop = CancellationToken::new();
        let task = spawn_gather(vec![9], rx, &clock, settings(10, 100), stop.clone());
        asleep(&clock).await;
        stop.cancel();
        let ((batch, carried), rx) = task.await.unwrap();
        assert_eq!((batch, carried), (vec![9, 2], None));

        // Deliveries that end (the connection closed) end the wait too; the clock never moves.
        drop(tx);
        let task = spawn_gather(
            vec![10],
            rx,
            &clock,
            settings(10, 100),
            CancellationToken::new(),
        );
        let ended = tokio::time::timeout(Duration::from_secs(5), task).await;
        let ((batch, carried), _) = ended.expect("gather waited on ended deliveries").unwrap();
        assert_eq!((batch, carried), (vec![10], None));
    }
}
