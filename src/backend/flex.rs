//! Flex in the service (seed 002, issue 45): the estimation penalty P that `FlexFilter` and
//! `FlexWeigher` read, moved once per `[flex] update_period_s` of the injected clock by
//! `control::FlexController` from the cluster's QoS Q(t), which `[flex] qos_source` names:
//! `none` (every period ends with no Q(t), so P stays at `p_start`), `host_saturation`
//! (the share of measured hosts whose load is at most `qos_saturation_threshold` of their
//! capacity, from the same readings Flex admits on; `control::unsaturated_share`) or
//! `instance_signals` (eq. 14 from the hosts' report of each instance: the share of
//! instances whose CPU wait and memory stall are within their thresholds;
//! `control::served_share`). Shared by every backend, so a backend switch keeps P.

use crate::clock::SharedClock;
use crate::configuration::{QosSource, Settings};
use crate::control::{served_share, unsaturated_share, ControlError, FlexController};
use crate::domain::{ClassId, FlexContext, InstanceQos, QosSignal, ReadingClock};
use crate::placement::RatioManager;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::sync::{Arc, Weak};

/// Each measured host's load over `classes` at a time (the live table's
/// `measured_loads`), injected so that the controller needs no ledger.
pub type MeasuredLoads = Arc<dyn Fn(&[ClassId], ReadingClock) -> Vec<f64> + Send + Sync>;

/// Visits every instance of every host whose QoS report is fresh at a time (the live
/// table's `visit_instance_qos`), injected as [`MeasuredLoads`] is.
pub type InstanceSignals = Arc<dyn Fn(ReadingClock, &mut dyn FnMut(&InstanceQos)) + Send + Sync>;

/// What Flex's QoS sources read.
#[derive(Clone)]
pub struct QosInputs {
    /// `host_saturation`'s.
    pub loads: MeasuredLoads,
    /// `instance_signals`'.
    pub instances: InstanceSignals,
}

impl QosInputs {
    /// Inputs that hold nothing (no host measured).
    pub fn empty() -> Self {
        QosInputs {
            loads: Arc::new(|_, _| Vec::new()),
            instances: Arc::new(|_, _| {}),
        }
    }
}

/// How many periods `/v1/stats` shows.
const SHOWN_PERIODS: usize = 60;

/// Flex's state: on or off, its classes, how long a reading decides, and the controller.
pub struct Flex {
    enabled: bool,
    classes: Vec<ClassId>,
    max_age_ms: i64,
    // parking_lot: held for one period's update or one read, never across an await.
    controller: Mutex<FlexController>,
    /// P as the gauge `parasol_flex_penalty` shows it.
    penalty: prometheus_client::metrics::gauge::Gauge<f64, std::sync::atomic::AtomicU64>,
    /// The last Q(t), as the gauge `parasol_flex_qos` shows it (NaN until one exists).
    qos: prometheus_client::metrics::gauge::Gauge<f64, std::sync::atomic::AtomicU64>,
    qos_source: QosSource,
    saturation: f64,
    /// `instance_signals`: each signal's threshold.
    signal_limits: [(QosSignal, f64); 2],
    /// How many hosts (`host_saturation`) or instances (`instance_signals`) the last Q(t)
    /// was measured on.
    measured_on: std::sync::atomic::AtomicUsize,
    inputs: QosInputs,
    /// Placement's allocation ratios, moved after each sync (`[flex]
    /// manage_allocation_ratio`).
    ratios: Option<Arc<RatioManager>>,
}

impl std::fmt::Debug for Flex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flex")
            .field("enabled", &self.enabled)
            .field("classes", &self.classes)
            .field("penalty", &self.penalty())
            .field("qos_source", &self.qos_source)
            .finish_non_exhaustive()
    }
}

impl Flex {
    /// Flex as `settings` say (`[flex]`, `[usage]`), with its controller's task on `clock`
    /// when it is on, reading Q(t) from `inputs` as `qos_source` says; the task ends when
    /// the returned value is dropped.
    pub fn start(
        settings: &Settings,
        clock: SharedClock,
        inputs: QosInputs,
    ) -> Result<Arc<Flex>, ControlError> {
        let params = settings
            .flex
            .params()
            .map_err(|e| ControlError::param("flex", e.to_string()))?;
        let period_ms = params.update_period_ms;
        let controller = FlexController::new(params)?;
        let penalty = prometheus_client::metrics::gauge::Gauge::<f64, _>::default();
        let ratios = settings.flex.ratio_settings().map(|ratio_settings| {
            let p = penalty.clone();
            Arc::new(RatioManager::new(
                ratio_settings,
                Arc::new(move || p.get()),
                settings.usage.max_age_ms(),
            ))
        });
        let flex = Arc::new(Flex {
            enabled: settings.flex.enabled,
            classes: settings.flex.class_ids(),
            max_age_ms: settings.usage.max_age_ms(),
            penalty,
            ratios,
            qos: Default::default(),
            qos_source: settings.flex.qos_source,
            saturation: settings.flex.qos_saturation_threshold,
            signal_limits: [
                (QosSignal::CpuWait, settings.flex.qos_cpu_wait_threshold),
                (
                    QosSignal::MemoryPressure,
                    settings.flex.qos_memory_pressure_threshold,
                ),
            ],
            measured_on: Default::default(),
            inputs,
            controller: Mutex::new(controller),
        });
        flex.penalty.set(flex.penalty());
        flex.qos.set(f64::NAN);
        if flex.enabled {
            tokio::spawn(run(Arc::downgrade(&flex), clock, period_ms));
        }
        Ok(flex)
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// P now.
    pub fn penalty(&self) -> f64 {
        self.controller.lock().penalty()
    }

    /// `[usage] max_age_s`, in ms.
    pub fn max_age_ms(&self) -> i64 {
        self.max_age_ms
    }

    /// What Flex's filter and weigher read for a call at `now_ms`; `None` when Flex is off.
    pub fn context(&self, now_ms: i64) -> Option<Arc<FlexContext>> {
        self.enabled.then(|| {
            Arc::new(FlexContext {
                penalty: self.penalty(),
                now_ms,
                max_age_ms: self.max_age_ms,
                classes: self.classes.clone(),
            })
        })
    }

    /// Ends a period whose cluster QoS was `qos` (`None`: no signal); returns P.
    pub fn on_period(&self, qos: Option<f64>) -> f64 {
        let p = self.controller.lock().on_period(qos);
        self.penalty.set(p);
        if let Some(q) = qos {
            self.qos.set(q);
        }
        p
    }

    /// Q(t) at `now_ms` from `[flex] qos_source`: `None` with `none`, or when no host (or
    /// instance) has a fresh reading.
    pub fn measure_qos(&self, now_ms: i64) -> Option<f64> {
        let clock = ReadingClock {
            now_ms,
            max_age_ms: self.max_age_ms,
        };
        let (qos, on) = match self.qos_source {
            QosSource::None => return None,
            QosSource::HostSaturation => {
                let loads = (self.inputs.loads)(&self.classes, clock);
                let on = loads.len();
                (unsaturated_share(loads, self.saturation), on)
            }
            QosSource::InstanceSignals => {
                let mut each = Vec::new();
                (self.inputs.instances)(clock, &mut |i| {
                    each.push(
                        self.signal_limits
                            .map(|(signal, limit)| (i.signal(signal).unwrap_or(f64::NAN), limit)),
                    );
                });
                let on = each.len();
                (served_share(each), on)
            }
        };
        self.measured_on
            .store(on, std::sync::atomic::Ordering::Relaxed);
        qos
    }

    /// The manager of Placement's allocation ratios, when `[flex] manage_allocation_ratio`.
    pub fn ratios(&self) -> Option<&Arc<RatioManager>> {
        self.ratios.as_ref()
    }

    /// The gauge of the last Q(t), for `/metrics`.
    pub fn qos_gauge(
        &self,
    ) -> prometheus_client::metrics::gauge::Gauge<f64, std::sync::atomic::AtomicU64> {
        self.qos.clone()
    }

    /// The gauge of P, for `/metrics`.
    pub fn penalty_gauge(
        &self,
    ) -> prometheus_client::metrics::gauge::Gauge<f64, std::sync::atomic::AtomicU64> {
        self.penalty.clone()
    }

    /// For `/v1/stats`: on or off, P, the last Q(t) and where it comes from, the periods.
    pub fn to_json(&self) -> Value {
        let c = self.controller.lock();
        let history: Vec<_> = c.history().iter().rev().take(SHOWN_PERIODS).rev().collect();
        let qos = c.history().iter().rev().find_map(|p| p.qos);
        json!({
            "enabled": self.enabled,
            "penalty": c.penalty(),
            "p_start": c.params().p_start,
            "p_min": c.params().p_min,
            "p_max": c.params().p_max,
            "qos": qos,
            "qos_target": c.params().qos_target,
            "qos_source": self.qos_source.as_str(),
            "qos_saturation_threshold": self.saturation,
            "qos_cpu_wait_threshold": self.signal_limits[0].1,
            "qos_memory_pressure_threshold": self.signal_limits[1].1,
            "qos_measured_on": self.measured_on.load(std::sync::atomic::Ordering::Relaxed),
            "update_period_s": c.params().update_period_ms as f64 / 1_000.0,
            "periods": c.history().iter().len(),
            "history": history,
            "classes": self.classes,
            "allocation_ratio": self
                .ratios
                .as_ref()
                .map_or_else(|| json!({"enabled": false}), |r| r.to_json()),
        })
    }
}

/// One period after another on the clock: Q(t) from `[flex] qos_source`, then P.
async fn run(flex: Weak<Flex>, clock: SharedClock, period_ms: u64) {
    loop {
        clock.sleep_ms(period_ms).await;
        let Some(flex) = flex.upgrade() else {
            return;
        };
        let qos = flex.measure_qos(clock.now_ms());
        let p = flex.on_period(qos);
        tracing::debug!(
            penalty = p,
            qos = qos,
            qos_source = flex.qos_source.as_str(),
            "Flex period"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    /// Runs `periods` periods of 10 s on `clock`, from period `from`.
    async fn periods(flex: &Flex, clock: &ManualClock, from: i64, to: i64) {
        for period in from..=to {
            // The task has armed its next period before the clock moves.
            while !clock.deadlines().contains(&(period * 10_000)) {
                tokio::task::yield_now().await;
            }
            clock.advance_ms(10_000);
            while flex.to_json()["periods"] != period {
                tokio::task::yield_now().await;
            }
        }
    }

    /// `host_saturation`: Q(t) is the share of measured hosts at most the threshold loaded,
    /// read from the table at each period's time; P grows while Q(t) falls below the target
    /// (Alg. 3 line 23), then decays once it holds (line 21).
    #[tokio::test]
    async fn host_saturation_moves_p_with_the_share_of_hosts_not_saturated() {
        let clock = ManualClock::new(0);
        let mut settings = Settings::default();
        settings.flex.enabled = true;
        settings.flex.update_period_s = 10.0;
        settings.flex.qos_source = QosSource::HostSaturation;
        let loads = Arc::new(Mutex::new(vec![0.5, 0.95]));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (l, s) = (loads.clone(), seen.clone());
        let source: MeasuredLoads = Arc::new(move |classes, at| {
            s.lock().push((classes.to_vec(), at));
            l.lock().clone()
        });
        let inputs = QosInputs {
            loads: source,
            ..QosInputs::empty()
        };
        let flex = Flex::start(&settings, Arc::new(clock.clone()), inputs).unwrap();
        periods(&flex, &clock, 1, 1).await;
        let stats = flex.to_json();
        assert_eq!(stats["qos"], 0.5, "{stats}");
        assert_eq!(stats["qos_measured_on"], 2, "{stats}");
        assert_eq!(stats["qos_source"], "host_saturation");
        assert_eq!(stats["penalty"], 1.5 + (1.5 - 1.0), "P + β(P − 1)");
        assert_eq!(flex.qos_gauge().get(), 0.5);
        let (classes, at) = seen.lock()[0].clone();
        assert_eq!(classes, [ClassId::VCPU, ClassId::MEMORY_MB]);
        assert_eq!((at.now_ms, at.max_age_ms), (10_000, 180_000));

        *loads.lock() = vec![0.5, 0.9];
        periods(&flex, &clock, 2, 2).await;
        assert_eq!(flex.to_json()["qos"], 1.0);
        assert_eq!(flex.penalty(), 2.0 * 0.99, "decays while Q(t) holds");
        // No host measured: no Q(t), P unchanged.
        *loads.lock() = Vec::new();
        periods(&flex, &clock, 3, 3).await;
        assert_eq!(flex.penalty(), 2.0 * 0.99);
        assert_eq!(flex.measure_qos(0), None);
    }

    fn instance(uuid: &str, signals: &[(QosSignal, f64)]) -> InstanceQos {
        InstanceQos {
            instance: uuid.into(),
            signals: signals.to_vec(),
        }
    }

    /// `instance_signals`: Q(t) is the share of reported instances whose CPU wait and
    /// memory stall are within `[flex] qos_*_threshold`, read at each period's time.
    #[tokio::test]
    async fn instance_signals_move_p_with_the_share_of_instances_served() {
        use QosSignal::{CpuWait, MemoryPressure};
        let clock = ManualClock::new(0);
        let mut settings = Settings::default();
        settings.flex.enabled = true;
        settings.flex.update_period_s = 10.0;
        settings.flex.qos_source = QosSource::InstanceSignals;
        settings.flex.qos_cpu_wait_threshold = 0.1;
        settings.flex.qos_memory_pressure_threshold = 0.2;
        let reported = Arc::new(Mutex::new(vec![
            instance("a", &[(CpuWait, 0.05), (MemoryPressure, 0.0)]),
            instance("b", &[(CpuWait, 0.3)]),
            instance("c", &[(MemoryPressure, 0.25)]),
            instance("d", &[(CpuWait, 0.1), (MemoryPressure, 0.2)]),
        ]));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (r, s) = (reported.clone(), seen.clone());
        let inputs = QosInputs {
            instances: Arc::new(move |at, visit| {
                s.lock().push(at);
                r.lock().iter().for_each(&mut *visit);
            }),
            ..QosInputs::empty()
        };
        let flex = Flex::start(&settings, Arc::new(clock.clone()), inputs).unwrap();
        periods(&flex, &clock, 1, 1).await;
        let stats = flex.to_json();
        // a and d (at the thresholds exactly) are served; b waited, c stalled.
        assert_eq!(stats["qos"], 0.5, "{stats}");
        assert_eq!(stats["qos_source"], "instance_signals");
        assert_eq!(stats["qos_measured_on"], 4);
        assert_eq!(stats["qos_cpu_wait_threshold"], 0.1);
        assert_eq!(stats["qos_memory_pressure_threshold"], 0.2);
        assert_eq!(flex.penalty(), 2.0, "P + β(P − 1) when Q(t) falls below ρ");
        let at = seen.lock()[0];
        assert_eq!((at.now_ms, at.max_age_ms), (10_000, 180_000));

        *reported.lock() = vec![instance("a", &[(CpuWait, 0.0)])];
        periods(&flex, &clock, 2, 2).await;
        assert_eq!(flex.to_json()["qos"], 1.0);
        assert_eq!(flex.penalty(), 2.0 * 0.99, "decays while Q(t) holds");
        // No instance reported (or every report expired): no Q(t), P unchanged.
        reported.lock().clear();
        periods(&flex, &clock, 3, 3).await;
        assert_eq!(flex.penalty(), 2.0 * 0.99);
        assert_eq!(flex.to_json()["qos_measured_on"], 0);
    }

    #[tokio::test]
    async fn without_a_qos_signal_p_stays_at_p_start_period_after_period() {
        let clock = ManualClock::new(0);
        let mut settings = Settings::default();
        settings.flex.enabled = true;
        settings.flex.update_period_s = 10.0;
        let flex = Flex::start(&settings, Arc::new(clock.clone()), QosInputs::empty()).unwrap();
        periods(&flex, &clock, 1, 3).await;
        let stats = flex.to_json();
        assert_eq!(stats["penalty"], 1.5);
        assert_eq!(stats["qos"], Value::Null);
        assert_eq!(stats["qos_source"], "none");
        assert_eq!(stats["history"][2]["step"], "unchanged");
        let ctx = flex.context(5).unwrap();
        assert_eq!((ctx.penalty, ctx.now_ms, ctx.max_age_ms), (1.5, 5, 180_000));
        // With a signal the same controller moves P (Alg. 3, line 21).
        assert_eq!(flex.on_period(Some(1.0)), 1.5 * 0.99);

        let off = Flex::start(&Settings::default(), Arc::new(clock), QosInputs::empty()).unwrap();
        assert!(off.context(0).is_none());
    }
}
