//! # Parasol
//!
//! A drop-in replacement for the OpenStack Nova scheduler.
//!
//! # Layout
//! - [`domain`]: resource vectors, host state and the per-request scheduling context.
//! - [`clock`]: the injectable clock every interval and timestamp comes from.
//! - [`control`]: the pure control logic of the `asc` and `apsr` backends (τ adaptation, (s, d) planning).
//! - [`policy`]: filters, weighers and placement algorithms that rank hosts for a request.
//! - [`datasets`]: the papers' workloads (NFV, Google, Amazon) mapped exactly to resource classes.
//! - [`sim`]: `parasol sim`, the papers' simulations driven by the library's own policy and control code.

pub mod clock;
pub mod control;
pub mod datasets;
pub mod domain;
pub mod policy;
pub mod sim;
