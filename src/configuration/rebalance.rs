//! `[rebalance]`: the Fair Maximum Utilization planner behind `POST /v1/rebalance/plan` and
//! `parasol rebalance plan` (issue 46, docs/fmu.md §8): which solver, how many moves at once
//! and in total, the migration resistance and the seed.

use crate::choice::Choice;
use serde::{Deserialize, Serialize};

/// The rebalancers of McNett's thesis (docs/fmu.md §4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum RebalanceSolver {
    /// Greedy Best Move (§3.9): the fewest migrations for the fairness gained.
    #[default]
    Gbm,
    /// Balanced CPU: Graham's list scheduling by decreasing usage (§3.7.2).
    Bcpu,
    /// BCPU2: list scheduling by name (§3.7.2).
    Bcpu2,
    /// Simulated annealing (§3.8, Table 3.2's parameters).
    Sa,
}

crate::choice_from_string!(RebalanceSolver);

impl Choice for RebalanceSolver {
    const ALL: &'static [Self] = &[
        RebalanceSolver::Gbm,
        RebalanceSolver::Bcpu,
        RebalanceSolver::Bcpu2,
        RebalanceSolver::Sa,
    ];
    fn as_str(self) -> &'static str {
        match self {
            RebalanceSolver::Gbm => "gbm",
            RebalanceSolver::Bcpu => "bcpu",
            RebalanceSolver::Bcpu2 => "bcpu2",
            RebalanceSolver::Sa => "sa",
        }
    }
}

/// How `parasol rebalance apply` authenticates to Nova's compute API.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum NovaAuth {
    /// `[placement]`'s Keystone service user (Nova's, by default), whose token's catalog
    /// gives the compute endpoint when `nova_url` is empty.
    #[default]
    Keystone,
    /// The static token `nova_token`, sent as `X-Auth-Token` to `nova_url`.
    Token,
}

crate::choice_from_string!(NovaAuth);

impl Choice for NovaAuth {
    const ALL: &'static [Self] = &[NovaAuth::Keystone, NovaAuth::Token];
    fn as_str(self) -> &'static str {
        match self {
            NovaAuth::Keystone => "keystone",
            NovaAuth::Token => "token",
        }
    }
}

/// The largest `max_moves` accepted: a plan is carried out one step at a time, and past a
/// few hundred moves the state it was made on is long gone.
pub const MAX_MOVES: usize = 1_000;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RebalanceSettings {
    /// The solver a request that names none gets.
    pub solver: RebalanceSolver,
    /// Live migrations out of one host at once (Nova's `max_concurrent_live_migrations`, 1).
    pub max_concurrent_per_source: usize,
    /// Live migrations at once across the cloud (one step of the plan).
    pub parallel: usize,
    /// Most moves in one plan.
    pub max_moves: usize,
    /// A move must gain this fraction: BCPU/BCPU2 keep a VM whose best host is within it of
    /// its current one (§3.7.2's 5 %); GBM moves a VM only to a host whose demand with it
    /// stays this fraction below its current host's; SA's plan only if it lowers C by it.
    pub migration_resistance: f64,
    /// The seed of GBM's and SA's random choices when a request gives none.
    pub seed: u64,
    /// `parasol rebalance apply`: Nova's compute API, `…/v2.1` (empty: the Keystone
    /// catalog's `compute` endpoint, `[placement] interface`).
    pub nova_url: String,
    /// `keystone` (`[placement]`'s service user) or `token` (`nova_token`).
    pub nova_auth: NovaAuth,
    /// The static token of `nova_auth = "token"`.
    pub nova_token: String,
    /// Seconds before one request to Nova is abandoned.
    pub nova_timeout_s: f64,
    /// Seconds between two looks at a moving server (and at the agreement after it).
    pub apply_poll_interval_s: f64,
    /// Seconds one live migration may take before the apply stops at it.
    pub move_timeout_s: f64,
    /// Seconds Placement and Parasol's ledger have to agree after a move before the apply
    /// stops there.
    pub agree_timeout_s: f64,
}

impl Default for RebalanceSettings {
    fn default() -> Self {
        RebalanceSettings {
            solver: RebalanceSolver::Gbm,
            max_concurrent_per_source: 1,
            parallel: 2,
            max_moves: 50,
            migration_resistance: 0.05,
            seed: 1,
            nova_url: String::new(),
            nova_auth: NovaAuth::Keystone,
            nova_token: String::new(),
            nova_timeout_s: 30.0,
            apply_poll_interval_s: 1.0,
            move_timeout_s: 600.0,
            agree_timeout_s: 60.0,
        }
    }
}

impl RebalanceSettings {
    /// Ranges serde cannot check: the key (within `[rebalance]`) and what is wrong.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(1..=64).contains(&self.max_concurrent_per_source) {
            return Err((
                "max_concurrent_per_source",
                "must be from 1 to 64 (Nova's max_concurrent_live_migrations, default 1)".into(),
            ));
        }
        if !(1..=1024).contains(&self.parallel) {
            return Err(("parallel", "must be from 1 to 1024".into()));
        }
        if !(1..=MAX_MOVES).contains(&self.max_moves) {
            return Err(("max_moves", format!("must be from 1 to {MAX_MOVES}")));
        }
        if !(self.migration_resistance >= 0.0 && self.migration_resistance < 1.0) {
            return Err((
                "migration_resistance",
                "must be a fraction in [0, 1) (the thesis' 0.05 is 5 %)".into(),
            ));
        }
        for (key, value) in [
            ("nova_timeout_s", self.nova_timeout_s),
            ("apply_poll_interval_s", self.apply_poll_interval_s),
            ("move_timeout_s", self.move_timeout_s),
            ("agree_timeout_s", self.agree_timeout_s),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err((key, "must be a positive number of seconds".into()));
            }
        }
        if self.nova_auth == NovaAuth::Token
            && (self.nova_token.is_empty() || self.nova_url.is_empty())
        {
            return Err((
                "nova_token",
                "nova_auth = \"token\" needs nova_token and nova_url".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::Settings;
    use super::RebalanceSolver;

    #[test]
    fn rebalance_defaults_to_gbm_one_move_per_source_and_five_percent() {
        let s = Settings::from_toml("").unwrap();
        assert_eq!(s.rebalance.solver, RebalanceSolver::Gbm);
        assert_eq!(s.rebalance.max_concurrent_per_source, 1);
        assert_eq!(s.rebalance.max_moves, 50);
        assert_eq!(s.rebalance.migration_resistance, 0.05);
        let s = Settings::from_toml("[rebalance]\nsolver = \"bcpu2\"\nparallel = 4\n").unwrap();
        assert_eq!(s.rebalance.solver, RebalanceSolver::Bcpu2);
        assert_eq!(s.rebalance.parallel, 4);
    }

    #[test]
    fn rebalance_values_out_of_range_are_refused_naming_the_key() {
        for (toml, key) in [
            (
                "max_concurrent_per_source = 0",
                "rebalance.max_concurrent_per_source",
            ),
            ("parallel = 0", "rebalance.parallel"),
            ("max_moves = 0", "rebalance.max_moves"),
            ("max_moves = 1001", "rebalance.max_moves"),
            (
                "migration_resistance = 1.0",
                "rebalance.migration_resistance",
            ),
            (
                "migration_resistance = -0.1",
                "rebalance.migration_resistance",
            ),
            (
                "migration_resistance = nan",
                "rebalance.migration_resistance",
            ),
            ("move_timeout_s = 0", "rebalance.move_timeout_s"),
            (
                "apply_poll_interval_s = -1",
                "rebalance.apply_poll_interval_s",
            ),
            ("nova_auth = \"token\"", "rebalance.nova_token"),
        ] {
            let err = Settings::from_toml(&format!("[rebalance]\n{toml}\n")).unwrap_err();
            let err = format!("{err:#}");
            assert!(err.contains(key), "{toml}: {err}");
        }
        let err = Settings::from_toml("[rebalance]\nsolver = \"dbp\"\n").unwrap_err();
        assert!(
            format!("{err:#}").contains("gbm, bcpu, bcpu2, sa"),
            "{err:#}"
        );
    }
}
