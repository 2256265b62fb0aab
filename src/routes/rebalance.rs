//! `POST /v1/rebalance/plan`: a Fair Maximum Utilization plan over the service's state (a dry
//! run: nothing is moved), in Parasol's form or Watcher's (`?format=watcher`); docs/fmu.md §8.

use super::{read_body, ApiError, BodyLimit};
use crate::rebalance::{self, PlanError, PlanFormat, PlanRequest, Times};
use crate::scheduling::Scheduler;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use std::sync::Arc;

#[derive(serde::Deserialize)]
pub struct PlanQuery {
    format: Option<String>,
}

pub async fn plan_rebalance(
    scheduler: web::Data<Scheduler>,
    limit: web::Data<BodyLimit>,
    query: web::Query<PlanQuery>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let counters = scheduler.stats().rebalance().clone();
    let refused = |e: PlanError| {
        counters.refuse(e.refusal());
        plan_error(e)
    };
    let body = read_body(payload, &limit).await?;
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        serde_json::Value::Null
    } else {
        super::parse_json(&body)?
    };
    let settings = scheduler.settings();
    let request =
        PlanRequest::parse(&body, query.format.as_deref(), &settings.rebalance).map_err(refused)?;
    let times = Times {
        now_ms: scheduler.clock().now_ms(),
        max_age_ms: scheduler.flex().max_age_ms(),
        host_timeout_ms: settings.policy.host_timeout_s as i64 * 1000,
    };
    let state = rebalance::read_state(scheduler.ledger(), times)
        .await
        .map_err(ApiError::unavailable)?;
    let format = request.format;
    let chains = scheduler.backend().plugins().clone();
    let plan = rebalance::reviewed_plan(Arc::new(state), Arc::new(request), &chains)
        .await
        .map_err(refused)?;
    counters.plan(plan.moves(), plan.replanned.is_some());
    tracing::info!(
        solver = ?plan.solver,
        moves = plan.moves(),
        revision = %plan.base_revision,
        cost_before = plan.before.cost,
        cost_after = plan.after.cost,
        "rebalance plan made (dry run)"
    );
    Ok(HttpResponse::Ok().json(match format {
        PlanFormat::Parasol => rebalance::plan_json(&plan),
        PlanFormat::Watcher => rebalance::watcher_json(&plan),
    }))
}

/// A refused request: 400 for a malformed one or unknown hosts, 409 when the state does not
/// allow a plan (no usage, a stale base); `reason` is the counter's.
fn plan_error(e: PlanError) -> ApiError {
    let (status, class) = match &e {
        PlanError::Invalid { .. } => (StatusCode::BAD_REQUEST, "BadRequest"),
        PlanError::UnknownHosts(_) => (StatusCode::BAD_REQUEST, "UnknownHosts"),
        PlanError::NoUsage(_) => (StatusCode::CONFLICT, "NoUsage"),
        PlanError::Stale { .. } => (StatusCode::CONFLICT, "StalePlan"),
        PlanError::MoveRefused { .. } => (StatusCode::CONFLICT, "MoveRefused"),
        // A plugin of the operator's that is not ignorable failed: not the caller's fault.
        PlanError::Plugin(_) => (StatusCode::SERVICE_UNAVAILABLE, "PluginFailed"),
    };
    ApiError {
        status,
        class,
        message: e.to_string(),
        reason: Some(e.refusal().as_str().to_string()),
    }
}
