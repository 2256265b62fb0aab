//! Failed operations waiting for their instance's allocations to be read in Placement: the
//! notification ingest queues them, the Placement sync task reads and settles them between
//! syncs (`placement::check_failed`, `Ledger::settle_failed`).

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

/// Most failed operations waiting for their Placement read; more are refused (the caller
/// logs it), and their claims left to the TTL and the sync's repair.
pub const MAX_FAILED_CHECKS: usize = 1024;

/// The queue of failed operations, oldest first, each with the failure's time.
#[derive(Debug, Default)]
pub struct FailedChecks {
    queue: Mutex<VecDeque<(String, i64)>>,
    notify: tokio::sync::Notify,
    /// Whether a sync task reads them: Placement enabled with Parasol's claims in it.
    read: AtomicBool,
}

impl FailedChecks {
    /// A sync task reads the queue from now on.
    pub fn enable(&self) {
        self.read.store(true, Ordering::Release);
    }

    /// Nova reported at `at_ms` (this process' clock) that an operation on `instance` failed
    /// after the scheduler claimed for it. `Some(true)` queued; `Some(false)` when the queue is
    /// full; `None` when no sync task reads it (Placement off, or Parasol's claims not in it).
    pub fn push(&self, instance: &str, at_ms: i64) -> Option<bool> {
        if !self.read.load(Ordering::Acquire) {
            return None;
        }
        let mut queue = self.queue.lock();
        if queue.len() >= MAX_FAILED_CHECKS {
            return Some(false);
        }
        queue.push_back((instance.to_string(), at_ms));
        drop(queue);
        self.notify.notify_one();
        Some(true)
    }

    /// The failed operations waiting, oldest first.
    pub fn take(&self) -> Vec<(String, i64)> {
        self.queue.lock().drain(..).collect()
    }

    /// Resolves once a failed operation waits (one wake-up kept when nobody waits).
    pub async fn waiting(&self) {
        self.notify.notified().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_queued_until_a_reader_is_enabled_and_never_past_the_bound() {
        let checks = FailedChecks::default();
        assert_eq!(checks.push("a", 1), None);
        assert!(checks.take().is_empty());
        checks.enable();
        for i in 0..MAX_FAILED_CHECKS {
            assert_eq!(checks.push(&format!("i{i}"), i as i64), Some(true));
        }
        assert_eq!(checks.push("over", 0), Some(false));
        let taken = checks.take();
        assert_eq!(taken.len(), MAX_FAILED_CHECKS);
        assert_eq!(taken[0], ("i0".to_string(), 0));
        assert_eq!(checks.push("again", 5), Some(true));
    }
}
