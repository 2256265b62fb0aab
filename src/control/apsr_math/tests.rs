//! Hand-derived cases, properties and numerical stability of the APSR sizing model.

use super::*;

fn close(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol
}

/// n = 2, k = 1, d = 1, s = 2: σ = 1 − (1/2)¹ = 1/2 and q = (k−1)/k = 0, so
/// E[H_2] = 1·[(1−0)·Bin(1; 2, ½) + (1−0)·Bin(2; 2, ½)] = 2/4 + 1/4 = 0.75.
#[test]
fn two_hosts_one_free_two_schedulers_expect_three_quarters_happy() {
    assert!(close(expected_happy(2, 1.0, 2, 1), 0.75, 1e-12));
    assert!(close(expected_happy_summed(2, 1.0, 2, 1), 0.75, 1e-12));
    assert!(close(expected_decline_ratio(2, 1.0, 2, 1), 0.625, 1e-12));
}

/// n = 4, k = 2, d = 1, s = 3: σ = 1 − (2/4)¹ = ½, q = ½, so
/// E[H_3] = 2·[½·3/8 + ¾·3/8 + ⅞·1/8] = 2·37/64 = 1.15625.
#[test]
fn four_hosts_two_free_three_schedulers_match_the_hand_sum() {
    assert!(close(expected_happy(4, 2.0, 3, 1), 1.156_25, 1e-12));
    assert!(close(expected_happy_summed(4, 2.0, 3, 1), 1.156_25, 1e-12));
}

/// s = 1: E[H_1] = k·(1 − (k−1)/k)·σ = σ.
#[test]
fn one_scheduler_is_happy_with_the_sample_hit_probability() {
    for &(n, k, d) in &[
        (10_u64, 3.0, 2_u64),
        (100, 1.0, 7),
        (1_000, 999.5, 1),
        (50, 50.0, 3),
    ] {
        let sigma = sample_hit_probability(n, k, d);
        assert!(
            close(expected_happy(n, k, 1, d), sigma, 1e-12),
            "n={n} k={k} d={d}"
        );
    }
    // n = 10, k = 3, d = 2: σ = 1 − (7/10)² = 0.51
    assert!(close(sample_hit_probability(10, 3.0, 2), 0.51, 1e-12));
}

/// k = n: every sample hits (σ = 1), so E[H_s] = k·(1 − ((k−1)/k)^s), balls into k bins.
#[test]
fn all_hosts_free_reduces_to_balls_into_bins() {
    for &(n, s, d) in &[
        (10_u64, 4_u64, 1_u64),
        (10, 4, 10),
        (1, 5, 1),
        (1_000, 300, 3),
    ] {
        let k = n as f64;
        assert_eq!(sample_hit_probability(n, k, d), 1.0);
        let want = k * (1.0 - ((k - 1.0) / k).powi(s as i32));
        assert!(
            close(expected_happy(n, k, s, d), want, 1e-9),
            "n={n} s={s} d={d}"
        );
        assert!(close(expected_happy_summed(n, k, s, d), want, 1e-9));
    }
}

/// k = 1 makes (k−1)/k = 0: one free host, happy iff anyone found it, 1 − (1−σ)^s.
#[test]
fn one_free_host_is_taken_when_any_scheduler_found_it() {
    // σ = 1 − 0.95⁴ (draws with replacement, see the module doc).
    let sigma = sample_hit_probability(20, 1.0, 4);
    assert!(close(sigma, 1.0 - 0.95_f64.powi(4), 1e-12));
    let want = 1.0 - (1.0 - sigma).powi(6);
    assert!(close(expected_happy(20, 1.0, 6, 4), want, 1e-12));
    assert!(close(expected_happy_summed(20, 1.0, 6, 4), want, 1e-12));
    assert_eq!(expected_happy(1, 1.0, 3, 1), 1.0);
}

#[test]
fn nothing_is_happy_when_nothing_fits_or_nothing_is_sampled() {
    assert_eq!(expected_happy(100, 0.0, 10, 5), 0.0);
    assert_eq!(expected_happy(100, -3.0, 10, 5), 0.0);
    assert_eq!(expected_happy(100, f64::NAN, 10, 5), 0.0);
    assert_eq!(expected_happy(100, 30.0, 10, 0), 0.0);
    assert_eq!(expected_happy(0, 30.0, 10, 5), 0.0);
    assert_eq!(expected_happy(100, 30.0, 0, 5), 0.0);
    assert_eq!(expected_decline_ratio(100, 0.0, 10, 5), 1.0);
}

#[test]
fn samples_larger_than_the_cluster_are_capped_at_n() {
    assert_eq!(
        expected_happy(10, 4.0, 3, 50),
        expected_happy(10, 4.0, 3, 10)
    );
    assert!(close(
        sample_hit_probability(10, 4.0, 50),
        1.0 - 0.6_f64.powi(10),
        1e-12
    ));
    assert_eq!(sample_hit_probability(10, 10.0, 50), 1.0);
    assert_eq!(
        expected_happy(10, 40.0, 3, 2),
        expected_happy(10, 10.0, 3, 2)
    );
}

#[test]
fn happiness_grows_with_schedulers_hosts_and_samples_and_stays_below_s_and_k() {
    let n = 200;
    for &k in &[0.5, 1.0, 7.5, 60.0, 200.0] {
        for d in [1_u64, 3, 20] {
            let mut previous = 0.0;
            for s in 1..=60 {
                let e = expected_happy(n, k, s, d);
                assert!(
                    e >= previous - 1e-12,
                    "E must grow with s (k={k} d={d} s={s})"
                );
                assert!(e <= (s as f64).min(k) + 1e-12);
                assert!(
                    expected_happy(n, k, s, d + 1) >= e - 1e-12,
                    "E must grow with d"
                );
                assert!(
                    expected_happy(n, k + 1.0, s, d) >= e - 1e-12,
                    "E must grow with k"
                );
                assert!(
                    expected_decline_ratio(n, k, s + 1, d)
                        >= expected_decline_ratio(n, k, s, d) - 1e-12,
                    "decline ratio must grow with s"
                );
                previous = e;
            }
        }
    }
}

#[test]
fn closed_form_matches_the_papers_sum_across_a_grid() {
    for &n in &[1_u64, 7, 100, 5_000] {
        for &k_share in &[0.01, 0.3, 0.77, 1.0] {
            let k = (n as f64 * k_share).max(1.0);
            for &s in &[1_u64, 2, 9, 64, 700] {
                for &d in &[1_u64, 2, 10, 300] {
                    let closed = expected_happy(n, k, s, d);
                    let summed = expected_happy_summed(n, k, s, d);
                    assert!(
                        close(closed, summed, 1e-9 * closed.max(1.0)),
                        "n={n} k={k} s={s} d={d}: {closed} vs {summed}"
                    );
                }
            }
        }
    }
}

/// The pmf by plain f64 products, feasible while C(s, f) < 1e308 (s ≤ 1,000).
fn brute_force_happy(n: u64, k: f64, s: u64, d: u64) -> f64 {
    let sigma = sample_hit_probability(n, k, d);
    let q = (k - 1.0) / k;
    let mut choose = 1.0_f64;
    let mut sum = 0.0;
    for f in 1..=s {
        choose = choose * (s - f + 1) as f64 / f as f64;
        let pmf = choose * sigma.powi(f as i32) * (1.0 - sigma).powi((s - f) as i32);
        sum += (1.0 - q.powi(f as i32)) * pmf;
    }
    k * sum
}

#[test]
fn thousands_of_schedulers_and_hosts_stay_finite_and_match_brute_force() {
    let e = expected_happy(10_000, 3_000.0, 2_000, 5);
    assert!(e.is_finite() && (0.0..=2_000.0).contains(&e), "{e}");
    let summed = expected_happy_summed(10_000, 3_000.0, 2_000, 5);
    assert!(close(e, summed, 1e-9 * e), "{e} vs {summed}");

    for &(n, k, s, d) in &[
        (10_000_u64, 3_000.0, 1_000_u64, 5_u64),
        (5_000, 4_200.0, 900, 2),
    ] {
        let brute = brute_force_happy(n, k, s, d);
        let closed = expected_happy(n, k, s, d);
        let summed = expected_happy_summed(n, k, s, d);
        assert!(brute.is_finite());
        assert!(
            close(closed, brute, 1e-9 * brute),
            "{closed} vs brute {brute}"
        );
        assert!(
            close(summed, brute, 1e-9 * brute),
            "{summed} vs brute {brute}"
        );
    }

    for &(n, k, s, d) in &[
        (1_000_000_u64, 250_000.5, 400_000_u64, 3_u64),
        (u32::MAX as u64, 1e9, 1_000_000, 1),
    ] {
        let closed = expected_happy(n, k, s, d);
        let summed = expected_happy_summed(n, k, s, d);
        assert!(closed.is_finite() && closed > 0.0 && closed <= s as f64);
        assert!(close(closed, summed, 1e-8 * closed), "{closed} vs {summed}");
    }
}

#[test]
fn plan_with_every_host_free_grows_s_while_the_sla_holds() {
    // n = B = k = 10, ε = 0.1, σ = 1 for any d: E_s = 10·(1 − 0.9^s).
    // s = 2: 1.9 ≥ 1.8; s = 3: 2.71 ≥ 2.7; s = 4: 3.439 < 3.6 → (3, ⌊10/3⌋ = 3).
    let plan = maximize_parallelism(10, 0.1, 10, 10.0, 64);
    assert_eq!((plan.schedulers, plan.hosts_per_scheduler), (3, 3));
    assert!(close(plan.expected_decline_ratio, 1.0 - 2.71 / 3.0, 1e-12));
}

#[test]
fn plan_on_two_hosts_depends_on_epsilon() {
    // n = B = k = 2: s = 2, d = 1 gives E = 2·(1 − ¼) = 1.5, i.e. a decline ratio of 0.25.
    let loose = maximize_parallelism(2, 0.5, 2, 2.0, 64);
    assert_eq!((loose.schedulers, loose.hosts_per_scheduler), (2, 1));
    assert!(close(loose.expected_decline_ratio, 0.25, 1e-12));
    // ε = 0.2 needs E ≥ 1.6: stay at s = 1 reading both hosts, which never declines.
    let tight = maximize_parallelism(2, 0.2, 2, 2.0, 64);
    assert_eq!((tight.schedulers, tight.hosts_per_scheduler), (1, 2));
    assert_eq!(tight.expected_decline_ratio, 0.0);
}

#[test]
fn plan_with_one_free_host_keeps_a_single_full_reader() {
    // s = 2, d = 50: σ = 1 − 0.99^50 ≈ 0.395, E ≤ k = 1 < 1.9. At s = 1, d = 100 the model's
    // σ = 1 − 0.99^100 (draws with replacement), so its decline ratio is 0.99^100.
    let plan = maximize_parallelism(100, 0.05, 100, 1.0, 64);
    assert_eq!((plan.schedulers, plan.hosts_per_scheduler), (1, 100));
    assert!(close(
        plan.expected_decline_ratio,
        0.99_f64.powi(100),
        1e-12
    ));
}

#[test]
fn fractional_k_below_one_stays_within_bounds() {
    for &k in &[0.01, 0.2, 0.5, 0.99] {
        for s in [1_u64, 2, 64, 5_000] {
            let e = expected_happy(10, k, s, 10);
            assert!(e.is_finite() && e >= 0.0 && e <= k, "k={k} s={s}: {e}");
        }
    }
}

#[test]
fn plan_falls_back_to_one_scheduler_when_nothing_fits_or_capped() {
    let none = maximize_parallelism(100, 0.05, 100, 0.0, 64);
    assert_eq!((none.schedulers, none.hosts_per_scheduler), (1, 100));
    assert_eq!(none.expected_decline_ratio, 1.0);
    let capped = maximize_parallelism(10, 0.1, 10, 10.0, 1);
    assert_eq!(capped.schedulers, 1);
    let capped_at_two = maximize_parallelism(10, 0.1, 10, 10.0, 2);
    assert_eq!(
        (capped_at_two.schedulers, capped_at_two.hosts_per_scheduler),
        (2, 5)
    );
    let empty = maximize_parallelism(0, 0.05, 0, 0.0, 64);
    assert_eq!((empty.schedulers, empty.hosts_per_scheduler), (1, 0));
}

#[test]
fn plan_never_exceeds_the_budget_nor_reads_less_than_the_minimum() {
    let plan = maximize_parallelism_with_min_hosts(1_000, 0.05, 1_000, 1_000.0, 1_000, 40);
    assert!(plan.hosts_per_scheduler >= 40);
    assert!(plan.schedulers * plan.hosts_per_scheduler <= 1_000);
    let free = maximize_parallelism(1_000, 0.05, 1_000, 1_000.0, 1_000);
    assert!(free.schedulers > plan.schedulers);
    assert!(free.expected_decline_ratio <= 0.05);
}

#[test]
fn plans_with_parallel_schedulers_meet_the_sla_and_more_budget_never_hurts() {
    for &(n, k) in &[
        (837_u64, 400.0),
        (5_989, 600.0),
        (10_000, 10_000.0),
        (300, 30.0),
    ] {
        let mut previous = 1;
        for budget in [n / 4, n, 4 * n] {
            let plan = maximize_parallelism(n, 0.05, budget, k, u64::MAX);
            assert!(plan.schedulers * plan.hosts_per_scheduler <= budget);
            if plan.schedulers > 1 {
                assert!(plan.expected_decline_ratio <= 0.05, "{plan:?}");
            }
            assert!(
                plan.schedulers >= previous,
                "n={n} k={k} B={budget}: {plan:?}"
            );
            previous = plan.schedulers;
        }
    }
}

/// The plan for 10,000 hosts is wide and meets the SLA. How long planning takes is measured in
/// a benchmark (`bench_decide`, BENCHMARKS.md), not asserted here.
#[test]
fn planning_ten_thousand_hosts_finds_a_wide_plan_within_the_sla() {
    let plan = maximize_parallelism(10_000, 0.05, 10_000, 10_000.0, u64::MAX);
    assert!(plan.schedulers > 500, "{plan:?}");
    assert!(plan.expected_decline_ratio <= 0.05, "{plan:?}");
}
