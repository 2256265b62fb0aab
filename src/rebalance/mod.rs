//! Rebalancing plans over the service's real state (issue 46 item 3, docs/fmu.md §8): the
//! thesis' FMU model and solvers (`control::fmu_*`) fed with the live table's hosts, the
//! ledger's allocations and the measured usage of `table::usage`. A plan is a dry run: it
//! moves nothing.
//!
//! # Layout
//! - `state`: the cloud as the planner reads it, and the revision a plan is made on.
//! - `request`: a plan request with `[rebalance]`'s defaults, and why one is refused.
//! - `model`: the hosts chosen, each VM's use and desire, the move rules.
//! - `planner`: the solver, the `max_moves` cut, ΔU/ΔF/ΔC, the replay check.
//! - `review`: a plan walked through the operator's `move` plugin chain.
//! - `report`: the plan as Parasol's JSON, Watcher's actions and a terminal table.
//! - `client`: `parasol rebalance plan`, which asks the running service.
//! - `nova_api`, `apply`: `parasol rebalance apply`, the plan carried out through Nova.

mod apply;
mod client;
mod model;
mod nova_api;
mod planner;
mod report;
mod request;
mod review;
mod state;

pub use apply::{
    from_nova, not_movable_reason, plan_moves, saved_plan, Apply, ApplyError, ParasolEndpoint,
    PlanMove, Stopped,
};
pub use client::{request_plan, ClientError, PlanCall};
pub use nova_api::{
    nova_message, ComputeApi, GroupView, NovaError, ServerView, COMPUTE_MICROVERSION,
};
pub use planner::{plan, plan_decided, Decided, Figures, LeftOut, Plan, PlannedMove};
pub use report::{plan_json, render_text, watcher_json, WATCHER_GOAL, WATCHER_STRATEGY};
pub use request::{GroupSpec, PlanError, PlanFormat, PlanRequest};
pub use review::reviewed_plan;
pub use state::{CloudState, PlanHost, PlanVm, Sources};

use crate::ledger::{Ledger, LedgerError};

/// The times the state is judged at.
#[derive(Clone, Copy, Debug)]
pub struct Times {
    pub now_ms: i64,
    /// `[usage] max_age_s` in ms.
    pub max_age_ms: i64,
    /// `[policy] host_timeout_s` in ms (0: never).
    pub host_timeout_ms: i64,
}

/// Reads the cloud's state: the live table's hosts, the ledger's allocations and held moves.
pub async fn read_state(ledger: &Ledger, times: Times) -> Result<CloudState, LedgerError> {
    let allocations = ledger.stored_allocations().await?;
    let held_moves = ledger.held_moves().await?;
    let hosts = ledger.read_hosts().await?;
    Ok(CloudState::build(Sources {
        hosts: &hosts,
        allocations: &allocations,
        held_moves: &held_moves,
        now_ms: times.now_ms,
        max_age_ms: times.max_age_ms,
        host_timeout_ms: times.host_timeout_ms,
    }))
}

#[cfg(test)]
mod tests;
