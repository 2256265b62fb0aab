//! The ASC loop's decision step (Adaptive Scheduler Cache, docs/architecture.md §4, after the
//! ASC paper): after each refresh interval τ, with r = declined / (declined + placed) over that
//! interval, r > th_decline → τ ← max(min, τ·speed_up_step);
//! r < th_low → τ ← min(max, τ·slow_down_step); otherwise τ stays. Shrink fast on an SLA
//! breach, grow slowly when quiet, as TCP's window.
//!
//! An interval with no requests at all leaves τ unchanged rather than counting as r = 0: a
//! quiet cloud has shown nothing about staleness, and growing τ then would leave it at the
//! maximum, with a stale cache, when traffic resumes.
//!
//! τ is kept as a real number so that repeated small steps (×1.1 on 1 ms) are not lost to
//! rounding; [`AscController::interval_ms`] rounds it.

use serde::Serialize;

use super::asc_params::AscParams;
use super::error::ControlError;
use super::history::History;

/// One decision, for stats and plots.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AscInterval {
    /// Time since the controller started at the end of the measured interval, in ms (the sum
    /// of the intervals decided so far; the caller adds its own start time if needed).
    pub at_ms: u64,
    /// The next interval τ, in ms.
    pub interval_ms: u64,
    /// The measured decline ratio r, `None` when the interval saw no requests.
    pub decline_ratio: Option<f64>,
}

/// Adapts the cache refresh interval to the observed decline ratio. Suitable for one cache;
/// the caller sleeps [`Self::interval_ms`], counts outcomes, and calls [`Self::on_interval`].
#[derive(Clone, Debug)]
pub struct AscController {
    params: AscParams,
    interval_ms: f64,
    elapsed_ms: f64,
    history: History<AscInterval>,
}

impl AscController {
    /// A controller starting at `start_interval_ms`.
    pub fn new(params: AscParams) -> Result<Self, ControlError> {
        params.validate()?;
        Ok(AscController {
            interval_ms: params.start_interval_ms as f64,
            params,
            elapsed_ms: 0.0,
            history: History::default(),
        })
    }

    /// Ends an interval in which `placed` requests were placed and `declined` declined;
    /// returns the next interval τ in ms.
    pub fn on_interval(&mut self, placed: u64, declined: u64) -> u64 {
        self.elapsed_ms += self.interval_ms;
        let total = placed.saturating_add(declined);
        let ratio = (total > 0).then(|| declined as f64 / total as f64);
        if let Some(r) = ratio {
            let params = &self.params;
            if r > params.th_decline {
                self.interval_ms =
                    (self.interval_ms * params.speed_up_step).max(params.min_interval_ms as f64);
            } else if r < params.th_low {
                let max = params.max_interval_ms.map_or(f64::MAX, |max| max as f64);
                self.interval_ms = (self.interval_ms * params.slow_down_step).min(max);
            }
        }
        self.history.push(AscInterval {
            at_ms: self.elapsed_ms as u64,
            interval_ms: self.interval_ms(),
            decline_ratio: ratio,
        });
        self.interval_ms()
    }

    /// The current refresh interval τ in ms (rounded; saturates at `u64::MAX` when unbounded).
    pub fn interval_ms(&self) -> u64 {
        self.interval_ms.round() as u64
    }

    pub fn params(&self) -> &AscParams {
        &self.params
    }

    /// The recent decisions, oldest first.
    pub fn history(&self) -> impl DoubleEndedIterator<Item = &AscInterval> + ExactSizeIterator {
        self.history.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn controller() -> AscController {
        AscController::new(AscParams::default()).unwrap()
    }

    #[test]
    fn breaching_the_sla_halves_the_interval_down_to_the_minimum() {
        let mut asc = controller();
        // r = 6/100 > 0.05.
        assert_eq!(asc.on_interval(94, 6), 30_000);
        let mut previous = asc.interval_ms();
        for _ in 0..20 {
            let next = asc.on_interval(0, 1);
            assert_eq!(next, (previous / 2).max(1_000));
            previous = next;
        }
        assert_eq!(asc.interval_ms(), 1_000);
    }

    #[test]
    fn rare_declines_grow_the_interval_by_a_tenth_up_to_the_maximum() {
        let params = AscParams {
            max_interval_ms: Some(80_000),
            ..AscParams::default()
        };
        let mut asc = AscController::new(params).unwrap();
        // r = 2/100 < 0.03.
        assert_eq!(asc.on_interval(98, 2), 66_000);
        assert_eq!(asc.on_interval(10, 0), 72_600);
        assert_eq!(asc.on_interval(10, 0), 79_860);
        assert_eq!(asc.on_interval(10, 0), 80_000);
        assert_eq!(asc.on_interval(10, 0), 80_000);
    }

    #[test]
    fn ratios_between_the_thresholds_keep_the_interval() {
        let mut asc = controller();
        for (placed, declined) in [(96, 4), (97, 3), (95, 5)] {
            assert_eq!(asc.on_interval(placed, declined), 60_000, "{declined}%");
        }
    }

    #[test]
    fn a_quiet_interval_keeps_the_interval_and_records_no_ratio() {
        let mut asc = controller();
        assert_eq!(asc.on_interval(0, 0), 60_000);
        let last = asc.history().last().copied().unwrap();
        assert_eq!(last.decline_ratio, None);
    }

    #[test]
    fn unbounded_growth_is_not_lost_to_rounding_and_never_overflows() {
        let params = AscParams {
            start_interval_ms: 1,
            min_interval_ms: 1,
            ..AscParams::default()
        };
        let mut asc = AscController::new(params).unwrap();
        assert_eq!(asc.on_interval(1, 0), 1);
        for _ in 0..10 {
            asc.on_interval(1, 0);
        }
        assert_eq!(asc.interval_ms(), (1.1_f64.powi(11)).round() as u64);
        for _ in 0..10_000 {
            asc.on_interval(1, 0);
        }
        assert_eq!(asc.interval_ms(), u64::MAX);
    }

    #[test]
    fn history_records_time_interval_and_ratio() {
        let mut asc = controller();
        asc.on_interval(90, 10);
        asc.on_interval(100, 0);
        let history: Vec<_> = asc.history().copied().collect();
        assert_eq!(
            history,
            vec![
                AscInterval {
                    at_ms: 60_000,
                    interval_ms: 30_000,
                    decline_ratio: Some(0.1)
                },
                AscInterval {
                    at_ms: 90_000,
                    interval_ms: 33_000,
                    decline_ratio: Some(0.0)
                },
            ]
        );
    }

    #[test]
    fn invalid_params_name_their_key() {
        let params = AscParams {
            th_low: 0.2,
            ..AscParams::default()
        };
        let err = AscController::new(params).unwrap_err();
        assert_eq!(err.subject(), Some("th_low"));
    }
}
