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
pub struct ManualClock(Arc<watch::Sender<i64>>, Arc<Deadlines>);

/// The deadlines of the sleeps pending on a [`ManualClock`], by sleep.
#[derive(Debug, Default)]
struct Deadlines {
    next: std::sync::atomic::AtomicU64,
    pending: parking_lot::Mutex<std::collections::BTreeMap<u64, i64>>,
}

/// Removes its sleep's deadline when the sleep ends or is dropped.
struct Pending(Arc<Deadlines>, u64);

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.pending.lock().remove(&self.1);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new(0)
    }
}

impl ManualClock {
    pub fn new(start_ms: i64) -> Self {
        ManualClock(
            Arc::new(watch::Sender::new(start_ms)),
            Arc::new(Deadlines::default()),
        )
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

    /// When the sleeps pending on this clock end, earliest first: a test knows a task has
    /// armed its next wake-up (and when it will come) without waiting in real time, and that
    /// moving the clock short of every deadline wakes nobody.
    pub fn deadlines(&self) -> Vec<i64> {
        let mut all: Vec<i64> = self.1.pending.lock().values().copied().collect();
        all.sort_unstable();
        all
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        *self.0.borrow()
    }

    fn sleep_ms(&self, ms: u64) -> Sleep {
        let mut rx = self.0.subscribe();
        let until = rx
            .borrow()
            .saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
        let id = self
            .1
            .next
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.1.pending.lock().insert(id, until);
        let pending = Pending(self.1.clone(), id);
        Box::pin(async move {
            let _pending = pending;
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

    #[tokio::test]
    async fn a_manual_clock_lists_the_deadlines_of_its_pending_sleeps() {
        let clock = ManualClock::new(1_000);
        let late = clock.sleep_ms(5_000);
        let early = clock.sleep_ms(200);
        assert_eq!(clock.deadlines(), vec![1_200, 6_000]);
        clock.advance_ms(200);
        tokio::time::timeout(Duration::from_secs(5), early)
            .await
            .unwrap();
        assert_eq!(clock.deadlines(), vec![6_000], "an ended sleep is gone");
        drop(late);
        assert!(clock.deadlines().is_empty(), "so is a dropped one");
    }
}
