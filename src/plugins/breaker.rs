//! A plugin's circuit breaker (docs/plugins.md §4), so that a dead plugin costs one timeout,
//! not one per call: after `[plugins] breaker_failures` failures in a row it *opens* and the
//! plugin is not called for `breaker_open_s` of the injected clock (an ignorable plugin is
//! skipped, another one fails the call at once); then it is *half-open*: one trial call goes
//! through, the others are spared meanwhile; the trial's success closes it, its failure opens
//! it again. The state is mirrored in the plugin's figures (`PluginStats::set_breaker`).

use crate::clock::SharedClock;
use crate::stats::{BreakerState, PluginStats};
use parking_lot::Mutex;
use std::sync::Arc;

/// Whether a call may go to the plugin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Call it.
    Call,
    /// Do not: the breaker is open (or half-open with its trial under way).
    Spare,
}

#[derive(Debug)]
enum Phase {
    Closed,
    Open {
        until_ms: i64,
    },
    /// A trial call went out at `since_ms`.
    HalfOpen {
        since_ms: i64,
    },
}

#[derive(Debug)]
struct State {
    failures: u32,
    phase: Phase,
}

/// One plugin's breaker. Built with each configuration: a reload (the operator's fix) starts
/// it closed.
#[derive(Debug)]
pub struct Breaker {
    /// 0: never opens.
    failures_to_open: u32,
    open_ms: i64,
    clock: SharedClock,
    stats: Arc<PluginStats>,
    // parking_lot's lock: held for a few comparisons, never across an await.
    state: Mutex<State>,
}

impl Breaker {
    pub fn new(
        failures_to_open: u32,
        open_s: u64,
        clock: SharedClock,
        stats: Arc<PluginStats>,
    ) -> Self {
        stats.set_breaker(BreakerState::Closed);
        Breaker {
            failures_to_open,
            open_ms: i64::try_from(open_s.saturating_mul(1000)).unwrap_or(i64::MAX),
            clock,
            stats,
            state: Mutex::new(State {
                failures: 0,
                phase: Phase::Closed,
            }),
        }
    }

    /// Whether this call may go to the plugin. Past the cool-down the first call is the
    /// trial; a trial that never reported back (its call dropped) is replaced after another
    /// cool-down.
    pub fn admit(&self) -> Admit {
        let now = self.clock.now_ms();
        let mut state = self.state.lock();
        let spare_until = match state.phase {
            Phase::Closed => return Admit::Call,
            Phase::Open { until_ms } => until_ms,
            Phase::HalfOpen { since_ms } => since_ms.saturating_add(self.open_ms),
        };
        if now < spare_until {
            return Admit::Spare;
        }
        state.phase = Phase::HalfOpen { since_ms: now };
        self.stats.set_breaker(BreakerState::HalfOpen);
        Admit::Call
    }

    /// How long an open breaker spares its plugin, in seconds.
    pub fn open_s(&self) -> i64 {
        self.open_ms / 1000
    }

    /// The plugin answered (approved, changed or denied): the breaker closes.
    pub fn success(&self) {
        let mut state = self.state.lock();
        state.failures = 0;
        if !matches!(state.phase, Phase::Closed) {
            state.phase = Phase::Closed;
            self.stats.set_breaker(BreakerState::Closed);
        }
    }

    /// The plugin failed; the breaker opens at the `failures_to_open`-th failure in a row, or
    /// at a failed trial. Whether it is open now.
    pub fn failure(&self) -> bool {
        if self.failures_to_open == 0 {
            return false;
        }
        let now = self.clock.now_ms();
        let mut state = self.state.lock();
        state.failures = state.failures.saturating_add(1);
        let trial = matches!(state.phase, Phase::HalfOpen { .. });
        if trial || state.failures >= self.failures_to_open {
            state.phase = Phase::Open {
                until_ms: now.saturating_add(self.open_ms),
            };
            self.stats.set_breaker(BreakerState::Open);
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::stats::Stats;

    fn breaker(failures: u32, open_s: u64) -> (Breaker, ManualClock, Arc<PluginStats>) {
        let clock = ManualClock::new(1_000_000);
        let stats = Stats::new(Arc::new(clock.clone()), 60).plugin("filter", "p");
        let b = Breaker::new(failures, open_s, Arc::new(clock.clone()), stats.clone());
        (b, clock, stats)
    }

    #[test]
    fn it_opens_after_n_failures_in_a_row_and_a_success_resets_the_count() {
        let (b, _clock, stats) = breaker(3, 30);
        assert!(!b.failure());
        assert!(!b.failure());
        b.success();
        assert!(!b.failure());
        assert!(!b.failure());
        assert_eq!(b.admit(), Admit::Call);
        assert!(b.failure(), "the third failure in a row opens it");
        assert_eq!(b.admit(), Admit::Spare);
        assert_eq!(stats.breaker(), BreakerState::Open);
        assert_eq!(stats.trips(), 1);
    }

    #[test]
    fn after_the_cool_down_one_trial_goes_through_and_decides() {
        let (b, clock, stats) = breaker(1, 30);
        assert!(b.failure());
        clock.advance_ms(29_999);
        assert_eq!(b.admit(), Admit::Spare);
        clock.advance_ms(1);
        assert_eq!(b.admit(), Admit::Call, "the trial");
        assert_eq!(stats.breaker(), BreakerState::HalfOpen);
        assert_eq!(b.admit(), Admit::Spare, "others wait for the trial");
        assert!(b.failure(), "a failed trial opens it again");
        assert_eq!((stats.breaker(), stats.trips()), (BreakerState::Open, 2));
        clock.advance_ms(30_000);
        assert_eq!(b.admit(), Admit::Call);
        b.success();
        assert_eq!(stats.breaker(), BreakerState::Closed);
        assert_eq!(b.admit(), Admit::Call);
        assert_eq!(b.admit(), Admit::Call);
    }

    #[test]
    fn a_trial_that_never_reports_is_replaced_after_another_cool_down() {
        let (b, clock, _) = breaker(1, 10);
        b.failure();
        clock.advance_ms(10_000);
        assert_eq!(b.admit(), Admit::Call);
        clock.advance_ms(9_999);
        assert_eq!(b.admit(), Admit::Spare);
        clock.advance_ms(1);
        assert_eq!(b.admit(), Admit::Call);
    }

    #[test]
    fn zero_failures_never_opens() {
        let (b, _, stats) = breaker(0, 30);
        for _ in 0..100 {
            assert!(!b.failure());
        }
        assert_eq!(b.admit(), Admit::Call);
        assert_eq!(stats.trips(), 0);
    }
}
