//! Applying host-state inputs (Parasol host-state events, Nova's versioned notifications and
//! nova-compute's fanout casts) to the ledger exactly once: the effect and the message id are
//! committed in one transaction, so a redelivered message changes nothing. HTTP and RabbitMQ
//! call the same [`apply`].

mod apply;

pub use apply::{apply, Applied, ApplyError};
