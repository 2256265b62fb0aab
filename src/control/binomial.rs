//! Binomial expectations computed in log space: `Σ_f g(f)·Bin(f; s, p)` for large `s` without
//! factorials, overflow or underflow.
//!
//! The probability mass at the mode `m = ⌊(s+1)p⌋` is `exp(ln C(s, m) + m ln p + (s−m) ln(1−p))`,
//! with `ln C` from `ln Γ` (Lanczos approximation, g = 7, n = 9; C. Lanczos, "A precision
//! approximation of the gamma function", SIAM J. Numer. Anal. B 1, 1964; coefficients as in
//! Numerical Recipes, 3rd ed., §6.1). The other terms follow by the ratio recurrence
//! `Bin(f+1)/Bin(f) = (s−f)/(f+1) · p/(1−p)`, walking away from the mode in both directions.
//!
//! Because these ratios decrease monotonically in `f`, the mass beyond the current term `t` with
//! next ratio `r < 1` is at most `t·r/(1−r)`; the walk stops once that bound drops below
//! [`TAIL_TOLERANCE`] times the mass already summed. So only `O(√(s·p·(1−p)))` terms around the
//! mode are visited, never all `s + 1`.

/// Relative bound on the probability mass left out of a sum.
pub const TAIL_TOLERANCE: f64 = 1e-18;

const LANCZOS_G: f64 = 7.0;
const LANCZOS_COEFFICIENTS: [f64; 9] = [
    0.999_999_999_999_809_9,
    676.520_368_121_885_1,
    -1_259.139_216_722_402_8,
    771.323_428_777_653_1,
    -176.615_029_162_140_6,
    12.507_343_278_686_905,
    -0.138_571_095_265_720_12,
    9.984_369_578_019_572e-6,
    1.505_632_735_149_311_6e-7,
];

/// `ln Γ(x)` for `x ≥ 0.5` (Lanczos approximation, relative error about 1e-15).
pub fn ln_gamma(x: f64) -> f64 {
    debug_assert!(x >= 0.5, "ln_gamma is only implemented for x >= 0.5");
    let x = x - 1.0;
    let series = LANCZOS_COEFFICIENTS[1..]
        .iter()
        .enumerate()
        .fold(LANCZOS_COEFFICIENTS[0], |acc, (i, c)| {
            acc + c / (x + i as f64 + 1.0)
        });
    let t = x + LANCZOS_G + 0.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + series.ln()
}

/// `ln C(s, f)`, the log of the binomial coefficient, for `f ≤ s`.
pub fn ln_choose(s: u64, f: u64) -> f64 {
    debug_assert!(f <= s);
    ln_gamma(s as f64 + 1.0) - ln_gamma(f as f64 + 1.0) - ln_gamma((s - f) as f64 + 1.0)
}

/// `ln Bin(f; s, p)` for `0 < p < 1`.
pub fn ln_pmf(f: u64, s: u64, p: f64) -> f64 {
    ln_choose(s, f) + f as f64 * p.ln() + (s - f) as f64 * (-p).ln_1p()
}

/// `Σ_{f=0..s} g(f)·Bin(f; s, p)` for `p ∈ [0, 1]`, visiting only the terms around the mode
/// (see the module doc for the tail bound that decides where to stop).
///
/// Every term is the mode's term times exact ratios, so the sum is divided by the mass actually
/// summed: that cancels the rounding of `ln Γ` at large `s` (absolute error ≈ 1e-16·s·ln s).
pub fn expectation(s: u64, p: f64, g: impl Fn(u64) -> f64) -> f64 {
    if p <= 0.0 {
        return g(0);
    }
    if p >= 1.0 {
        return g(s);
    }
    let odds = p / (1.0 - p);
    let mode = (((s + 1) as f64 * p).floor() as u64).min(s);
    let at_mode = ln_pmf(mode, s, p).exp();
    let mut mass = at_mode;
    let mut sum = g(mode) * at_mode;

    let mut term = at_mode;
    for f in mode..s {
        term *= (s - f) as f64 / (f + 1) as f64 * odds;
        mass += term;
        sum += g(f + 1) * term;
        let next_ratio = (s - f - 1) as f64 / (f + 2) as f64 * odds;
        if next_ratio < 1.0 && term * next_ratio / (1.0 - next_ratio) < TAIL_TOLERANCE * mass {
            break;
        }
    }

    let mut term = at_mode;
    for f in (1..=mode).rev() {
        term *= f as f64 / (s - f + 1) as f64 / odds;
        mass += term;
        sum += g(f - 1) * term;
        let next_ratio = (f - 1) as f64 / (s - f + 2) as f64 / odds;
        if next_ratio < 1.0 && term * next_ratio / (1.0 - next_ratio) < TAIL_TOLERANCE * mass {
            break;
        }
    }
    sum / mass
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_gamma_matches_log_factorials() {
        let mut ln_factorial = 0.0_f64;
        for m in 1..=170_u64 {
            ln_factorial += (m as f64).ln();
            let got = ln_gamma(m as f64 + 1.0);
            assert!(
                (got - ln_factorial).abs() <= 1e-12 * ln_factorial.max(1.0),
                "ln Γ({}) = {got}, expected {ln_factorial}",
                m + 1
            );
        }
        assert!(ln_gamma(1.0).abs() < 1e-14);
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-14);
    }

    #[test]
    fn pmf_of_small_binomials_matches_the_definition() {
        // Bin(2; 4, 0.25) = 6 · 0.25² · 0.75² = 0.2109375
        assert!((ln_pmf(2, 4, 0.25).exp() - 0.210_937_5).abs() < 1e-14);
        // Bin(0; 3, 0.5) = 0.125
        assert!((ln_pmf(0, 3, 0.5).exp() - 0.125).abs() < 1e-14);
    }

    #[test]
    fn expectation_sums_to_one_and_gives_the_mean_for_large_s() {
        for &(s, p) in &[
            (1_u64, 0.3),
            (10, 0.5),
            (2_000, 0.83),
            (100_000, 1e-3),
            (1_000_000, 0.4),
        ] {
            let total = expectation(s, p, |_| 1.0);
            let mean = expectation(s, p, |f| f as f64);
            assert!((total - 1.0).abs() < 1e-9, "s={s} p={p}: mass {total}");
            let expected_mean = s as f64 * p;
            assert!(
                (mean - expected_mean).abs() < 1e-9 * expected_mean.max(1.0),
                "s={s} p={p}: mean {mean}"
            );
        }
    }

    #[test]
    fn expectation_at_degenerate_probabilities_takes_the_end_terms() {
        assert_eq!(expectation(7, 0.0, |f| f as f64), 0.0);
        assert_eq!(expectation(7, 1.0, |f| f as f64), 7.0);
    }
}
