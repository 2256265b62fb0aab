//! # openstack-bench: Parasol's research tools
//!
//! Everything that measures Parasol rather than serves: the load benchmark of the real
//! service (`openstack-bench compare` / `scenario`, in the binary) and the simulator of the
//! APSR and ASC papers' experiments (`openstack-bench sim`, this library), with every plot
//! either draws. They share one crate so that the `parasol` service crate links no plotting,
//! font or progress-bar library, while the simulator still runs the service's own code: it
//! calls `parasol::policy`, `parasol::control` and `parasol::domain`, so what it measures is
//! what the service runs.
//!
//! # Layout
//! - [`datasets`]: the papers' workloads (NFV, Google, Amazon; `datasets/*.json` beside this
//!   crate's manifest), for the simulator and the load driver.
//! - [`ecsched`]: ECSched's evaluation (seed 004) on the library's batch solver.
//! - [`sim`]: the papers' experiments in virtual time, their tables and figures.
//! - [`fonts`]: the font embedded for every plot (the simulator's and the benchmark's).
//! - [`plot`]: every figure's palette, markers, axes and panels.
//! - [`trace_files`]: the 2011 Google trace's files as published (folders of gzip parts).

// As in the service crate (issue 41); the research tools' few longer functions carry a
// targeted allowance each.
#![deny(clippy::too_many_lines, clippy::too_many_arguments)]

pub mod datasets;
pub mod ecsched;
pub mod fonts;
pub mod plot;
pub mod sim;
pub mod trace_files;
