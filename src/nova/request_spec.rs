//! Decoding Nova's RequestSpec 1.x primitive into the parts a scheduler acts on.

use super::error::{CodecError, Result};
use super::object::{Fields, NovaObject};
use crate::domain::{Destination, GroupPolicy, RequestContext, Resources, ServerGroup};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// The most instances one call may ask for; a larger `num_instances` is refused rather
/// than allocated.
pub const MAX_INSTANCES: i64 = 10_000;

/// The sizes of a Nova Flavor (or FlavorPayload) that make up a demand.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Flavor {
    pub name: Option<String>,
    pub flavorid: Option<String>,
    pub vcpus: i64,
    pub memory_mb: i64,
    pub root_gb: i64,
    pub ephemeral_gb: i64,
    /// Swap in MB.
    pub swap: i64,
}

impl Flavor {
    /// Reads the flavor fields of a Flavor object's data or of a legacy flavor dict;
    /// `vcpus`, `memory_mb` and `root_gb` are required, `ephemeral_gb` and `swap` default to 0.
    pub fn from_fields(f: &Fields<'_>) -> Result<Self> {
        Ok(Flavor {
            name: f.opt_str("name")?,
            flavorid: f.opt_id("flavorid")?,
            vcpus: f.req_size("vcpus")?,
            memory_mb: f.req_size("memory_mb")?,
            root_gb: f.req_size("root_gb")?,
            ephemeral_gb: f.opt_size("ephemeral_gb")?.unwrap_or(0),
            swap: f.opt_size("swap")?.unwrap_or(0),
        })
    }

    /// The demand vector as Nova's `resources_from_request_spec` computes it:
    /// DISK_GB = root_gb (unless boot-from-volume) + ephemeral_gb + ⌈swap / 1024⌉.
    pub fn demand(&self, is_bfv: bool) -> Resources {
        let root = if is_bfv { 0 } else { self.root_gb };
        let swap_gb = self.swap / 1024 + i64::from(self.swap % 1024 != 0);
        let disk = root
            .saturating_add(self.ephemeral_gb)
            .saturating_add(swap_gb);
        Resources::new(self.vcpus, self.memory_mb, disk)
    }

    /// The name a request is counted under per flavor (name, else flavorid, else sizes).
    pub fn key(&self) -> String {
        self.name
            .clone()
            .or_else(|| self.flavorid.clone())
            .unwrap_or_else(|| format!("{}-{}-{}", self.vcpus, self.memory_mb, self.root_gb))
    }
}

/// The parts of Nova's InstanceGroup a scheduler uses.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstanceGroup {
    /// `policy` (1.11), or the first of the older `policies` list; `None` when neither is set.
    pub policy: Option<GroupPolicy>,
    pub hosts: Vec<String>,
    pub members: Vec<String>,
    /// `rules.max_server_per_host`, when set.
    pub max_server_per_host: Option<i64>,
}

impl InstanceGroup {
    /// Reads an InstanceGroup object's data (or a legacy dict with the same keys).
    pub fn from_fields(g: &Fields<'_>) -> Result<Self> {
        let name = match g.opt_str("policy")? {
            Some(p) => Some(p),
            None => g
                .opt_str_list("policies")?
                .and_then(|l| l.into_iter().next()),
        };
        let policy = match name {
            None => None,
            Some(n) => Some(GroupPolicy::parse(&n).ok_or_else(|| {
                CodecError::invalid(g.path_of("policy"), format!("is not a known policy: {n:?}"))
            })?),
        };
        let max_server_per_host = match g.opt_dict("rules")? {
            None => None,
            Some(rules) => read_rule(&rules, "max_server_per_host")?,
        };
        Ok(InstanceGroup {
            policy,
            hosts: g.opt_str_list("hosts")?.unwrap_or_default(),
            members: g.opt_str_list("members")?.unwrap_or_default(),
            max_server_per_host,
        })
    }

    /// The scheduling constraint, when the group has a policy.
    pub fn server_group(&self) -> Option<ServerGroup> {
        Some(ServerGroup {
            policy: self.policy?,
            hosts: self.hosts.clone(),
            max_server_per_host: self.max_server_per_host.unwrap_or(1),
        })
    }
}

/// Reads a positive integer rule given as a number or a numeric string (Nova stores rules
/// as strings).
fn read_rule(rules: &Fields<'_>, key: &str) -> Result<Option<i64>> {
    let parsed = match rules.field(key).value() {
        None => return Ok(None),
        Some(Value::String(s)) => s.trim().parse::<i64>().ok(),
        Some(v) => v.as_i64(),
    };
    match parsed {
        Some(n) if n >= 1 => Ok(Some(n)),
        _ => Err(CodecError::invalid(
            rules.path_of(key),
            "must be a positive integer",
        )),
    }
}

/// SchedulerLimits 1.0 (oversubscription limits a host reported; all optional).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Limits {
    pub vcpu: Option<i64>,
    pub memory_mb: Option<i64>,
    pub disk_gb: Option<i64>,
}

impl Limits {
    /// Reads a SchedulerLimits object's data.
    pub fn from_fields(l: &Fields<'_>) -> Result<Self> {
        Ok(Limits {
            vcpu: l.opt_size("vcpu")?,
            memory_mb: l.opt_size("memory_mb")?,
            disk_gb: l.opt_size("disk_gb")?,
        })
    }
}

/// What Parasol keeps of a RequestSpec (1.x, or the legacy 4.0 dicts).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestSpec {
    /// The object version it came as; `(1, 0)` for legacy dicts.
    pub version: (u32, u32),
    pub flavor: Flavor,
    /// The demand of one instance, from the flavor and `is_bfv`.
    pub demand: Resources,
    pub num_instances: i64,
    pub instance_uuid: Option<String>,
    pub availability_zone: Option<String>,
    pub ignore_hosts: Vec<String>,
    pub force_hosts: Vec<String>,
    pub force_nodes: Vec<String>,
    pub requested_destination: Option<Destination>,
    pub instance_group: Option<InstanceGroup>,
    pub is_bfv: bool,
    /// Hints as lists of strings (a scalar hint becomes a one-element list).
    pub scheduler_hints: BTreeMap<String, Vec<String>>,
    pub limits: Option<Limits>,
    pub project_id: Option<String>,
    pub image_id: Option<String>,
}

impl RequestSpec {
    /// Decodes `RequestSpec.obj_to_primitive()`; errors are located under `spec_obj`.
    pub fn from_primitive(value: &Value) -> Result<Self> {
        Self::from_primitive_at(value, "spec_obj")
    }

    /// Decodes a RequestSpec primitive found at `path` (used in error messages).
    pub fn from_primitive_at(value: &Value, path: &str) -> Result<Self> {
        let obj = NovaObject::parse(value, "RequestSpec", path)?;
        obj.require_major(1)?;
        let d = &obj.data;
        let flavor = match d.opt_object("flavor", "Flavor")? {
            Some(f) => Flavor::from_fields(&f.data)?,
            None => return Err(CodecError::missing(d.path_of("flavor"))),
        };
        let is_bfv = d.opt_bool("is_bfv")?.unwrap_or(false);
        let requested_destination = match d.opt_object("requested_destination", "Destination")? {
            Some(dest) => Some(Destination {
                host: dest.data.opt_str("host")?,
                node: dest.data.opt_str("node")?,
            }),
            None => None,
        };
        let instance_group = match d.opt_object("instance_group", "InstanceGroup")? {
            Some(g) => Some(InstanceGroup::from_fields(&g.data)?),
            None => None,
        };
        let limits = match d.opt_object("limits", "SchedulerLimits")? {
            Some(l) => Some(Limits::from_fields(&l.data)?),
            None => None,
        };
        let image_id = match d.opt_object("image", "ImageMeta")? {
            Some(i) => i.data.opt_id("id")?,
            None => None,
        };
        Ok(RequestSpec {
            version: obj.version,
            demand: flavor.demand(is_bfv),
            flavor,
            num_instances: read_num_instances(d)?,
            instance_uuid: d.opt_str("instance_uuid")?,
            availability_zone: d.opt_str("availability_zone")?,
            ignore_hosts: d.opt_str_list("ignore_hosts")?.unwrap_or_default(),
            force_hosts: d.opt_str_list("force_hosts")?.unwrap_or_default(),
            force_nodes: d.opt_str_list("force_nodes")?.unwrap_or_default(),
            requested_destination,
            instance_group,
            is_bfv,
            scheduler_hints: read_hints(d, "scheduler_hints")?,
            limits,
            project_id: d.opt_str("project_id")?,
            image_id,
        })
    }

    /// One scheduling context per instance to place: one per `instance_uuids` entry; when
    /// that is empty, the spec's own `instance_uuid` first and fresh v4 uuids for the rest
    /// of `num_instances`.
    pub fn contexts(&self, instance_uuids: &[String]) -> Vec<RequestContext> {
        let uuids: Vec<String> = if instance_uuids.is_empty() {
            let count = self.num_instances.clamp(1, MAX_INSTANCES) as usize;
            let mut uuids: Vec<String> = self.instance_uuid.iter().cloned().collect();
            while uuids.len() < count {
                uuids.push(uuid::Uuid::new_v4().to_string());
            }
            uuids
        } else {
            instance_uuids.to_vec()
        };
        let group = self
            .instance_group
            .as_ref()
            .and_then(InstanceGroup::server_group);
        let flavor = self.flavor.key();
        uuids
            .into_iter()
            .map(|uuid| RequestContext {
                availability_zone: self.availability_zone.clone(),
                force_hosts: self.force_hosts.clone(),
                force_nodes: self.force_nodes.clone(),
                ignore_hosts: self.ignore_hosts.clone(),
                requested_destination: self.requested_destination.clone(),
                group: group.clone(),
                ..RequestContext::with_demand(uuid, flavor.clone(), self.demand)
            })
            .collect()
    }
}

/// `num_instances`: 1 when unset, otherwise between 1 and [`MAX_INSTANCES`].
pub(crate) fn read_num_instances(d: &Fields<'_>) -> Result<i64> {
    match d.opt_size("num_instances")? {
        None => Ok(1),
        Some(n) if (1..=MAX_INSTANCES).contains(&n) => Ok(n),
        Some(n) => Err(CodecError::invalid(
            d.path_of("num_instances"),
            format!("must be between 1 and {MAX_INSTANCES}, got {n}"),
        )),
    }
}

/// Scheduler hints as lists of strings; scalars become one-element lists.
pub(crate) fn read_hints(d: &Fields<'_>, key: &str) -> Result<BTreeMap<String, Vec<String>>> {
    let Some(hints) = d.opt_dict(key)? else {
        return Ok(BTreeMap::new());
    };
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Ok(hints
        .map()
        .iter()
        .map(|(k, v)| {
            let values = match v {
                Value::Array(items) => items.iter().map(text).collect(),
                Value::Null => Vec::new(),
                other => vec![text(other)],
            };
            (k.clone(), values)
        })
        .collect())
}

#[cfg(test)]
#[path = "request_spec_tests.rs"]
mod tests;
