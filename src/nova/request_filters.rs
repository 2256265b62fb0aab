//! Nova 34's request filters (`nova.scheduler.request_filter`), the part of them that
//! turns scheduler options and the aggregates Parasol knows into aggregates and root traits.
//!
//! | Nova's filter | here |
//! |---|---|
//! | `require_tenant_aggregate` (`limit_tenants_to_placement_aggregate`, `placement_aggregate_required_for_tenants`) | yes |
//! | `map_az_to_placement_aggregate` (always on in Nova 34: `query_placement_for_availability_zone` was removed) | yes |
//! | `require_image_type_support` (`query_placement_for_image_type_support`) | yes |
//! | `compute_status_filter` (always: `!COMPUTE_STATUS_DISABLED` on the root) | yes |
//! | `isolate_aggregates` (`enable_isolated_aggregate_filtering`) | yes |
//! | `transform_image_metadata` (`image_metadata_prefilter`) | yes |
//! | `packed_virtqueue_filter`, `ephemeral_encryption_filter`, `virtio_sound_filter`, `tpm_secret_security_filter` | yes (read flavor and image only) |
//! | `owner_nova_filter` (`OWNER_NOVA` once every nova-compute is at service version ≥ 73) | yes, on the root and on the flavor's PCI groups, from the minimum version the caller passes |
//! | `accelerators_filter` (`COMPUTE_ACCELERATORS` on the root for `accel:device_profile`) | yes |
//! | `routed_networks_filter` (`query_placement_for_routed_network_aggregates`) | no: needs Neutron's segments; the option is not offered |
//! | `remote_managed_ports_filter` | no: needs Neutron's port details; `COMPUTE_REMOTE_MANAGED_PORTS` is not added |

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Aggregate metadata key prefix of tenant isolation (`TENANT_METADATA_KEY`).
pub const TENANT_METADATA_KEY: &str = "filter_tenant_id";
/// Nova-compute service version from which `OWNER_NOVA` is required.
pub const MIN_COMPUTE_VERSION_OWNER_TRAIT: i64 = 73;

/// The `[scheduler]` options of Nova that drive the request filters, with Nova's defaults.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RequestFilterOptions {
    pub limit_tenants_to_placement_aggregate: bool,
    pub placement_aggregate_required_for_tenants: bool,
    pub enable_isolated_aggregate_filtering: bool,
    pub query_placement_for_image_type_support: bool,
    pub image_metadata_prefilter: bool,
    /// `limit` of `GET /allocation_candidates`.
    pub max_placement_results: u32,
}

impl Default for RequestFilterOptions {
    fn default() -> Self {
        RequestFilterOptions {
            limit_tenants_to_placement_aggregate: false,
            placement_aggregate_required_for_tenants: false,
            enable_isolated_aggregate_filtering: false,
            query_placement_for_image_type_support: false,
            image_metadata_prefilter: false,
            max_placement_results: 1000,
        }
    }
}

/// A Nova host aggregate as the request filters read it (for them, membership of hosts is
/// Placement's business: providers carry the aggregate uuids), with the service hosts Nova
/// lists in it (`Aggregate.hosts`, what nova-scheduler's `HostState.aggregates` are built
/// from, read by the per-aggregate filters).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Aggregate {
    pub uuid: String,
    pub metadata: BTreeMap<String, String>,
    #[serde(default)]
    pub hosts: Vec<String>,
}

/// A compute node: the provider of `in_tree` for a forced or requested host/node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputeNodeRef {
    /// The nova-compute service host.
    pub host: String,
    /// `hypervisor_hostname`, Placement's provider name.
    pub node: String,
    /// The compute node uuid, Placement's provider uuid.
    pub uuid: String,
}

/// What the translation knows of the cloud besides the request.
#[derive(Clone, Copy, Debug, Default)]
pub struct CloudView<'a> {
    pub aggregates: &'a [Aggregate],
    pub compute_nodes: &'a [ComputeNodeRef],
    /// The lowest service version of the nova-compute services (Nova counts 0 when none
    /// reports one); `None` when unknown, which adds no `OWNER_NOVA`.
    pub min_compute_service_version: Option<i64>,
}

/// `require_tenant_aggregate`: the aggregates with a `filter_tenant_id*` key whose value is
/// the project. A spec without a project matches none.
pub fn tenant_aggregates(cloud: &CloudView<'_>, project_id: Option<&str>) -> Vec<String> {
    let Some(project) = project_id else {
        return Vec::new();
    };
    uuids_where(cloud, |k, v| {
        v == project && k.starts_with(TENANT_METADATA_KEY)
    })
}

/// `map_az_to_placement_aggregate`: the aggregates whose `availability_zone` is `zone`.
pub fn zone_aggregates(cloud: &CloudView<'_>, zone: &str) -> Vec<String> {
    uuids_where(cloud, |k, v| k == "availability_zone" && v == zone)
}

/// `isolate_aggregates`: aggregates with a `trait:*=required` key for a trait the request
/// does not require (the key prefix is compared without case, as SQL `LIKE` does).
pub fn isolated_aggregates(cloud: &CloudView<'_>, required: &BTreeSet<String>) -> Vec<String> {
    let wanted: BTreeSet<String> = required.iter().map(|t| format!("trait:{t}")).collect();
    uuids_where(cloud, |k, v| {
        v == "required"
            && k.get(..6).is_some_and(|p| p.eq_ignore_ascii_case("trait:"))
            && !wanted.contains(k)
    })
}

fn uuids_where(cloud: &CloudView<'_>, matches: impl Fn(&str, &str) -> bool) -> Vec<String> {
    let mut out: Vec<String> = cloud
        .aggregates
        .iter()
        .filter(|a| a.metadata.iter().any(|(k, v)| matches(k, v)))
        .map(|a| a.uuid.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `HostManager.get_compute_nodes_by_host_or_node`: the nodes of `host` and/or `node`.
pub fn compute_nodes<'a>(
    cloud: &CloudView<'a>,
    host: Option<&str>,
    node: Option<&str>,
) -> Vec<&'a ComputeNodeRef> {
    cloud
        .compute_nodes
        .iter()
        .filter(|n| host.is_none_or(|h| n.host == h) && node.is_none_or(|x| n.node == x))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agg(uuid: &str, metadata: &[(&str, &str)]) -> Aggregate {
        Aggregate {
            uuid: uuid.into(),
            hosts: Vec::new(),
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn tenant_zone_and_isolation_read_metadata_as_nova_s_queries_do() {
        let aggs = [
            agg("a", &[("filter_tenant_id", "p1")]),
            agg("b", &[("filter_tenant_id_2", "p1"), ("x", "p2")]),
            agg("c", &[("owner", "p1"), ("availability_zone", "az1")]),
            agg("d", &[("TRAIT:CUSTOM_SSD", "required")]),
            agg(
                "e",
                &[
                    ("trait:CUSTOM_GPU", "required"),
                    ("trait:CUSTOM_SSD", "required"),
                ],
            ),
            agg("f", &[("trait:CUSTOM_SLOW", "forbidden")]),
        ];
        let cloud = CloudView {
            aggregates: &aggs,
            ..CloudView::default()
        };
        assert_eq!(tenant_aggregates(&cloud, Some("p1")), vec!["a", "b"]);
        assert_eq!(tenant_aggregates(&cloud, Some("p2")), Vec::<String>::new());
        assert_eq!(tenant_aggregates(&cloud, None), Vec::<String>::new());
        assert_eq!(zone_aggregates(&cloud, "az1"), vec!["c"]);
        let ssd: BTreeSet<String> = ["CUSTOM_SSD".to_string()].into();
        assert_eq!(
            isolated_aggregates(&cloud, &BTreeSet::new()),
            vec!["d", "e"]
        );
        assert_eq!(isolated_aggregates(&cloud, &ssd), vec!["d", "e"]);
    }
}
