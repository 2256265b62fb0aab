//! The pure control logic of the `asc` and `apsr` backends: no I/O, no async, no clock. The
//! service, the simulator and the benchmark all drive these same types.
//!
//! # Layout
//! - `apsr_math`: E[H_s], the expected decline ratio and MaximizeParallelism (s, d) planning.
//! - `binomial`: binomial expectations in log space, the cross-check of the closed form.

mod apsr_math;
mod binomial;

pub use apsr_math::{
    expected_decline_ratio, expected_happy, expected_happy_summed, maximize_parallelism,
    maximize_parallelism_with_min_hosts, meets_sla, sample_hit_probability, Plan,
};
