//! The HTTP surface against a real ledger: every test on a fresh SQLite file and on its own
//! database of the running PostgreSQL.

#[path = "../support/plugin_server.rs"]
mod plugin_server;
#[path = "../support/mod.rs"]
mod support;
#[path = "../support/tls_front.rs"]
mod tls_front;
#[path = "../support/venv.rs"]
mod venv;

mod apsr;
mod auth;
mod backends;
mod bad_input;
mod batch;
mod claim_ttl;
mod concurrency;
mod flex;
mod helpers;
mod host_events;
mod hosts_paging;
mod metrics;
mod monitor_metrics;
mod moves;
mod notifications;
mod plugin_examples;
mod plugin_transport;
mod plugins;
#[cfg(feature = "wasm-plugins")]
mod plugins_wasm;
mod prometheus;
mod ready;
mod rebalance;
mod redaction;
mod regressions;
mod select_destinations;
