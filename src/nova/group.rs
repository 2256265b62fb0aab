//! The RequestSpec's `instance_group` (InstanceGroup 1.x) and `limits` (SchedulerLimits 1.0).

use super::bounds::MAX_SIZE;
use super::error::{CodecError, Result};
use super::object::Fields;
use crate::domain::{GroupPolicy, ServerGroup};
use serde::Serialize;
use serde_json::Value;

/// The parts of Nova's InstanceGroup a scheduler uses.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstanceGroup {
    /// `policy` (1.11), or the first of the older `policies` list; `None` when neither is set.
    pub policy: Option<GroupPolicy>,
    pub hosts: Vec<String>,
    pub members: Vec<String>,
    /// `max_server_per_host` of the group's rules, when set.
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
        // InstanceGroup 1.11's field is `_rules` (`rules` is a Python property over it, so
        // `obj_to_primitive()` carries `_rules`); `rules` is read too, for a legacy dict.
        let rules_key = if g.field("_rules").value().is_some() {
            "_rules"
        } else {
            "rules"
        };
        let max_server_per_host = match g.opt_dict(rules_key)? {
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
        Some(ServerGroup::new(
            self.policy?,
            self.hosts.clone(),
            self.max_server_per_host.unwrap_or(1),
        ))
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
        Some(n) if (1..=MAX_SIZE).contains(&n) => Ok(Some(n)),
        _ => Err(CodecError::invalid(
            rules.path_of(key),
            format!("must be a positive integer of at most {MAX_SIZE}"),
        )),
    }
}

/// SchedulerLimits 1.0 (oversubscription limits a host reported; all optional).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Limits {
    pub vcpu: Option<i64>,
    pub memory_mb: Option<i64>,
    pub disk_gb: Option<i64>,
    /// NUMATopologyLimits 1.1, set where `NUMATopologyFilter` passed an instance with a
    /// NUMA topology (`host_state.limits['numa_topology']`): the compute's claim fits the
    /// instance under them. Not read from a RequestSpec (nothing reads it there).
    pub numa_topology: Option<crate::domain::numa::NumaLimits>,
}

impl Limits {
    /// Reads a SchedulerLimits object's data.
    pub fn from_fields(l: &Fields<'_>) -> Result<Self> {
        Ok(Limits {
            vcpu: l.opt_size("vcpu")?,
            memory_mb: l.opt_size("memory_mb")?,
            disk_gb: l.opt_size("disk_gb")?,
            numa_topology: None,
        })
    }
}
