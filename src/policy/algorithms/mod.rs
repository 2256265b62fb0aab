//! The papers' placement algorithms as ranking keys in the policy pipeline (DESIGN §5).
//!
//! Each file holds one rule as a pure function of a host and the demand (higher ranks
//! first) with its tests; [`resolve`] turns an [`Algorithm`] into the ranking and pick-set
//! size for one request.

pub mod adaptive;
pub mod best_fit;
pub mod dist_from_diag;
pub mod ffr;
pub mod first_fit;
pub mod random;
pub mod wfr;
pub mod worst_fit;

use super::config::Algorithm;
use crate::domain::{HostState, Resources};

/// A ranking key: higher ranks first.
pub type KeyFn = fn(&HostState, &Resources) -> f64;

/// How one request's passing hosts are ranked.
#[derive(Clone, Copy)]
pub enum Ranking {
    /// Nova's weighers, normalised, multiplied and summed.
    Weighers,
    /// A key per host.
    Key(KeyFn),
    /// No ranking: a uniform random order.
    Uniform,
}

/// The ranking and pick-set size ℓ of `algorithm` for one request over `hosts`.
pub fn resolve(
    algorithm: Algorithm,
    hosts: &[HostState],
    host_subset_size: usize,
) -> (Ranking, usize) {
    match algorithm {
        Algorithm::Nova => (Ranking::Weighers, host_subset_size),
        Algorithm::WorstFit => (Ranking::Key(worst_fit::score), host_subset_size),
        Algorithm::FirstFit => (Ranking::Key(first_fit::score), host_subset_size),
        Algorithm::BestFit => (Ranking::Key(best_fit::score), host_subset_size),
        Algorithm::Random => (Ranking::Uniform, usize::MAX),
        Algorithm::DistFromDiag => (Ranking::Key(dist_from_diag::score), host_subset_size),
        Algorithm::Adaptive => {
            let inner = adaptive::choose(adaptive::cloud_utilisation(hosts));
            resolve(inner, hosts, host_subset_size)
        }
        Algorithm::Ffr => (Ranking::Key(ffr::score), ffr::subset_size(host_subset_size)),
        Algorithm::Wfr => (Ranking::Key(wfr::score), wfr::subset_size(host_subset_size)),
    }
}

/// Utilisation per class once `demand` is placed on `host`; `None` for a class the host has
/// no capacity of.
pub fn utilisation_after(host: &HostState, demand: &Resources) -> [Option<f64>; 3] {
    let mut u = [None; 3];
    for (i, slot) in u.iter_mut().enumerate() {
        let cap = host.usable.0[i];
        if cap > 0 {
            *slot = Some((host.used.0[i] + demand.0[i]) as f64 / cap as f64);
        }
    }
    u
}

/// The largest defined utilisation (0 when the host has no capacity at all).
pub fn max_utilisation(u: &[Option<f64>; 3]) -> f64 {
    u.iter().flatten().fold(0.0, |m: f64, &v| m.max(v))
}

#[cfg(test)]
pub(crate) mod testing {
    use crate::domain::{HostState, Resources};

    /// A host of capacity 10 in every class with the given usage.
    pub fn host(id: i64, used: [i64; 3]) -> HostState {
        HostState::synthetic(id, Resources::new(10, 10, 10), Resources(used))
    }

    /// The position of the best host under `key` (first on ties).
    pub fn best(hosts: &[HostState], demand: Resources, key: super::KeyFn) -> usize {
        let mut best = 0;
        for (i, h) in hosts.iter().enumerate() {
            if key(h, &demand) > key(&hosts[best], &demand) {
                best = i;
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utilisation_after_ignores_classes_without_capacity() {
        let host = HostState::synthetic(1, Resources::new(10, 0, 20), Resources::new(5, 0, 5));
        let u = utilisation_after(&host, &Resources::new(1, 0, 5));
        assert_eq!(u, [Some(0.6), None, Some(0.5)]);
        assert_eq!(max_utilisation(&u), 0.6);
        assert_eq!(max_utilisation(&[None; 3]), 0.0);
    }
}
