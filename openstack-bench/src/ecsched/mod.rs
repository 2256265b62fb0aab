//! ECSched's evaluation (seed 004, §4) reproduced on the library's own solver
//! (`parasol::control::ecsched`, docs/architecture.md §12).
//!
//! # Layout
//! - `shapes`: §4.1's 30 ExoGENI VMs, §4.2's EC2 general-purpose clusters.
//! - `trace`: the task generator fitted to §4.1's published trace statistics; the loader of
//!   the real `task_events` files.
//! - `fig5`: solve time per cluster and batch size (the benchmark).
//! - `table1`: Table 1's utilisation runs (ECSched against queue-based baselines).
//! - `results`: Table 1 and Fig. 4 beside the published cells.
//! - `window`: issue 44's acceptance (b) in the service, predicted (`off` against `window`).
//! - `cli`: `openstack-bench sim ecsched …`.

pub mod cli;
pub mod fig5;
pub mod results;
pub mod shapes;
pub mod table1;
pub mod trace;
pub mod window;
