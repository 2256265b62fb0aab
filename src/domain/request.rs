//! The typed scheduling context: everything a filter or weigher needs from a RequestSpec,
//! computed once per request rather than per host.

use super::resources::Resources;
use serde::Serialize;

/// Nova's `requested_destination` (Destination 1.4), the parts that constrain a host.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Destination {
    pub host: Option<String>,
    pub node: Option<String>,
}

/// Server-group policies Nova knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum GroupPolicy {
    Affinity,
    AntiAffinity,
    SoftAffinity,
    SoftAntiAffinity,
}

impl GroupPolicy {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "affinity" => Some(GroupPolicy::Affinity),
            "anti-affinity" => Some(GroupPolicy::AntiAffinity),
            "soft-affinity" => Some(GroupPolicy::SoftAffinity),
            "soft-anti-affinity" => Some(GroupPolicy::SoftAntiAffinity),
            _ => None,
        }
    }
}

/// The instance group of a request: its policy and the hosts its members already run on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerGroup {
    pub policy: GroupPolicy,
    pub hosts: Vec<String>,
    /// Anti-affinity `max_server_per_host` rule (1 when absent).
    pub max_server_per_host: i64,
}

/// One instance to place, with its demand and constraints.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestContext {
    pub instance_uuid: String,
    pub demand: Resources,
    /// Flavor name (or id), used as the per-flavor key of APSR's sample counters.
    pub flavor: String,
    pub availability_zone: Option<String>,
    pub force_hosts: Vec<String>,
    pub force_nodes: Vec<String>,
    pub ignore_hosts: Vec<String>,
    pub requested_destination: Option<Destination>,
    pub group: Option<ServerGroup>,
}

impl RequestContext {
    /// A request with only a demand, for the simulator, the benchmark and tests.
    pub fn with_demand(
        instance_uuid: impl Into<String>,
        flavor: impl Into<String>,
        demand: Resources,
    ) -> Self {
        RequestContext {
            instance_uuid: instance_uuid.into(),
            demand,
            flavor: flavor.into(),
            availability_zone: None,
            force_hosts: Vec::new(),
            force_nodes: Vec::new(),
            ignore_hosts: Vec::new(),
            requested_destination: None,
            group: None,
        }
    }
}
