//! `POST /v1/notifications`: the same messages as on RabbitMQ (oslo envelope, or the inner
//! message alone), applied by the same handlers.

use super::select_destinations::codec_error;
use super::{read_body, ApiError};
use crate::notifications::{apply, ApplyError};
use crate::nova::Notification;
use crate::startup::{AppState, BodyLimit};
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde_json::json;

pub async fn post_notification(
    state: web::Data<AppState>,
    limit: web::Data<BodyLimit>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body = read_body(payload, limit.0).await?;
    let value = super::parse_json(&body)?;
    let decoded = if value.get("oslo.message").is_some() {
        Notification::decode(&body)
    } else if value.get("method").is_some() {
        crate::nova::RpcMessage::from_value(&value).and_then(|m| Notification::from_rpc(&m))
    } else {
        Notification::from_inner(&value)
    };
    let notification = decoded.map_err(|e| {
        state.count_notification("rejected");
        codec_error(e)
    })?;
    let now = state.scheduler.clock().now_ms();
    match apply(state.scheduler.ledger(), &notification, now).await {
        Ok(outcome) => {
            state.count_notification(outcome.as_str());
            Ok(HttpResponse::Ok().json(json!({
                "message_id": notification.message_id,
                "event_type": notification.event_type,
                "outcome": outcome.as_str(),
            })))
        }
        Err(ApplyError::Rejected(reason)) => {
            state.count_notification("rejected");
            let status = if reason.starts_with("unknown host") || reason.contains("unknown host") {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::UNPROCESSABLE_ENTITY
            };
            Err(ApiError {
                status,
                class: "Rejected",
                message: reason,
                reason: None,
            })
        }
        Err(ApplyError::Ledger(e)) => Err(ApiError::internal(e)),
    }
}
