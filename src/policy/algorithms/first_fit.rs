//! `first_fit`: the first host that fits in a fixed host order.
//!
//! Classic FirstFit (APSR paper): the fixed order is the ledger's host id, so the choice does
//! not depend on how a snapshot or sample happens to be ordered.

use crate::domain::{HostState, Resources};

/// Minus the host id: the lowest id ranks first.
pub fn score(host: &HostState, _demand: &Resources) -> f64 {
    -(host.id.0 as f64)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{best, host};
    use super::*;

    #[test]
    fn prefers_the_lowest_host_id_whatever_the_load() {
        let cases: [(&str, Vec<HostState>, usize); 3] = [
            ("in order", vec![host(1, [9, 9, 9]), host(2, [0, 0, 0])], 0),
            (
                "out of order",
                vec![host(7, [0, 0, 0]), host(3, [9, 9, 9])],
                1,
            ),
            ("single host", vec![host(4, [1, 1, 1])], 0),
        ];
        for (name, hosts, want) in cases {
            assert_eq!(best(&hosts, Resources::new(1, 1, 1), score), want, "{name}");
        }
    }
}
