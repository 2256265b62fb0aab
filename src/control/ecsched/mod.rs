//! ECSched (seed 004): a batch of requests placed at once as a minimum-cost flow
//! (docs/architecture.md §12). Pure: no I/O, no clock; the service, the simulator and the
//! benchmark call [`solve`].
//!
//! # Layout
//! - `problem`: the cluster, the requests, the options and the answer.
//! - `units`: requests as flow units (an affinity group is one, Fig. 3b's aggregator).
//! - `costs`: §3.3's dot-product and most-loaded costs, on capacity or free, as integers.
//! - `graph`: §3.2's network per host and per unit (for another solver to read); host slots,
//!   pruning.
//! - `compact`: the network solved: identical hosts and identical units merged, pruned.
//! - `mcf`: successive shortest paths with potentials.
//! - `solve`: the network completed, solved and read back.

mod compact;
mod costs;
mod graph;
mod mcf;
mod problem;
mod solve;
mod units;

pub use costs::COST_SCALE;
pub use graph::{build, BatchGraph};
pub use problem::{
    BatchError, BatchRequest, Cluster, CostModel, Group, GroupPolicy, Placement, SlotRule,
    SolveOptions, SolveStats, Unscheduled,
};
pub use solve::{solve, unscheduled_cost};
pub use units::Unit;
