//! Nova's scheduler RPC on RabbitMQ, answered as nova-scheduler does (oslo.messaging's rabbit
//! driver, RPC server and dispatcher), so nova-conductor talks to Parasol unchanged.
//!
//! # Layout
//! - `topology`: the `nova` topic exchange and the queues `scheduler` and `scheduler.<host>`.
//! - `dispatch`: oslo's dispatcher rules (namespace, version, method) → an [`Action`].
//! - `dedup`: the bounded memory of `_unique_id`s that drops redelivered duplicates.
//! - `server`: consume, ack, one task per call, reply, heartbeat, dead-letter, reconnect.
//! - `counters`: what the server did, by outcome.
//!
//! The client side (what nova-conductor sends) is the `parasol-rpc-client` crate of this
//! workspace, used by the tests and `openstack-bench`.

mod counters;
mod dedup;
mod dispatch;
mod server;
mod topology;

pub use counters::RpcCounters;
pub use dedup::Dedup;
pub use dispatch::{route, Action, Refusal, BASEAPI_NAMESPACE, BASEAPI_VERSION, SCHEDULER_VERSION};
pub use server::{run_rpc_server, RpcDeps, RpcError};
pub use topology::{declare_rpc_topology, server_queue};
