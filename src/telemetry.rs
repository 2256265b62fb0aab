//! Structured logging with `tracing`; the sink is injectable so tests can silence it.

use tracing_subscriber::{fmt::MakeWriter, EnvFilter};

/// Installs a global subscriber writing to `sink`, filtered by `RUST_LOG` (default `level`).
/// Colours only when `colour` (a terminal); a journal or a file gets plain text. A second call
/// (tests) is a no-op.
pub fn init<W>(level: &str, sink: W, colour: bool)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(sink)
        .with_target(false)
        .with_ansi(colour)
        .try_init();
}
