//! `GET /metrics`: the Prometheus text exposition.

use crate::startup::AppState;
use actix_web::{web, HttpResponse};

pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .body(state.scheduler.stats().metrics().encode())
}
