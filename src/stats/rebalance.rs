//! The rebalancing planner's figures (`POST /v1/rebalance/plan`, docs/fmu.md §8): plans made,
//! moves planned, plans re-made on a newer state, and requests refused by reason.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::{json, Map, Value};

/// Why a plan request was refused (nothing planned, nothing moved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RebalanceRefusal {
    /// A field of the request is malformed or out of range.
    InvalidRequest,
    /// The request names hosts the table does not have.
    UnknownHosts,
    /// The hosts have no fresh measured usage to plan on.
    NoUsage,
    /// The request's `base_revision` is not the ledger's state any more.
    StalePlan,
    /// A `move` plugin that is not ignorable failed.
    Plugin,
}

impl RebalanceRefusal {
    pub const ALL: [RebalanceRefusal; 5] = [
        RebalanceRefusal::InvalidRequest,
        RebalanceRefusal::UnknownHosts,
        RebalanceRefusal::NoUsage,
        RebalanceRefusal::StalePlan,
        RebalanceRefusal::Plugin,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RebalanceRefusal::InvalidRequest => "invalid_request",
            RebalanceRefusal::UnknownHosts => "unknown_hosts",
            RebalanceRefusal::NoUsage => "no_usage",
            RebalanceRefusal::StalePlan => "stale_plan",
            RebalanceRefusal::Plugin => "plugin",
        }
    }
}

/// The counters, shared with `/metrics` (`parasol_rebalance_*`).
#[derive(Clone, Debug, Default)]
pub struct RebalanceStats {
    /// `parasol_rebalance_plans_total`.
    pub plans: Counter,
    /// `parasol_rebalance_moves_planned_total`.
    pub moves: Counter,
    /// `parasol_rebalance_replans_total`: plans made on a newer state than the request's.
    pub replans: Counter,
    /// `parasol_rebalance_refusals_total{reason}`.
    pub refusals: Family<Vec<(String, String)>, Counter>,
}

impl RebalanceStats {
    /// Counts one plan of `moves` moves, `replanned` when the request's base was stale.
    pub fn plan(&self, moves: usize, replanned: bool) {
        self.plans.inc();
        self.moves.inc_by(moves as u64);
        if replanned {
            self.replans.inc();
        }
    }

    /// Counts one refused request.
    pub fn refuse(&self, reason: RebalanceRefusal) {
        self.refusal(reason).inc();
    }

    fn refusal(&self, reason: RebalanceRefusal) -> Counter {
        self.refusals
            .get_or_create(&vec![("reason".to_string(), reason.as_str().to_string())])
            .clone()
    }

    /// `/v1/stats` `rebalance`.
    pub fn to_json(&self) -> Value {
        let refused: Map<String, Value> = RebalanceRefusal::ALL
            .iter()
            .map(|r| (r.as_str().to_string(), json!(self.refusal(*r).get())))
            .collect();
        json!({
            "plans": self.plans.get(),
            "moves_planned": self.moves.get(),
            "replans": self.replans.get(),
            "refused": refused,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_moves_and_refusals_are_counted_by_reason() {
        let stats = RebalanceStats::default();
        stats.plan(3, false);
        stats.plan(2, true);
        stats.refuse(RebalanceRefusal::StalePlan);
        let json = stats.to_json();
        assert_eq!(json["plans"], 2);
        assert_eq!(json["moves_planned"], 5);
        assert_eq!(json["replans"], 1);
        assert_eq!(json["refused"]["stale_plan"], 1);
        assert_eq!(json["refused"]["unknown_hosts"], 0);
    }
}
