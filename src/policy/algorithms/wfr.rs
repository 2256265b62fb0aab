//! `wfr`: WorstFit ranking with a random pick among the top ℓ.
//!
//! APSR paper's WFR (WorstFit-Random): rank by `worst_fit`, pick uniformly among the first ℓ
//! hosts, with ℓ = max(host_subset_size, 5) as for [`super::ffr`].

use crate::domain::{HostState, Resources};

/// The pick-set size for a configured `host_subset_size`.
pub fn subset_size(host_subset_size: usize) -> usize {
    super::ffr::subset_size(host_subset_size)
}

/// The `worst_fit` key.
pub fn score(host: &HostState, demand: &Resources) -> f64 {
    super::worst_fit::score(host, demand)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Resources;

    #[test]
    fn ranks_as_worst_fit_with_the_papers_subset() {
        let light = HostState::synthetic(1, Resources::new(10, 10, 10), Resources::new(1, 1, 1));
        let heavy = HostState::synthetic(2, Resources::new(10, 10, 10), Resources::new(8, 1, 1));
        let d = Resources::new(1, 1, 1);
        assert!(score(&light, &d) > score(&heavy, &d));
        assert_eq!(subset_size(1), 5);
    }
}
