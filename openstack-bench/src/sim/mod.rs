//! `openstack-bench sim`: the APSR and ASC papers' simulations, driven by the library's own policy
//! pipeline and control code in virtual time, so what they measure is what the service runs.
//!
//! # Layout
//! - `policy`: [`SimPolicy`], the names experiments accept, and the policy the simulator builds.
//! - `random`: seeded streams and the Poisson / exponential draws the models need.
//! - `index`: per flavor, the hosts that fit grouped by ranking key, so a decision reads no host.
//! - `slots`: experiment A's slot mechanics (decide on the slot-start state, then resolve).
//! - `apsr`: APSR's sampling scheduler, driving the library's `ApsrController` in slot time.
//! - `parallel`: experiment A (docs/architecture.md §10 A): arrivals, FIFO, one run per cell, in parallel.
//! - `staleness`: experiment B (docs/architecture.md §10 B): fixed refresh intervals, then ASC in virtual time.
//! - `report`: rows, mean and spread over seeds, Markdown / CSV / JSON.
//! - `plot`: the figures (PNG and SVG), drawn with the embedded font of [`crate::fonts`].
//! - `results`: regenerates `docs/results/`, comparing with the published NFV cells.
//! - `compare`, `compare_b`: the README's comparisons with the APSR and ASC papers.
//! - `isolate_b`: experiment B's runs that change one model choice at a time.
//! - `flex`: the Flex paper's §5 (usage-aware admission): LeastFit, OverSub, FlexF, FlexL.
//! - `cli`: the `openstack-bench sim` subcommands.
//! - `fmu`: McNett's FMU rebalancing experiments (seed 003 ch. 4, docs/fmu.md).

mod apsr;
pub mod cli;
mod compare;
mod compare_b;
pub mod flex;
mod index;
mod isolate_b;
mod parallel;
pub mod plot;
mod policy;
mod pool;
mod random;
mod report;
mod results;
mod slots;
mod stale_runs;
mod staleness;

pub mod fmu;

pub use apsr::{ApsrScheduler, ApsrSetup};
pub use parallel::{run_cells, run_parallel, ParallelCell, ParallelOutcome, ParallelSetup};
pub use policy::SimPolicy;
pub use report::{DynamicRow, Format, ParallelRow, StaleRow};
pub use slots::{ClaimResult, Decider, Slots};
pub use stale_runs::{staleness_rows, AscRun};
pub use staleness::{
    run_dynamic, run_fixed_refresh, CacheModel, DynamicOutcome, DynamicSetup, RefreshMode,
    StaleOutcome, TimelinePoint,
};
