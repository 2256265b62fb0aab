//! `ffr`: FirstFit ranking with a random pick among the top ℓ.
//!
//! APSR paper's FFR (FirstFit-Random): rank by `first_fit`, pick uniformly among the first ℓ
//! hosts, ℓ = 5 in the paper. Here ℓ = max(host_subset_size, [`PAPER_SUBSET`]): Nova's
//! default `host_subset_size = 1` would turn FFR into plain FirstFit, so the paper's 5 is the
//! floor and a larger configured `host_subset_size` widens it.

use crate::domain::{HostState, Resources};

/// ℓ of the paper.
pub const PAPER_SUBSET: usize = 5;

/// The pick-set size for a configured `host_subset_size`.
pub fn subset_size(host_subset_size: usize) -> usize {
    host_subset_size.max(PAPER_SUBSET)
}

/// The `first_fit` key.
pub fn score(host: &HostState, demand: &Resources) -> f64 {
    super::first_fit::score(host, demand)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subset_is_at_least_the_papers_five() {
        for (configured, want) in [(1, 5), (5, 5), (8, 8)] {
            assert_eq!(subset_size(configured), want);
        }
    }
}
