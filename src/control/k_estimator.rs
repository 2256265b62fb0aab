//! The APSR controller's estimate of k, the number of hosts that can take any request
//! (docs/architecture.md §4, after the APSR paper): per flavor c, hosts sampled n_c and hosts found
//! to fit k_c since the last round; then k̃ = n · min_c (Σk_c / Σn_c) and k ← α·k̃ + (1−α)·k.

use std::collections::HashMap;

/// Per-flavor sample counts of one scheduler worker since the last round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SampleCounters {
    by_flavor: HashMap<String, FlavorCount>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct FlavorCount {
    sampled: u64,
    fitting: u64,
}

impl SampleCounters {
    /// Counts one request: `sampled` hosts read, `fitting` of them able to take it.
    pub fn record(&mut self, flavor: &str, sampled: u64, fitting: u64) {
        let count = match self.by_flavor.get_mut(flavor) {
            Some(count) => count,
            None => self.by_flavor.entry(flavor.to_owned()).or_default(),
        };
        count.sampled += sampled;
        count.fitting += fitting;
    }

    /// Adds another worker's counts to these.
    pub fn merge(&mut self, other: &SampleCounters) {
        for (flavor, count) in &other.by_flavor {
            self.record(flavor, count.sampled, count.fitting);
        }
    }

    /// The smallest fitting share Σk_c/Σn_c over the flavors sampled, if any was.
    /// A share is capped at 1 in case a caller reports more fitting than sampled hosts.
    pub fn min_fitting_share(&self) -> Option<f64> {
        self.by_flavor
            .values()
            .filter(|count| count.sampled > 0)
            .map(|count| (count.fitting as f64 / count.sampled as f64).min(1.0))
            .min_by(f64::total_cmp)
    }

    /// Whether nothing was recorded since the last reset.
    pub fn is_empty(&self) -> bool {
        self.by_flavor
            .values()
            .all(|count| count.sampled == 0 && count.fitting == 0)
    }

    /// Zeroes every count. Flavors already seen keep their entry, so recording them next round
    /// allocates nothing; a zero entry is left out of [`Self::min_fitting_share`].
    pub fn clear(&mut self) {
        self.by_flavor
            .values_mut()
            .for_each(|count| *count = FlavorCount::default());
    }
}

/// The EWMA estimate of k over rounds, plus the counts of the round in progress.
#[derive(Clone, Debug, PartialEq)]
pub struct KEstimator {
    hosts: u64,
    alpha: f64,
    k: f64,
    round: SampleCounters,
}

impl KEstimator {
    /// The paper's smoothing factor α.
    pub const DEFAULT_ALPHA: f64 = 0.1;

    /// An estimator for `hosts` hosts; k starts at `hosts` (every host assumed available).
    pub fn new(hosts: u64, alpha: f64) -> Self {
        KEstimator {
            hosts,
            alpha,
            k: hosts as f64,
            round: SampleCounters::default(),
        }
    }

    /// The current estimate of k, in `[0, n]`.
    pub fn k(&self) -> f64 {
        self.k
    }

    /// The cluster size n the estimate refers to.
    pub fn hosts(&self) -> u64 {
        self.hosts
    }

    /// Counts one request of `flavor` in this round (see [`SampleCounters::record`]).
    pub fn record(&mut self, flavor: &str, sampled: u64, fitting: u64) {
        self.round.record(flavor, sampled, fitting);
    }

    /// Adds one scheduler worker's counts to this round.
    pub fn merge(&mut self, worker: &SampleCounters) {
        self.round.merge(worker);
    }

    /// The counts of the round in progress.
    pub fn round_counters(&self) -> &SampleCounters {
        &self.round
    }

    /// Ends the round: folds k̃ into k (unless nothing was sampled) and resets the counts.
    /// Returns k̃, the round's own estimate, when there was one.
    pub fn end_round(&mut self) -> Option<f64> {
        let observed = self
            .round
            .min_fitting_share()
            .map(|share| self.hosts as f64 * share);
        if let Some(observed) = observed {
            self.k =
                (self.alpha * observed + (1.0 - self.alpha) * self.k).clamp(0.0, self.hosts as f64);
        }
        self.round.clear();
        observed
    }

    /// Follows a change of cluster size; k is clamped to the new n.
    pub fn set_hosts(&mut self, hosts: u64) {
        self.hosts = hosts;
        self.k = self.k.min(hosts as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn k_starts_at_the_cluster_size() {
        assert_eq!(KEstimator::new(837, 0.1).k(), 837.0);
    }

    #[test]
    fn one_round_moves_k_a_tenth_of_the_way_to_the_observed_share() {
        let mut estimator = KEstimator::new(100, 0.1);
        estimator.record("m1.small", 10, 4);
        estimator.record("m1.small", 10, 2);
        // k̃ = 100 · 6/20 = 30; k = 0.1·30 + 0.9·100 = 93.
        assert_eq!(estimator.end_round(), Some(30.0));
        assert!(close(estimator.k(), 93.0));
        estimator.record("m1.small", 5, 0);
        // k̃ = 0; k = 0.9·93 = 83.7.
        estimator.end_round();
        assert!(close(estimator.k(), 83.7));
    }

    #[test]
    fn the_scarcest_flavor_sets_the_estimate() {
        let mut estimator = KEstimator::new(1_000, 0.5);
        estimator.record("small", 100, 90);
        estimator.record("large", 50, 5);
        estimator.record("medium", 10, 6);
        // min(0.9, 0.1, 0.6) = 0.1 → k̃ = 100; k = 0.5·100 + 0.5·1000 = 550.
        assert_eq!(estimator.end_round(), Some(100.0));
        assert!(close(estimator.k(), 550.0));
    }

    #[test]
    fn flavors_not_sampled_in_the_round_are_left_out() {
        let mut estimator = KEstimator::new(100, 1.0);
        estimator.record("large", 0, 0);
        estimator.record("small", 20, 15);
        assert_eq!(estimator.end_round(), Some(75.0));
        // The next round sees only "small": last round's "large" counts are gone.
        estimator.record("small", 10, 10);
        assert_eq!(estimator.end_round(), Some(100.0));
        assert!(close(estimator.k(), 100.0));
    }

    #[test]
    fn an_empty_round_leaves_k_unchanged() {
        let mut estimator = KEstimator::new(100, 0.1);
        estimator.record("small", 10, 0);
        estimator.end_round();
        let k = estimator.k();
        assert_eq!(estimator.end_round(), None);
        assert_eq!(estimator.k(), k);
        assert!(estimator.round_counters().is_empty());
    }

    #[test]
    fn worker_counters_merge_into_one_round() {
        let mut first = SampleCounters::default();
        first.record("small", 10, 5);
        first.record("large", 4, 1);
        let mut second = SampleCounters::default();
        second.record("small", 30, 5);
        let mut estimator = KEstimator::new(100, 1.0);
        estimator.merge(&first);
        estimator.merge(&second);
        // small: 10/40 = 0.25, large: 1/4 = 0.25 → k̃ = 25.
        assert_eq!(estimator.end_round(), Some(25.0));
        assert_eq!(first.min_fitting_share(), Some(0.25));
    }

    #[test]
    fn shrinking_the_cluster_clamps_k() {
        let mut estimator = KEstimator::new(100, 0.1);
        estimator.set_hosts(60);
        assert_eq!((estimator.hosts(), estimator.k()), (60, 60.0));
        estimator.set_hosts(200);
        assert_eq!(estimator.k(), 60.0);
        estimator.record("small", 10, 10);
        // k̃ = 200; k = 0.1·200 + 0.9·60 = 74.
        estimator.end_round();
        assert!(close(estimator.k(), 74.0));
    }

    #[test]
    fn reports_of_more_fitting_than_sampled_hosts_are_capped() {
        let mut estimator = KEstimator::new(10, 1.0);
        estimator.record("small", 2, 5);
        assert_eq!(estimator.end_round(), Some(10.0));
    }
}
