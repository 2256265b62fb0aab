//! Stand-ins for the control loops the `apsr` branch is still landing (`ApsrController`,
//! `KEstimator`, `AscController`): the same DESIGN §4 rules, kept minimal, planning with the
//! library's own `maximize_parallelism`. Swap for `crate::control`'s types when they land.

use crate::control::{maximize_parallelism, Plan};
use std::collections::HashMap;

/// APSR's round controller: per-flavor sample counters, the smoothed k, and the plan.
#[derive(Debug)]
pub struct ApsrController {
    n: u64,
    epsilon: f64,
    budget: u64,
    alpha: f64,
    max_schedulers: u64,
    k: f64,
    counters: HashMap<String, (u64, u64)>,
}

impl ApsrController {
    pub fn new(n: u64, epsilon: f64, budget: u64, alpha: f64, max_schedulers: u64) -> Self {
        ApsrController {
            n,
            epsilon,
            budget,
            alpha,
            max_schedulers,
            k: n as f64,
            counters: HashMap::new(),
        }
    }

    /// Counts one request's sample: `sampled` hosts read, `fitting` of them fit.
    pub fn record(&mut self, flavor: &str, sampled: u64, fitting: u64) {
        if let Some(c) = self.counters.get_mut(flavor) {
            c.0 += sampled;
            c.1 += fitting;
        } else {
            self.counters.insert(flavor.to_string(), (sampled, fitting));
        }
    }

    /// The current estimate of k.
    pub fn k(&self) -> f64 {
        self.k
    }

    /// Ends a round: k ← α·k̃ + (1−α)·k with k̃ = n · min over sampled flavors of the fitting
    /// share (a round without samples keeps k), resets the counters, and re-plans (s, d).
    pub fn on_round(&mut self, n: u64) -> Plan {
        self.n = n;
        let share = self
            .counters
            .values()
            .filter(|(sampled, _)| *sampled > 0)
            .map(|(sampled, fitting)| *fitting as f64 / *sampled as f64)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.min(v))));
        if let Some(share) = share {
            self.k = self.alpha * (n as f64 * share) + (1.0 - self.alpha) * self.k;
        }
        self.counters.clear();
        maximize_parallelism(n, self.epsilon, self.budget, self.k, self.max_schedulers)
    }
}

/// ASC's parameters (DESIGN §4), intervals in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AscParams {
    pub th_decline: f64,
    pub th_low: f64,
    pub start_interval_ms: u64,
    pub min_interval_ms: u64,
    pub max_interval_ms: u64,
    pub speed_up_step: f64,
    pub slow_down_step: f64,
}

impl Default for AscParams {
    fn default() -> Self {
        AscParams {
            th_decline: 0.05,
            th_low: 0.03,
            start_interval_ms: 60_000,
            min_interval_ms: 1_000,
            max_interval_ms: u64::MAX,
            speed_up_step: 0.5,
            slow_down_step: 1.1,
        }
    }
}

/// ASC's loop: shrink τ fast on an SLA breach, grow it slowly when quiet.
#[derive(Debug)]
pub struct AscController {
    params: AscParams,
    interval_ms: u64,
}

impl AscController {
    pub fn new(params: AscParams) -> Self {
        AscController {
            params,
            interval_ms: params.start_interval_ms,
        }
    }

    /// The interval that just ended saw `placed` and `declined`: the next interval (ms).
    pub fn on_interval(&mut self, placed: u64, declined: u64) -> u64 {
        let p = self.params;
        let r = declined as f64 / (placed + declined).max(1) as f64;
        let tau = self.interval_ms as f64;
        if r > p.th_decline {
            self.interval_ms = ((tau * p.speed_up_step) as u64).max(p.min_interval_ms);
        } else if r < p.th_low {
            self.interval_ms = ((tau * p.slow_down_step).ceil() as u64).min(p.max_interval_ms);
        }
        self.interval_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k_moves_a_tenth_of_the_way_to_the_scarcest_flavor() {
        let mut c = ApsrController::new(100, 0.05, 100, 0.1, u64::MAX);
        c.record("a", 10, 10);
        c.record("b", 10, 5);
        c.on_round(100);
        assert!((c.k() - 95.0).abs() < 1e-9);
        c.on_round(100);
        assert!(
            (c.k() - 95.0).abs() < 1e-9,
            "a round without samples keeps k"
        );
    }

    #[test]
    fn asc_halves_on_breach_and_grows_by_a_tenth_when_quiet() {
        let mut a = AscController::new(AscParams::default());
        assert_eq!(a.on_interval(90, 10), 30_000);
        assert_eq!(a.on_interval(100, 0), 33_000);
        assert_eq!(a.on_interval(96, 4), 33_000);
    }
}
