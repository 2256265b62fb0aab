//! # Parasol
//!
//! A drop-in replacement for the OpenStack Nova scheduler.
//!
//! # Layout
//! - [`domain`]: resource vectors, host state and the per-request scheduling context.
//! - [`clock`]: the injectable clock every interval and timestamp comes from.
//! - [`nova`]: the Nova contract codec (RequestSpec, Selection, oslo envelope, notifications).

pub mod clock;
pub mod domain;
pub mod nova;
