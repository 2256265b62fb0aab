//! The scheduling policy every backend shares: filters keep or drop hosts, weighers (or a
//! placement algorithm's key) rank the rest, and a seeded pick chooses among the top
//! `host_subset_size` (docs/architecture.md §5, Nova's FilterScheduler).
//!
//! # Layout
//! - `config`: [`PolicyConfig`] and [`Algorithm`], with Nova's option names and defaults.
//! - `filters`: the [`Filter`] trait, [`FilterEnv`], and one file per filter.
//! - `weighers`: the [`Weigher`] trait, Nova's normalisation (`minval` or the least value to the greatest), and two weighers
//!   driven by tables (resources; soft server groups with a sign).
//! - `algorithms`: the papers' placement rules as ranking keys, one file per rule.
//! - `registry`: name → factory maps that refuse unknown or duplicate names.
//! - `pipeline`: [`Policy`], which filters, ranks and picks into a caller's buffer.
//! - `error`: [`PolicyError`] for bad configuration, [`Rejection`] for NoValidHost.

pub mod algorithms;
mod config;
mod error;
pub mod filters;
mod pipeline;
pub mod registry;
pub mod weighers;

pub use config::{
    parse_metric_weight, Algorithm, PolicyConfig, TieBreak, DEFAULT_FILTERS, DEFAULT_WEIGHERS,
};
pub use error::{no_allocation_candidate, PolicyError, Rejection, NO_TREE_CANDIDATE};
pub use filters::numa_topology::first_fit as first_numa_pci_fit;
pub use filters::{Filter, FilterEnv};
pub use pipeline::{
    top_with_random_ties, Policy, RankArgs, RankScratch, ScanView, Scored, SortKey, SortedIndex,
    SortedScratch,
};
pub use registry::NOVA_ALL_WEIGHERS;
pub use weighers::Weigher;

#[cfg(test)]
mod tests;
