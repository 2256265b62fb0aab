//! A sliding window of counters and latencies made of six rotating sub-buckets.

use super::{histogram, Counts};
use hdrhistogram::Histogram;

const SLOTS: usize = 6;

#[derive(Debug)]
pub(super) struct Window {
    slot_ms: i64,
    slots: Vec<Slot>,
}

#[derive(Debug)]
struct Slot {
    /// Index of the sub-interval this slot holds (time / slot_ms), -1 when unused.
    epoch: i64,
    counts: Counts,
    latency_us: Histogram<u64>,
}

impl Window {
    pub(super) fn new(window_ms: i64) -> Self {
        let slots = (0..SLOTS)
            .map(|_| Slot {
                epoch: -1,
                counts: Counts::default(),
                latency_us: histogram(),
            })
            .collect();
        Window {
            slot_ms: (window_ms / SLOTS as i64).max(1),
            slots,
        }
    }

    pub(super) fn record(&mut self, now_ms: i64, delta: &Counts, latency_us: Option<u64>) {
        let epoch = now_ms.div_euclid(self.slot_ms);
        let slot = &mut self.slots[epoch.rem_euclid(SLOTS as i64) as usize];
        if slot.epoch != epoch {
            slot.epoch = epoch;
            slot.counts = Counts::default();
            slot.latency_us.reset();
        }
        slot.counts.add(delta);
        if let Some(us) = latency_us {
            let _ = slot.latency_us.record(us.max(1));
        }
    }

    /// Counters and latencies of the slots still inside the window, and its length in seconds.
    pub(super) fn view(&self, now_ms: i64) -> (Counts, Histogram<u64>, f64) {
        let epoch = now_ms.div_euclid(self.slot_ms);
        let mut counts = Counts::default();
        let mut h = histogram();
        for slot in &self.slots {
            if slot.epoch >= 0 && epoch - slot.epoch < SLOTS as i64 {
                counts.add(&slot.counts);
                let _ = h.add(&slot.latency_us);
            }
        }
        (counts, h, (self.slot_ms * SLOTS as i64) as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_slots_leave_the_window() {
        let mut w = Window::new(60_000);
        let one = Counts {
            requests: 1,
            ..Counts::default()
        };
        w.record(0, &one, Some(10));
        w.record(30_000, &one, Some(20));
        assert_eq!(w.view(30_000).0.requests, 2);
        assert_eq!(w.view(65_000).0.requests, 1);
        assert_eq!(w.view(200_000).0.requests, 0);
    }
}
