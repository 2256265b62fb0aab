//! APSR in slot time: each scheduler samples d distinct hosts (d queries), keeps those that
//! fit, and picks one uniformly (the library's `random` ranking over the sample); the
//! controller re-plans (s, d) every T slots from the estimated k.

use super::policy;
use parasol::control::{ApsrController, ApsrParams, ControlError, Plan};
use parasol::domain::{HostState, RequestContext};
use parasol::policy::{Algorithm, FilterEnv, Policy, RankArgs, TieBreak};
use rand::Rng;

/// APSR in the simulator: the library's parameters (ε, B, α, cap) and the round length in
/// slots (T; the parameters' `round_interval_ms` is wall time and unused here).
#[derive(Clone, Debug, PartialEq)]
pub struct ApsrSetup {
    pub params: ApsrParams,
    pub round_slots: u64,
}

impl Default for ApsrSetup {
    /// docs/architecture.md §10 A: ε = 5 %, B = n, T = 10 slots, α = 0.1, no cap on s beyond the model's.
    fn default() -> Self {
        ApsrSetup {
            params: ApsrParams {
                max_schedulers: u64::MAX,
                ..ApsrParams::default()
            },
            round_slots: 10,
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
    /// Errs when the parameters are invalid (ε outside (0, 1), …).
    pub fn new(n_hosts: usize, setup: &ApsrSetup) -> Result<Self, ControlError> {
        // The paper's B = n at every size, where the service caps an unset budget
        // (`parasol::control::DEFAULT_BUDGET_CAP`).
        let params = ApsrParams {
            budget: Some(setup.params.budget.unwrap_or(n_hosts as u64)),
            ..setup.params.clone()
        };
        let controller = ApsrController::new(params, n_hosts as u64)?;
        let plan = controller.plan();
        Ok(ApsrScheduler {
            policy: policy::build(Algorithm::Random, TieBreak::HostOrder),
            controller,
            plan,
            sample: Vec::new(),
            sampled_ids: Vec::new(),
        })
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

    /// The hosts one decision samples out of `n_hosts`: the plan's d, at least 1, at most n.
    pub fn sample_size(&self, n_hosts: usize) -> usize {
        (self.plan.hosts_per_scheduler as usize).clamp(1, n_hosts.max(1))
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
        let d = self.sample_size(hosts.len());
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
        let pick = match self
            .policy
            .rank(&self.sample, RankArgs { req, env, max: 1 }, rng, out)
        {
            Ok(()) => out.first().map(|j| self.sampled_ids[*j]),
            Err(_) => None,
        };
        (pick, self.sample.len() as u64)
    }
}
