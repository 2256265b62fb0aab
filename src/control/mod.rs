//! The pure control logic: the `asc` and `apsr` backends' controllers, and the seed systems'
//! models (Flex's penalty and QoS, ECSched's min-cost flow, Fair Maximum Utilization's
//! rebalancers): no I/O, no async, no clock. The service, the simulator and the benchmark all
//! drive these same types.
//!
//! # Layout
//! - `apsr_math`: E[H_s], the expected decline ratio and MaximizeParallelism (s, d) planning.
//! - `binomial`: binomial expectations in log space, the cross-check of the closed form.
//! - `k_estimator`: per-flavor sample counters and the EWMA estimate of available hosts k.
//! - `apsr_params`: the `[apsr]` config section, validated.
//! - `apsr_controller`: the per-round APSR re-plan of (s, d) and its history.
//! - `asc_params`: the `[asc]` config section, validated.
//! - `asc_controller`: the ASC decision step adapting the cache refresh interval τ.
//! - `flex_params`: the `[flex]` config section, validated (seed 002, §5.1).
//! - `flex_controller`: Flex's estimation penalty P following the cluster's QoS (Alg. 3).
//! - `flex_qos`: §3's fair allocation under contention, eq. 14's QoS Q(t), and a QoS from
//!   hosts' measured load (the share of hosts not saturated).
//! - `flex_admission`: Alg. 3's admission test P·L̂ + r ≤ C and its score.
//! - `flex_ratio`: the Placement allocation ratio at which Flex's filter binds
//!   (`[flex] manage_allocation_ratio`).
//! - `plan_cli`: `parasol apsr plan`, the same planning offline ([`PlanArgs`], [`run_plan`]).
//! - `history`: the bounded decision history both controllers keep for stats and plots.
//! - `ecsched`: ECSched's batch placement as a min-cost flow (seed 004).
//! - `error`: [`ControlError`], naming the config key or CLI flag at fault.
//! - `fmu_model`: Fair Maximum Utilization (seed 003 ch. 3): hungry level, U, F, cost C.
//! - `fmu_plan`: move rules (ratios, server groups, enabled hosts), feasible move ordering
//!   and the independent replay checker.
//! - `fmu_delta`: the cost after one move from the two hosts it changes (GBM at scale).
//! - `fmu_solvers`: the rebalancers BCPU, BCPU2, simulated annealing and Greedy Best Move.

mod apsr_controller;
mod apsr_math;
mod apsr_params;
mod asc_controller;
mod asc_params;
mod binomial;
pub mod ecsched;
mod error;
mod flex_admission;
mod flex_controller;
mod flex_params;
mod flex_qos;
mod flex_ratio;
mod history;
mod k_estimator;
mod plan_cli;

mod fmu_delta;
mod fmu_model;
mod fmu_plan;
mod fmu_solvers;

pub use apsr_controller::{ApsrController, ApsrRound};
pub use apsr_math::{
    expected_decline_ratio, expected_happy, expected_happy_summed, maximize_parallelism,
    maximize_parallelism_with_min_hosts, meets_sla, sample_hit_probability, Plan,
};
pub use apsr_params::{ApsrParams, DEFAULT_BUDGET_CAP};
pub use asc_controller::{AscController, AscInterval};
pub use asc_params::AscParams;
pub use error::ControlError;
pub use flex_admission::{
    fits as flex_fits, fits_all as flex_fits_all, headroom as flex_headroom, Load,
};
pub use flex_controller::{FlexController, FlexPeriod, PenaltyStep};
pub use flex_params::FlexParams;
pub use flex_qos::{
    cluster_qos, fair_allocation, node_qos, served, served_share, unsaturated_share, Share,
};
pub use flex_ratio::{
    cluster_ratio as flex_cluster_ratio, floor_ratio as flex_floor_ratio,
    provider_ratio as flex_provider_ratio, RatioBounds, UsageEvidence,
};
pub use history::History;
pub use k_estimator::{KEstimator, SampleCounters};
pub use plan_cli::{run_plan, PlanArgs};

pub use fmu_delta::{CostTracker, Departure};
pub use fmu_model::{
    detect_hungry, evaluate as fmu_evaluate, fmu_cost, hungry_level, jain_index, FmuError,
    FmuEvaluation, FmuParams, FmuProblem, Normalization, VmState,
};
pub use fmu_plan::{
    order_moves, replay_plan, GroupPolicy, Move, MoveRules, Occupancy, OrderedPlan, PlanLimits,
    ReplayError, ServerGroup,
};
pub use fmu_solvers::{
    rebalance, GbmParams, RebalanceInput, RebalancePlan, SaParams, Solver, MIGRATION_RESISTANCE,
};
