//! The papers' placement algorithms as ranking keys in the policy pipeline (docs/architecture.md
//! §5).
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
use crate::domain::{ClassId, HostState, Resources, MAX_CLASSES};

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
            let inner = adaptive::choose(adaptive::least_loaded_host_load(hosts));
            resolve(inner, hosts, host_subset_size)
        }
        Algorithm::Ffr => (Ranking::Key(ffr::score), ffr::subset_size(host_subset_size)),
        Algorithm::Wfr => (Ranking::Key(wfr::score), wfr::subset_size(host_subset_size)),
    }
}

/// Utilisation of each class a host has capacity of (classes it lacks take no part), in
/// class order, on the stack.
#[derive(Clone, Copy, Debug)]
pub struct Utilisation {
    values: [f64; MAX_CLASSES],
    len: usize,
}

impl Utilisation {
    /// The defined utilisations.
    pub fn as_slice(&self) -> &[f64] {
        &self.values[..self.len]
    }
}

/// Utilisation per class once `demand` is placed on `host`.
pub fn utilisation_after(host: &HostState, demand: &Resources) -> Utilisation {
    let mut u = Utilisation {
        values: [0.0; MAX_CLASSES],
        len: 0,
    };
    let usable = host.usable();
    for i in 0..ClassId::count() {
        let cap = usable.0[i];
        if cap > 0 {
            u.values[u.len] = host.used.0[i].saturating_add(demand.0[i]) as f64 / cap as f64;
            u.len += 1;
        }
    }
    u
}

/// `max_utilisation(&utilisation_after(host, demand))` in one pass, without building the
/// vector (the `worst_fit` key, computed for every host of every request).
pub fn max_utilisation_after(host: &HostState, demand: &Resources) -> f64 {
    let usable = host.usable();
    let mut m = 0.0f64;
    for i in 0..ClassId::count() {
        let cap = usable.0[i];
        if cap > 0 {
            m = m.max(host.used.0[i].saturating_add(demand.0[i]) as f64 / cap as f64);
        }
    }
    m
}

/// The largest defined utilisation (0 when the host has no capacity at all).
pub fn max_utilisation(u: &Utilisation) -> f64 {
    u.as_slice().iter().fold(0.0, |m: f64, &v| m.max(v))
}

#[cfg(test)]
pub(crate) mod testing {
    use crate::domain::{HostState, Resources};

    /// A host of capacity 10 in every class with the given usage.
    pub fn host(id: i64, used: [i64; 3]) -> HostState {
        HostState::synthetic(
            id,
            Resources::new(10, 10, 10),
            Resources::new(used[0], used[1], used[2]),
        )
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
        assert_eq!(u.as_slice(), [0.6, 0.5]);
        assert_eq!(max_utilisation(&u), 0.6);
        assert_eq!(max_utilisation_after(&host, &Resources::new(1, 0, 5)), 0.6);
        let none = HostState::synthetic(2, Resources::ZERO, Resources::ZERO);
        assert_eq!(
            max_utilisation(&utilisation_after(&none, &Resources::ZERO)),
            0.0
        );
        assert_eq!(max_utilisation_after(&none, &Resources::ZERO), 0.0);
    }
}
