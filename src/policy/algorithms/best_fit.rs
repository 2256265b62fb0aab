//! `best_fit`: the most loaded host that fits first.
//!
//! The ASC paper calls this FirstFit: pack hosts by preferring the one whose largest
//! post-placement utilisation `max_i u_i` is largest; classes without capacity take no part.

use super::max_utilisation_after;
use crate::domain::{HostState, Resources};

/// The host's largest post-placement utilisation.
pub fn score(host: &HostState, demand: &Resources) -> f64 {
    max_utilisation_after(host, demand)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{best, host};
    use super::*;

    #[test]
    fn prefers_the_most_loaded_host() {
        let cases: [(&str, Vec<HostState>, usize); 4] = [
            (
                "fuller host",
                vec![host(1, [2, 2, 2]), host(2, [5, 5, 5])],
                1,
            ),
            (
                "largest class decides",
                vec![host(1, [1, 8, 1]), host(2, [6, 6, 6])],
                0,
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
                1,
            ),
        ];
        for (name, hosts, want) in cases {
            assert_eq!(best(&hosts, Resources::new(1, 0, 1), score), want, "{name}");
        }
    }
}
