//! The simulator's figures use the crate's one plotting module ([`crate::plot`]).

pub use crate::plot::*;
