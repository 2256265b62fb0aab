//! `worst_fit`: the least loaded host first.
//!
//! Pessimistic multi-resource WorstFit (APSR paper; ≈ OpenStack's default spreading, BUP):
//! prefer the host whose largest utilisation `max_i u_i` is smallest. Utilisation is taken
//! after placing the request, as for `dist_from_diag`, so hosts of different sizes compare on
//! what they would become; classes a host has no capacity of take no part.

use super::max_utilisation_after;
use crate::domain::{HostState, Resources};

/// Minus the host's largest post-placement utilisation.
pub fn score(host: &HostState, demand: &Resources) -> f64 {
    -max_utilisation_after(host, demand)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{best, host};
    use super::*;
    use crate::domain::Resources;

    #[test]
    fn prefers_the_smallest_largest_utilisation() {
        let cases: [(&str, Vec<HostState>, usize); 4] = [
            (
                "emptier host",
                vec![host(1, [5, 5, 5]), host(2, [2, 2, 2])],
                1,
            ),
            (
                "largest class decides",
                vec![host(1, [1, 9, 1]), host(2, [6, 6, 6])],
                1,
            ),
            (
                "tie keeps host order",
                vec![host(1, [3, 3, 3]), host(2, [3, 3, 3])],
                0,
            ),
            (
                "zero-capacity class ignored",
                vec![
                    HostState::synthetic(1, Resources::new(10, 0, 10), Resources::new(4, 0, 4)),
                    host(2, [5, 5, 5]),
                ],
                0,
            ),
        ];
        for (name, hosts, want) in cases {
            assert_eq!(best(&hosts, Resources::new(1, 0, 1), score), want, "{name}");
        }
    }
}
