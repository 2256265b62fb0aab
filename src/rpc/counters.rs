//! Counts of what the RPC server did (calls, casts, failures, duplicates, dead letters).

use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Outcome counters. A `parking_lot` mutex: held for one map update, never across an await.
#[derive(Debug, Default)]
pub struct RpcCounters {
    by_outcome: Mutex<BTreeMap<&'static str, u64>>,
}

impl RpcCounters {
    /// Adds one to `outcome`.
    pub fn count(&self, outcome: &'static str) {
        *self.by_outcome.lock().entry(outcome).or_default() += 1;
    }

    /// The count of `outcome` so far.
    pub fn get(&self, outcome: &str) -> u64 {
        self.by_outcome.lock().get(outcome).copied().unwrap_or(0)
    }

    pub fn to_json(&self) -> Value {
        json!(*self.by_outcome.lock())
    }
}
