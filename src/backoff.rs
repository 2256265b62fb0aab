//! Capped exponential backoff for reconnecting to the broker.

use std::time::Duration;

/// Delays doubling from `min` up to `max`; `reset` after a successful connection.
#[derive(Clone, Debug)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            min,
            max: max.max(min),
            next: min,
        }
    }

    /// The delay to wait now; the following one doubles, up to the cap.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        d
    }

    /// [`Backoff::next_delay`] in whole milliseconds, as a clock sleeps (`Clock::sleep_ms`).
    pub fn next_delay_ms(&mut self) -> u64 {
        u64::try_from(self.next_delay().as_millis()).unwrap_or(u64::MAX)
    }

    pub fn reset(&mut self) {
        self.next = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(500), Duration::from_secs(3));
        let got: Vec<u128> = (0..5).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(got, vec![500, 1000, 2000, 3000, 3000]);
        b.reset();
        assert_eq!(b.next_delay().as_millis(), 500);
    }
}
