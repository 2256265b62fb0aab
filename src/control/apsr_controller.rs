//! The APSR controller: every round it folds the schedulers' sample counts into k and
//! re-plans (s, d) by MaximizeParallelism (docs/architecture.md §4, after the APSR paper).
//! Pure: the caller owns the timer (`round_interval_ms`) and applies the plan to its workers.

use serde::Serialize;

use super::apsr_math::{maximize_parallelism_with_min_hosts, Plan};
use super::apsr_params::ApsrParams;
use super::error::ControlError;
use super::history::History;
use super::k_estimator::{KEstimator, SampleCounters};

/// One re-plan, for stats and plots.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ApsrRound {
    /// 0 for the plan made at start, then 1, 2, …
    pub round: u64,
    pub schedulers: u64,
    pub hosts_per_scheduler: u64,
    pub estimated_available_hosts: f64,
}

/// Plans (s, d) from the estimated k. Suitable for one service instance (or one simulator run);
/// workers keep their own [`SampleCounters`] and hand them over with [`Self::merge`].
#[derive(Clone, Debug)]
pub struct ApsrController {
    params: ApsrParams,
    estimator: KEstimator,
    plan: Plan,
    round: u64,
    history: History<ApsrRound>,
}

impl ApsrController {
    /// A controller for `hosts` hosts, planned with k = n until the first round ends.
    pub fn new(params: ApsrParams, hosts: u64) -> Result<Self, ControlError> {
        params.validate()?;
        let estimator = KEstimator::new(hosts, params.alpha);
        let mut controller = ApsrController {
            plan: Plan {
                schedulers: 1,
                hosts_per_scheduler: hosts,
                expected_decline_ratio: 0.0,
            },
            params,
            estimator,
            round: 0,
            history: History::default(),
        };
        controller.replan();
        Ok(controller)
    }

    /// Counts one request's sample (see [`KEstimator::record`]).
    pub fn record(&mut self, flavor: &str, sampled: u64, fitting: u64) {
        self.estimator.record(flavor, sampled, fitting);
    }

    /// Adds a worker's counts to the round in progress.
    pub fn merge(&mut self, worker: &SampleCounters) {
        self.estimator.merge(worker);
    }

    /// Ends a round on a cluster of `hosts` hosts: updates k, re-plans, records the decision.
    pub fn on_round(&mut self, hosts: u64) -> Plan {
        self.estimator.set_hosts(hosts);
        self.estimator.end_round();
        self.round += 1;
        self.replan()
    }

    fn replan(&mut self) -> Plan {
        let hosts = self.estimator.hosts();
        let k = self.estimator.k();
        self.plan = maximize_parallelism_with_min_hosts(
            hosts,
            self.params.epsilon,
            self.params.budget_for(hosts),
            k,
            self.params.max_schedulers,
            self.params.min_hosts_per_scheduler,
        );
        self.history.push(ApsrRound {
            round: self.round,
            schedulers: self.plan.schedulers,
            hosts_per_scheduler: self.plan.hosts_per_scheduler,
            estimated_available_hosts: k,
        });
        self.plan
    }

    /// The plan in force.
    pub fn plan(&self) -> Plan {
        self.plan
    }

    /// s, the number of parallel schedulers.
    pub fn schedulers(&self) -> u64 {
        self.plan.schedulers
    }

    /// d, the hosts each scheduler samples per request.
    pub fn hosts_per_scheduler(&self) -> u64 {
        self.plan.hosts_per_scheduler
    }

    /// k, the estimated number of hosts that can take any request.
    pub fn estimated_available_hosts(&self) -> f64 {
        self.estimator.k()
    }

    /// Rounds ended so far.
    pub fn round(&self) -> u64 {
        self.round
    }

    pub fn params(&self) -> &ApsrParams {
        &self.params
    }

    /// The recent decisions, oldest first.
    pub fn history(&self) -> impl DoubleEndedIterator<Item = &ApsrRound> + ExactSizeIterator {
        self.history.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::apsr_math::maximize_parallelism;

    #[test]
    fn starts_planned_for_every_host_available() {
        let controller = ApsrController::new(ApsrParams::default(), 1_000).unwrap();
        let want = maximize_parallelism(1_000, 0.05, 1_000, 1_000.0, 64);
        assert_eq!(controller.plan(), want);
        assert_eq!(controller.estimated_available_hosts(), 1_000.0);
        assert_eq!(controller.history().len(), 1);
    }

    #[test]
    fn scarce_capacity_reduces_parallelism_round_after_round() {
        let params = ApsrParams {
            alpha: 0.5,
            ..ApsrParams::default()
        };
        let mut controller = ApsrController::new(params, 1_000).unwrap();
        let start = controller.schedulers();
        let mut previous_k = controller.estimated_available_hosts();
        for _ in 0..5 {
            let mut worker = SampleCounters::default();
            worker.record("large", 100, 2);
            controller.merge(&worker);
            controller.on_round(1_000);
            assert!(controller.estimated_available_hosts() < previous_k);
            previous_k = controller.estimated_available_hosts();
        }
        assert!(controller.schedulers() < start, "{:?}", controller.plan());
        let last = controller.history().last().copied().unwrap();
        assert_eq!(last.round, 5);
        assert_eq!(last.schedulers, controller.schedulers());
        assert_eq!(last.estimated_available_hosts, previous_k);
        let plan = controller.plan();
        let want = maximize_parallelism(1_000, 0.05, 1_000, previous_k, 64);
        assert_eq!(plan, want);
    }

    #[test]
    fn an_unset_budget_is_n_up_to_ten_thousand_hosts() {
        // Up to the cap the paper's B = n exactly; above it, d stops growing with the cloud
        // and the plan still meets the SLA, when every host fits and when few do.
        let small = ApsrController::new(ApsrParams::default(), 1_000).unwrap();
        assert_eq!(
            small.plan(),
            maximize_parallelism(1_000, 0.05, 1_000, 1_000.0, 64)
        );
        let large = ApsrController::new(ApsrParams::default(), 100_000).unwrap();
        let plan = large.plan();
        assert_eq!(
            plan,
            maximize_parallelism(100_000, 0.05, 10_000, 100_000.0, 64)
        );
        assert_eq!((plan.schedulers, plan.hosts_per_scheduler), (64, 156));
        let scarce = maximize_parallelism(100_000, 0.05, 10_000, 500.0, 64);
        assert!(scarce.schedulers < 64, "{scarce:?}");
        assert!(scarce.expected_decline_ratio <= 0.05, "{scarce:?}");
        let set = ApsrParams {
            budget: Some(100_000),
            ..ApsrParams::default()
        };
        assert_eq!(
            ApsrController::new(set, 100_000)
                .unwrap()
                .hosts_per_scheduler(),
            1_562
        );
    }

    #[test]
    fn budget_and_caps_bound_the_plan() {
        let params = ApsrParams {
            budget: Some(100),
            max_schedulers: 4,
            min_hosts_per_scheduler: 30,
            ..ApsrParams::default()
        };
        let mut controller = ApsrController::new(params, 1_000).unwrap();
        let plan = controller.on_round(1_000);
        assert!(plan.schedulers <= 3 && plan.hosts_per_scheduler >= 30);
        assert!(plan.schedulers * plan.hosts_per_scheduler <= 100);
    }

    #[test]
    fn a_round_without_samples_keeps_k_and_follows_the_cluster_size() {
        let mut controller = ApsrController::new(ApsrParams::default(), 500).unwrap();
        controller.record("small", 10, 5);
        controller.on_round(500);
        let k = controller.estimated_available_hosts();
        controller.on_round(500);
        assert_eq!(controller.estimated_available_hosts(), k);
        controller.on_round(100);
        assert_eq!(controller.estimated_available_hosts(), 100.0);
        assert!(controller.hosts_per_scheduler() <= 100);
    }

    #[test]
    fn invalid_params_are_refused() {
        let params = ApsrParams {
            epsilon: 0.0,
            ..ApsrParams::default()
        };
        let err = ApsrController::new(params, 10).unwrap_err();
        assert_eq!(err.subject(), Some("epsilon"));
    }
}
