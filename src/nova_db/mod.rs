//! Nova's compute-node records, read from where nova-scheduler's `HostManager` reads them:
//! the `compute_nodes` and `services` tables of every cell database, found through the API
//! database's `cell_mappings`, read-only.
//!
//! Placement knows a provider by the node name (`hypervisor_hostname`), but nova-conductor
//! sends a build to the Selection's `service_host`, the `CONF.host` of a nova-compute, and the
//! two differ in real clouds: libvirt names its node by the FQDN while `CONF.host` is the
//! short name; one Ironic nova-compute serves many nodes. A Selection naming a host no
//! compute service listens on leaves the instance in BUILD for ever. This module gives the
//! scheduler host ↔ node, the cell uuid a Selection must carry, and the facts Nova's filters
//! read: hypervisor type and version, `supported_instances`, `cpu_info`, NUMA and PCI
//! presence, and the service's disabled / forced-down state and heartbeat, judged as Nova's
//! DB `servicegroup` driver judges it with `service_down_time`.
//!
//! ## Why the cell databases, not Nova's API
//! Nova's API (`os-hypervisors`, `os-services`) was the other choice. Since microversion
//! 2.88 `os-hypervisors` no longer returns `cpu_info`, the hypervisor version or the
//! resource fields, and it never returned `supported_instances`, which
//! `ImagePropertiesFilter` and `ComputeCapabilitiesFilter` need; it also needs an admin
//! token and a nova-api in the path of every refresh. The cell databases are what
//! `HostManager._get_computes_for_cells` reads (`ServiceList.get_by_binary('nova-compute',
//! include_disabled=True)`, `ComputeNodeList.get_all`), so Parasol sees exactly what
//! nova-scheduler sees, with the same liveness rule, and only reads (sessions are opened
//! read-only).
//!
//! ## Behaviour, as Nova's
//! - cell0 is skipped; a disabled cell is listed but not read (`HostManager.enabled_cells`).
//! - Rows with `deleted != 0` are skipped; only `nova-compute` services are read.
//! - A node is joined to the service of its `host`; a node with no such service is set
//!   aside with the reason (Nova logs "No compute service record found" and skips it).
//! - All enabled cells are read at once; a cell that fails is reported and the others are
//!   used (Nova's `scatter_gather_cells` warns and goes on). Only an unreadable API
//!   database fails a whole read.
//! - A service is up unless forced down, while its last heartbeat (`last_seen_up`, else
//!   `created_at`) is within `service_down_time` of now, either side
//!   ([`ServiceRecord::liveness`]; `now` comes from the injected clock).
//! - Templated `database_connection`s are filled from `[nova_db] database_url` as Nova
//!   fills them from `[database] connection`.
//! - With `api_database_url`, Nova's host aggregates (`aggregates`, `aggregate_hosts`,
//!   `aggregate_metadata`) are loaded once at start into [`crate::cloud::Cloud`], as
//!   `HostManager._init_aggregates` does; nova-api's casts keep them current afterwards, and
//!   a cast that arrives during the read wins over it ([`load_aggregates`]).
//!
//! ## Settings (`settings.toml` beside this file, for `etc/parasol.toml`)
//! ```toml
#![doc = include_str!("settings.toml")]
//! ```
//!
//! URLs are taken as nova.conf writes them (`mysql+pymysql://`, `mysql://`,
//! `postgresql+psycopg2://`, `sqlite:////absolute/path`) and translated for sqlx; passwords
//! are hidden in every log line, error and `Debug` output.
//!
//! # Layout
//! - `settings`: the `[nova_db]` section and its validation.
//! - `url`: SQLAlchemy URLs → sqlx URLs, and password redaction.
//! - `template`: Nova's templated cell database URLs.
//! - `sql`: read-only pools on MySQL/MariaDB, PostgreSQL or SQLite, and the queries (cells,
//!   services, compute nodes; aggregates with their hosts and metadata).
//! - `records`: cells, services, compute nodes, liveness, the JSON columns' decoding, and
//!   aggregate rows into Nova's aggregates.
//! - `reader`: discovery of the cells, reading them, joining nodes to services.
//! - `snapshot`: one read of every cell, indexed by node uuid and node name.
//! - `refresh`: the periodic read on the injected clock, published on a `watch` channel.
//! - `apply`: each read laid over the live host table (service host, facts, cell, service
//!   state), and the aggregates loaded at start, as `parasol serve` runs it.

mod apply;
mod reader;
mod records;
mod refresh;
mod settings;
mod snapshot;
mod sql;
mod template;
mod url;

pub use apply::{
    load_aggregates, metric_readings, node_records, run_nova_db, unschedulable_reason,
};
pub use reader::{AggregatesRead, Discovery, NovaDbReader};
pub use records::{
    CellMapping, CellSnapshot, ComputeNodeRecord, Liveness, NodeMetric, RejectedNode,
    ServiceRecord, SkippedAggregate, SupportedInstance,
};
pub use refresh::{refresh_loop, RefreshState};
pub use settings::{CellSetting, NovaDbSettings, SecretUrl, CELL0_UUID};
pub use snapshot::{CellFailure, NodeView, NovaDbSnapshot};
pub use url::{DbUrl, Dialect};

/// Why reading Nova's databases failed; every URL in it is redacted.
#[derive(Debug, thiserror::Error)]
pub enum NovaDbError {
    #[error("[nova_db] {key}: {reason}")]
    Settings { key: String, reason: String },
    #[error("database URL {url}: {reason}")]
    Url { url: String, reason: String },
    #[error("cannot open {url}: {message}")]
    Connect { url: String, message: String },
    #[error("reading {what} from {url} failed: {message}")]
    Query {
        url: String,
        what: &'static str,
        message: String,
    },
    #[error("{url} did not answer within {after_s} s")]
    Timeout { url: String, after_s: f64 },
    #[error("cell {cell}: {reason}")]
    Cell { cell: String, reason: String },
}
