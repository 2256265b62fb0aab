//! Host-state inputs (Parasol host-state events, Nova's versioned notifications and
//! nova-compute's fanout casts) as the ledger applies them: each decoded message is validated
//! and turned into a typed [`crate::ledger::Effect`] (`effect`), and the ledger applies it
//! exactly once (the effect and the message id are committed in one transaction, so a
//! redelivered message changes nothing). HTTP applies one message at a time, RabbitMQ a batch
//! per transaction; both hand the same effects to the ledger, which owns every write.
//!
//! # Layout
//! - `effect`: validation, and what each [`crate::nova::HostEvent`] asks of the ledger.
//! - `ingest`: [`Ingest`], the handle every transport applies through, with outcome counts.
//! - `usage`: the measured usage a message carries, as a reading of the table's soft state.

mod effect;
mod ingest;
mod usage;

pub use crate::ledger::{Applied, ApplyError, Outcome};
pub use effect::{apply, apply_batch, message_of};
pub use ingest::Ingest;

#[cfg(test)]
mod tests;
