//! APSR's sizing model: how many of `s` parallel schedulers, each sampling `d` of `n` hosts of
//! which `k` can take the request, end up with a claim that succeeds (docs/architecture.md §4,
//! after the APSR paper's MaximizeParallelism).
//!
//! With σ = 1 − ((n−k)/n)^d, the chance that a sample holds a fitting host, the paper gives
//!
//! E[H_s] = k · Σ_{f=1..s} [1 − ((k−1)/k)^f] · Bin(f; s, σ).
//!
//! Summing over the binomial with its generating function `Σ_f Bin(f; s, σ)·q^f = (1−σ+σq)^s`
//! and `q = (k−1)/k` collapses this to the closed form E[H_s] = k · (1 − (1 − σ/k)^s): each of the
//! k free hosts is left unchosen by a scheduler with probability 1 − σ/k, independently. Since
//! σ ≤ d·k/n, `1 − σ/k ∈ [0, 1]` whenever d ≤ n, so [`expected_happy`] evaluates the closed form
//! with `ln_1p`/`expm1` in O(1), exactly at σ = 0, σ = 1, k = 1 and k = n, for any size.
//! [`expected_happy_summed`] evaluates the paper's sum term by term in log space (see
//! [`super::binomial`]) and serves as the cross-check.
//!
//! σ is the paper's, that of d draws *with* replacement. APSR samples d *distinct* hosts, whose
//! hit probability 1 − C(n−k, d)/C(n, d) is higher; E[H_s] grows with σ, so the model
//! underestimates happy schedulers and its SLA guarantee stays safe (the two agree when d = 1
//! or d ≪ n). One consequence: at d = n, σ < 1 unless k = n. The Monte-Carlo tests check both.

use serde::Serialize;

use super::binomial;

/// A scheduler layout: `schedulers` (s) in parallel, each reading `hosts_per_scheduler` (d).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Plan {
    pub schedulers: u64,
    pub hosts_per_scheduler: u64,
    /// 1 − E[H_s]/s for this (s, d) at the k it was planned for.
    pub expected_decline_ratio: f64,
}

/// σ = 1 − ((n−k)/n)^d: the chance that d distinct uniform samples of n hosts hold one of k.
/// `k` is clamped to `[0, n]` and `d` to `n`.
pub fn sample_hit_probability(n: u64, k: f64, d: u64) -> f64 {
    let d = d.min(n);
    if n == 0 || d == 0 || k.is_nan() || k <= 0.0 {
        return 0.0;
    }
    let k = k.min(n as f64);
    // ((n−k)/n)^d = exp(d·ln(1 − k/n)); at k = n, ln_1p(−1) = −∞ and σ = 1 exactly.
    -(d as f64 * (-k / n as f64).ln_1p()).exp_m1()
}

fn clamped_k(n: u64, k: f64) -> Option<f64> {
    (k > 0.0 && n > 0).then(|| k.min(n as f64))
}

/// E[H_s]: the expected number of the `s` schedulers whose claim succeeds (closed form, O(1)).
/// `k` (clamped to `[0, n]`) may be fractional; `k ≤ 0`, `s = 0`, `d = 0` or `n = 0` give 0.
pub fn expected_happy(n: u64, k: f64, s: u64, d: u64) -> f64 {
    let Some(k) = clamped_k(n, k) else {
        return 0.0;
    };
    if s == 0 {
        return 0.0;
    }
    let sigma = sample_hit_probability(n, k, d);
    // 1 − (1 − σ/k)^s; at σ = k = 1, ln_1p(−1) = −∞ and every free host is taken.
    let happy = k * -(s as f64 * (-sigma / k).ln_1p()).exp_m1();
    happy.clamp(0.0, (s as f64).min(k))
}

/// E[H_s] by the paper's sum over `f` with binomial terms in log space (O(√s) terms around the
/// mode). Equal to [`expected_happy`] up to rounding for k ≥ 1; kept as the literal formula to
/// check it by.
pub fn expected_happy_summed(n: u64, k: f64, s: u64, d: u64) -> f64 {
    let Some(k) = clamped_k(n, k) else {
        return 0.0;
    };
    let sigma = sample_hit_probability(n, k, d);
    // 1 − ((k−1)/k)^f as −expm1(f·ln(1 − 1/k)): forming (k−1)/k first would lose ~1/k of
    // the precision of its logarithm. For k < 1 the ratio is below −1 and the alternating sum
    // is ill-conditioned: use the closed form there.
    let ln_q = (-1.0 / k).ln_1p();
    k * binomial::expectation(s, sigma, |f| {
        if f == 0 {
            0.0
        } else if k < 1.0 {
            1.0 - ((k - 1.0) / k).powf(f as f64)
        } else {
            -(f as f64 * ln_q).exp_m1()
        }
    })
}

/// 1 − E[H_s]/s, clamped to `[0, 1]`; 0 when `s = 0`.
pub fn expected_decline_ratio(n: u64, k: f64, s: u64, d: u64) -> f64 {
    if s == 0 {
        return 0.0;
    }
    (1.0 - expected_happy(n, k, s, d) / s as f64).clamp(0.0, 1.0)
}

/// Whether (s, d) meets the SLA: E[H_s] ≥ s·(1 − ε). No tolerance is applied to ties.
pub fn meets_sla(n: u64, k: f64, s: u64, d: u64, epsilon: f64) -> bool {
    expected_happy(n, k, s, d) >= s as f64 * (1.0 - epsilon)
}

/// MaximizeParallelism(n, ε, B, k) with an operator cap on s: the largest s reached by growing
/// from 1 while (s+1, ⌊B/(s+1)⌋) meets the SLA, returned with d = ⌊B/s⌋ capped at n.
/// s = 1 is always allowed; k ≤ 0 (nothing fits) plans s = 1.
pub fn maximize_parallelism(
    n: u64,
    epsilon: f64,
    budget: u64,
    k: f64,
    max_schedulers: u64,
) -> Plan {
    maximize_parallelism_with_min_hosts(n, epsilon, budget, k, max_schedulers, 1)
}

/// [`maximize_parallelism`] that also refuses any s > 1 giving fewer than
/// `min_hosts_per_scheduler` hosts per scheduler.
///
/// The scan is linear, as in the paper (the first failing s stops it). It is short: an accepted
/// s satisfies s·(1−ε) ≤ E[H_s] ≤ k ≤ n, so at most min(max_schedulers, B, n/(1−ε)) + 1 closed-form
/// evaluations run (about 1,000 for n = B = k = 10,000 and ε = 0.05).
pub fn maximize_parallelism_with_min_hosts(
    n: u64,
    epsilon: f64,
    budget: u64,
    k: f64,
    max_schedulers: u64,
    min_hosts_per_scheduler: u64,
) -> Plan {
    let min_hosts = min_hosts_per_scheduler.max(1);
    let mut s = 1;
    if k > 0.0 {
        while s < max_schedulers {
            let next = s + 1;
            let d = budget / next;
            if d < min_hosts || !meets_sla(n, k, next, d.min(n), epsilon) {
                break;
            }
            s = next;
        }
    }
    let d = (budget / s).min(n);
    Plan {
        schedulers: s,
        hosts_per_scheduler: d,
        expected_decline_ratio: expected_decline_ratio(n, k, s, d),
    }
}

#[cfg(test)]
mod monte_carlo;
#[cfg(test)]
mod tests;
