//! The Nova contract codec: what nova-conductor and nova-compute send, and what they expect back.
//!
//! # Layout
//! - `error`: [`CodecError`], every variant naming the field or part that is wrong.
//! - `object`: reading versioned-object JSON (`nova_object.*`; absent = unset, null = None).
//! - `request_spec`: [`RequestSpec`] 1.x → flavor demand and constraints → [`RequestContext`]s;
//!   `image`, `destination`, `group` read its nested objects.
//! - `specs`, `settings`, `cpu`, `features`: the flavor's extra specs and the image's
//!   properties that shape the resource request, checked at decode ([`ResourceSpecs`]).
//! - `resource_request`: [`resources_from_request_spec`] → Nova's whole [`ResourceRequest`]
//!   (every request group, `request_group`'s [`RequestGroup`]s), with the request filters of
//!   `request_filters` ([`RequestFilterOptions`], [`CloudView`]); [`translate`] refuses what
//!   needs nested providers ([`Refusal`]); `querystring` writes the request as Nova's
//!   `GET /allocation_candidates` query.
//! - `numa`: the RequestSpec's `numa_topology`, `pci_requests` and `network_metadata`, and
//!   a compute node's `numa_topology` and `pci_stats` columns, into `domain::numa`'s types.
//! - `bounds`, `versions`: the bounds on every input and the major of every object read.
//! - `legacy`: RPC 4.0's `request_spec` / `filter_properties` dicts → the same [`RequestSpec`].
//! - `select`: [`SelectDestinationsArgs`] from an RPC call of any 4.x version or the HTTP body.
//! - `selection`: [`Selection`] 1.1/1.0 primitives, [`encode_selections`], [`encode_legacy`].
//! - `failure`: NoValidHost and other oslo failure strings, and the HTTP error body.
//! - `oslo`: the `oslo.version` 2.0 envelope, [`RpcMessage`] and [`Reply`] (with heartbeats).
//! - `scheduler_notification`: the `scheduler.select_destinations.start`/`.end` notifications
//!   Parasol emits as nova-scheduler does ([`request_spec_payload`], [`notification_message`]).
//! - `notification`: versioned notifications, `compute.host.state` and the fanout casts →
//!   [`Notification`] with a typed [`HostEvent`].
//!
//! [`RequestContext`]: crate::domain::RequestContext

mod aggregate;
mod bounds;
mod cpu;
mod destination;
mod error;
mod failure;
mod features;
mod group;
mod image;
mod legacy;
mod notification;
pub mod numa;
mod object;
mod oslo;
mod querystring;
mod request_filters;
mod request_group;
mod request_spec;
mod resource_request;
mod scheduler_notification;
mod select;
mod selection;
mod settings;
mod specs;
mod versions;

#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod hardening_tests;
#[cfg(test)]
mod robustness_tests;

pub use aggregate::{decode_aggregate, decode_aggregates};
pub use bounds::{MAX_ITEMS, MAX_NAME_BYTES, MAX_SIZE, MAX_TEXT_BYTES};
pub use cpu::{CpuPolicy, CpuSpecs};
pub use destination::{RequestLevelParams, RequestedDestination};
pub use error::CodecError;
pub use failure::{http_error_body, no_valid_host_failure, no_valid_host_message, oslo_failure};
pub use features::Features;
pub use image::{Image, PropValue};
pub use legacy::decode_legacy;
pub use notification::{
    oslo_timestamp, time_ms, AggregateCast, HostEvent, HostStatePayload, Metric, MetricsPayload,
    MoveStep, Notification, HOST_STATE_EVENT, METRICS_UPDATE_EVENT,
};
pub use object::{parse_version, FieldValue, Fields, NovaObject};
pub use oslo::{
    decode_envelope, encode_envelope, encode_envelope_str, OsloEnvelope, Reply, RpcMessage,
    OSLO_VERSION,
};
pub use request_filters::{Aggregate, CloudView, ComputeNodeRef, RequestFilterOptions};
pub use request_group::{GroupOrigin, RequestGroup};
pub use request_spec::{Flavor, InstanceGroup, Limits, RequestSpec, MAX_INSTANCES};
pub use resource_request::{
    resources_from_request_spec, translate, Refusal, ResourceRequest, COMPUTE_STATUS_DISABLED,
};
pub use scheduler_notification::{
    notification_message, request_spec_payload, required_aggregates, Phase,
    REQUEST_SPEC_PAYLOAD_VERSION,
};
pub use select::SelectDestinationsArgs;
pub use selection::{
    allocation_request_body, encode_legacy, encode_selections, Selection, SelectionVersion,
    SelectionsBody, ALLOCATION_REQUEST_VERSION,
};
pub use specs::ResourceSpecs;
