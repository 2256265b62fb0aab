//! Nova's scheduler RPC on RabbitMQ, answered as nova-scheduler does (oslo.messaging's rabbit
//! driver, RPC server and dispatcher), so nova-conductor talks to Parasol unchanged.
//!
//! # Layout
//! - `topology`: the `nova` topic exchange and the queues `scheduler` and `scheduler.<host>`.
//! - `dispatch`: oslo's dispatcher rules (namespace, version, method) → an [`Action`].
//! - `dedup`: the bounded memory of `_unique_id`s that drops redelivered duplicates.
//! - `server`: consume, ack, one task per call, reply, heartbeat, dead-letter, reconnect.
//! - `counters`: what the server did, by outcome.
//! - `client`: a minimal oslo RPC client for tests and benchmarks.

pub mod client;
mod counters;
mod dedup;
mod dispatch;
mod server;
mod topology;

pub use client::{CallReply, ClientError, RpcClient};
pub use counters::RpcCounters;
pub use dedup::Dedup;
pub use dispatch::{route, Action, Refusal, BASEAPI_NAMESPACE, BASEAPI_VERSION, SCHEDULER_VERSION};
pub use server::{run_rpc_server, RpcError};
pub use topology::{declare_rpc_topology, server_queue};

use crate::startup::AppState;
use actix_web::web;
use std::sync::Arc;

/// Starts the RPC server when `[rpc] enabled`; it reconnects forever. Returns its counters.
pub fn spawn_rpc_server(state: web::Data<AppState>) -> Option<Arc<RpcCounters>> {
    let settings = state.scheduler.settings();
    if !settings.rpc.enabled {
        return None;
    }
    let counters = Arc::new(RpcCounters::default());
    let shared = state.into_inner();
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let c = counters.clone();
    // The sender lives as long as the task: the server runs until the process ends.
    tokio::spawn(async move {
        run_rpc_server(shared, c, shutdown).await;
        drop(stop);
    });
    Some(counters)
}
