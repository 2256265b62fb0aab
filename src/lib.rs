//! # Parasol
//!
//! A drop-in replacement for the OpenStack Nova scheduler: it answers Nova's
//! `select_destinations` over HTTP and Nova's RPC, learns host state from notifications,
//! claims atomically in its SQL ledger, and runs one of four backends (`filter`, `caching`,
//! `asc`, `apsr`), counting declines and host queries for each.
//!
//! # Layout
//! - [`domain`]: resource vectors, host state and the per-request scheduling context.
//! - [`backoff`]: capped exponential delays between reconnection attempts.
//! - [`choice`]: closed sets of named configuration values, with "did you mean" errors.
//! - [`cloud`]: Nova's host aggregates (and facts) the request filters read.
//! - [`clock`]: the injectable clock every interval and timestamp comes from.
//! - [`transport_url`]: nova.conf's `transport_url` (several brokers, `rabbit://`) as AMQP URIs.
//! - [`configuration`]: the settings file, environment overrides and validation.
//! - [`table`]: the live host table every decision reads and every claim reserves in.
//! - [`ledger`]: the SQL ledger (SQLite or PostgreSQL): hosts, claims, allocations, message ids;
//!   it keeps the live table equal to what it committed plus the claims in flight.
//! - [`nova`]: Nova's wire contract: RequestSpec, Selection, oslo envelopes, notifications.
//! - [`nova_db`]: Nova's compute-node and service records, read from its cell databases.
//! - [`policy`]: filters, weighers and the named placement algorithms.
//! - [`plugins`]: operators' plugin chains (select, filter, weigh) reached as HTTP webhooks.
//! - [`control`]: the pure control logic of ASC (adaptive interval) and APSR (planning s, d).
//! - [`backend`]: the four backends and their worker pools.
//! - [`rebalance`]: Fair Maximum Utilization plans over the live state (`POST
//!   /v1/rebalance/plan`, `parasol rebalance plan`, Watcher's action format).
//! - [`scheduling`]: the transport-neutral `select` use case and the switch between backends.
//! - [`notifications`]: applying host-state inputs to the ledger exactly once.
//! - [`amqp`]: the RabbitMQ notification consumer.
//! - [`placement`]: inventory sync from OpenStack Placement.
//! - [`rpc`]: Nova's scheduler RPC server on RabbitMQ.
//! - [`stats`]: per-backend counters, latency percentiles and the Prometheus registry.
//! - [`auth`]: authentication of the HTTP API (none, a shared token, or Keystone).
//! - [`routes`], [`startup`], [`service`]: the HTTP surface (and the live page at `/`),
//!   building and running the service.
//! - [`redact`]: URLs without their passwords, for every log line and error.
//! - [`cli`], [`telemetry`], [`systemd`]: the command line, logging (text or JSON lines) and
//!   systemd's readiness notifications.

// Long functions are split into named steps and long argument lists into structs (issue 41;
// the threshold is in clippy.toml).
#![deny(clippy::too_many_lines, clippy::too_many_arguments)]

pub mod amqp;
pub mod auth;
pub mod backend;
pub mod backoff;
pub mod choice;
pub mod cli;
pub mod clock;
pub mod cloud;
pub mod configuration;
pub mod control;
pub mod domain;
pub mod ledger;
pub mod notifications;
pub mod nova;
pub mod nova_db;
pub mod placement;
pub mod plugins;
pub mod policy;
pub mod rebalance;
pub mod redact;
pub mod routes;
pub mod rpc;
pub mod scheduling;
pub mod service;
pub mod startup;
pub mod stats;
pub mod systemd;
pub mod table;
pub mod telemetry;
pub mod transport_url;
pub mod usage_poll;
