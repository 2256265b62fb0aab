//! A plan walked through the operator's `move` plugin chain (issue 47, docs/plugins.md §2):
//! each move in the plan's order is approved, sent elsewhere or denied. A changed destination
//! is checked by the planner's rules and the rest of the plan made again from there; a denied
//! move leaves its instance where it is (listed among `not_movable` with the plugin's reason)
//! and the rest is made again without it. Each new plan is shown only its new moves, so each
//! move is decided once. A destination the rules refuse keeps the instance too, with why.

use super::planner::{plan_decided, Decided, Plan, PlannedMove};
use super::request::{PlanError, PlanRequest};
use super::state::CloudState;
use crate::plugins::{Chains, MoveReview};
use serde_json::{json, Value};
use std::sync::Arc;

/// Plans `request` on `state`, every move passing `chains`' `move` chain (the plain plan when
/// there is none). Runs the solver off the async threads, once per change the chain makes.
pub async fn reviewed_plan(
    state: Arc<CloudState>,
    request: Arc<PlanRequest>,
    chains: &Chains,
) -> Result<Plan, PlanError> {
    let hosts: Vec<String> = state.hosts.iter().map(|h| h.host.clone()).collect();
    let mut decided = Decided::default();
    loop {
        let plan = {
            let (state, request, asked) = (state.clone(), request.clone(), decided.clone());
            tokio::task::spawn_blocking(move || plan_decided(&state, &request, &asked))
                .await
                .map_err(|e| PlanError::invalid("plan", format!("the planner failed: {e}")))?
        };
        let plan = match plan {
            Err(PlanError::MoveRefused {
                instance,
                destination,
                reason,
            }) => {
                // Only the last decided move can be refused: the earlier ones were planned.
                decided.moves.pop();
                let why = format!(
                    "a plugin sent it to {destination}, which the rules refuse ({reason}): it stays"
                );
                tracing::info!(%instance, %destination, %reason, "a plugin's destination for a move is refused: the instance stays");
                decided.kept.push((instance, why));
                continue;
            }
            other => other?,
        };
        if !chains.has_move() {
            return Ok(plan);
        }
        if !review_new_moves(&plan, chains, &hosts, &mut decided).await? {
            return Ok(plan);
        }
    }
}

/// Asks the chain about `plan`'s moves past those already decided, in order, until one is
/// changed or denied (`true`: the plan must be made again) or all are approved (`false`).
async fn review_new_moves(
    plan: &Plan,
    chains: &Chains,
    hosts: &[String],
    decided: &mut Decided,
) -> Result<bool, PlanError> {
    let total = plan.moves();
    let summary = json!({
        "solver": plan.solver, "base_revision": plan.base_revision, "moves": total,
        "fairness_before": plan.before.fairness, "fairness_after": plan.after.fairness,
    });
    let already = decided.moves.len();
    for (index, m) in plan.steps.iter().flatten().enumerate().skip(already) {
        let mut about = summary.clone();
        about["index"] = json!(index);
        let review = chains
            .review_move(&move_view(m), &about, hosts)
            .await
            .map_err(|stopped| PlanError::Plugin(stopped.to_string()))?;
        match review {
            MoveReview::Approved => {
                decided
                    .moves
                    .push((m.instance.clone(), m.destination.clone()));
            }
            MoveReview::Changed { destination, .. } => {
                decided.moves.push((m.instance.clone(), destination));
                return Ok(true);
            }
            MoveReview::Denied { plugin, reason } => {
                let why = format!("denied by plugin {plugin}: {reason}");
                decided.kept.push((m.instance.clone(), why));
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// One move as a `move` plugin is shown it.
fn move_view(m: &PlannedMove) -> Value {
    json!({
        "instance_uuid": m.instance, "source": m.source, "destination": m.destination,
        "destination_node": m.destination_node, "desire_vcpus": m.desire,
        "delta_utilization": m.delta_utilization, "delta_fairness": m.delta_fairness,
        "delta_cost": m.delta_cost,
    })
}
