//! [`Ingest`]: the handle every transport (HTTP, the RabbitMQ consumer, the RPC server's
//! instance-info casts) applies host-state inputs through, counting each outcome once for
//! `/v1/stats` and `/metrics`.

use super::apply::{apply, apply_batch, Applied, ApplyError, Outcome};
use crate::clock::SharedClock;
use crate::cloud::Cloud;
use crate::ledger::{Ledger, LedgerError};
use crate::nova::{HostEvent, Notification};
use crate::stats::Stats;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// Applies notifications to the ledger and counts their outcomes.
pub struct Ingest {
    ledger: Ledger,
    clock: SharedClock,
    stats: Arc<Stats>,
    // parking_lot: held for one map update, never across an await.
    outcomes: Mutex<BTreeMap<String, u64>>,
    /// Where fanout `update_aggregates` / `delete_aggregate` go (the scheduler's view of
    /// Nova's aggregates), once attached.
    cloud: OnceLock<Arc<Cloud>>,
}

impl Ingest {
    pub fn new(ledger: Ledger, clock: SharedClock, stats: Arc<Stats>) -> Self {
        Ingest {
            ledger,
            clock,
            stats,
            outcomes: Mutex::new(BTreeMap::new()),
            cloud: OnceLock::new(),
        }
    }

    /// Sends the aggregate casts that arrive with the notifications (nova-api fans
    /// `update_aggregates` and `delete_aggregate` out to every scheduler) to `cloud`. The
    /// first attachment holds.
    pub fn attach_cloud(&self, cloud: Arc<Cloud>) {
        let _ = self.cloud.set(cloud);
    }

    /// Applies the aggregate changes of the messages the ledger accepted, in order.
    fn apply_aggregates<'a>(&self, accepted: impl IntoIterator<Item = &'a Notification>) {
        let Some(cloud) = self.cloud.get() else {
            return;
        };
        for n in accepted {
            match &n.event {
                HostEvent::UpdateAggregates { aggregates } => {
                    for a in aggregates {
                        tracing::debug!(uuid = %a.uuid, metadata = ?a.metadata, hosts = ?a.hosts, "aggregate updated");
                    }
                    cloud.update_aggregates(aggregates.iter().cloned());
                }
                HostEvent::DeleteAggregate { uuid } => {
                    tracing::debug!(%uuid, "aggregate deleted");
                    cloud.delete_aggregate(uuid);
                }
                _ => {}
            }
        }
    }

    /// Applies one message exactly once and counts the outcome (a rejection as `rejected`).
    pub async fn apply(&self, n: &Notification) -> Result<Applied, ApplyError> {
        let outcome = apply(&self.ledger, n, self.clock.now_ms()).await;
        if matches!(outcome, Ok(Applied::Applied)) {
            self.apply_aggregates([n]);
        }
        match &outcome {
            Ok(applied) => self.count(applied.as_str()),
            Err(ApplyError::Rejected(_)) => self.count("rejected"),
            Err(ApplyError::Ledger(_)) => {}
        }
        outcome
    }

    /// Applies a batch in one transaction (see [`apply_batch`]); the caller counts each
    /// outcome once it has settled what happens to the rejected ones.
    pub async fn apply_batch(&self, batch: &[&Notification]) -> Result<Vec<Outcome>, LedgerError> {
        let outcomes = apply_batch(&self.ledger, batch, self.clock.now_ms()).await?;
        self.apply_aggregates(
            batch
                .iter()
                .zip(&outcomes)
                .filter(|(_, o)| matches!(o, Ok(Applied::Applied)))
                .map(|(n, _)| *n),
        );
        Ok(outcomes)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use serde_json::json;

    fn fanout(id: &str, method: &str, args: serde_json::Value) -> Notification {
        let msg = json!({"method": method, "args": args, "version": "4.1", "_unique_id": id});
        Notification::decode(&crate::nova::encode_envelope(&msg)).unwrap()
    }

    fn aggregate(uuid: &str, host: &str, tenant: &str) -> serde_json::Value {
        json!({"nova_object.name": "Aggregate", "nova_object.namespace": "nova",
               "nova_object.version": "1.3", "nova_object.data": {"id": 1, "uuid": uuid,
               "name": "a", "hosts": [host], "metadata": {"filter_tenant_id": tenant}}})
    }

    /// nova-api fans `update_aggregates` / `delete_aggregate` out to every scheduler: they
    /// arrive on the fanout queue with the instance-info casts and reach the aggregates the
    /// request filters and per-aggregate filters read.
    #[tokio::test]
    async fn fanout_aggregate_casts_reach_the_attached_cloud() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("l.db").display());
        let ledger = Ledger::connect(&url, 2).await.unwrap();
        ledger.migrate().await.unwrap();
        let clock: SharedClock = Arc::new(ManualClock::new(1_000));
        let ingest = Ingest::new(ledger, clock.clone(), Arc::new(Stats::new(clock, 60)));
        let cloud = Arc::new(Cloud::new());

        let first = fanout(
            "m1",
            "update_aggregates",
            json!({"aggregates": [aggregate("a1", "host1", "p1")]}),
        );
        ingest.apply(&first).await.unwrap();
        assert!(cloud.aggregates().is_empty(), "nothing attached yet");

        ingest.attach_cloud(cloud.clone());
        let second = fanout(
            "m2",
            "update_aggregates",
            json!({"aggregates": [aggregate("a1", "host2", "p2")]}),
        );
        let outcomes = ingest.apply_batch(&[&second]).await.unwrap();
        assert!(
            matches!(outcomes[..], [Ok(Applied::Applied)]),
            "{outcomes:?}"
        );
        let all = cloud.aggregates();
        assert_eq!(
            (all[0].uuid.as_str(), all[0].hosts.as_slice()),
            ("a1", &["host2".to_string()][..])
        );
        assert!(cloud.host_metadata().of("host2").is_some());

        let gone = fanout(
            "m3",
            "delete_aggregate",
            json!({"aggregate": aggregate("a1", "host2", "p2")}),
        );
        assert!(matches!(ingest.apply(&gone).await, Ok(Applied::Applied)));
        assert!(cloud.aggregates().is_empty());
        assert!(matches!(
            ingest.apply(&second).await,
            Ok(Applied::Duplicate)
        ));
        assert!(
            cloud.aggregates().is_empty(),
            "a redelivery changes nothing"
        );
    }
}
