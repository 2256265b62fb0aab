//! Batch placement's counters (`[batch]`, docs/architecture.md §12.5): rounds solved, their
//! sizes and solve times, instances the solve left unscheduled, and calls that fell back to
//! one instance at a time, by reason.

use super::{histogram, percentiles};
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};

/// Why a multi-create was placed one instance at a time although `[batch] mode` asked for a
/// batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BatchFallback {
    /// More instances than `[batch] max_instances`.
    TooLarge,
    /// The solve took longer than `[batch] solve_timeout_ms`.
    SolveTimeout,
    /// The solve left instances unscheduled on a view that may be stale or partial (a
    /// snapshot, a sample): the one-at-a-time path reads again.
    Unscheduled,
    /// The ledger or Placement declined a claim of the assignment (someone took the room).
    Declined,
    /// The call needs what the batch does not model (a rebuild, instances of different
    /// demands, anti-affinity with `max_server_per_host` > 1, a filter counting the call's
    /// own instances per host).
    Unsupported,
}

impl BatchFallback {
    pub const ALL: [BatchFallback; 5] = [
        BatchFallback::TooLarge,
        BatchFallback::SolveTimeout,
        BatchFallback::Unscheduled,
        BatchFallback::Declined,
        BatchFallback::Unsupported,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BatchFallback::TooLarge => "too_large",
            BatchFallback::SolveTimeout => "solve_timeout",
            BatchFallback::Unscheduled => "unscheduled",
            BatchFallback::Declined => "declined",
            BatchFallback::Unsupported => "unsupported",
        }
    }
}

/// One solved batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchRound {
    /// Instances in the batch.
    pub size: u64,
    /// The solve's duration (network built and solved), in microseconds.
    pub solve_us: u64,
    /// Instances the optimum left on the unscheduled node.
    pub unscheduled: u64,
}

/// The run's totals.
#[derive(Debug)]
pub(super) struct BatchTotals {
    rounds: u64,
    instances: u64,
    unscheduled: u64,
    fallbacks: [u64; BatchFallback::ALL.len()],
    size: Histogram<u64>,
    solve_us: Histogram<u64>,
}

impl Default for BatchTotals {
    fn default() -> Self {
        BatchTotals {
            rounds: 0,
            instances: 0,
            unscheduled: 0,
            fallbacks: [0; BatchFallback::ALL.len()],
            size: histogram(),
            solve_us: histogram(),
        }
    }
}

impl BatchTotals {
    pub(super) fn round(&mut self, r: BatchRound) {
        self.rounds += 1;
        self.instances += r.size;
        self.unscheduled += r.unscheduled;
        let _ = self.size.record(r.size.max(1));
        let _ = self.solve_us.record(r.solve_us.max(1));
    }

    pub(super) fn fallback(&mut self, reason: BatchFallback) {
        self.fallbacks[reason as usize] += 1;
    }

    /// `/v1/stats`' `batch` object of a backend.
    pub(super) fn to_json(&self) -> Value {
        let fallbacks: Map<String, Value> = BatchFallback::ALL
            .iter()
            .map(|r| (r.as_str().to_string(), json!(self.fallbacks[*r as usize])))
            .collect();
        json!({
            "rounds": self.rounds,
            "instances": self.instances,
            "unscheduled": self.unscheduled,
            "fallbacks": fallbacks,
            "size": sizes(&self.size),
            "solve_latency_ms": percentiles(&self.solve_us),
        })
    }
}

/// p50/p90/p99/max of batch sizes (instances, null when empty) and the count.
fn sizes(h: &Histogram<u64>) -> Value {
    let q = |q: f64| {
        if h.is_empty() {
            Value::Null
        } else {
            json!(h.value_at_quantile(q))
        }
    };
    json!({"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": q(1.0), "count": h.len()})
}
