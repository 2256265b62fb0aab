//! `GET /metrics`: the Prometheus text exposition.

use crate::scheduling::Scheduler;
use actix_web::{web, HttpResponse};

pub async fn metrics(scheduler: web::Data<Scheduler>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .body(scheduler.stats().metrics().encode())
}
