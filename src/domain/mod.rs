//! Domain types shared by every layer: resource classes and amount vectors, traits and
//! aggregates, host state, and the typed scheduling context computed once per request.
//!
//! # Layout
//! - `candidates`: [`TreeCandidates`], Placement's allocation candidates of a request on
//!   provider trees, per compute node.
//! - `classes`: resource class names ↔ dense indices ([`ClassId`]).
//! - `resources`: [`Resources`] vectors and Placement's [`Inventory`].
//! - `markers`: traits and aggregates as interned ids in sorted sets.
//! - `host`: [`HostProfile`] (what a host is) and [`HostState`] (its usage and liveness).
//! - `request`: [`RequestContext`], one instance to place, with its [`PlacementQuery`].
//! - `extra_specs`: [`AggregateExtraSpecs`], a flavor's extra specs against host aggregates'
//!   metadata (Nova's `extra_specs_ops`).
//! - `capabilities`: [`CapabilitySpecs`], a flavor's extra specs against the host's own
//!   attributes (Nova's `ComputeCapabilitiesFilter`).
//! - `zones`: [`HostZones`], each host's availability zone as Nova defines it (aggregates).
//! - `host_aggregates`: [`HostAggregateMetadata`], each host's aggregate metadata merged.
//! - `hints`: [`SchedulerHints`], what Nova's hint filters read from `scheduler_hints`.
//! - `numa`: NUMA topologies and PCI pools of instances and hosts, and Nova's fitting of one
//!   on the other (`NUMATopologyFilter`, `PciPassthroughFilter`).
//! - `usage`: [`MeasuredUsage`], a host's measured usage and monitor metrics (soft state,
//!   expiring), and [`FlexContext`], what Flex's filter and weigher read of a request.

mod candidates;
pub mod capabilities;
mod classes;
pub mod extra_specs;
pub mod hints;
mod host;
pub mod host_aggregates;
mod markers;
pub mod numa;
mod request;
mod resources;
mod usage;
pub mod zones;

pub use candidates::{Candidate, TreeCandidates};
pub use capabilities::CapabilitySpecs;
pub use classes::{is_valid_class_name, ClassError, ClassId, MAX_CLASSES, STANDARD_CLASSES};
pub use extra_specs::AggregateExtraSpecs;
pub use hints::SchedulerHints;
pub use host::{
    ComputeFacts, Encoded, EncodedOnce, HostId, HostProfile, HostScan, HostState, WeighBase,
    SCAN_CLASSES,
};
pub use host_aggregates::{AggregateMembers, HostAggregateMetadata};
pub use markers::{
    AggregateId, Aggregates, Mark, MarkSet, TraitId, Traits, COMPUTE_STATUS_DISABLED,
};
pub use request::{
    CallClaims, ConsumerOwner, Destination, GroupPolicy, PlacementQuery, QueryTest, RequestContext,
    ServerGroup,
};
pub use resources::{Inventory, Resources};
pub use usage::{
    check_value as check_usage_value, ClassUsage, FlexContext, InstanceQos, InstanceUsage,
    MeasuredUsage, MonitorMetric, MonitorMetrics, QosReport, QosSignal, ReadingClock, UsageError,
    UsageRefusal, UsageSource,
};
pub use zones::HostZones;
