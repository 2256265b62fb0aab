//! Measured usage as soft state (issue 45): each host's last reading per resource class,
//! with its time and source, kept beside the allocations in the live table and never
//! written to the ledger. A reading is taken whole or refused whole, with a reason that is
//! counted (`/v1/stats` `usage`, `/metrics` `parasol_usage_readings_total`): unknown host
//! or class, a negative or non-finite value, a value above the class's total, or a
//! measurement older than the one held. Expiry is judged where the reading is read
//! (`domain::ClassUsage::fresh`): an expired reading is kept, but decides nothing.

use super::HostTable;
use crate::domain::{
    check_usage_value, ClassId, ClassUsage, HostState, InstanceQos, InstanceUsage, MeasuredUsage,
    MonitorMetric, MonitorMetrics, QosReport, QosSignal, ReadingClock, UsageError, UsageRefusal,
    UsageSource,
};
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use std::sync::Arc;

/// Which compute node a reading is of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeRef {
    /// By compute node (resource provider) uuid.
    Uuid(String),
    /// By service host and node name (Nova's `metrics.update` names no uuid).
    Name { host: String, node: String },
    /// By service host alone (a Prometheus series' host label): its node when it has one,
    /// else the one of its nodes named the same (an Ironic-style service's nodes need a
    /// label each).
    Service(String),
}

/// A measured amount of one class.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Amount {
    /// In the class's unit (VCPU, MB, GB).
    Units(f64),
    /// A percentage of the class's total (Nova's `cpu.percent`).
    Percent(f64),
}

/// One message's usage for one compute node.
#[derive(Clone, Debug, PartialEq)]
pub struct UsageReading {
    pub node: NodeRef,
    pub source: UsageSource,
    /// When it was measured (ms since the epoch); `None`: when it is received.
    pub at_ms: Option<i64>,
    /// Per class name.
    pub classes: Vec<(String, Amount)>,
    /// Per instance uuid, per class name (in the class's unit); when present, the host's
    /// whole list of instances.
    pub instances: Vec<(String, Vec<(String, f64)>)>,
    /// Monitor metrics by name (`cpu.percent`, …), each with its own time when it has one;
    /// when present, the node's whole list.
    pub metrics: Vec<(String, f64, Option<i64>)>,
    /// QoS signals per instance uuid, per signal name (`cpu_wait`, `memory_pressure`);
    /// when present, the host's whole list of instances.
    pub qos: Vec<(String, Vec<(String, f64)>)>,
}

/// The label of the readings counter: what became of a reading.
type OutcomeLabel = Vec<(String, String)>;

/// Readings taken by source and refused by reason, shared with `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct UsageCounters {
    /// `parasol_usage_readings_total{outcome, source}`: `outcome` is `accepted` or the
    /// refusal's reason.
    pub readings: Family<OutcomeLabel, Counter>,
    /// `parasol_usage_polls_total{outcome, source}`: the queries a poller sent to a source
    /// it reads (`prometheus`), `ok` or `failed`.
    pub polls: Family<OutcomeLabel, Counter>,
    /// The error of each polled source's last failed query, until a round of its queries
    /// all succeed.
    last_poll_error: Arc<Mutex<Vec<(UsageSource, String)>>>,
}

/// What became of one query of a polled source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollOutcome {
    Ok,
    Failed,
}

impl PollOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            PollOutcome::Ok => "ok",
            PollOutcome::Failed => "failed",
        }
    }
}

impl UsageCounters {
    fn counter(&self, outcome: &str, source: UsageSource) -> Counter {
        self.readings
            .get_or_create(&vec![
                ("outcome".to_string(), outcome.to_string()),
                ("source".to_string(), source.as_str().to_string()),
            ])
            .clone()
    }

    /// Readings taken from `source`.
    pub fn accepted(&self, source: UsageSource) -> u64 {
        self.counter("accepted", source).get()
    }

    fn poll_counter(&self, outcome: PollOutcome, source: UsageSource) -> Counter {
        self.polls
            .get_or_create(&vec![
                ("outcome".to_string(), outcome.as_str().to_string()),
                ("source".to_string(), source.as_str().to_string()),
            ])
            .clone()
    }

    /// Counts one query of `source`; a failure's error becomes its last error.
    pub fn poll(&self, source: UsageSource, outcome: Result<(), String>) {
        let counted = match outcome {
            Ok(()) => PollOutcome::Ok,
            Err(e) => {
                let mut errors = self.last_poll_error.lock();
                errors.retain(|(s, _)| *s != source);
                errors.push((source, e));
                PollOutcome::Failed
            }
        };
        self.poll_counter(counted, source).inc();
    }

    /// A round of `source`'s queries all succeeded: its last error is forgotten.
    pub fn clear_poll_error(&self, source: UsageSource) {
        self.last_poll_error.lock().retain(|(s, _)| *s != source);
    }

    /// Queries of `source` that ended `outcome`.
    pub fn polls(&self, source: UsageSource, outcome: PollOutcome) -> u64 {
        self.poll_counter(outcome, source).get()
    }

    /// The error of `source`'s last query, if it failed.
    pub fn last_poll_error(&self, source: UsageSource) -> Option<String> {
        let errors = self.last_poll_error.lock();
        errors
            .iter()
            .find(|(s, _)| *s == source)
            .map(|(_, e)| e.clone())
    }

    /// Readings refused for `reason`, every source together.
    pub fn refused(&self, reason: UsageRefusal) -> u64 {
        UsageSource::ALL
            .iter()
            .map(|s| self.counter(reason.as_str(), *s).get())
            .sum()
    }
}

/// How many hosts have a fresh reading, only expired ones, or none, at one time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsageCounts {
    pub fresh: usize,
    pub expired: usize,
    pub none: usize,
    /// Instances with a reading, over every host.
    pub instances: usize,
    /// Instances with QoS signals, over every host (fresh or not).
    pub qos_instances: usize,
}

impl HostTable {
    /// What became of the usage readings so far.
    pub fn usage_counters(&self) -> &UsageCounters {
        &self.usage
    }

    /// Takes `reading` received at `now_ms` whole, or refuses it whole with the reason (the
    /// table unchanged); either way counted. Returns how many classes it set.
    pub fn record_usage(&self, reading: &UsageReading, now_ms: i64) -> Result<usize, UsageError> {
        let taken = self.take_usage(reading, now_ms);
        let outcome = match &taken {
            Ok(_) => "accepted",
            Err(e) => e.reason.as_str(),
        };
        self.usage.counter(outcome, reading.source).inc();
        taken
    }

    fn take_usage(&self, reading: &UsageReading, now_ms: i64) -> Result<usize, UsageError> {
        if reading.classes.is_empty()
            && reading.instances.is_empty()
            && reading.metrics.is_empty()
            && reading.qos.is_empty()
        {
            return Err(UsageError::new(UsageRefusal::NoUsage, "no class measured"));
        }
        let at_ms = reading.at_ms.unwrap_or(now_ms);
        let mut inner = self.inner.write();
        let slot = match &reading.node {
            NodeRef::Uuid(uuid) => inner.by_uuid.get(uuid.as_str()).copied(),
            NodeRef::Name { host, node } => [host, node].into_iter().find_map(|name| {
                inner.by_host.get(name.as_str()).and_then(|slots| {
                    slots
                        .iter()
                        .copied()
                        .find(|s| *inner.hosts[*s].profile.node == **node)
                })
            }),
            NodeRef::Service(host) => {
                inner
                    .by_host
                    .get(host.as_str())
                    .and_then(|slots| match slots.as_slice() {
                        [only] => Some(*only),
                        _ => slots
                            .iter()
                            .copied()
                            .find(|s| *inner.hosts[*s].profile.node == **host),
                    })
            }
        };
        let Some(slot) = slot else {
            return Err(UsageError::new(
                UsageRefusal::UnknownHost,
                format!("no compute node {:?}", reading.node),
            ));
        };
        let host = &inner.hosts[slot];
        let mut measured = host.measured.as_deref().cloned().unwrap_or_default();
        for (name, amount) in &reading.classes {
            let (class, total) = class_of(host, name)?;
            let value = class_value(name, *amount, total)?;
            not_older(name, at_ms, measured.class(class).map(|held| held.at_ms))?;
            measured.set(ClassUsage {
                class,
                value,
                at_ms,
                received_ms: now_ms,
                source: reading.source,
                placed: 0,
            });
        }
        if !reading.instances.is_empty() {
            measured.instances = instances_of(host, reading, &measured, at_ms)?;
        }
        if !reading.metrics.is_empty() {
            measured.metrics = Some(metrics_of(reading, &measured, at_ms, now_ms)?);
        }
        if !reading.qos.is_empty() {
            measured.qos = Some(qos_of(reading, &measured, at_ms, now_ms)?);
        }
        let set = reading.classes.len();
        inner.hosts[slot].measured = Some(Arc::new(measured));
        Ok(set)
    }

    /// How many hosts have a reading younger than `max_age_ms` at `now_ms` in some class,
    /// only older ones (decided on their allocations), or none.
    pub fn usage_counts(&self, now_ms: i64, max_age_ms: i64) -> UsageCounts {
        let inner = self.inner.read();
        let mut counts = UsageCounts::default();
        for h in &inner.hosts {
            match &h.measured {
                Some(m) if m.any_fresh(now_ms, max_age_ms) => counts.fresh += 1,
                Some(m) if !m.classes.is_empty() => counts.expired += 1,
                _ => counts.none += 1,
            }
            counts.instances += h.measured.as_ref().map_or(0, |m| m.instances.len());
            counts.qos_instances += h
                .measured
                .as_ref()
                .and_then(|m| m.qos.as_ref())
                .map_or(0, |q| q.instances.len());
        }
        counts
    }
}

impl HostTable {
    /// Each host's measured load at `clock` (Flex's `host_saturation` QoS): over `classes`
    /// with a fresh reading, the greatest estimate (the reading plus what was claimed since)
    /// over total − reserved. A host with no fresh reading in any of them is left out.
    pub fn measured_loads(&self, classes: &[ClassId], clock: ReadingClock) -> Vec<f64> {
        let inner = self.inner.read();
        inner
            .hosts
            .iter()
            .filter_map(|h| {
                let measured = h.measured.as_deref()?;
                classes
                    .iter()
                    .filter_map(|&class| {
                        let reading = measured
                            .class(class)
                            .filter(|r| clock.fresh(r.at_ms, r.received_ms))?;
                        let inv = h.profile.inventory(class)?;
                        let capacity = (inv.total - inv.reserved) as f64;
                        (capacity > 0.0).then(|| reading.estimate() / capacity)
                    })
                    .reduce(f64::max)
            })
            .collect()
    }
}

impl HostTable {
    /// Passes every instance of every host whose QoS report is fresh at `clock` to `visit`
    /// (Flex's `instance_signals` QoS). A host whose last report expired counts no instance.
    pub fn visit_instance_qos(&self, clock: ReadingClock, visit: &mut dyn FnMut(&InstanceQos)) {
        let inner = self.inner.read();
        for h in &inner.hosts {
            let Some(report) = h.measured.as_deref().and_then(|m| m.fresh_qos(clock)) else {
                continue;
            };
            for instance in &report.instances {
                visit(instance);
            }
        }
    }
}

/// The per-instance readings of `reading` on `host`, or why they are refused.
fn instances_of(
    host: &HostState,
    reading: &UsageReading,
    measured: &MeasuredUsage,
    at_ms: i64,
) -> Result<Vec<InstanceUsage>, UsageError> {
    let held = measured.instances.iter().map(|i| i.at_ms).max();
    not_older("instances", at_ms, held)?;
    let mut instances = Vec::with_capacity(reading.instances.len());
    for (uuid, classes) in &reading.instances {
        let mut values = Vec::with_capacity(classes.len());
        for (name, value) in classes {
            let (class, total) = class_of(host, name)?;
            let what = format!("instance {uuid} {name}");
            check_usage_value(&what, *value)?;
            if *value > total {
                return Err(UsageError::new(
                    UsageRefusal::AboveTotal,
                    format!("{what} {value} above the host's total {total}"),
                ));
            }
            values.push((class, *value));
        }
        instances.push(InstanceUsage {
            instance: Arc::from(uuid.as_str()),
            at_ms,
            source: reading.source,
            classes: values,
        });
    }
    Ok(instances)
}

/// The node's monitor metrics of `reading`, its whole list, or why they are refused: a value
/// not finite or below 0, or a report measured before the one held.
fn metrics_of(
    reading: &UsageReading,
    measured: &MeasuredUsage,
    at_ms: i64,
    now_ms: i64,
) -> Result<MonitorMetrics, UsageError> {
    not_older("metrics", at_ms, measured.metrics.as_ref().map(|m| m.at_ms))?;
    let mut metrics = Vec::with_capacity(reading.metrics.len());
    for (name, value, own_ms) in &reading.metrics {
        check_usage_value(&format!("metric {name}"), *value)?;
        metrics.push(MonitorMetric {
            name: Arc::from(name.as_str()),
            value: *value,
            at_ms: own_ms.unwrap_or(at_ms),
        });
    }
    Ok(MonitorMetrics {
        at_ms,
        received_ms: now_ms,
        source: reading.source,
        metrics,
    })
}

/// The instances' QoS signals of `reading`, the host's whole list, or why they are refused:
/// a name that is no signal, a value that is not a share in [0, 1], or a report measured
/// before the one held.
fn qos_of(
    reading: &UsageReading,
    measured: &MeasuredUsage,
    at_ms: i64,
    now_ms: i64,
) -> Result<QosReport, UsageError> {
    not_older("QoS signals", at_ms, measured.qos.as_ref().map(|q| q.at_ms))?;
    let mut instances = Vec::with_capacity(reading.qos.len());
    for (uuid, signals) in &reading.qos {
        let mut values = Vec::with_capacity(signals.len());
        for (name, value) in signals {
            let signal = QosSignal::lookup(name).ok_or_else(|| {
                UsageError::new(
                    UsageRefusal::UnknownClass,
                    format!(
                        "instance {uuid}: {name} is not a QoS signal ({})",
                        QosSignal::names()
                    ),
                )
            })?;
            let what = format!("instance {uuid} {name}");
            check_usage_value(&what, *value)?;
            if *value > 1.0 {
                return Err(UsageError::new(
                    UsageRefusal::AboveTotal,
                    format!("{what} {value} is above 1 (a share of the interval)"),
                ));
            }
            values.push((signal, *value));
        }
        values.sort_by_key(|(s, _)| *s);
        values.dedup_by_key(|(s, _)| *s);
        instances.push(InstanceQos {
            instance: Arc::from(uuid.as_str()),
            signals: values,
        });
    }
    Ok(QosReport {
        at_ms,
        received_ms: now_ms,
        source: reading.source,
        instances,
    })
}

/// Refuses `what` measured at `at_ms` when the reading held was measured later (`held_ms`).
fn not_older(what: &str, at_ms: i64, held_ms: Option<i64>) -> Result<(), UsageError> {
    match held_ms {
        Some(held) if held > at_ms => Err(UsageError::new(
            UsageRefusal::Older,
            format!("{what} measured at {at_ms} ms, before the {held} ms held"),
        )),
        _ => Ok(()),
    }
}

/// Class `name`'s measured `amount` in units of a class of `total`, or why it is refused.
fn class_value(name: &str, amount: Amount, total: f64) -> Result<f64, UsageError> {
    let value = match amount {
        Amount::Units(v) => v,
        Amount::Percent(p) => {
            check_usage_value(name, p)?;
            if p > 100.0 {
                return Err(UsageError::new(
                    UsageRefusal::AboveTotal,
                    format!("{name} at {p} %"),
                ));
            }
            p / 100.0 * total
        }
    };
    check_usage_value(name, value)?;
    if value > total {
        return Err(UsageError::new(
            UsageRefusal::AboveTotal,
            format!("{name} {value} above its total {total}"),
        ));
    }
    Ok(value)
}

/// The class `name` of `host`, with its total: refused when it is no class or one the host
/// has no inventory of.
fn class_of(host: &HostState, name: &str) -> Result<(ClassId, f64), UsageError> {
    ClassId::lookup(name)
        .and_then(|class| {
            host.profile
                .inventory(class)
                .map(|inv| (class, inv.total as f64))
        })
        .ok_or_else(|| {
            UsageError::new(
                UsageRefusal::UnknownClass,
                format!("{name} is not a class of {}", host.profile.node),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{HostId, HostProfile, Inventory, MeasuredUsage, Resources};

    const UUID: &str = "00000000-0000-4000-8000-000000000001";

    fn table() -> HostTable {
        let t = HostTable::new();
        let inv = |total| Inventory {
            reserved: 2,
            ..Inventory::of(total)
        };
        let profile = HostProfile::new(
            "cmp1",
            "cmp1.node",
            UUID,
            "nova",
            vec![(ClassId::VCPU, inv(16)), (ClassId::MEMORY_MB, inv(32_768))],
        );
        t.load([HostState::new(HostId(1), Arc::new(profile))]);
        t
    }

    fn reading(at_ms: i64, classes: &[(&str, Amount)]) -> UsageReading {
        UsageReading {
            node: NodeRef::Uuid(UUID.into()),
            source: UsageSource::HostState,
            at_ms: Some(at_ms),
            classes: classes.iter().map(|(n, a)| (n.to_string(), *a)).collect(),
            instances: Vec::new(),
            metrics: Vec::new(),
            qos: Vec::new(),
        }
    }

    fn measured(t: &HostTable) -> Option<Arc<MeasuredUsage>> {
        t.get(HostId(1)).unwrap().measured
    }

    /// Host 1's VCPU estimate: its reading plus what was placed since.
    fn vcpu_estimate(t: &HostTable) -> f64 {
        measured(t)
            .unwrap()
            .class(ClassId::VCPU)
            .unwrap()
            .estimate()
    }

    #[test]
    fn a_service_host_names_its_only_node_or_the_node_of_its_name() {
        let t = table();
        let by = |host: &str| UsageReading {
            node: NodeRef::Service(host.into()),
            source: UsageSource::Prometheus,
            ..reading(1_000, &[("VCPU", Amount::Units(2.0))])
        };
        assert_eq!(t.record_usage(&by("cmp1"), 1_000), Ok(1));
        assert_eq!(vcpu_estimate(&t), 2.0);
        let err = t.record_usage(&by("cmp1.node"), 1_000).unwrap_err();
        assert_eq!(
            err.reason,
            UsageRefusal::UnknownHost,
            "a node name is no service host"
        );
        let profile = |node: &str, uuid: &str| {
            let vcpu = vec![(ClassId::VCPU, Inventory::of(16))];
            Arc::new(HostProfile::new("ironic", node, uuid, "nova", vcpu))
        };
        t.load([
            HostState::new(
                HostId(2),
                profile("ironic", "00000000-0000-4000-8000-000000000002"),
            ),
            HostState::new(
                HostId(3),
                profile("bm-1", "00000000-0000-4000-8000-000000000003"),
            ),
        ]);
        assert_eq!(t.record_usage(&by("ironic"), 1_000), Ok(1));
        let node2 = t.get(HostId(2)).unwrap().measured.unwrap();
        assert_eq!(
            node2.class(ClassId::VCPU).unwrap().source,
            UsageSource::Prometheus
        );
        assert!(t.get(HostId(3)).unwrap().measured.is_none());
        assert_eq!(t.usage_counters().accepted(UsageSource::Prometheus), 2);
    }

    #[test]
    fn a_reading_sets_each_class_with_its_time_and_source() {
        let t = table();
        let r = reading(
            1_000,
            &[
                ("VCPU", Amount::Units(4.5)),
                ("MEMORY_MB", Amount::Units(8192.0)),
            ],
        );
        assert_eq!(t.record_usage(&r, 1_500), Ok(2));
        let m = measured(&t).unwrap();
        let vcpu = m.class(ClassId::VCPU).unwrap();
        assert_eq!(
            (vcpu.value, vcpu.at_ms, vcpu.received_ms, vcpu.source),
            (4.5, 1_000, 1_500, UsageSource::HostState)
        );
        assert_eq!(m.class(ClassId::MEMORY_MB).unwrap().value, 8192.0);
        assert_eq!(t.usage_counters().accepted(UsageSource::HostState), 1);

        // Nova's cpu.percent of the node's total, by service host and node name.
        let nova = UsageReading {
            node: NodeRef::Name {
                host: "cmp1".into(),
                node: "cmp1.node".into(),
            },
            source: UsageSource::NovaMetrics,
            at_ms: Some(2_000),
            classes: vec![("VCPU".into(), Amount::Percent(25.0))],
            instances: Vec::new(),
            metrics: Vec::new(),
            qos: Vec::new(),
        };
        t.record_usage(&nova, 2_000).unwrap();
        let m = measured(&t).unwrap();
        let vcpu = m.class(ClassId::VCPU).unwrap();
        assert_eq!((vcpu.value, vcpu.source), (4.0, UsageSource::NovaMetrics));
        assert_eq!(
            m.class(ClassId::MEMORY_MB).unwrap().source,
            UsageSource::HostState,
            "each class keeps its own source"
        );
    }

    #[test]
    fn bad_readings_are_refused_whole_with_their_reason_and_counted() {
        let t = table();
        t.record_usage(&reading(5_000, &[("VCPU", Amount::Units(1.0))]), 5_000)
            .unwrap();
        let before = measured(&t);
        let mut unknown = reading(6_000, &[("VCPU", Amount::Units(1.0))]);
        unknown.node = NodeRef::Uuid("00000000-0000-4000-8000-0000000000ff".into());
        let cases: Vec<(UsageReading, UsageRefusal)> = vec![
            (unknown, UsageRefusal::UnknownHost),
            (
                // The good class first: nothing of the reading is taken.
                reading(
                    6_000,
                    &[
                        ("MEMORY_MB", Amount::Units(1.0)),
                        ("VCPU", Amount::Units(-1.0)),
                    ],
                ),
                UsageRefusal::Negative,
            ),
            (
                reading(6_000, &[("VCPU", Amount::Units(f64::NAN))]),
                UsageRefusal::NotANumber,
            ),
            (
                // Above the total (16), not merely above total − reserved (14).
                reading(6_000, &[("VCPU", Amount::Units(16.5))]),
                UsageRefusal::AboveTotal,
            ),
            (
                reading(6_000, &[("VCPU", Amount::Percent(101.0))]),
                UsageRefusal::AboveTotal,
            ),
            (
                reading(4_999, &[("VCPU", Amount::Units(2.0))]),
                UsageRefusal::Older,
            ),
            (
                reading(6_000, &[("DISK_GB", Amount::Units(2.0))]),
                UsageRefusal::UnknownClass,
            ),
            (reading(6_000, &[]), UsageRefusal::NoUsage),
        ];
        let mut counted = std::collections::HashMap::new();
        for (r, reason) in cases {
            let err = t.record_usage(&r, 6_000).unwrap_err();
            assert_eq!(err.reason, reason, "{err}");
            assert_eq!(measured(&t), before, "{reason:?} changed nothing");
            let n = counted.entry(reason).or_insert(0);
            *n += 1;
            assert_eq!(t.usage_counters().refused(reason), *n, "{reason:?}");
        }
        assert_eq!(t.usage_counters().accepted(UsageSource::HostState), 1);
        // Total itself is fine.
        t.record_usage(&reading(6_000, &[("VCPU", Amount::Units(16.0))]), 6_000)
            .unwrap();
    }

    #[test]
    fn counts_tell_fresh_expired_and_unmeasured_hosts_apart() {
        let t = table();
        assert_eq!(t.usage_counts(0, 60_000).none, 1);
        t.record_usage(&reading(1_000, &[("VCPU", Amount::Units(1.0))]), 1_000)
            .unwrap();
        assert_eq!(t.usage_counts(61_000, 60_000).fresh, 1);
        assert_eq!(t.usage_counts(61_001, 60_000).expired, 1);
    }

    #[test]
    fn claims_on_the_table_count_on_top_of_the_reading_until_the_next() {
        let t = table();
        t.record_usage(&reading(1_000, &[("VCPU", Amount::Units(1.0))]), 1_000)
            .unwrap();
        let demand = Resources::new(2, 256, 0);
        t.reserve(HostId(1), &demand);
        assert_eq!(vcpu_estimate(&t), 3.0);
        t.undo(HostId(1), &demand);
        assert_eq!(vcpu_estimate(&t), 1.0);
        t.reserve(HostId(1), &demand);
        t.record_usage(&reading(2_000, &[("VCPU", Amount::Units(3.5))]), 2_000)
            .unwrap();
        assert_eq!(vcpu_estimate(&t), 3.5);
    }

    /// Nova's `metrics.update` lists the node's monitor metrics: kept by name, each with its
    /// own time, the whole list replaced by the next report; a bad value or an older report
    /// is refused whole.
    #[test]
    fn monitor_metrics_are_the_nodes_whole_last_list() {
        let t = table();
        let report = |at_ms: i64, metrics: &[(&str, f64)]| UsageReading {
            node: NodeRef::Name {
                host: "cmp1".into(),
                node: "cmp1.node".into(),
            },
            source: UsageSource::NovaMetrics,
            at_ms: Some(at_ms),
            classes: Vec::new(),
            instances: Vec::new(),
            metrics: metrics
                .iter()
                .map(|(n, v)| (n.to_string(), *v, None))
                .collect(),
            qos: Vec::new(),
        };
        let mut first = report(1_000, &[("cpu.percent", 40.0), ("cpu.frequency", 2400.0)]);
        first.metrics[1].2 = Some(900);
        assert_eq!(t.record_usage(&first, 1_200), Ok(0));
        let m = measured(&t).unwrap();
        let set = m.metrics.as_ref().unwrap();
        assert_eq!((set.at_ms, set.received_ms), (1_000, 1_200));
        assert_eq!(set.metrics[1].at_ms, 900, "a metric keeps its own time");
        assert_eq!(m.metric("cpu.percent", None), Some(40.0));
        let clock = |now_ms| {
            Some(crate::domain::ReadingClock {
                now_ms,
                max_age_ms: 60_000,
            })
        };
        assert_eq!(m.metric("cpu.frequency", clock(60_900)), Some(2400.0));
        assert_eq!(m.metric("cpu.frequency", clock(60_901)), None, "expired");
        assert_eq!(m.metric("cpu.percent", clock(60_901)), Some(40.0));
        assert!(m.classes.is_empty(), "no class from metrics alone");

        for (bad, reason) in [
            (
                report(2_000, &[("cpu.percent", -1.0)]),
                UsageRefusal::Negative,
            ),
            (
                report(2_000, &[("cpu.percent", f64::NAN)]),
                UsageRefusal::NotANumber,
            ),
            (report(999, &[("cpu.percent", 1.0)]), UsageRefusal::Older),
        ] {
            assert_eq!(t.record_usage(&bad, 2_000).unwrap_err().reason, reason);
            assert_eq!(measured(&t), Some(m.clone()), "{reason:?} changed nothing");
        }
        t.record_usage(&report(3_000, &[("cpu.user.time", 7.0)]), 3_000)
            .unwrap();
        let m = measured(&t).unwrap();
        assert_eq!(m.metric("cpu.percent", None), None, "no longer reported");
        assert_eq!(m.metric("cpu.user.time", None), Some(7.0));
    }

    /// A host's `instance_qos`: its whole list of instances, each with the signals reported;
    /// a name that is no signal, a value outside [0, 1] or an older report is refused whole;
    /// the report expires as a reading does.
    #[test]
    fn instance_qos_is_the_hosts_whole_last_list_and_expires() {
        let t = table();
        let report = |at_ms: i64, instances: &[(&str, &[(&str, f64)])]| UsageReading {
            qos: instances
                .iter()
                .map(|(uuid, signals)| {
                    let signals = signals.iter().map(|(n, v)| (n.to_string(), *v)).collect();
                    (uuid.to_string(), signals)
                })
                .collect(),
            ..reading(at_ms, &[])
        };
        let (a, b) = (
            "10000000-0000-4000-8000-000000000001",
            "10000000-0000-4000-8000-000000000002",
        );
        let first = report(
            1_000,
            &[
                (a, &[("memory_pressure", 0.0), ("cpu_wait", 0.25)]),
                (b, &[("cpu_wait", 0.0)]),
            ],
        );
        assert_eq!(t.record_usage(&first, 1_100), Ok(0));
        let m = measured(&t).unwrap();
        let q = m.qos.as_ref().unwrap();
        assert_eq!(
            (q.at_ms, q.received_ms, q.instances.len()),
            (1_000, 1_100, 2)
        );
        assert_eq!(q.instances[0].signal(QosSignal::CpuWait), Some(0.25));
        assert_eq!(
            q.instances[0].signals[0].0,
            QosSignal::CpuWait,
            "sorted by signal"
        );
        assert_eq!(q.instances[1].signal(QosSignal::MemoryPressure), None);
        assert!(m.classes.is_empty(), "no class from QoS signals alone");
        assert_eq!(t.usage_counts(1_100, 60_000).qos_instances, 2);

        let visited = |now_ms| {
            let mut seen = Vec::new();
            let clock = ReadingClock {
                now_ms,
                max_age_ms: 60_000,
            };
            t.visit_instance_qos(clock, &mut |i| seen.push(i.instance.to_string()));
            seen
        };
        assert_eq!(visited(61_000), [a, b]);
        assert!(visited(61_001).is_empty(), "expired");

        for (bad, reason) in [
            (
                report(2_000, &[(a, &[("steal", 0.1)])]),
                UsageRefusal::UnknownClass,
            ),
            (
                report(2_000, &[(a, &[("cpu_wait", 1.5)])]),
                UsageRefusal::AboveTotal,
            ),
            (
                report(2_000, &[(a, &[("cpu_wait", -0.1)])]),
                UsageRefusal::Negative,
            ),
            (
                report(
                    2_000,
                    &[(b, &[("cpu_wait", 0.0)]), (a, &[("cpu_wait", f64::NAN)])],
                ),
                UsageRefusal::NotANumber,
            ),
            (
                report(999, &[(a, &[("cpu_wait", 0.0)])]),
                UsageRefusal::Older,
            ),
        ] {
            let err = t.record_usage(&bad, 2_000).unwrap_err();
            assert_eq!(err.reason, reason, "{err}");
            assert_eq!(measured(&t), Some(m.clone()), "{reason:?} changed nothing");
        }
        t.record_usage(&report(3_000, &[(b, &[("cpu_wait", 0.5)])]), 3_000)
            .unwrap();
        assert_eq!(visited(3_000), [b], "a is no longer reported");
    }

    #[test]
    fn measured_loads_take_the_most_loaded_fresh_class_over_capacity() {
        let t = table();
        let clock = |now_ms| ReadingClock {
            now_ms,
            max_age_ms: 60_000,
        };
        let classes = [ClassId::VCPU, ClassId::MEMORY_MB];
        assert!(
            t.measured_loads(&classes, clock(0)).is_empty(),
            "no reading"
        );
        // 7 of 14 VCPU, 24,383 of 32,766 MB (total − reserved).
        let r = reading(
            1_000,
            &[
                ("VCPU", Amount::Units(7.0)),
                ("MEMORY_MB", Amount::Units(24_383.0)),
            ],
        );
        t.record_usage(&r, 1_000).unwrap();
        let loads = t.measured_loads(&classes, clock(1_000));
        assert_eq!(loads, [24_383.0 / 32_766.0]);
        assert_eq!(t.measured_loads(&[ClassId::VCPU], clock(1_000)), [0.5]);
        assert!(
            t.measured_loads(&classes, clock(61_001)).is_empty(),
            "expired"
        );
    }

    #[test]
    fn instance_readings_replace_the_hosts_list() {
        let t = table();
        let mut r = reading(1_000, &[]);
        r.instances = vec![("i-1".into(), vec![("VCPU".into(), 0.5)])];
        t.record_usage(&r, 1_000).unwrap();
        assert_eq!(measured(&t).unwrap().instances.len(), 1);
        r.instances = vec![("i-2".into(), vec![("VCPU".into(), 99.0)])];
        r.at_ms = Some(2_000);
        let err = t.record_usage(&r, 2_000).unwrap_err();
        assert_eq!(err.reason, UsageRefusal::AboveTotal);
        assert_eq!(&*measured(&t).unwrap().instances[0].instance, "i-1");
        assert_eq!(t.usage_counts(2_000, 60_000).instances, 1);
    }
}
