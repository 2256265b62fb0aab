//! Flex's estimation penalty P (seed 002, eq. 13 and Alg. 3 `PeriodicEstimationPenaltyUpdate`):
//! a host is judged by P·L̂ (its measured usage L̂ inflated by P) instead of by what its
//! instances requested. Once per period, with the cluster's QoS Q(t) of eq. 14 and target ρ:
//!
//! - Q(t) > ρ: P ← max(α·P, P_min) (line 21: QoS holds, admit a little more);
//! - Q(t) < ρ and Q(t) < Q(t − 1): P ← P + β·(P − 1) (line 23: QoS is falling, back off
//!   fast; β = 1 doubles the overestimate P − 1, as §4.3 says);
//! - otherwise P stays (Q(t) = ρ, or Q below target but recovering).
//!
//! Where the paper disagrees with itself: §4.2's prose increases by β·(P − P_min), Alg. 3 and
//! §4.3 by β·(P − 1). They coincide at §5.1's P_min = 1, so both readings give the same
//! reproduction; this follows Alg. 3. The first period has no Q(t − 1): a drop below ρ then
//! counts as falling (nothing was known to be better). A period with no instances has no Q
//! (eq. 14 is 0/0): P stays, since an idle cloud shows nothing about the estimator (§4.3 lets
//! an empty queue decay P, which is what P_min guards against; we do not decay on silence).
//! P is also capped at `p_max`, which the paper does not have.

use serde::Serialize;

use super::error::ControlError;
use super::flex_params::FlexParams;
use super::history::History;

/// What one period did to P.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PenaltyStep {
    /// QoS above target: P decayed by α (or held at P_min).
    Decreased,
    /// QoS below target and falling: P grew by β·(P − 1) (or held at P_max).
    Increased,
    /// Neither rule applied, or the period had no QoS to judge.
    Unchanged,
}

/// One period's decision, for stats and plots.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FlexPeriod {
    /// Time since the controller started at the end of the period, in ms.
    pub at_ms: u64,
    /// Q(t), `None` when the period had no instances to judge.
    pub qos: Option<f64>,
    /// P after the period.
    pub penalty: f64,
    /// Which rule of Alg. 3 applied.
    pub step: PenaltyStep,
}

/// Adapts the estimation penalty P to the cluster's QoS. The caller measures Q(t) once per
/// [`FlexParams::update_period_ms`] and calls [`Self::on_period`].
#[derive(Clone, Debug)]
pub struct FlexController {
    params: FlexParams,
    penalty: f64,
    last_qos: Option<f64>,
    elapsed_ms: u64,
    history: History<FlexPeriod>,
}

impl FlexController {
    /// A controller starting at `p_start`.
    pub fn new(params: FlexParams) -> Result<Self, ControlError> {
        params.validate()?;
        Ok(FlexController {
            penalty: params.p_start,
            params,
            last_qos: None,
            elapsed_ms: 0,
            history: History::default(),
        })
    }

    /// The current penalty P.
    pub fn penalty(&self) -> f64 {
        self.penalty
    }

    /// The parameters the controller runs with.
    pub fn params(&self) -> &FlexParams {
        &self.params
    }

    /// The decisions so far, oldest first (bounded).
    pub fn history(&self) -> &History<FlexPeriod> {
        &self.history
    }

    /// Ends a period whose cluster QoS was `qos` (eq. 14, in [0, 1]; `None` when no instance
    /// was judged); returns the penalty for the next period. A `qos` outside [0, 1] or NaN is
    /// a caller's bug and is treated as no signal.
    pub fn on_period(&mut self, qos: Option<f64>) -> f64 {
        self.elapsed_ms = self.elapsed_ms.saturating_add(self.params.update_period_ms);
        let qos = qos.filter(|q| (0.0..=1.0).contains(q));
        let step = match qos {
            Some(q) if q > self.params.qos_target => {
                self.penalty = (self.penalty * self.params.alpha).max(self.params.p_min);
                PenaltyStep::Decreased
            }
            Some(q) if q < self.params.qos_target && self.last_qos.is_none_or(|last| q < last) => {
                let grown = self.penalty + self.params.beta * (self.penalty - 1.0);
                self.penalty = grown.min(self.params.p_max);
                PenaltyStep::Increased
            }
            _ => PenaltyStep::Unchanged,
        };
        if qos.is_some() {
            self.last_qos = qos;
        }
        self.history.push(FlexPeriod {
            at_ms: self.elapsed_ms,
            qos,
            penalty: self.penalty,
            step,
        });
        self.penalty
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paper() -> FlexController {
        FlexController::new(FlexParams::paper()).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn a_hand_computed_qos_sequence_gives_algorithm_3s_penalties() {
        // P0 = 1.5, α = 0.99, β = 1, ρ = 0.99, P_min = 1 (§5.1).
        let mut flex = paper();
        let steps = [
            // Q above ρ: P ← 0.99·P.
            (Some(1.0), 1.5 * 0.99, PenaltyStep::Decreased),
            (Some(0.995), 1.5 * 0.99 * 0.99, PenaltyStep::Decreased),
            // Q below ρ and below the last Q: P ← P + (P − 1).
            (
                Some(0.98),
                1.5 * 0.99 * 0.99 * 2.0 - 1.0,
                PenaltyStep::Increased,
            ),
            // Below ρ but recovering (0.985 > 0.98): unchanged.
            (
                Some(0.985),
                1.5 * 0.99 * 0.99 * 2.0 - 1.0,
                PenaltyStep::Unchanged,
            ),
            // Exactly ρ: neither rule.
            (
                Some(0.99),
                1.5 * 0.99 * 0.99 * 2.0 - 1.0,
                PenaltyStep::Unchanged,
            ),
            // Falling again (0.97 < 0.99).
            (
                Some(0.97),
                (1.5 * 0.99 * 0.99 * 2.0 - 1.0) * 2.0 - 1.0,
                PenaltyStep::Increased,
            ),
            // No instances: no signal, and Q(t − 1) stays 0.97.
            (
                None,
                (1.5 * 0.99 * 0.99 * 2.0 - 1.0) * 2.0 - 1.0,
                PenaltyStep::Unchanged,
            ),
            (
                Some(0.96),
                ((1.5 * 0.99 * 0.99 * 2.0 - 1.0) * 2.0 - 1.0) * 2.0 - 1.0,
                PenaltyStep::Increased,
            ),
        ];
        for (i, (qos, want, step)) in steps.into_iter().enumerate() {
            let got = flex.on_period(qos);
            assert!(close(got, want), "period {i}: P = {got}, want {want}");
            assert_eq!(flex.history().last().unwrap().step, step, "period {i}");
        }
        assert_eq!(flex.history().iter().len(), steps.len());
        assert_eq!(flex.history().last().unwrap().at_ms, 8 * 60_000);
    }

    #[test]
    fn p_never_goes_below_p_min() {
        for params in [FlexParams::paper(), FlexParams::default()] {
            let p_min = params.p_min;
            let mut flex = FlexController::new(params).unwrap();
            for _ in 0..10_000 {
                assert!(flex.on_period(Some(1.0)) >= p_min);
            }
            assert!(close(flex.penalty(), p_min));
        }
    }

    #[test]
    fn with_the_papers_p_min_of_1_the_penalty_can_never_rise_again() {
        // Alg. 3's increase is P + β(P − 1): at P = 1 it adds nothing. Decay to the floor,
        // then let QoS collapse period after period.
        let mut flex = paper();
        while flex.penalty() > 1.0 {
            flex.on_period(Some(1.0));
        }
        let mut qos = 0.98;
        for _ in 0..100 {
            flex.on_period(Some(qos));
            qos -= 0.005;
        }
        assert_eq!(
            flex.penalty(),
            1.0,
            "stuck at P_min = 1 despite falling QoS"
        );

        // The service's floor above 1 lets it back off.
        let mut flex = FlexController::new(FlexParams::default()).unwrap();
        while flex.penalty() > flex.params().p_min {
            flex.on_period(Some(1.0));
        }
        flex.on_period(Some(0.98));
        assert!(close(flex.penalty(), 1.2), "1.1 + (1.1 − 1) = 1.2");
    }

    #[test]
    fn p_max_caps_the_growth() {
        let mut flex = FlexController::new(FlexParams::default()).unwrap();
        let mut qos = 0.98;
        for _ in 0..20 {
            flex.on_period(Some(qos));
            qos -= 0.01;
        }
        assert_eq!(flex.penalty(), 4.0);
    }

    #[test]
    fn a_qos_outside_0_1_is_no_signal() {
        let mut flex = paper();
        for bad in [f64::NAN, -0.5, 1.5] {
            assert_eq!(flex.on_period(Some(bad)), 1.5);
        }
        assert!(flex.history().iter().all(|p| p.qos.is_none()));
    }
}
