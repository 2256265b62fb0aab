//! `GET /v1/stats`: per-backend counters, latencies, windowed view and live parameters.

use crate::startup::AppState;
use actix_web::{web, HttpResponse};
use serde_json::json;

pub async fn get_stats(state: web::Data<AppState>) -> HttpResponse {
    let stats = state.scheduler.stats();
    HttpResponse::Ok().json(json!({
        "active_backend": state.scheduler.backend().kind().as_str(),
        "backends": stats.backends_json(),
        "broker": state.broker.to_json(),
        "notifications": state.notifications_json(),
    }))
}
