//! Measured usage of a host (issue 45, Flex): soft state beside the allocations, never
//! durable. Each resource class keeps its last reading with its time and source; a reading
//! older than `[usage] max_age_s` is expired and decisions fall back to the allocations.
//! Between two readings, what was claimed on the host since the last one counts at its
//! request (docs/flex.md, "L̂ between measurements").

use super::classes::ClassId;
use super::resources::Resources;
use serde::Serialize;
use std::sync::Arc;

/// Where a reading came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageSource {
    /// The `usage` block of Parasol's `compute.host.state` event.
    HostState,
    /// Nova's versioned `metrics.update` notification (`compute_monitors`; host CPU only).
    NovaMetrics,
    /// The `metrics` column of the node's `compute_nodes` row, read through `[nova_db]`
    /// (where nova-scheduler's `HostState` reads them): monitor metrics only.
    NovaDb,
    /// A PromQL query of `[usage.prometheus]`, one sample per host and class.
    Prometheus,
}

impl UsageSource {
    pub const ALL: [UsageSource; 4] = [
        UsageSource::HostState,
        UsageSource::NovaMetrics,
        UsageSource::NovaDb,
        UsageSource::Prometheus,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            UsageSource::HostState => "host_state",
            UsageSource::NovaMetrics => "nova_metrics",
            UsageSource::NovaDb => "nova_db",
            UsageSource::Prometheus => "prometheus",
        }
    }
}

/// Why a reading was refused (nothing of it was taken).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageRefusal {
    /// No host of the table has this compute node (or service host and node).
    UnknownHost,
    /// Not a resource class, or one the host has no inventory of.
    UnknownClass,
    /// A value below 0.
    Negative,
    /// A value that is not a finite number.
    NotANumber,
    /// A value above the host's total of the class.
    AboveTotal,
    /// Measured before the reading held for the class.
    Older,
    /// The message carries no usage Parasol reads (e.g. a `metrics.update` listing no
    /// metric).
    NoUsage,
}

impl UsageRefusal {
    pub const ALL: [UsageRefusal; 7] = [
        UsageRefusal::UnknownHost,
        UsageRefusal::UnknownClass,
        UsageRefusal::Negative,
        UsageRefusal::NotANumber,
        UsageRefusal::AboveTotal,
        UsageRefusal::Older,
        UsageRefusal::NoUsage,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            UsageRefusal::UnknownHost => "unknown_host",
            UsageRefusal::UnknownClass => "unknown_class",
            UsageRefusal::Negative => "negative",
            UsageRefusal::NotANumber => "not_a_number",
            UsageRefusal::AboveTotal => "above_total",
            UsageRefusal::Older => "older",
            UsageRefusal::NoUsage => "no_usage",
        }
    }
}

/// A refused reading: the reason and what was wrong, for the log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("usage refused ({}): {detail}", reason.as_str())]
pub struct UsageError {
    pub reason: UsageRefusal,
    pub detail: String,
}

impl UsageError {
    pub fn new(reason: UsageRefusal, detail: impl Into<String>) -> Self {
        UsageError {
            reason,
            detail: detail.into(),
        }
    }
}

/// A value's checks that need no host: finite and not negative.
pub fn check_value(what: &str, value: f64) -> Result<(), UsageError> {
    if !value.is_finite() {
        return Err(UsageError::new(
            UsageRefusal::NotANumber,
            format!("{what} is {value}"),
        ));
    }
    if value < 0.0 {
        return Err(UsageError::new(
            UsageRefusal::Negative,
            format!("{what} is {value}"),
        ));
    }
    Ok(())
}

/// One class's last reading on one host.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClassUsage {
    #[serde(rename = "class")]
    pub class: ClassId,
    /// Measured usage L̂, in the class's unit.
    pub value: f64,
    /// When it was measured (the source's time), ms since the epoch.
    pub at_ms: i64,
    /// When Parasol received it (the service's clock), ms since the epoch.
    pub received_ms: i64,
    pub source: UsageSource,
    /// What was claimed on the host since (requests, in the class's unit).
    pub placed: i64,
}

impl ClassUsage {
    /// Whether the reading is younger than `max_age_ms` at `now_ms`. Its age counts from
    /// the earlier of its measurement and its receipt: a reading that waited in a queue is
    /// as old as its measurement, one from a host whose clock runs ahead as old as its
    /// receipt.
    pub fn fresh(&self, now_ms: i64, max_age_ms: i64) -> bool {
        ReadingClock { now_ms, max_age_ms }.fresh(self.at_ms, self.received_ms)
    }

    /// L̂ as Flex judges it: the measurement plus what was claimed since.
    pub fn estimate(&self) -> f64 {
        self.value + self.placed as f64
    }
}

/// The time against which readings expire: a call's time and `[usage] max_age_s`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadingClock {
    /// The time of the call (the service's clock), ms since the epoch.
    pub now_ms: i64,
    /// `[usage] max_age_s`, in ms.
    pub max_age_ms: i64,
}

impl ReadingClock {
    /// Whether a reading measured at `at_ms` and received at `received_ms` still decides:
    /// its age counts from the earlier of the two (see [`ClassUsage::fresh`]).
    pub fn fresh(self, at_ms: i64, received_ms: i64) -> bool {
        self.now_ms.saturating_sub(at_ms.min(received_ms)) <= self.max_age_ms
    }
}

/// One of a node's monitor metrics (Nova's `MonitorMetric`: `cpu.percent`,
/// `cpu.user.time`, … as `[DEFAULT] compute_monitors` report them).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MonitorMetric {
    pub name: Arc<str>,
    pub value: f64,
    /// Its own `timestamp` (else its message's), ms since the epoch.
    pub at_ms: i64,
}

/// A node's monitor metrics as its last report listed them: the whole list, so a metric the
/// node no longer reports is gone (as from Nova's `compute_nodes.metrics`), and each expires
/// after `[usage] max_age_s` (then unavailable, as Nova's weigher calls a missing metric).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MonitorMetrics {
    /// When the report was measured, ms since the epoch.
    pub at_ms: i64,
    /// When Parasol received it (the service's clock), ms since the epoch.
    pub received_ms: i64,
    pub source: UsageSource,
    pub metrics: Vec<MonitorMetric>,
}

impl MonitorMetrics {
    /// The value of metric `name` when the node reported it and, with a `clock`, it is still
    /// fresh; `None` (unavailable) otherwise. Without a clock (the simulator, unit tests)
    /// every reported metric counts.
    pub fn value(&self, name: &str, clock: Option<ReadingClock>) -> Option<f64> {
        self.metrics
            .iter()
            .find(|m| &*m.name == name)
            .filter(|m| clock.is_none_or(|c| c.fresh(m.at_ms, self.received_ms)))
            .map(|m| m.value)
    }
}

/// One instance's last reading (where a source reports per instance).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstanceUsage {
    pub instance: Arc<str>,
    pub at_ms: i64,
    pub source: UsageSource,
    /// Measured usage per class.
    pub classes: Vec<(ClassId, f64)>,
}

/// A signal of an instance's quality of service: how much of what it asked for it was not
/// given, as a share of the last interval (eq. 14's q_j(t), docs/flex.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QosSignal {
    /// The share of the interval the instance's vCPUs were runnable but not running (libvirt's
    /// `vcpu.N.delay` over the interval and its vCPUs: steal as the guest sees it).
    CpuWait,
    /// The share of the interval the instance stalled waiting for memory (the `some` line of
    /// its cgroup's `memory.pressure`, or the guest's own PSI).
    MemoryPressure,
}

impl QosSignal {
    pub const ALL: [QosSignal; 2] = [QosSignal::CpuWait, QosSignal::MemoryPressure];

    pub fn as_str(self) -> &'static str {
        match self {
            QosSignal::CpuWait => "cpu_wait",
            QosSignal::MemoryPressure => "memory_pressure",
        }
    }

    pub fn lookup(name: &str) -> Option<QosSignal> {
        QosSignal::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Every signal's name, for an error that lists them (`cpu_wait, memory_pressure`).
    pub fn names() -> String {
        QosSignal::ALL.map(QosSignal::as_str).join(", ")
    }
}

/// One instance's QoS signals as its host last reported them (each a share in [0, 1]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstanceQos {
    pub instance: Arc<str>,
    /// Per signal reported, sorted by signal.
    pub signals: Vec<(QosSignal, f64)>,
}

impl InstanceQos {
    /// The value of `signal`, when reported.
    pub fn signal(&self, signal: QosSignal) -> Option<f64> {
        self.signals
            .iter()
            .find(|(s, _)| *s == signal)
            .map(|(_, v)| *v)
    }
}

/// A host's last report of its instances' QoS signals: the whole list, replaced by the next.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QosReport {
    /// When it was measured, ms since the epoch.
    pub at_ms: i64,
    /// When Parasol received it (the service's clock), ms since the epoch.
    pub received_ms: i64,
    pub source: UsageSource,
    pub instances: Vec<InstanceQos>,
}

/// A host's measured usage: per class its last reading, and per instance where reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MeasuredUsage {
    /// Sorted by class.
    pub classes: Vec<ClassUsage>,
    pub instances: Vec<InstanceUsage>,
    /// The node's monitor metrics (`metrics.update`), when it reports any.
    pub metrics: Option<MonitorMetrics>,
    /// Its instances' QoS signals, when it reports any (Flex's `instance_signals`).
    pub qos: Option<QosReport>,
}

impl MeasuredUsage {
    /// The reading of `class`, when there is one.
    pub fn class(&self, class: ClassId) -> Option<&ClassUsage> {
        self.classes
            .binary_search_by_key(&class, |c| c.class)
            .ok()
            .map(|i| &self.classes[i])
    }

    /// Sets (or adds) the reading of its class.
    pub fn set(&mut self, reading: ClassUsage) {
        match self
            .classes
            .binary_search_by_key(&reading.class, |c| c.class)
        {
            Ok(i) => self.classes[i] = reading,
            Err(i) => self.classes.insert(i, reading),
        }
    }

    /// A claim of `demand` on the host: counted on top of each class's reading.
    pub fn add_placed(&mut self, demand: &Resources) {
        for c in &mut self.classes {
            c.placed = c.placed.saturating_add(demand.get(c.class));
        }
    }

    /// A claim given back before it was made durable: no longer counted.
    pub fn remove_placed(&mut self, demand: &Resources) {
        for c in &mut self.classes {
            c.placed = c.placed.saturating_sub(demand.get(c.class)).max(0);
        }
    }

    /// Monitor metric `name`'s value when the node reports it and it is fresh at `clock`
    /// (see [`MonitorMetrics::value`]); `None`: unavailable.
    pub fn metric(&self, name: &str, clock: Option<ReadingClock>) -> Option<f64> {
        self.metrics.as_ref()?.value(name, clock)
    }

    /// The host's report of its instances' QoS signals, when it has one fresh at `clock`.
    pub fn fresh_qos(&self, clock: ReadingClock) -> Option<&QosReport> {
        self.qos
            .as_ref()
            .filter(|q| clock.fresh(q.at_ms, q.received_ms))
    }

    /// Whether some class has a reading younger than `max_age_ms`.
    pub fn any_fresh(&self, now_ms: i64, max_age_ms: i64) -> bool {
        self.classes.iter().any(|c| c.fresh(now_ms, max_age_ms))
    }
}

/// What Flex's filter and weigher know of one request: the penalty P now, how long a
/// reading stays fresh, and the classes Flex judges (`[flex] classes`). `None` in a
/// [`super::RequestContext`] when Flex is off.
#[derive(Clone, Debug, PartialEq)]
pub struct FlexContext {
    /// The estimation penalty P (Alg. 3).
    pub penalty: f64,
    /// The time of the call (the service's clock), against which readings expire.
    pub now_ms: i64,
    /// `[usage] max_age_s`, in ms.
    pub max_age_ms: i64,
    pub classes: Vec<ClassId>,
}

impl FlexContext {
    /// L̂ of `class` on a host as Flex judges it: its reading plus what was claimed since,
    /// when the reading is fresh; `None` (decide on the allocations) otherwise.
    pub fn estimate(&self, measured: Option<&MeasuredUsage>, class: ClassId) -> Option<f64> {
        measured?
            .class(class)
            .filter(|r| r.fresh(self.now_ms, self.max_age_ms))
            .map(ClassUsage::estimate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(class: ClassId, value: f64, at_ms: i64) -> ClassUsage {
        ClassUsage {
            class,
            value,
            at_ms,
            received_ms: at_ms,
            source: UsageSource::HostState,
            placed: 0,
        }
    }

    #[test]
    fn a_reading_expires_after_max_age_from_the_earlier_of_its_times() {
        let mut r = reading(ClassId::VCPU, 1.0, 1_000);
        assert!(r.fresh(61_000, 60_000));
        assert!(!r.fresh(61_001, 60_000));
        // Measured at 1 s, received at 50 s (it waited in a queue): as old as its measurement.
        r.received_ms = 50_000;
        assert!(!r.fresh(61_001, 60_000));
        // A host whose clock runs ahead: as old as its receipt.
        r.at_ms = 90_000;
        assert!(r.fresh(110_000, 60_000));
        assert!(!r.fresh(110_001, 60_000));
    }

    #[test]
    fn claims_since_the_reading_count_at_their_request() {
        let mut m = MeasuredUsage::default();
        m.set(reading(ClassId::MEMORY_MB, 100.0, 0));
        m.set(reading(ClassId::VCPU, 2.5, 0));
        assert_eq!(m.classes[0].class, ClassId::VCPU, "kept sorted");
        m.add_placed(&Resources::new(2, 512, 10));
        assert_eq!(m.class(ClassId::VCPU).unwrap().estimate(), 4.5);
        assert_eq!(m.class(ClassId::MEMORY_MB).unwrap().estimate(), 612.0);
        assert!(m.class(ClassId::DISK_GB).is_none());
        m.remove_placed(&Resources::new(4, 512, 0));
        assert_eq!(m.class(ClassId::VCPU).unwrap().placed, 0, "never below 0");
        // A new reading replaces the old one and what was placed before it.
        m.set(reading(ClassId::VCPU, 3.0, 10));
        assert_eq!(m.class(ClassId::VCPU).unwrap().estimate(), 3.0);
    }

    #[test]
    fn values_must_be_finite_and_not_negative() {
        assert_eq!(
            check_value("VCPU", f64::NAN).unwrap_err().reason,
            UsageRefusal::NotANumber
        );
        assert_eq!(
            check_value("VCPU", f64::INFINITY).unwrap_err().reason,
            UsageRefusal::NotANumber
        );
        assert_eq!(
            check_value("VCPU", -0.5).unwrap_err().reason,
            UsageRefusal::Negative
        );
        check_value("VCPU", 0.0).unwrap();
    }
}
