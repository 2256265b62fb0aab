//! APSR in slot time: each scheduler samples d distinct hosts (d queries), keeps those that
//! fit, and picks one uniformly (the library's `random` ranking over the sample); the
//! controller re-plans (s, d) every T slots from the estimated k.

use super::control::ApsrController;
use super::policy;
use crate::control::Plan;
use crate::domain::{HostState, RequestContext};
use crate::policy::{Algorithm, FilterEnv, Policy};
use rand::Rng;

/// APSR's parameters in the simulator (DESIGN §4, §6 A).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ApsrParams {
    pub epsilon: f64,
    /// Hosts all schedulers together may read per round; `None` = n.
    pub budget: Option<u64>,
    /// Slots per controller round (T).
    pub round_slots: u64,
    pub alpha: f64,
    pub max_schedulers: u64,
}

impl Default for ApsrParams {
    fn default() -> Self {
        ApsrParams {
            epsilon: 0.05,
            budget: None,
            round_slots: 10,
            alpha: 0.1,
            max_schedulers: u64::MAX,
        }
    }
}

/// The sampling decider and its controller.
pub struct ApsrScheduler {
    policy: Policy,
    controller: ApsrController,
    plan: Plan,
    sample: Vec<HostState>,
    sampled_ids: Vec<usize>,
}

impl ApsrScheduler {
    pub fn new(n_hosts: usize, params: ApsrParams) -> Self {
        let n = n_hosts as u64;
        let mut controller = ApsrController::new(
            n,
            params.epsilon,
            params.budget.unwrap_or(n),
            params.alpha,
            params.max_schedulers,
        );
        let plan = controller.on_round(n);
        ApsrScheduler {
            policy: policy::build(Algorithm::Random),
            controller,
            plan,
            sample: Vec::new(),
            sampled_ids: Vec::new(),
        }
    }

    /// The current plan (s, d).
    pub fn plan(&self) -> Plan {
        self.plan
    }

    /// Ends a controller round: folds the round's samples into k and re-plans.
    pub fn end_round(&mut self, n_hosts: usize) -> Plan {
        self.plan = self.controller.on_round(n_hosts as u64);
        self.plan
    }

    /// Samples d hosts, records what fitted, and picks uniformly among them.
    pub fn decide(
        &mut self,
        hosts: &[HostState],
        req: &RequestContext,
        env: &FilterEnv,
        rng: &mut impl Rng,
        out: &mut Vec<usize>,
    ) -> (Option<usize>, u64) {
        let d = (self.plan.hosts_per_scheduler as usize).clamp(1, hosts.len().max(1));
        self.sampled_ids.clear();
        self.sample.clear();
        for i in rand::seq::index::sample(rng, hosts.len(), d.min(hosts.len())) {
            self.sampled_ids.push(i);
            self.sample.push(hosts[i].clone());
        }
        let fitting = self
            .sample
            .iter()
            .filter(|h| self.policy.fits_any(h, req, env))
            .count();
        self.controller
            .record(&req.flavor, self.sample.len() as u64, fitting as u64);
        let pick = match self.policy.rank(&self.sample, req, env, rng, 1, out) {
            Ok(()) => out.first().map(|j| self.sampled_ids[*j]),
            Err(_) => None,
        };
        (pick, self.sample.len() as u64)
    }
}
