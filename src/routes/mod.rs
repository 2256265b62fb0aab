//! The HTTP surface (docs/architecture.md §8.1), one file per route, and the JSON error every route
//! answers.

pub mod connection;
mod health;
mod hosts;
mod metrics;
mod notifications;
mod page;
mod rebalance;
mod select_destinations;
mod stats;

pub use health::{healthz, readyz};
pub use hosts::list_hosts;
pub use metrics::metrics;
pub use notifications::post_notification;
pub use page::{asset, live_page};
pub use rebalance::plan_rebalance;
pub use select_destinations::select_destinations;
pub use stats::get_stats;

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse, ResponseError};
use futures::StreamExt;

/// An error answered as `{"error": {"class", "message", "reason"}}` with its status.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub status: StatusCode,
    pub class: &'static str,
    pub message: String,
    pub reason: Option<String>,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            class: "BadRequest",
            message: message.into(),
            reason: None,
        }
    }

    /// 503: Parasol cannot serve the call right now (an outage, not the caller's fault).
    pub fn unavailable(message: impl std::fmt::Display) -> Self {
        tracing::error!(error = %message, "request failed: service unavailable");
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            class: "ServiceUnavailable",
            message: message.to_string(),
            reason: None,
        }
    }

    pub fn internal(message: impl std::fmt::Display) -> Self {
        tracing::error!(error = %message, "request failed");
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            class: "InternalError",
            message: message.to_string(),
            reason: None,
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status).json(crate::nova::http_error_body(
            self.class,
            &self.message,
            self.reason.as_deref(),
        ))
    }
}

/// How large a body a route reads and how long it waits for it.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimit {
    /// `[server] max_body_bytes`.
    pub bytes: usize,
    /// `[server] body_timeout_s`.
    pub timeout: std::time::Duration,
}

/// Reads a request body up to `limit.bytes` bytes, refusing larger ones with 413 and one that
/// has not arrived in full within `limit.timeout` with 408 (the server then closes the
/// connection: its body was not read).
pub(crate) async fn read_body(
    payload: web::Payload,
    limit: &BodyLimit,
) -> Result<web::BytesMut, ApiError> {
    match tokio::time::timeout(limit.timeout, read_body_within(payload, limit.bytes)).await {
        Ok(body) => body,
        Err(_) => Err(ApiError {
            status: StatusCode::REQUEST_TIMEOUT,
            class: "RequestTimeout",
            message: format!(
                "the request body did not arrive in full within {} s (server.body_timeout_s)",
                limit.timeout.as_secs_f64()
            ),
            reason: None,
        }),
    }
}

async fn read_body_within(
    mut payload: web::Payload,
    limit: usize,
) -> Result<web::BytesMut, ApiError> {
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::bad_request(format!("could not read the request body: {e}")))?;
        if body.len() + chunk.len() > limit {
            return Err(ApiError {
                status: StatusCode::PAYLOAD_TOO_LARGE,
                class: "PayloadTooLarge",
                message: format!(
                    "request body is larger than {limit} bytes (server.max_body_bytes)"
                ),
                reason: None,
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Parses a JSON body, naming the position of a syntax error.
pub(crate) fn parse_json(body: &[u8]) -> Result<serde_json::Value, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request(
            "request body is empty: a JSON object is expected",
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("request body is not valid JSON: {e}")))
}
