//! `GET /`: the live page, and `GET /assets/{name}` its script, styles and the vendored uPlot
//! (`assets/vendor/uplot`, MIT, its LICENSE beside it). Everything is compiled into the binary,
//! so the page works with no network and no build step.

use actix_web::http::header::{CacheControl, CacheDirective, ContentType};
use actix_web::{web, HttpResponse, ResponseError};

/// Each asset: name in the URL, content type, bytes.
const ASSETS: [(&str, &str, &str); 5] = [
    (
        "page.js",
        "text/javascript; charset=utf-8",
        include_str!("../../assets/page/page.js"),
    ),
    (
        "page.css",
        "text/css; charset=utf-8",
        include_str!("../../assets/page/page.css"),
    ),
    (
        "uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_str!("../../assets/vendor/uplot/uPlot.iife.min.js"),
    ),
    (
        "uPlot.min.css",
        "text/css; charset=utf-8",
        include_str!("../../assets/vendor/uplot/uPlot.min.css"),
    ),
    (
        "uPlot.LICENSE",
        "text/plain; charset=utf-8",
        include_str!("../../assets/vendor/uplot/LICENSE"),
    ),
];

const INDEX: &str = include_str!("../../assets/page/index.html");

pub async fn live_page() -> HttpResponse {
    HttpResponse::Ok()
        .content_type(ContentType::html())
        .insert_header(CacheControl(vec![CacheDirective::NoCache]))
        .body(INDEX)
}

pub async fn asset(name: web::Path<String>) -> HttpResponse {
    match ASSETS.iter().find(|(n, _, _)| *n == name.as_str()) {
        Some((_, content_type, body)) => HttpResponse::Ok()
            .insert_header(("content-type", *content_type))
            .insert_header(CacheControl(vec![CacheDirective::NoCache]))
            .body(*body),
        None => super::ApiError {
            status: actix_web::http::StatusCode::NOT_FOUND,
            class: "NotFound",
            message: format!("no asset {:?}", name.as_str()),
            reason: None,
        }
        .error_response(),
    }
}
