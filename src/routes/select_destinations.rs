//! `POST /v1/select_destinations`: Nova's call over HTTP, with the RPC 4.5 argument shape.

use super::{read_body, ApiError, BodyLimit};
use crate::nova::{CodecError, SelectDestinationsArgs};
use crate::scheduling::{Scheduler, SelectError};
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};

pub async fn select_destinations(
    scheduler: web::Data<Scheduler>,
    limit: web::Data<BodyLimit>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body = read_body(payload, &limit).await?;
    let args = SelectDestinationsArgs::from_http_body(&body).map_err(codec_error)?;
    let answer = scheduler.select(args).await.map_err(select_error)?;
    Ok(HttpResponse::Ok()
        .content_type(actix_web::http::header::ContentType::json())
        .body(answer.to_body()))
}

/// The HTTP form of a failed call: NoValidHost (a plugin's denial too) is 409 with Nova's
/// message and the reason,
/// a wrong call 400, an unavailable ledger 503.
fn select_error(e: SelectError) -> ApiError {
    match e {
        SelectError::NoValidHost { reason } | SelectError::Denied { reason } => ApiError {
            status: StatusCode::CONFLICT,
            class: "NoValidHost",
            message: crate::nova::no_valid_host_message(&reason),
            reason: Some(reason),
        },
        SelectError::Invalid(message) => ApiError::bad_request(message),
        e @ SelectError::Unavailable(_) => ApiError::unavailable(e),
    }
}

/// A request the codec refused: 400 naming what is wrong.
pub(crate) fn codec_error(e: CodecError) -> ApiError {
    ApiError {
        status: StatusCode::BAD_REQUEST,
        class: "BadRequest",
        message: e.to_string(),
        reason: None,
    }
}
