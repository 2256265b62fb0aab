//! `adaptive`: spread while some host is still light, pack once every host is loaded.
//!
//! The APSR paper's Adaptive: it "begins like WF; once the load passes a threshold, the
//! algorithm switches to an FF regime", a host's load being "the maximum load over all the
//! possible resources" (docs/architecture.md §5). So `worst_fit` while the least-loaded host's load —
//! max over classes of used / usable, before placement — is below [`THRESHOLD`], then
//! `first_fit`. The hosts are those given to the ranking; classes a host has no capacity of
//! take no part, and a host with no capacity at all is skipped.

use crate::domain::{ClassId, HostState};
use crate::policy::config::Algorithm;

/// Load of the least-loaded host at which `adaptive` switches from `worst_fit` to `first_fit`.
pub const THRESHOLD: f64 = 0.6;

/// A host's load: max over the classes it has capacity of of used / usable (`None` when it
/// has no capacity at all).
pub fn host_load(host: &HostState) -> Option<f64> {
    let usable = host.usable();
    let mut load: Option<f64> = None;
    for c in 0..ClassId::count() {
        let cap = usable.0[c];
        if cap > 0 {
            let u = host.used.0[c] as f64 / cap as f64;
            load = Some(load.map_or(u, |l| l.max(u)));
        }
    }
    load
}

/// min over `hosts` of [`host_load`] (0 when no host has capacity: an empty cloud).
pub fn least_loaded_host_load(hosts: &[HostState]) -> f64 {
    hosts
        .iter()
        .filter_map(host_load)
        .fold(None, |m: Option<f64>, l| Some(m.map_or(l, |m| m.min(l))))
        .unwrap_or(0.0)
}

/// The rule `adaptive` follows when the least-loaded host's load is `load`.
pub fn choose(load: f64) -> Algorithm {
    if load < THRESHOLD {
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
    fn least_loaded_host_load_is_the_min_over_hosts_of_the_fullest_class() {
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
                "fullest class is the load",
                vec![h([10, 10, 10], [1, 7, 2])],
                0.7,
            ),
            (
                "least-loaded host decides, not the cloud's sum",
                // Cloud-wide CPU is 12/20 = 0.6, but the second host is only at 0.3.
                vec![h([10, 10, 10], [9, 0, 0]), h([10, 10, 10], [3, 0, 0])],
                0.3,
            ),
            (
                "one light host keeps the cloud light",
                vec![h([10, 10, 10], [9, 9, 9]), h([10, 10, 10], [0, 5, 0])],
                0.5,
            ),
            (
                "class without capacity skipped",
                vec![h([10, 0, 10], [2, 0, 4])],
                0.4,
            ),
            (
                "host without capacity skipped",
                vec![h([0, 0, 0], [0, 0, 0]), h([10, 10, 10], [8, 0, 0])],
                0.8,
            ),
            ("no hosts", vec![], 0.0),
        ];
        for (name, hosts, want) in cases {
            assert!(
                (least_loaded_host_load(&hosts) - want).abs() < 1e-12,
                "{name}: {}",
                least_loaded_host_load(&hosts)
            );
        }
    }

    #[test]
    fn stays_worst_fit_until_every_host_passes_the_threshold() {
        let h = |cpu: i64| {
            HostState::synthetic(1, Resources::new(10, 10, 10), Resources::new(cpu, 0, 0))
        };
        let mixed = [h(9), h(9), h(5)];
        assert_eq!(choose(least_loaded_host_load(&mixed)), Algorithm::WorstFit);
        let loaded = [h(9), h(6), h(7)];
        assert_eq!(choose(least_loaded_host_load(&loaded)), Algorithm::FirstFit);
    }
}
