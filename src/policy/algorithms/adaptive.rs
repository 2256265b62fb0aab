//! `adaptive`: spread while the cloud is light, pack once it is loaded.
//!
//! The ASC paper's adaptive policy: `worst_fit` while cloud utilisation is below
//! [`THRESHOLD`], then `first_fit`. Cloud utilisation is the largest class ratio
//! Σused / Σusable over the hosts given to the ranking (classes no host has are skipped).

use crate::domain::{ClassId, HostState, MAX_CLASSES};
use crate::policy::config::Algorithm;

/// Cloud utilisation at which `adaptive` switches from `worst_fit` to `first_fit`.
pub const THRESHOLD: f64 = 0.6;

/// max over classes of Σused / Σusable over `hosts` (0 when there is no capacity at all).
pub fn cloud_utilisation(hosts: &[HostState]) -> f64 {
    let classes = ClassId::count();
    let mut used = [0i128; MAX_CLASSES];
    let mut usable = [0i128; MAX_CLASSES];
    for h in hosts {
        for c in 0..classes {
            used[c] += i128::from(h.used.0[c]);
            usable[c] += i128::from(h.usable().0[c]);
        }
    }
    (0..classes)
        .filter(|&c| usable[c] > 0)
        .map(|c| used[c] as f64 / usable[c] as f64)
        .fold(0.0, f64::max)
}

/// The rule `adaptive` follows at cloud utilisation `u`.
pub fn choose(u: f64) -> Algorithm {
    if u < THRESHOLD {
        Algorithm::WorstFit
    } else {
        Algorithm::FirstFit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Resources;

    #[test]
    fn switches_to_first_fit_at_sixty_percent() {
        let cases = [
            (0.0, Algorithm::WorstFit),
            (0.59, Algorithm::WorstFit),
            (0.6, Algorithm::FirstFit),
            (0.95, Algorithm::FirstFit),
        ];
        for (u, want) in cases {
            assert_eq!(choose(u), want, "u={u}");
        }
    }

    #[test]
    fn cloud_utilisation_is_the_fullest_class_over_all_hosts() {
        let h = |usable: [i64; 3], used: [i64; 3]| {
            HostState::synthetic(
                1,
                Resources::new(usable[0], usable[1], usable[2]),
                Resources::new(used[0], used[1], used[2]),
            )
        };
        let cases = [
            ("empty cloud", vec![h([10, 10, 10], [0, 0, 0])], 0.0),
            (
                "summed before dividing",
                vec![h([10, 10, 10], [9, 0, 0]), h([30, 10, 10], [3, 0, 0])],
                0.3,
            ),
            ("fullest class wins", vec![h([10, 10, 10], [1, 7, 2])], 0.7),
            (
                "class without capacity skipped",
                vec![h([10, 0, 10], [2, 0, 4])],
                0.4,
            ),
            ("no hosts", vec![], 0.0),
        ];
        for (name, hosts, want) in cases {
            assert!((cloud_utilisation(&hosts) - want).abs() < 1e-12, "{name}");
        }
    }
}
