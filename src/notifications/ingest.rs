//! [`Ingest`]: the handle every transport (HTTP, the RabbitMQ consumer, the RPC server's
//! instance-info casts) applies host-state inputs through, counting each outcome once for
//! `/v1/stats` and `/metrics`. nova-api's aggregate casts, which come on the scheduler
//! fanout queue with nova-compute's, are recorded as processed in the ledger (so a
//! redelivery is a duplicate) and applied to the cloud view the request filters read.

use super::effect::message_of;
use crate::clock::SharedClock;
use crate::cloud::Cloud;
use crate::ledger::{
    Applied, ApplyError, HotAnswer, JobQueue, Ledger, LedgerError, Message, Outcome,
};
use crate::nova::{AggregateCast, HostEvent, Notification};
use crate::stats::Stats;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Applies the queued single messages as one batch and answers each (see [`Ingest::apply`]).
async fn apply_queued(ledger: &Ledger, clock: &SharedClock, queue: &JobQueue<Queued>) {
    let (jobs, outcomes) = ledger
        .apply_taken(|| queue.take(), |q: &Queued| &q.message, || clock.now_ms())
        .await;
    match outcomes {
        Ok(outcomes) => {
            for (job, outcome) in jobs.into_iter().zip(outcomes) {
                let _ = job.reply.send(outcome.map_err(ApplyError::Rejected));
            }
        }
        Err(e) => {
            // Nothing of the group was committed: each message fails with the ledger's error.
            let errors = e.for_group(jobs.len(), "");
            for (job, e) in jobs.into_iter().zip(errors) {
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
    /// Where aggregate casts go; without one they are unknown events.
    cloud: Option<Arc<Cloud>>,
    // parking_lot: held for one map update, never across an await.
    outcomes: Mutex<BTreeMap<String, u64>>,
    /// Single messages (HTTP, RPC casts) waiting to be applied, in groups.
    queue: JobQueue<Queued>,
    /// Consumer batches given back to the broker unapplied (the ledger out or full).
    requeued: std::sync::atomic::AtomicU64,
}

/// A single message waiting for its group.
struct Queued {
    message: Message,
    reply: tokio::sync::oneshot::Sender<Result<Applied, ApplyError>>,
}

impl Ingest {
    pub fn new(ledger: Ledger, clock: SharedClock, stats: Arc<Stats>) -> Self {
        Ingest {
            ledger,
            clock,
            stats,
            cloud: None,
            outcomes: Mutex::new(BTreeMap::new()),
            queue: JobQueue::default(),
            requeued: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Applies nova-api's aggregate casts to `cloud` (the scheduler's view of aggregates).
    pub fn with_cloud(mut self, cloud: Arc<Cloud>) -> Self {
        self.cloud = Some(cloud);
        self
    }

    /// Applies one message exactly once and counts the outcome (a rejection as `rejected`).
    /// Answers once the message's effect is committed. Messages that arrive together
    /// (concurrent HTTP posts) are applied in groups as the RabbitMQ consumer's batches are:
    /// whoever queues into an empty queue starts the task that, once it holds the ledger's
    /// writer, applies everything queued by then in one transaction (at low load a group is
    /// one message and waits for nothing). A rejected message changes nothing and does not
    /// affect the others of its group. On SQLite heartbeats and builds' confirmations go to
    /// the ledger's hot writer instead (see `hot`), committed with its next group.
    pub async fn apply(&self, n: &Notification) -> Result<Applied, ApplyError> {
        let message = message_of(n);
        let outcome = match self.ledger.apply_hot(message, self.clock.now_ms()).await {
            HotAnswer::Done(outcome) => outcome,
            HotAnswer::Elsewhere(message) => self.apply_queued(*message).await,
        }
        .map(|applied| self.to_failures(n, self.to_usage(n, self.to_cloud(n, applied))));
        match &outcome {
            Ok(applied) => self.count(applied.as_str()),
            Err(ApplyError::Rejected(_)) => self.count("rejected"),
            Err(ApplyError::Ledger(_)) => {}
        }
        outcome
    }

    /// Applies `message` with the messages queued meanwhile, in one transaction (see [`Self::apply`]).
    async fn apply_queued(&self, message: Message) -> Result<Applied, ApplyError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let first = self.queue.push(Queued { message, reply });
        if first {
            let (ledger, clock, queue) =
                (self.ledger.clone(), self.clock.clone(), self.queue.clone());
            tokio::spawn(async move { apply_queued(&ledger, &clock, &queue).await });
        }
        match answer.await {
            Ok(outcome) => outcome,
            Err(_) => Err(ApplyError::Ledger(LedgerError::Unavailable(
                "the notification's writer task ended without an answer".into(),
            ))),
        }
    }

    /// Messages waiting for their group.
    #[cfg(test)]
    pub(crate) fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Applies a batch in one transaction (see [`super::apply_batch`]); the caller counts
    /// each outcome once it has settled what happens to the rejected ones.
    pub async fn apply_batch(&self, batch: &[&Notification]) -> Result<Vec<Outcome>, LedgerError> {
        let outcomes = super::apply_batch(&self.ledger, batch, self.clock.now_ms()).await?;
        Ok(batch
            .iter()
            .zip(outcomes)
            .map(|(n, outcome)| {
                outcome
                    .map(|applied| self.to_failures(n, self.to_usage(n, self.to_cloud(n, applied))))
            })
            .collect())
    }

    /// After the ledger recorded `n` (so, in the order of the batch and once per message
    /// id): an aggregate cast seen for the first time changes the cloud view and counts as
    /// applied. A redelivered one (a duplicate) changes nothing, not to undo a later cast.
    fn to_cloud(&self, n: &Notification, applied: Applied) -> Applied {
        let (Some(cloud), HostEvent::Aggregates(cast), Applied::Unknown) =
            (&self.cloud, &n.event, applied)
        else {
            return applied;
        };
        match cast {
            AggregateCast::Update(aggregates) => {
                tracing::info!(aggregates = ?aggregates.iter().map(|a| &a.uuid).collect::<Vec<_>>(), "aggregates updated");
                cloud.update_aggregates(aggregates.iter().cloned());
            }
            AggregateCast::Delete(uuid) => {
                tracing::info!(aggregate = %uuid, "aggregate deleted");
                cloud.delete_aggregate(uuid);
            }
        }
        Applied::Applied
    }

    /// After the ledger recorded `n` (once per message id): a failed operation goes to the
    /// Placement sync task's check (`table::FailedChecks`; counted as applied once queued).
    /// Its time is the failure's as Nova sent it, never later than now: a claim made after the
    /// failure (a retry) is never settled by it.
    fn to_failures(&self, n: &Notification, applied: Applied) -> Applied {
        let (HostEvent::Failed { instance_uuid }, Applied::Unknown) = (&n.event, applied) else {
            return applied;
        };
        let now = self.clock.now_ms();
        let at_ms = n.sent_ms().map_or(now, |sent| sent.min(now));
        match self.ledger.table().failed().push(instance_uuid, at_ms) {
            Some(true) => Applied::Applied,
            Some(false) => {
                tracing::warn!(instance = %instance_uuid, event_type = %n.event_type, "too many failed operations waiting for Placement; this one's claim is left to the TTL and the repair");
                applied
            }
            None => applied,
        }
    }

    /// After the ledger recorded `n` (once per message id): its measured usage, if it
    /// carries any, goes to the table's soft state (`table::usage`), which takes or refuses
    /// it whole and counts either. A `metrics.update` taken counts as applied.
    fn to_usage(&self, n: &Notification, applied: Applied) -> Applied {
        if applied == Applied::Duplicate {
            return applied;
        }
        let Some(reading) = super::usage::reading_of(n) else {
            return applied;
        };
        let table = self.ledger.table();
        match table.record_usage(&reading, self.clock.now_ms()) {
            Ok(_) if matches!(n.event, HostEvent::Metrics(_)) => Applied::Applied,
            Ok(_) => applied,
            Err(e) => {
                tracing::warn!(message_id = %n.message_id, event_type = %n.event_type, reason = e.reason.as_str(), error = %e, "measured usage refused; decisions keep the allocations");
                applied
            }
        }
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

    /// Notes a consumer batch given back to the broker unapplied.
    pub fn batch_requeued(&self) {
        self.requeued
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Consumer batches given back to the broker unapplied so far.
    pub fn requeued_batches(&self) -> u64 {
        self.requeued.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Adds one to `outcome` here and on `/metrics`.
    pub fn count(&self, outcome: &str) {
        self.count_n(outcome, 1);
    }

    /// Adds `n` to `outcome` here and on `/metrics`.
    pub fn count_n(&self, outcome: &str, n: u64) {
        if n == 0 {
            return;
        }
        {
            let mut outcomes = self.outcomes.lock();
            match outcomes.get_mut(outcome) {
                Some(count) => *count += n,
                None => {
                    outcomes.insert(outcome.to_string(), n);
                }
            }
        }
        self.stats.metrics().notifications_n(outcome, n);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::nova::encode_envelope;
    use serde_json::json;

    fn aggregate_cast(id: &str, method: &str, zone: &str) -> Notification {
        let aggregate = json!({"nova_object.name": "Aggregate", "nova_object.namespace": "nova",
            "nova_object.version": "1.3", "nova_object.data": {"id": 1,
            "uuid": "6f1a2e4b-0000-4000-8000-00000000000a", "name": "a", "hosts": ["host2"],
            "metadata": {"availability_zone": zone}}});
        let args = if method == "update_aggregates" {
            json!({"aggregates": [aggregate]})
        } else {
            json!({"aggregate": aggregate})
        };
        let cast = json!({"method": method, "args": args, "version": "4.1", "_unique_id": id});
        Notification::decode(&encode_envelope(&cast)).unwrap()
    }

    #[tokio::test]
    async fn aggregate_fanouts_reach_the_cloud_view_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("l.db").display());
        let ledger = Ledger::connect(&url, 2).await.unwrap();
        ledger.migrate().await.unwrap();
        let clock: SharedClock = Arc::new(ManualClock::new(0));
        let stats = Arc::new(Stats::new(clock.clone(), 60));
        let cloud = Arc::new(Cloud::new());
        let ingest =
            Ingest::new(ledger.clone(), clock.clone(), stats.clone()).with_cloud(cloud.clone());

        let zone1 = aggregate_cast("m1", "update_aggregates", "zone1");
        let zone2 = aggregate_cast("m2", "update_aggregates", "zone2");
        let out = ingest.apply_batch(&[&zone1, &zone2]).await.unwrap();
        assert_eq!(out, [Ok(Applied::Applied), Ok(Applied::Applied)]);
        let known = cloud.aggregates();
        assert_eq!(known.len(), 1);
        assert_eq!(known[0].metadata["availability_zone"], "zone2");
        assert_eq!(known[0].hosts, ["host2"]);
        // A redelivery of the older cast is a duplicate and does not undo the newer one.
        assert_eq!(ingest.apply(&zone1).await.unwrap(), Applied::Duplicate);
        assert_eq!(cloud.aggregates()[0].metadata["availability_zone"], "zone2");
        let gone = aggregate_cast("m3", "delete_aggregate", "zone2");
        assert_eq!(ingest.apply(&gone).await.unwrap(), Applied::Applied);
        assert!(cloud.aggregates().is_empty());

        // Without a cloud view, such casts stay unknown events.
        let plain = Ingest::new(ledger, clock, stats);
        let again = aggregate_cast("m4", "update_aggregates", "zone1");
        assert_eq!(plain.apply(&again).await.unwrap(), Applied::Unknown);
    }
}
