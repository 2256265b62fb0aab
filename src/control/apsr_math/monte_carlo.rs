//! Monte-Carlo check of the APSR model against the process it describes.
//!
//! Balls into bins: n bins of which the first k are free (sampling is uniform, so which ones
//! does not matter); each of s agents samples d bins uniformly, keeps the free ones and picks
//! one of them uniformly; a free bin accepts one agent, so the happy agents of a trial are the
//! distinct bins chosen. Two samplers: d draws *with replacement* (the model's own σ, which must
//! match E[H_s]) and d *distinct* bins (what APSR does, σ = 1 − C(n−k, d)/C(n, d), which must
//! match k·(1 − (1 − σ/k)^s) with that σ, and never fall short of the model's E[H_s]).
//!
//! Tolerance: over R seeded trials (ChaCha8, fixed seeds) the mean happy count must be within
//! **4·(sample std)/√R + 1e-9** of its expectation — four standard errors, a 6e-5 false-alarm
//! rate per case for an unseeded run. For plans with s > 1 from [`maximize_parallelism`], the
//! mean observed decline ratio 1 − happy/s must be at most ε + 4·(its sample std)/√R + 1e-9.
//! R = 2,000 keeps the whole test around a second in debug.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

const TRIALS: usize = 2_000;

#[derive(Clone, Copy, Debug)]
enum Sampling {
    WithReplacement,
    Distinct,
}

/// A uniform integer in `0..bound` by multiply-shift (Lemire) on 32 random bits: one word per
/// draw and cheap in debug builds; its bias, below bound/2³² ≈ 1e-7 here, is far inside the
/// tolerance.
fn below(rng: &mut ChaCha8Rng, bound: usize) -> usize {
    ((u64::from(rng.next_u32()) * bound as u64) >> 32) as usize
}

/// Reusable buffers of one simulation: a permutation of the bins (partial Fisher–Yates draws
/// distinct samples from any starting order), the free draws of a sample, the taken bins.
struct Bins {
    order: Vec<usize>,
    free: Vec<usize>,
    taken: Vec<bool>,
}

impl Bins {
    fn new(n: usize, k: usize) -> Self {
        Bins {
            order: (0..n).collect(),
            free: Vec::new(),
            taken: vec![false; k],
        }
    }
}

/// One trial: the number of distinct free bins chosen by the s agents.
fn happy_agents(
    rng: &mut ChaCha8Rng,
    (n, k, s, d): (usize, usize, usize, usize),
    sampling: Sampling,
    bins: &mut Bins,
) -> usize {
    bins.taken.iter_mut().for_each(|t| *t = false);
    let mut happy = 0;
    for _ in 0..s {
        bins.free.clear();
        for i in 0..d {
            let bin = match sampling {
                Sampling::WithReplacement => below(rng, n),
                Sampling::Distinct => {
                    let j = i + below(rng, n - i);
                    bins.order.swap(i, j);
                    bins.order[i]
                }
            };
            if bin < k {
                bins.free.push(bin);
            }
        }
        if bins.free.is_empty() {
            continue;
        }
        let bin = bins.free[below(rng, bins.free.len())];
        if !bins.taken[bin] {
            bins.taken[bin] = true;
            happy += 1;
        }
    }
    happy
}

/// E[H_s] for samples of d distinct bins: σ = 1 − Π_{i<d} (n−k−i)/(n−i).
fn expected_happy_distinct(n: usize, k: usize, s: usize, d: usize) -> f64 {
    let miss: f64 = (0..d.min(n))
        .map(|i| (n - i).saturating_sub(k) as f64 / (n - i) as f64)
        .product();
    let sigma = 1.0 - miss;
    k as f64 * (1.0 - (1.0 - sigma / k as f64).powi(s as i32))
}

/// Mean and sample standard deviation of `f` over `TRIALS` trials.
fn mean_and_std(mut f: impl FnMut() -> f64) -> (f64, f64) {
    let values: Vec<f64> = (0..TRIALS).map(|_| f()).collect();
    let mean = values.iter().sum::<f64>() / TRIALS as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (TRIALS - 1) as f64;
    (mean, var.sqrt())
}

fn tolerance(std: f64) -> f64 {
    4.0 * std / (TRIALS as f64).sqrt() + 1e-9
}

#[test]
fn simulated_happy_schedulers_match_the_expectation() {
    let cases: &[(usize, usize, usize, usize)] = &[
        (2, 1, 2, 1),
        (10, 3, 4, 2),
        (20, 5, 10, 3),
        (40, 1, 5, 8),
        (50, 10, 8, 5),
        (100, 30, 20, 4),
        (100, 100, 30, 1),
        (200, 50, 40, 2),
        (30, 10, 6, 30),
    ];
    for (case, &(n, k, s, d)) in cases.iter().enumerate() {
        let model = expected_happy(n as u64, k as f64, s as u64, d as u64);
        let mut bins = Bins::new(n, k);

        let mut rng = ChaCha8Rng::seed_from_u64(0xA95 + case as u64);
        let (mean, std) = mean_and_std(|| {
            happy_agents(&mut rng, (n, k, s, d), Sampling::WithReplacement, &mut bins) as f64
        });
        assert!(
            (mean - model).abs() <= tolerance(std),
            "with replacement n={n} k={k} s={s} d={d}: simulated {mean} ± {std}, expected {model}"
        );

        let mut rng = ChaCha8Rng::seed_from_u64(0xD15 + case as u64);
        let (mean, std) = mean_and_std(|| {
            happy_agents(&mut rng, (n, k, s, d), Sampling::Distinct, &mut bins) as f64
        });
        let exact = expected_happy_distinct(n, k, s, d);
        assert!(
            (mean - exact).abs() <= tolerance(std),
            "distinct n={n} k={k} s={s} d={d}: simulated {mean} ± {std}, expected {exact}"
        );
        assert!(
            mean >= model - tolerance(std),
            "the model must not overestimate: {mean} < {model}"
        );
    }
}

#[test]
fn simulated_plans_with_parallel_schedulers_decline_at_most_epsilon() {
    let cases: &[(u64, u64, u64, f64)] = &[
        (60, 60, 60, 0.1),
        (100, 40, 100, 0.1),
        (80, 80, 160, 0.05),
        (200, 20, 200, 0.1),
        (120, 30, 60, 0.1),
    ];
    for (case, &(n, k, budget, epsilon)) in cases.iter().enumerate() {
        let plan = maximize_parallelism(n, epsilon, budget, k as f64, u64::MAX);
        assert!(
            plan.schedulers > 1,
            "case {case} should plan parallel schedulers: {plan:?}"
        );
        let (s, d) = (plan.schedulers as usize, plan.hosts_per_scheduler as usize);
        for sampling in [Sampling::WithReplacement, Sampling::Distinct] {
            let mut rng = ChaCha8Rng::seed_from_u64(0x5EED + case as u64);
            let mut bins = Bins::new(n as usize, k as usize);
            let shape = (n as usize, k as usize, s, d);
            let (decline, std) = mean_and_std(|| {
                1.0 - happy_agents(&mut rng, shape, sampling, &mut bins) as f64 / s as f64
            });
            assert!(
                decline <= epsilon + tolerance(std),
                "{sampling:?} n={n} k={k} B={budget} ε={epsilon} {plan:?}: simulated decline {decline} ± {std}"
            );
        }
    }
}
