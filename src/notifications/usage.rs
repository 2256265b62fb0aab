//! The measured usage a message carries, as one reading of the table's soft state
//! (`table::usage`): the `usage` and `instance_usage` blocks of Parasol's host-state event
//! (per host and per instance, by class), its `instance_qos` block (per instance, by QoS
//! signal), and Nova's `metrics.update`: its `cpu.percent` as
//! the host's VCPU usage (host CPU only: Nova's `cpu.virt_driver` monitor reports the node's
//! busy share of its CPU time, an integer percentage), and every metric it lists as the
//! node's monitor metrics (`MetricsFilter`, `MetricsWeigher`).

use crate::domain::UsageSource;
use crate::nova::{HostEvent, Notification};
use crate::table::{Amount, NodeRef, UsageReading};
use std::collections::BTreeMap;

/// Nova's monitor metric of the node's CPU use: (user + kernel + iowait) time over the
/// whole, since its last reading, in percent.
const CPU_PERCENT: &str = "cpu.percent";

/// The reading `n` carries, if any. A `metrics.update` without `cpu.percent` sets no class,
/// only the node's metrics; one with no metric at all the table refuses as `no_usage`
/// (counted).
pub(super) fn reading_of(n: &Notification) -> Option<UsageReading> {
    match &n.event {
        HostEvent::HostState(p) => {
            if p.usage.is_none() && p.instance_usage.is_none() && p.instance_qos.is_none() {
                return None;
            }
            Some(UsageReading {
                node: NodeRef::Uuid(p.compute_node_uuid.clone()),
                source: UsageSource::HostState,
                at_ms: n.sent_ms(),
                classes: p
                    .usage
                    .iter()
                    .flatten()
                    .map(|(class, v)| (class.clone(), Amount::Units(*v)))
                    .collect(),
                instances: per_instance(p.instance_usage.as_ref()),
                metrics: Vec::new(),
                qos: per_instance(p.instance_qos.as_ref()),
            })
        }
        HostEvent::Metrics(p) => {
            let cpu = p.metric(CPU_PERCENT);
            Some(UsageReading {
                node: NodeRef::Name {
                    host: p.host.clone(),
                    node: p.nodename.clone(),
                },
                source: UsageSource::NovaMetrics,
                at_ms: cpu.and_then(|m| m.at_ms).or_else(|| n.sent_ms()),
                classes: cpu
                    .map(|m| vec![("VCPU".to_string(), Amount::Percent(m.value))])
                    .unwrap_or_default(),
                instances: Vec::new(),
                metrics: p
                    .metrics
                    .iter()
                    .map(|m| (m.name.clone(), m.value, m.at_ms))
                    .collect(),
                qos: Vec::new(),
            })
        }
        _ => None,
    }
}

/// A per-instance block as the table takes it: per instance uuid, values by name.
type PerInstance = Vec<(String, Vec<(String, f64)>)>;

fn per_instance(block: Option<&BTreeMap<String, BTreeMap<String, f64>>>) -> PerInstance {
    block
        .into_iter()
        .flatten()
        .map(|(uuid, values)| {
            let values = values.iter().map(|(c, v)| (c.clone(), *v)).collect();
            (uuid.clone(), values)
        })
        .collect()
}
