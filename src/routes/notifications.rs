//! `POST /v1/notifications`: the same messages as on RabbitMQ (oslo envelope, or the inner
//! message alone), applied by the same handlers.

use super::select_destinations::codec_error;
use super::BodyLimit;
use super::{read_body, ApiError};
use crate::notifications::{ApplyError, Ingest};
use crate::nova::Notification;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde_json::json;

pub async fn post_notification(
    ingest: web::Data<Ingest>,
    limit: web::Data<BodyLimit>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body = read_body(payload, &limit).await?;
    let notification = match Notification::typed_alone(&body) {
        // Most of the traffic (host states, builds, deletions), read without a JSON tree.
        Some(n) => n,
        None => {
            let value = super::parse_json(&body)?;
            let decoded = if value.get("oslo.message").is_some() {
                Notification::from_envelope(&value)
            } else if value.get("method").is_some() {
                crate::nova::RpcMessage::from_value(&value).and_then(|m| Notification::from_rpc(&m))
            } else {
                Notification::from_inner(&value)
            };
            decoded.map_err(|e| {
                ingest.count("rejected");
                codec_error(e)
            })?
        }
    };
    match ingest.apply(&notification).await {
        Ok(outcome) => Ok(HttpResponse::Ok().json(json!({
            "message_id": notification.message_id,
            "event_type": notification.event_type,
            "outcome": outcome.as_str(),
        }))),
        Err(ApplyError::Rejected(reason)) => {
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
        Err(ApplyError::Ledger(e)) => Err(ApiError::unavailable(e)),
    }
}
