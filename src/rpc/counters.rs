//! Counts of what the RPC server did (calls, casts, replies, failures, duplicates, dead
//! letters, reconnections), for `/v1/stats` and for `/metrics` as
//! `parasol_rpc_messages_total{outcome}`.

use crate::stats::prometheus_client::encoding::EncodeLabelSet;
use crate::stats::prometheus_client::metrics::counter::Counter;
use crate::stats::prometheus_client::metrics::family::Family;
use crate::stats::Metrics;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// Outcome counters. A `parking_lot` mutex: held for one map update, never across an await.
#[derive(Debug, Default)]
pub struct RpcCounters {
    by_outcome: Mutex<BTreeMap<&'static str, u64>>,
    family: Family<OutcomeLabel, Counter>,
}

impl RpcCounters {
    /// Counters that `/metrics` shows too, as `parasol_rpc_messages_total{outcome}`.
    pub fn registered(metrics: &Metrics) -> Self {
        let counters = RpcCounters::default();
        metrics.register(
            "rpc_messages",
            "Nova scheduler RPC messages by outcome (call, cast, reply, failure, no_valid_host, \
             duplicate, malformed, dead_letter, reply_lost, heartbeat, reconnect, ...)",
            counters.family.clone(),
        );
        counters
    }

    /// Adds one to `outcome`.
    pub fn count(&self, outcome: &'static str) {
        *self.by_outcome.lock().entry(outcome).or_default() += 1;
        self.family.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    /// The count of `outcome` so far.
    pub fn get(&self, outcome: &str) -> u64 {
        self.by_outcome.lock().get(outcome).copied().unwrap_or(0)
    }

    pub fn to_json(&self) -> Value {
        json!(*self.by_outcome.lock())
    }
}
