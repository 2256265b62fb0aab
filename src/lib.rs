//! # Parasol
//!
//! A drop-in replacement for the OpenStack Nova scheduler.
//!
//! # Layout
//! - [`domain`]: resource vectors, host state and the per-request scheduling context.
//! - [`clock`]: the injectable clock every interval and timestamp comes from.
//! - [`control`]: the pure control logic of the `asc` and `apsr` backends (τ adaptation, (s, d) planning).

pub mod clock;
pub mod control;
pub mod domain;
