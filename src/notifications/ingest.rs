//! [`Ingest`]: the handle every transport (HTTP, the RabbitMQ consumer, the RPC server's
//! instance-info casts) applies host-state inputs through, counting each outcome once for
//! `/v1/stats` and `/metrics`.

use super::apply::{apply_batch, apply_taken, Applied, ApplyError, Outcome};
use crate::clock::SharedClock;
use crate::ledger::{JobQueue, Ledger, LedgerError};
use crate::nova::Notification;
use crate::stats::Stats;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Applies the queued single messages as one batch and answers each (see [`Ingest::apply`]).
async fn apply_queued(ledger: &Ledger, clock: &SharedClock, queue: &JobQueue<Queued>) {
    let (jobs, outcomes) = apply_taken(
        ledger,
        || queue.take(),
        |q: &Queued| &q.notification,
        || clock.now_ms(),
    )
    .await;
    match outcomes {
        Ok(outcomes) => {
            for (job, outcome) in jobs.into_iter().zip(outcomes) {
                let _ = job.reply.send(outcome.map_err(ApplyError::Rejected));
            }
        }
        Err(e) => {
            // Nothing of the group was committed: each message fails with the ledger's error.
            let message = e.to_string();
            let outage = e.is_outage();
            let mut first = Some(e);
            for job in jobs {
                let e = match first.take() {
                    Some(e) => e,
                    None if outage => LedgerError::Unavailable(message.clone()),
                    None => LedgerError::Invalid(message.clone()),
                };
                let _ = job.reply.send(Err(ApplyError::Ledger(e)));
            }
        }
    }
}

/// Applies notifications to the ledger and counts their outcomes.
pub struct Ingest {
    ledger: Ledger,
    clock: SharedClock,
    stats: Arc<Stats>,
    // parking_lot: held for one map update, never across an await.
    outcomes: Mutex<BTreeMap<String, u64>>,
    /// Single messages (HTTP, RPC casts) waiting to be applied, in groups.
    queue: JobQueue<Queued>,
}

/// A single message waiting for its group.
struct Queued {
    notification: Notification,
    reply: tokio::sync::oneshot::Sender<Result<Applied, ApplyError>>,
}

impl Ingest {
    pub fn new(ledger: Ledger, clock: SharedClock, stats: Arc<Stats>) -> Self {
        Ingest {
            ledger,
            clock,
            stats,
            outcomes: Mutex::new(BTreeMap::new()),
            queue: JobQueue::default(),
        }
    }

    /// Applies one message exactly once and counts the outcome (a rejection as `rejected`).
    /// Answers once the message's effect is committed. Messages that arrive together
    /// (concurrent HTTP posts) are applied in groups as the RabbitMQ consumer's batches are:
    /// whoever queues into an empty queue starts the task that, once it holds the ledger's
    /// writer, applies everything queued by then in one transaction (at low load a group is
    /// one message and waits for nothing). A rejected message changes nothing and does not
    /// affect the others of its group.
    pub async fn apply(&self, n: &Notification) -> Result<Applied, ApplyError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let first = self.queue.push(Queued {
            notification: n.clone(),
            reply,
        });
        if first {
            let (ledger, clock, queue) =
                (self.ledger.clone(), self.clock.clone(), self.queue.clone());
            tokio::spawn(async move { apply_queued(&ledger, &clock, &queue).await });
        }
        let outcome = match answer.await {
            Ok(outcome) => outcome,
            Err(_) => Err(ApplyError::Ledger(LedgerError::Unavailable(
                "the notification's writer task ended without an answer".into(),
            ))),
        };
        match &outcome {
            Ok(applied) => self.count(applied.as_str()),
            Err(ApplyError::Rejected(_)) => self.count("rejected"),
            Err(ApplyError::Ledger(_)) => {}
        }
        outcome
    }

    /// Messages waiting for their group.
    #[cfg(test)]
    pub(crate) fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Applies a batch in one transaction (see [`apply_batch`]); the caller counts each
    /// outcome once it has settled what happens to the rejected ones.
    pub async fn apply_batch(&self, batch: &[&Notification]) -> Result<Vec<Outcome>, LedgerError> {
        apply_batch(&self.ledger, batch, self.clock.now_ms()).await
    }

    /// Whether the ledger takes a write now (the write probe of `/readyz`): tells an outage
    /// from a failure caused by the messages written.
    pub async fn takes_writes(&self) -> Result<(), LedgerError> {
        self.ledger
            .probe_write(self.clock.now_ms(), std::time::Duration::from_secs(5))
            .await
    }

    /// Records a message that cannot be applied, with its reason, in the ledger's dead-letter
    /// table (a failure to record is logged: the message is on the dead-letter queue too).
    pub async fn dead_letter(&self, source: &str, reason: &str, body: &str) {
        let recorded = self
            .ledger
            .dead_letter(source, reason, body, self.clock.now_ms())
            .await;
        if let Err(e) = recorded {
            tracing::warn!(error = %e, "dead letter not recorded in the ledger");
        }
    }

    /// Adds one to `outcome` here and on `/metrics`.
    pub fn count(&self, outcome: &str) {
        *self.outcomes.lock().entry(outcome.to_string()).or_default() += 1;
        self.stats.metrics().notification(outcome);
    }

    /// The outcome counts, for `/v1/stats`.
    pub fn to_json(&self) -> Value {
        json!(*self.outcomes.lock())
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }
}
