//! One batch of ready deliveries: decode, apply in one ledger transaction, dead-letter the
//! poison ones (publisher-confirmed), then acknowledge everything with one `multiple` ack per
//! channel. Nothing is acknowledged before its effect, or its dead letter, is safe.

use super::consumer::ConsumerError;
use super::session::{DeadLetters, Letter};
use crate::configuration::AmqpSettings;
use crate::notifications::{Applied, Ingest};
use crate::nova::Notification;
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicNackOptions};

/// Which queue a delivery came from (each has its own channel and delivery tags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Notifications,
    Fanout,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Notifications => "notifications",
            Source::Fanout => "fanout",
        }
    }
}

const SOURCES: [Source; 2] = [Source::Notifications, Source::Fanout];

/// How long a batch the ledger could not take waits, on the service's clock, before it is
/// given back to the broker.
pub const REQUEUE_WAIT_MS: u64 = 500;

/// A batch of deliveries with each body decoded (or the reason it cannot be).
pub(super) struct Decoded {
    deliveries: Vec<(Source, Delivery)>,
    notifications: Vec<Result<Notification, String>>,
}

impl Decoded {
    /// Deliveries in the batch.
    pub(super) fn len(&self) -> usize {
        self.deliveries.len()
    }

    /// When the newest message of the batch was sent (see [`Notification::sent_ms`]).
    pub(super) fn newest_sent_ms(&self) -> Option<i64> {
        self.notifications
            .iter()
            .filter_map(|n| n.as_ref().ok().and_then(Notification::sent_ms))
            .max()
    }
}

/// Decodes a batch of ready deliveries; `Err` when the broker failed one (the connection ends).
pub(super) fn decode_batch(
    batch: Vec<(Source, lapin::Result<Delivery>)>,
) -> Result<Decoded, ConsumerError> {
    let mut deliveries = Vec::with_capacity(batch.len());
    for (source, delivery) in batch {
        deliveries.push((source, delivery?));
    }
    let notifications = deliveries
        .iter()
        .map(|(_, d)| Notification::decode(&d.data).map_err(|e| e.to_string()))
        .collect();
    Ok(Decoded {
        deliveries,
        notifications,
    })
}

/// Applies a decoded batch exactly once and acknowledges it; `Err` ends the connection
/// (whatever is unacknowledged is redelivered, and skipped as duplicate where already
/// committed).
pub(super) async fn process_batch(
    ingest: &Ingest,
    dead_letters: &DeadLetters,
    amqp: &AmqpSettings,
    batch: Decoded,
) -> Result<(), ConsumerError> {
    let Decoded {
        deliveries,
        notifications: decoded,
    } = batch;
    let valid: Vec<&Notification> = decoded.iter().filter_map(|r| r.as_ref().ok()).collect();
    let outcomes = match ingest.apply_batch(&valid).await {
        Ok(outcomes) => Some(outcomes),
        Err(e) if e.is_out_of_space() => {
            tracing::error!(error = %e, messages = valid.len(), "ledger out of space; batch requeued");
            None
        }
        Err(e) => one_by_one(ingest, amqp, &valid, &e).await,
    };
    let Some(outcomes) = outcomes else {
        ingest.batch_requeued();
        // Not at once: the ledger needs time to come back, and the batch would return now.
        ingest.clock().sleep_ms(REQUEUE_WAIT_MS).await;
        let requeue = BasicNackOptions {
            multiple: true,
            requeue: true,
        };
        for (_, last) in last_per_source(&deliveries) {
            last.acker.nack(requeue).await?;
        }
        return Ok(());
    };
    let mut outcomes = outcomes.into_iter();
    let mut poison = Vec::new();
    // Counted once per outcome for the whole batch.
    let mut tally = [
        (Applied::Applied, 0),
        (Applied::Duplicate, 0),
        (Applied::Unknown, 0),
    ];
    for (i, d) in decoded.iter().enumerate() {
        let outcome = match d {
            Err(reason) => Err(reason.clone()),
            Ok(_) => outcomes
                .next()
                .unwrap_or_else(|| Err("no outcome for this message".into())),
        };
        match outcome {
            Ok(applied) => {
                if let Some((_, n)) = tally.iter_mut().find(|(a, _)| *a == applied) {
                    *n += 1;
                }
            }
            Err(reason) => poison.push((&deliveries[i].1, reason)),
        }
    }
    for (applied, n) in tally {
        ingest.count_n(applied.as_str(), n);
    }
    dead_letter(ingest, dead_letters, &poison).await?;
    for (_, last) in last_per_source(&deliveries) {
        last.acker.ack(BasicAckOptions { multiple: true }).await?;
    }
    Ok(())
}

/// A batch failed with what looked like an outage. When the ledger takes a write now, the
/// failure came from the batch, not the ledger: its messages are applied one by one, each
/// tried up to `[amqp] attempts` times (0.25 s, 0.5 s, 1 s … apart); one that still fails
/// (while the ledger takes writes) is rejected with the database's reason and dead-lettered,
/// and the others are applied.
/// `None` when the ledger is really out, or out of space (a disk that still takes the probe
/// may refuse a message for its size, which is no fault of the message): the whole batch is
/// requeued (messages applied meanwhile come back as duplicates and change nothing).
async fn one_by_one(
    ingest: &Ingest,
    amqp: &AmqpSettings,
    batch: &[&Notification],
    error: &crate::ledger::LedgerError,
) -> Option<Vec<crate::notifications::Outcome>> {
    if let Err(probe) = ingest.takes_writes().await {
        tracing::error!(%error, %probe, messages = batch.len(), "ledger unavailable; batch requeued");
        return None;
    }
    tracing::warn!(%error, messages = batch.len(), "a batch failed while the ledger takes writes; applying its messages one by one");
    let attempts = amqp.attempts.max(1);
    let mut outcomes = Vec::with_capacity(batch.len());
    for n in batch {
        let mut tries = 0;
        let outcome = loop {
            tries += 1;
            match ingest.apply_batch(std::slice::from_ref(n)).await {
                Ok(mut one) => {
                    break one
                        .pop()
                        .unwrap_or_else(|| Err("no outcome for this message".into()))
                }
                Err(e) if e.is_out_of_space() => {
                    tracing::error!(error = %e, "ledger out of space; batch requeued");
                    return None;
                }
                Err(e) => {
                    if let Err(probe) = ingest.takes_writes().await {
                        tracing::error!(error = %e, %probe, "ledger unavailable; batch requeued");
                        return None;
                    }
                    if tries >= attempts {
                        break Err(format!(
                            "{} {}: failed {tries} times while the ledger took writes: {e}",
                            n.event_type, n.message_id
                        ));
                    }
                    // A lock or a conflict may clear: 0.25 s, 0.5 s, 1 s … between tries.
                    ingest.clock().sleep_ms(250 << (tries - 1).min(6)).await;
                }
            }
        };
        outcomes.push(outcome);
    }
    Some(outcomes)
}

fn last_per_source(deliveries: &[(Source, Delivery)]) -> Vec<(Source, &Delivery)> {
    SOURCES
        .iter()
        .filter_map(|s| {
            let last = deliveries.iter().rev().find(|(source, _)| source == s)?;
            Some((*s, &last.1))
        })
        .collect()
}

/// Dead-letters the poison messages (confirmed by the broker before the caller acknowledges
/// the originals), then records them in the ledger.
async fn dead_letter(
    ingest: &Ingest,
    dead_letters: &DeadLetters,
    poison: &[(&Delivery, String)],
) -> Result<(), ConsumerError> {
    let letters: Vec<Letter<'_>> = poison
        .iter()
        .map(|(delivery, reason)| Letter {
            body: &delivery.data,
            routing_key: delivery.routing_key.as_str(),
            reason,
        })
        .collect();
    dead_letters.publish(&letters).await?;
    for (delivery, reason) in poison {
        let body = String::from_utf8_lossy(&delivery.data);
        ingest.dead_letter("amqp", reason, &body).await;
        ingest.count("dead_letter");
    }
    Ok(())
}
