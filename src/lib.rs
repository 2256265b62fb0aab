//! # Parasol
//!
//! A drop-in replacement for the OpenStack Nova scheduler: it answers Nova's
//! `select_destinations` over HTTP and Nova's RPC, learns host state from notifications,
//! claims atomically in its SQL ledger, and runs one of four backends (`filter`, `caching`,
//! `asc`, `apsr`), counting declines and host queries for each.
//!
//! # Layout
//! - [`domain`]: resource vectors, host state and the per-request scheduling context.
//! - [`clock`]: the injectable clock every interval and timestamp comes from.
//! - [`configuration`]: the settings file, environment overrides and validation.
//! - [`ledger`]: the SQL ledger (SQLite or PostgreSQL): hosts, claims, allocations, message ids.
//! - [`nova`]: Nova's wire contract: RequestSpec, Selection, oslo envelopes, notifications.
//! - [`policy`]: filters, weighers and the named placement algorithms.
//! - [`control`]: the pure control logic of ASC (adaptive interval) and APSR (planning s, d).
//! - [`backend`]: the four backends, their worker pools and the switch between them.
//! - [`notifications`]: applying host-state inputs to the ledger exactly once.
//! - [`amqp`]: the RabbitMQ notification consumer.
//! - [`placement`]: inventory sync from OpenStack Placement.
//! - [`rpc`]: Nova's scheduler RPC server on RabbitMQ, and a minimal oslo RPC client.
//! - [`stats`]: per-backend counters, latency percentiles and the Prometheus registry.
//! - [`routes`], [`startup`], [`service`]: the HTTP surface, building and running the service.
//! - [`datasets`]: the papers' workloads (the simulator of their experiments is in the
//!   workspace's research-tools crate, `openstack-bench sim`).
//! - [`cli`], [`telemetry`]: the command line and logging.

pub mod amqp;
pub mod backend;
pub mod cli;
pub mod clock;
pub mod configuration;
pub mod control;
pub mod datasets;
pub mod domain;
pub mod ledger;
pub mod notifications;
pub mod nova;
pub mod placement;
pub mod policy;
pub mod routes;
pub mod rpc;
pub mod service;
pub mod startup;
pub mod stats;
pub mod telemetry;
