//! `POST /v1/select_destinations`: Nova's call over HTTP, with the RPC 4.5 argument shape.

use super::{read_body, ApiError};
use crate::backend::ScheduleError;
use crate::nova::{
    encode_legacy, encode_selections, CodecError, SelectDestinationsArgs, Selection,
    SelectionVersion,
};
use crate::startup::{AppState, BodyLimit};
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde_json::Value;
use tracing::Instrument;

pub async fn select_destinations(
    state: web::Data<AppState>,
    limit: web::Data<BodyLimit>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body = read_body(payload, limit.0).await?;
    let args = SelectDestinationsArgs::from_http_body(&body).map_err(codec_error)?;
    let result = place(&state, args).await?;
    Ok(HttpResponse::Ok().json(result))
}

/// Decides for decoded arguments and encodes the answer as the caller asked for it; shared
/// with the RPC server.
pub async fn place(state: &AppState, args: SelectDestinationsArgs) -> Result<Value, ApiError> {
    let requests = args.spec.contexts(&args.instance_uuids);
    let settings = state.scheduler.settings();
    let span = tracing::info_span!(
        "select_destinations",
        instances = requests.len(),
        instance_uuids = %args.instance_uuids.join(","),
        backend = state.scheduler.backend().kind().as_str()
    );
    let demand_of: Vec<_> = requests.iter().map(|r| r.demand).collect();
    match state.scheduler.schedule(requests).instrument(span).await {
        Ok(per_instance) => {
            let selections: Vec<Vec<Selection>> = per_instance
                .iter()
                .zip(demand_of)
                .map(|(hosts, demand)| {
                    hosts
                        .iter()
                        .map(|h| Selection::from_host(h, demand, &settings.scheduler.cell_uuid))
                        .collect()
                })
                .collect();
            if args.return_objects {
                let version = if settings.scheduler.selection_version == "1.0" {
                    SelectionVersion::V1_0
                } else {
                    SelectionVersion::V1_1
                };
                Ok(encode_selections(
                    &selections,
                    version,
                    args.return_alternates,
                ))
            } else {
                Ok(encode_legacy(&selections))
            }
        }
        Err(ScheduleError::NoValidHost { reason }) => Err(ApiError {
            status: StatusCode::CONFLICT,
            class: "NoValidHost",
            message: crate::nova::no_valid_host_message(&reason),
            reason: Some(reason),
        }),
        Err(ScheduleError::Ledger(e)) => Err(ApiError::internal(e)),
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
