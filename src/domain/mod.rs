//! Domain types shared by every layer: resource classes and amount vectors, traits and
//! aggregates, host state, and the typed scheduling context computed once per request.
//!
//! # Layout
//! - `classes`: resource class names ↔ dense indices ([`ClassId`]).
//! - `resources`: [`Resources`] vectors and Placement's [`Inventory`].
//! - `markers`: traits and aggregates as interned ids in sorted sets.
//! - `host`: [`HostProfile`] (what a host is) and [`HostState`] (its usage and liveness).
//! - `request`: [`RequestContext`], one instance to place, with its [`PlacementQuery`].

mod classes;
mod host;
mod markers;
mod request;
mod resources;

pub use classes::{is_valid_class_name, ClassError, ClassId, MAX_CLASSES, STANDARD_CLASSES};
pub use host::{ComputeFacts, HostId, HostProfile, HostState};
pub use markers::{AggregateId, Aggregates, Mark, MarkSet, TraitId, Traits};
pub use request::{
    ConsumerOwner, Destination, GroupPolicy, PlacementQuery, RequestContext, ServerGroup,
};
pub use resources::{Inventory, Resources};
