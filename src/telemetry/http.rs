//! A span around every HTTP request carrying Nova's `X-OpenStack-Request-ID` when the caller
//! sends one, so each log line of the request names it; the header is echoed in the answer as
//! OpenStack services do.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use tracing::Instrument;

/// The header OpenStack clients send their request id in.
pub const REQUEST_ID_HEADER: &str = "x-openstack-request-id";

/// Middleware (`actix_web::middleware::from_fn`): the `http` span with `method`, `path` and
/// `request_id`.
pub async fn request_span(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let request_id: Option<HeaderValue> = req.headers().get(REQUEST_ID_HEADER).cloned();
    let span = tracing::info_span!(
        "http",
        method = %req.method(),
        path = %req.path(),
        request_id = request_id.as_ref().and_then(|v| v.to_str().ok())
    );
    let mut res = next.call(req).instrument(span).await?;
    if let Some(id) = request_id {
        res.headers_mut()
            .insert(HeaderName::from_static(REQUEST_ID_HEADER), id);
    }
    Ok(res)
}
