//! [`Ingest`]: the handle every transport (HTTP, the RabbitMQ consumer, the RPC server's
//! instance-info casts) applies host-state inputs through, counting each outcome once for
//! `/v1/stats` and `/metrics`.

use super::apply::{apply, apply_batch, Applied, ApplyError, Outcome};
use crate::clock::SharedClock;
use crate::ledger::{Ledger, LedgerError};
use crate::nova::Notification;
use crate::stats::Stats;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Applies notifications to the ledger and counts their outcomes.
pub struct Ingest {
    ledger: Ledger,
    clock: SharedClock,
    stats: Arc<Stats>,
    // parking_lot: held for one map update, never across an await.
    outcomes: Mutex<BTreeMap<String, u64>>,
}

impl Ingest {
    pub fn new(ledger: Ledger, clock: SharedClock, stats: Arc<Stats>) -> Self {
        Ingest {
            ledger,
            clock,
            stats,
            outcomes: Mutex::new(BTreeMap::new()),
        }
    }

    /// Applies one message exactly once and counts the outcome (a rejection as `rejected`).
    pub async fn apply(&self, n: &Notification) -> Result<Applied, ApplyError> {
        let outcome = apply(&self.ledger, n, self.clock.now_ms()).await;
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
