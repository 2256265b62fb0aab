//! The scheduling use case, transport-neutral: Nova's `select_destinations` as
//! nova-scheduler's `SchedulerManager` runs it (decode → requests → backend → claims →
//! Selections with alternates), answering a typed result or [`SelectError`]. The HTTP routes
//! and the RPC server each map it to their own wire form; neither reaches into the other.
//!
//! # Layout
//! - `scheduler`: [`Scheduler`], the active backend and its replacement on SIGHUP.
//! - `select`: [`Scheduler::select`], its [`Answer`] and [`SelectError`].
//! - `select_chain`: the operator's `select` plugins, before the decision (docs/plugins.md).
//! - `trees`: requests only provider trees answer, on Placement's allocation candidates.

#[cfg(test)]
mod numa_tests;
mod scheduler;
mod select;
mod select_chain;
#[cfg(test)]
mod tests;
mod trees;

pub use scheduler::Scheduler;
pub use select::{Answer, SelectError};
pub use trees::CANDIDATE_OUTCOMES;
