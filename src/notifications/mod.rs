//! Applying host-state inputs (Parasol host-state events, Nova's versioned notifications and
//! nova-compute's fanout casts) to the ledger exactly once: the effect and the message id are
//! committed in one transaction, so a redelivered message changes nothing. HTTP applies one
//! message at a time, RabbitMQ a batch per transaction; both call the same effects.
//!
//! # Layout
//! - `apply`: validation, the batch transaction and a savepoint per message.
//! - `effects`: what each [`crate::nova::HostEvent`] changes in the ledger.
//! - `hot`: heartbeats and builds' confirmations, applied by SQLite's hot writer.
//! - `hot_batch`: a consumer batch of host-state events, applied by SQLite's hot writer.
//! - `ingest`: [`Ingest`], the handle every transport applies through, with outcome counts.

mod apply;
mod effects;
mod hot;
mod hot_batch;
mod ingest;
mod known_rows;

pub use apply::{apply, apply_batch, Applied, ApplyError, Outcome};
pub use ingest::Ingest;
