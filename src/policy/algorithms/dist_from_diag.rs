//! `dist_from_diag`: the host left most balanced across classes first.
//!
//! APSR paper's DistFromDiag: prefer the host whose utilisation vector after placement is
//! closest to the diagonal (all u_i equal), minimising ‖u − mean(u)·1‖₂ over the classes the
//! host has capacity of.

use super::utilisation_after;
use crate::domain::{HostState, Resources};

/// Distance of a utilisation vector from the diagonal, over its defined classes.
pub fn distance(u: &[f64]) -> f64 {
    if u.is_empty() {
        return 0.0;
    }
    let mean = u.iter().sum::<f64>() / u.len() as f64;
    u.iter()
        .map(|v| (v - mean) * (v - mean))
        .sum::<f64>()
        .sqrt()
}

/// Minus the post-placement distance from the diagonal.
pub fn score(host: &HostState, demand: &Resources) -> f64 {
    -distance(utilisation_after(host, demand).as_slice())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{best, host};
    use super::*;

    #[test]
    fn distance_is_euclidean_from_the_mean() {
        assert_eq!(distance(&[0.5; 3]), 0.0);
        assert_eq!(distance(&[0.0, 1.0]), 0.5f64.sqrt());
        assert_eq!(distance(&[]), 0.0);
    }

    #[test]
    fn prefers_the_host_closest_to_the_diagonal_after_placement() {
        // The demand (4, 0, 0) rebalances host 1 (0, 4, 4) → (4, 4, 4) but unbalances host 2.
        let cases: [(&str, Vec<HostState>, usize); 3] = [
            (
                "placement rebalances",
                vec![host(2, [2, 2, 2]), host(1, [0, 4, 4])],
                1,
            ),
            (
                "less skewed host",
                vec![host(1, [0, 9, 0]), host(2, [0, 0, 0])],
                1,
            ),
            (
                "zero-capacity class ignored",
                vec![
                    host(1, [0, 3, 3]),
                    HostState::synthetic(2, Resources::new(10, 10, 0), Resources::new(1, 5, 0)),
                ],
                1,
            ),
        ];
        for (name, hosts, want) in cases {
            assert_eq!(best(&hosts, Resources::new(4, 0, 0), score), want, "{name}");
        }
    }
}
