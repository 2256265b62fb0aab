//! The order of each host's host-state events, and the counts of what host registration
//! did beside the usual (`node_replaced`, `host_events_older`), for `/v1/stats` and
//! `/metrics`.
//!
//! An event sent before the newest one applied for its compute node (by the envelope's
//! `timestamp`, `Notification::sent_ms`) is older: it still counts as a heartbeat (liveness
//! is by the time an event is received) but changes neither the host's inventory nor its
//! state. A host whose events stay older for longer than `[policy] host_timeout_s` had its
//! clock set back: its events are taken again from then on, logged once. Kept per process,
//! in memory: after a start the first event of each host sets its clock.

use super::HostTable;
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use std::sync::atomic::{AtomicI64, Ordering};

/// What [`HostTable::event_order`] made of a host-state event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventOrder {
    /// As new as the newest applied, or newer, or of no known time: applied.
    Current,
    /// Sent before the newest applied: a heartbeat only.
    Older,
}

/// A compute node's newest event time applied (ms), and since when (the service's clock)
/// its events have been older than that.
#[derive(Clone, Copy, Debug)]
struct EventClock {
    newest_ms: i64,
    older_since_ms: Option<i64>,
}

/// The counters of host registration, shared with `/metrics` (clones count together).
#[derive(Clone, Debug, Default)]
pub struct HostCounters {
    /// Registrations whose (host, node) another compute node held: that node was replaced
    /// (its row taken over) or retired beside the new one.
    pub node_replaced: Counter,
    /// Host-state events older than the newest applied of their compute node.
    pub older_events: Counter,
}

/// [`HostTable`]'s part: per compute node uuid, its clock; and after how long older events
/// are taken (`host_timeout_s`).
#[derive(Debug)]
pub(super) struct EventClocks {
    clocks: Mutex<super::FastMap<String, EventClock>>,
    reset_after_ms: AtomicI64,
    pub(super) counters: HostCounters,
}

impl Default for EventClocks {
    fn default() -> Self {
        EventClocks {
            clocks: Mutex::default(),
            // `[policy] host_timeout_s`'s default, until the service sets its own.
            reset_after_ms: AtomicI64::new(60_000),
            counters: HostCounters::default(),
        }
    }
}

impl HostTable {
    /// After how long a host's events may stay older before they are taken again (its
    /// clock was set back): `[policy] host_timeout_s`.
    pub fn set_event_clock_reset_after_ms(&self, ms: i64) {
        self.events.reset_after_ms.store(ms, Ordering::Relaxed);
    }

    /// The counters of host registration.
    pub fn host_counters(&self) -> &HostCounters {
        &self.events.counters
    }

    /// Whether a host-state event of compute node `uuid` sent at `sent_ms`, received at
    /// `now_ms` (the service's clock), is as new as the newest applied (which it becomes) or
    /// older. An event without a time is current and leaves the clock as it is.
    pub fn event_order(&self, uuid: &str, sent_ms: Option<i64>, now_ms: i64) -> EventOrder {
        let Some(sent_ms) = sent_ms else {
            return EventOrder::Current;
        };
        let mut clocks = self.events.clocks.lock();
        let Some(clock) = clocks.get_mut(uuid) else {
            clocks.insert(
                uuid.to_string(),
                EventClock {
                    newest_ms: sent_ms,
                    older_since_ms: None,
                },
            );
            return EventOrder::Current;
        };
        if sent_ms >= clock.newest_ms {
            *clock = EventClock {
                newest_ms: sent_ms,
                older_since_ms: None,
            };
            return EventOrder::Current;
        }
        let since = *clock.older_since_ms.get_or_insert(now_ms);
        let reset_after = self.events.reset_after_ms.load(Ordering::Relaxed);
        if now_ms.saturating_sub(since) > reset_after {
            tracing::warn!(
                compute_node = %uuid,
                newest_ms = clock.newest_ms,
                sent_ms,
                older_for_ms = now_ms - since,
                "a host's events stayed older than its newest for longer than host_timeout_s: \
                 its clock was set back; its events are taken again"
            );
            *clock = EventClock {
                newest_ms: sent_ms,
                older_since_ms: None,
            };
            return EventOrder::Current;
        }
        EventOrder::Older
    }
}
