//! An injectable clock: the service uses the system clock, tests and the simulator a manual one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// A sleep on some clock.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Source of wall-clock time in milliseconds since the Unix epoch, and of the sleeps every
/// scheduler interval (cache refresh, ASC's τ, APSR's round) waits on.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ms(&self) -> i64;

    /// Resolves once `ms` milliseconds of this clock have passed.
    fn sleep_ms(&self, ms: u64) -> Sleep;
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }

    fn sleep_ms(&self, ms: u64) -> Sleep {
        Box::pin(tokio::time::sleep(Duration::from_millis(ms)))
    }
}

/// A clock that moves only when told to; its sleeps end when it has been moved far enough.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<watch::Sender<i64>>);

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new(0)
    }
}

impl ManualClock {
    pub fn new(start_ms: i64) -> Self {
        ManualClock(Arc::new(watch::Sender::new(start_ms)))
    }

    pub fn advance_ms(&self, ms: i64) {
        self.0.send_modify(|now| *now += ms);
    }

    pub fn set_ms(&self, ms: i64) {
        self.0.send_replace(ms);
    }

    /// Sleeps on this clock that have not ended yet, so a test can tell that a task waits
    /// on the clock (and not on the system's time) before it moves the clock.
    pub fn sleepers(&self) -> usize {
        self.0.receiver_count()
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        *self.0.borrow()
    }

    fn sleep_ms(&self, ms: u64) -> Sleep {
        let mut rx = self.0.subscribe();
        let until = *rx.borrow() + i64::try_from(ms).unwrap_or(i64::MAX);
        Box::pin(async move {
            // An error means the clock is gone: nothing will ever wake this sleep.
            if rx.wait_for(|now| *now >= until).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_manual_sleep_ends_only_when_the_clock_has_moved_far_enough() {
        let clock = ManualClock::new(1_000);
        let mut sleep = clock.sleep_ms(500);
        assert!(futures::poll!(&mut sleep).is_pending());
        clock.advance_ms(499);
        tokio::task::yield_now().await;
        assert!(futures::poll!(&mut sleep).is_pending());
        clock.advance_ms(1);
        tokio::time::timeout(Duration::from_secs(5), sleep)
            .await
            .expect("the sleep ends at its deadline");
        assert_eq!(clock.now_ms(), 1_500);
        // A clock set past the deadline wakes a sleep too; a zero sleep ends at once.
        let sleep = clock.sleep_ms(10_000);
        clock.set_ms(20_000);
        tokio::time::timeout(Duration::from_secs(5), sleep)
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), clock.sleep_ms(0))
            .await
            .unwrap();
    }
}
