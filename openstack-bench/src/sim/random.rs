//! Seeded random streams and the draws the models need (no extra crate for two formulas).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Independent streams of one seed: the same seed gives every policy the same workload and
/// arrivals (common random numbers), and each use of randomness its own sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Workload = 0,
    Arrivals = 1,
    Decisions = 2,
    ClaimOrder = 3,
    Lifetimes = 4,
}

/// The generator of `stream` for `seed`.
pub fn stream(seed: u64, stream: Stream) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream as u64);
    rng
}

/// A Poisson(λ) draw by multiplying uniforms (Knuth); fine for the λ ≈ 20 the models use.
pub fn poisson(rng: &mut impl Rng, lambda: f64) -> usize {
    if lambda <= 0.0 {
        return 0;
    }
    if lambda > 500.0 {
        // Normal approximation, far outside the published setups.
        let z: f64 = (0..12).map(|_| rng.gen::<f64>()).sum::<f64>() - 6.0;
        return (lambda + z * lambda.sqrt()).round().max(0.0) as usize;
    }
    let limit = (-lambda).exp();
    let mut k = 0;
    let mut p: f64 = rng.gen();
    while p > limit {
        k += 1;
        p *= rng.gen::<f64>();
    }
    k
}

/// An exponential draw with the given mean.
pub fn exponential(rng: &mut impl Rng, mean: f64) -> f64 {
    let u: f64 = rng.gen();
    -mean * (1.0 - u).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_has_the_requested_mean() {
        let mut rng = stream(1, Stream::Arrivals);
        let n = 20_000;
        let total: usize = (0..n).map(|_| poisson(&mut rng, 20.0)).sum();
        let mean = total as f64 / n as f64;
        assert!((mean - 20.0).abs() < 0.2, "{mean}");
    }

    #[test]
    fn exponential_has_the_requested_mean() {
        let mut rng = stream(1, Stream::Lifetimes);
        let n = 20_000;
        let mean = (0..n).map(|_| exponential(&mut rng, 437.0)).sum::<f64>() / n as f64;
        assert!((mean - 437.0).abs() < 15.0, "{mean}");
    }

    #[test]
    fn streams_of_one_seed_differ_and_repeat() {
        let a: u64 = stream(5, Stream::Arrivals).gen();
        let b: u64 = stream(5, Stream::Decisions).gen();
        assert_ne!(a, b);
        assert_eq!(a, stream(5, Stream::Arrivals).gen::<u64>());
    }
}
