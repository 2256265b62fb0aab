//! Nova's resource request for a RequestSpec, transport-neutral: what nova-scheduler asks
//! Placement (`GET /allocation_candidates`) before it picks a host.
//!
//! [`resources_from_request_spec`] does what `SchedulerManager.select_destinations` does
//! before that query: the request filters (`request_filter.process_reqspec`, see
//! [`super::request_filters`]), then `utils.resources_from_request_spec`
//! (`ResourceRequest.from_request_spec`, in `from_spec`, plus the destination's aggregates,
//! `in_tree` for a forced host or node, the `limit` and the default `group_policy`). The
//! result holds every request group: the unnumbered one, the flavor's suffixed ones and
//! those of `requested_resources` (ports, device profiles, PCI devices); names stay
//! strings, the caller maps them to its own class and trait tables.
//!
//! [`ResourceRequest::needs_nested_providers`] names each part only provider trees answer (a
//! suffixed group, `same_subtree`): the scheduler decides such a request on Placement's
//! allocation candidates, or, without Placement's claims, refuses it with that reason
//! ([`translate`]: [`Refusal::Unsupported`]), never a wrong placement nor a capacity
//! shortage. Names no provider has (an unknown `CUSTOM_`
//! class or trait) are *not* refused here: the scheduler finds no candidate and answers
//! NoValidHost, as Nova does.

use super::destination::RequestedDestination;
use super::request_filters::{
    compute_nodes, isolated_aggregates, tenant_aggregates, zone_aggregates, CloudView,
    RequestFilterOptions, MIN_COMPUTE_VERSION_OWNER_TRAIT,
};
use super::request_group::{GroupOrigin, RequestGroup};
use super::request_spec::RequestSpec;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

mod from_spec;

/// What Nova's `ResourceRequest` holds: the unnumbered group (its fields first), the
/// suffixed groups and the request as a whole.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ResourceRequest {
    /// Resource class → amount (no zeros).
    pub resources: BTreeMap<String, u64>,
    pub required_traits: BTreeSet<String>,
    pub forbidden_traits: BTreeSet<String>,
    /// `member_of`: the provider must be in at least one aggregate of every inner list.
    pub member_of: Vec<Vec<String>>,
    /// `member_of=!in:`: the provider must be in none of these.
    pub forbidden_aggregates: BTreeSet<String>,
    /// The provider tree (compute node uuid) the allocation must come from.
    pub in_tree: Option<String>,
    /// Traits the root provider must have / must not have.
    pub root_required: BTreeSet<String>,
    pub root_forbidden: BTreeSet<String>,
    /// The suffixed groups, the flavor's (by suffix) then `requested_resources` in their
    /// order; no zeros, no empty group.
    pub groups: Vec<RequestGroup>,
    /// Lists of group suffixes each of which must come from one provider subtree.
    pub same_subtree: Vec<Vec<String>>,
    /// `group_policy` (`none` or `isolate`): the flavor's, or `none` when two suffixed
    /// groups exist and at most one came from the flavor.
    pub group_policy: Option<String>,
    /// Most candidates to ask for; `None` for no limit (several nodes for a forced host,
    /// affinity hints).
    pub limit: Option<u32>,
    /// The flavor or image asked for dedicated CPUs: Nova then also asks a fallback request
    /// with VCPU instead of PCPU (`translate(…, false)`) unless
    /// `[workarounds] disable_fallback_pcpu_query` is set.
    pub cpu_pinning_requested: bool,
}

/// Why no resource request comes out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
pub enum Refusal {
    /// Nova answers NoValidHost with this reason: an unknown forced host or node, a tenant
    /// without its required aggregate.
    #[error("{0}")]
    NoValidHost(String),
    /// Parasol cannot express what the request needs.
    #[error("unsupported request: {0}")]
    Unsupported(String),
}

/// The trait every request forbids on the root (`compute_status_filter`).
pub use crate::domain::COMPUTE_STATUS_DISABLED;
const OWNER_NOVA: &str = "OWNER_NOVA";
/// The root trait `accelerators_filter` asks when the flavor names a device profile.
const COMPUTE_ACCELERATORS: &str = "COMPUTE_ACCELERATORS";

/// Nova's resource request for `spec` as the in-memory decision takes it: that of
/// [`resources_from_request_spec`], or [`Refusal::Unsupported`] naming each request group
/// and `same_subtree` it would need nested providers for.
pub fn translate(
    spec: &RequestSpec,
    options: &RequestFilterOptions,
    cloud: &CloudView<'_>,
    pinning_translate: bool,
) -> Result<ResourceRequest, Refusal> {
    let request = resources_from_request_spec(spec, options, cloud, pinning_translate)?;
    match request.needs_nested_providers() {
        Some(reason) => Err(Refusal::Unsupported(reason)),
        None => Ok(request),
    }
}

impl ResourceRequest {
    /// What of this request only nested providers can answer, each part named: every
    /// suffixed group with where it comes from, and every `same_subtree`.
    pub fn needs_nested_providers(&self) -> Option<String> {
        let mut reasons: Vec<String> = self
            .groups
            .iter()
            .map(|g| {
                let s = g.suffix();
                match g.origin {
                    GroupOrigin::Flavor => format!(
                        "request group '{s}' (from the flavor's resources{s}/trait{s} extra specs) needs nested providers"
                    ),
                    origin => format!(
                        "request group '{s}' ({}, in requested_resources) needs nested providers",
                        origin.describe()
                    ),
                }
            })
            .collect();
        for suffixes in &self.same_subtree {
            reasons.push(format!(
                "same_subtree ({}) needs nested providers",
                suffixes.join(",")
            ));
        }
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }
}

/// The host or node a request forces or names as its destination: the request is limited to
/// its tree, to none when it names several nodes, or refused when it names none that exists.
fn target_tree(
    spec: &RequestSpec,
    dest: &RequestedDestination,
    cloud: &CloudView<'_>,
    request: &mut ResourceRequest,
) -> Result<(), Refusal> {
    let target_host = dest
        .host
        .clone()
        .filter(|h| !h.is_empty())
        .or_else(|| spec.force_hosts.first().cloned().filter(|h| !h.is_empty()));
    let target_node = dest
        .node
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| spec.force_nodes.first().cloned().filter(|n| !n.is_empty()));
    if target_host.is_some() || target_node.is_some() {
        let nodes = compute_nodes(cloud, target_host.as_deref(), target_node.as_deref());
        match nodes.as_slice() {
            [] => {
                return Err(Refusal::NoValidHost(format!(
                    "No such host - host: {} node: {} ",
                    target_host.as_deref().unwrap_or("None"),
                    target_node.as_deref().unwrap_or("None")
                )))
            }
            [one] => request.in_tree = Some(one.uuid.clone()),
            _ => request.limit = None,
        }
    }
    Ok(())
}

/// Nova's resource request for `spec`: the request filters of `options` with what `cloud`
/// knows, then `resources_from_request_spec`, every group included. `pinning_translate =
/// false` is Nova's PCPU fallback query (see [`ResourceRequest::cpu_pinning_requested`]);
/// the request filters always see the pinned request, as in Nova, where they run once
/// before both queries.
pub fn resources_from_request_spec(
    spec: &RequestSpec,
    options: &RequestFilterOptions,
    cloud: &CloudView<'_>,
    pinning_translate: bool,
) -> Result<ResourceRequest, Refusal> {
    let mut request =
        ResourceRequest::from_request_spec(spec, pinning_translate, options.max_placement_results);
    let specs = &spec.resource_specs;
    let dest = spec.destination.clone().unwrap_or_default();
    let mut aggregates = dest.aggregates.clone();
    let mut forbidden = dest.forbidden_aggregates.clone();
    let mut root_required = spec.request_level.root_required.clone();
    let mut root_forbidden = spec.request_level.root_forbidden.clone();

    if options.limit_tenants_to_placement_aggregate {
        let tenant = tenant_aggregates(cloud, spec.project_id.as_deref());
        if !tenant.is_empty() {
            aggregates.push(tenant.join(","));
        } else if options.placement_aggregate_required_for_tenants {
            return Err(Refusal::NoValidHost(
                "Scheduling failed: No hosts available for tenant".into(),
            ));
        }
    }
    if let Some(zone) = spec.availability_zone.as_deref().filter(|z| !z.is_empty()) {
        let zoned = zone_aggregates(cloud, zone);
        if !zoned.is_empty() {
            aggregates.push(zoned.join(","));
        }
    }
    if options.query_placement_for_image_type_support && !spec.is_bfv {
        root_required.extend(specs.features.image_type_trait.clone());
    }
    root_forbidden.insert(COMPUTE_STATUS_DISABLED.into());
    if options.enable_isolated_aggregate_filtering {
        let required = from_spec::build(spec, true).all_required_traits();
        forbidden.extend(isolated_aggregates(cloud, &required));
    }
    if options.image_metadata_prefilter {
        root_required.extend(
            specs
                .features
                .image_metadata_traits
                .iter()
                .flatten()
                .cloned(),
        );
    }
    if specs.features.device_profile.is_some() {
        root_required.insert(COMPUTE_ACCELERATORS.into());
    }
    root_required.extend(specs.features.root_traits.iter().cloned());
    // owner_nova_filter: nothing more when the caller already requires OWNER_NOVA.
    let owner_ok = !root_required.contains(OWNER_NOVA)
        && cloud
            .min_compute_service_version
            .is_some_and(|v| v >= MIN_COMPUTE_VERSION_OWNER_TRAIT);
    if owner_ok {
        root_required.insert(OWNER_NOVA.into());
        for g in &mut request.groups {
            let prefix = g.suffix().rsplit_once('-').map_or(g.suffix(), |(p, _)| p);
            if g.origin != GroupOrigin::Flavor && spec.pci_request_ids.contains(prefix) {
                g.required_traits.insert(OWNER_NOVA.into());
            }
        }
    }

    if !aggregates.is_empty() {
        request.member_of = aggregates
            .iter()
            .map(|ored| ored.split(',').map(str::to_string).collect())
            .collect();
    }
    request.forbidden_aggregates.extend(forbidden);
    request.root_required = root_required;
    request.root_forbidden = root_forbidden;

    target_tree(spec, &dest, cloud, &mut request)?;
    if ["group", "same_host", "different_host"]
        .iter()
        .any(|h| spec.scheduler_hints.contains_key(*h))
    {
        request.limit = None;
    }
    if request.groups.len() >= 2 && request.group_policy.is_none() && specs.numbered.len() <= 1 {
        request.group_policy = Some("none".into());
    }
    Ok(request)
}

#[cfg(test)]
mod tests;
