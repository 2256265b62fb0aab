//! Structured logging with `tracing`, as text for people or one JSON object a line for log
//! collectors (`[log] format`); the sink is injectable so tests can capture it.
//!
//! # Layout
//! - `json`: the JSON line format, span fields (request id, instance uuids) flattened in.
//! - `http`: the span of each HTTP request, with Nova's `X-OpenStack-Request-ID`.

mod http;
mod json;

pub use http::{request_span, REQUEST_ID_HEADER};

use crate::configuration::LogFormat;
use tracing_subscriber::fmt::format::JsonFields;
use tracing_subscriber::{fmt::MakeWriter, EnvFilter};

/// Installs a global subscriber writing to `sink` in `format`, filtered by `RUST_LOG`
/// (default `level`). Colours only when `colour` (a terminal) and text; a journal or a file
/// gets plain text. A second call (tests) is a no-op.
pub fn init<W>(level: &str, format: LogFormat, sink: W, colour: bool)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(sink);
    let _ = match format {
        LogFormat::Text => builder.with_target(false).with_ansi(colour).try_init(),
        LogFormat::Json => builder
            .fmt_fields(JsonFields::new())
            .event_format(json::JsonLines)
            .try_init(),
    };
}
