//! # Parasol
//!
//! A drop-in replacement for the OpenStack Nova scheduler.
//!
//! # Layout
//! - [`domain`]: resource vectors, host state and the per-request scheduling context.
//! - [`clock`]: the injectable clock every interval and timestamp comes from.
//! - [`ledger`]: the SQL ledger (SQLite or PostgreSQL): hosts, claims, allocations, message ids.

pub mod clock;
pub mod domain;
pub mod ledger;
