//! Nova's resource request for a RequestSpec, transport-neutral: what nova-scheduler asks
//! Placement (`GET /allocation_candidates`) before it picks a host.
//!
//! [`translate`] does what `SchedulerManager.select_destinations` does before that query:
//! the request filters (`request_filter.process_reqspec`, see [`super::request_filters`]),
//! then `utils.resources_from_request_spec` (`ResourceRequest.from_request_spec` plus the
//! destination's aggregates, `in_tree` for a forced host or node, and the `limit`).
//! Names stay strings here; the caller maps them to its own class and trait tables.
//!
//! The result is the unnumbered request group and the request-level parameters. A request
//! that needs more (numbered groups, port or device-profile groups, `same_subtree`, memory
//! encryption) is [`Refusal::Unsupported`] with the reason: nested providers are out of
//! Parasol's scope, and such a request must get NoValidHost, never a wrong placement.
//! Names no provider has (an unknown `CUSTOM_` class or trait) are *not* refused here: the
//! scheduler finds no candidate and answers NoValidHost, as Nova does.

use super::request_filters::{
    compute_nodes, isolated_aggregates, tenant_aggregates, zone_aggregates, CloudView,
    RequestFilterOptions, MIN_COMPUTE_VERSION_OWNER_TRAIT,
};
use super::request_spec::RequestSpec;
use super::specs::ResourceSpecs;
use crate::nova::cpu::CpuPolicy;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What Nova's `ResourceRequest` holds for the unnumbered group and the request as a whole.
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
    /// `group_policy` (`none` or `isolate`), when the flavor sets it.
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

/// Nova's resource request for `spec`: the request filters of `options` with what `cloud`
/// knows, then `resources_from_request_spec`. `pinning_translate = false` is Nova's PCPU
/// fallback query (see [`ResourceRequest::cpu_pinning_requested`]); the request filters
/// always see the pinned request, as in Nova, where they run once before both queries.
pub fn translate(
    spec: &RequestSpec,
    options: &RequestFilterOptions,
    cloud: &CloudView<'_>,
    pinning_translate: bool,
) -> Result<ResourceRequest, Refusal> {
    if let Some(reason) = unsupported(spec) {
        return Err(Refusal::Unsupported(reason));
    }
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
        let required = unnumbered_group(spec, true).required_traits;
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
    root_required.extend(specs.features.root_traits.iter().cloned());
    let owner_ok = cloud
        .min_compute_service_version
        .is_some_and(|v| v >= MIN_COMPUTE_VERSION_OWNER_TRAIT);
    if owner_ok {
        root_required.insert(OWNER_NOVA.into());
    }

    let mut request = unnumbered_group(spec, pinning_translate);
    request.member_of = aggregates
        .iter()
        .map(|ored| ored.split(',').map(str::to_string).collect())
        .collect();
    request.forbidden_aggregates = forbidden;
    request.root_required = root_required;
    request.root_forbidden = root_forbidden;
    request.group_policy = specs.group_policy.clone();
    request.limit = Some(options.max_placement_results);

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
    if ["group", "same_host", "different_host"]
        .iter()
        .any(|h| spec.scheduler_hints.contains_key(*h))
    {
        request.limit = None;
    }
    Ok(request)
}

/// Why Parasol cannot translate `spec`, if it cannot.
pub fn unsupported(spec: &RequestSpec) -> Option<String> {
    let mut reasons: Vec<String> = spec.resource_specs.unsupported().into_iter().collect();
    if !spec.requested_resources.is_empty() {
        reasons.push(
            "requested_resources (port or device-profile request groups) need nested providers"
                .into(),
        );
    }
    if !spec.request_level.same_subtree.is_empty() {
        reasons.push("same_subtree needs nested providers".into());
    }
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// `ResourceRequest.from_request_spec` for the unnumbered group: extra specs, image
/// traits, CPU pinning, the flavor's sizes where no extra spec set them, features; zeros
/// stripped.
fn unnumbered_group(spec: &RequestSpec, pinning_translate: bool) -> ResourceRequest {
    let specs: &ResourceSpecs = &spec.resource_specs;
    let flavor = &spec.flavor;
    let vcpus = flavor.vcpus as u64;
    let mut r = ResourceRequest {
        resources: specs.resources.clone(),
        required_traits: specs.required_traits.clone(),
        forbidden_traits: specs.forbidden_traits.clone(),
        ..ResourceRequest::default()
    };
    r.required_traits.extend(specs.image_traits.iter().cloned());
    if pinning_translate {
        let cpu = &specs.cpu;
        let pcpus = match cpu.policy {
            Some(CpuPolicy::Dedicated) => {
                r.cpu_pinning_requested = true;
                Some(vcpus)
            }
            Some(CpuPolicy::Mixed) => {
                r.resources
                    .insert("VCPU".into(), vcpus - cpu.mixed_dedicated.min(vcpus));
                Some(cpu.mixed_dedicated)
            }
            _ => None,
        };
        if let Some(pcpus) = pcpus {
            r.resources
                .insert("PCPU".into(), pcpus + u64::from(cpu.emulator_isolate));
        }
        match cpu.hyperthreading {
            Some(true) => r.required_traits.insert("HW_CPU_HYPERTHREADING".into()),
            Some(false) => r.forbidden_traits.insert("HW_CPU_HYPERTHREADING".into()),
            None => false,
        };
    }
    if !r.resources.contains_key("VCPU") && !r.resources.contains_key("PCPU") {
        r.resources.insert("VCPU".into(), vcpus);
    }
    r.resources
        .entry("MEMORY_MB".into())
        .or_insert(flavor.memory_mb as u64);
    let disk = flavor.disk_gb(spec.is_bfv) as u64;
    if !r.resources.contains_key("DISK_GB") && disk > 0 {
        r.resources.insert("DISK_GB".into(), disk);
    }
    for (class, n) in &specs.features.pmem {
        r.resources.insert(class.clone(), *n);
    }
    r.required_traits
        .extend(specs.features.traits.iter().cloned());
    r.resources.retain(|_, n| *n > 0);
    r
}

#[cfg(test)]
mod tests;
