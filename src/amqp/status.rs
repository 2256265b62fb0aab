//! [`BrokerStatus`]: whether the broker connection is up, for `/healthz`, `/v1/stats` and
//! the `broker_connected` gauge on `/metrics`.

use parking_lot::Mutex;
use prometheus_client::metrics::gauge::Gauge;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The broker connection's state, shared by the notification consumer and the RPC server.
#[derive(Debug, Default)]
pub struct BrokerStatus {
    configured: AtomicBool,
    connected: AtomicBool,
    /// Connection attempts since start (each failure waits a capped, doubling delay).
    connect_attempts: AtomicU64,
    /// The delay before the next attempt, in ms, while disconnected.
    retry_in_ms: AtomicU64,
    // parking_lot: held to copy or replace one string, never across an await.
    last_error: Mutex<Option<String>>,
    /// The fanout queues the consumer declared (one per process, kept across reconnects),
    /// so that whoever started it (a benchmark, a test) can delete them.
    fanout_queues: Mutex<Vec<String>>,
    /// `/metrics`' `broker_connected`, when registered.
    gauge: Gauge,
}

impl BrokerStatus {
    /// A status that also drives `gauge` (1 while connected).
    pub fn new(gauge: Gauge) -> Self {
        BrokerStatus {
            gauge,
            ..BrokerStatus::default()
        }
    }

    /// A consumer of the broker was started.
    pub fn set_configured(&self) {
        self.configured.store(true, Ordering::Relaxed);
    }

    pub fn is_configured(&self) -> bool {
        self.configured.load(Ordering::Relaxed)
    }

    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// A connection attempt starts.
    pub fn attempt(&self) {
        self.connect_attempts.fetch_add(1, Ordering::Relaxed);
    }

    /// The connection is up: the last error and the retry delay are cleared.
    pub fn connected(&self) {
        self.connected.store(true, Ordering::Relaxed);
        self.retry_in_ms.store(0, Ordering::Relaxed);
        *self.last_error.lock() = None;
        self.gauge.set(1);
    }

    /// The connection ended (on purpose or not).
    pub fn disconnected(&self) {
        self.connected.store(false, Ordering::Relaxed);
        self.gauge.set(0);
    }

    /// The connection failed with `error`; the next attempt comes in `retry_in_ms`.
    pub fn failed(&self, error: String, retry_in_ms: u64) {
        self.disconnected();
        self.retry_in_ms.store(retry_in_ms, Ordering::Relaxed);
        *self.last_error.lock() = Some(error);
    }

    /// The consumer declared fanout queue `name`.
    pub fn declared_fanout(&self, name: &str) {
        let mut queues = self.fanout_queues.lock();
        if !queues.iter().any(|q| q == name) {
            queues.push(name.to_string());
        }
    }

    /// Every fanout queue the consumer declared so far, in order.
    pub fn fanout_queues(&self) -> Vec<String> {
        self.fanout_queues.lock().clone()
    }

    pub fn to_json(&self) -> Value {
        json!({
            "configured": self.is_configured(),
            "connected": self.is_connected(),
            "connect_attempts": self.connect_attempts.load(Ordering::Relaxed),
            "retry_in_s": self.retry_in_ms.load(Ordering::Relaxed) as f64 / 1000.0,
            "last_error": *self.last_error.lock(),
        })
    }
}
