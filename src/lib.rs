//! # Parasol
//!
//! A drop-in replacement for the OpenStack Nova scheduler.
//!
//! # Layout
//! - [`domain`]: resource vectors, host state and the per-request scheduling context.
//! - [`clock`]: the injectable clock every interval and timestamp comes from.
//! - [`datasets`]: the papers' workloads (NFV, Google, Amazon) mapped exactly to resource classes.
//! - [`policy`]: filters, weighers and placement algorithms that rank hosts for a request.

pub mod clock;
pub mod datasets;
pub mod domain;
pub mod policy;
