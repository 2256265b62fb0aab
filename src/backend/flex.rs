//! Flex in the service (seed 002, issue 45): the estimation penalty P that `FlexFilter` and
//! `FlexWeigher` read, moved once per `[flex] update_period_s` of the injected clock by
//! `control::FlexController` from the cluster's QoS Q(t). Parasol has no QoS signal yet
//! (issue 45 item 4): every period ends with no Q(t), so P stays at `p_start` and
//! `/v1/stats` says so (`qos_source: "none"`). Shared by every backend, so a backend switch
//! keeps P.

use crate::clock::SharedClock;
use crate::configuration::Settings;
use crate::control::{ControlError, FlexController};
use crate::domain::{ClassId, FlexContext};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::sync::{Arc, Weak};

/// Where Q(t) comes from. Only `none` exists today.
const QOS_SOURCE: &str = "none";

/// How many periods `/v1/stats` shows.
const SHOWN_PERIODS: usize = 60;

/// Flex's state: on or off, its classes, how long a reading decides, and the controller.
#[derive(Debug)]
pub struct Flex {
    enabled: bool,
    classes: Vec<ClassId>,
    max_age_ms: i64,
    // parking_lot: held for one period's update or one read, never across an await.
    controller: Mutex<FlexController>,
    /// P as the gauge `parasol_flex_penalty` shows it.
    penalty: prometheus_client::metrics::gauge::Gauge<f64, std::sync::atomic::AtomicU64>,
}

impl Flex {
    /// Flex as `settings` say (`[flex]`, `[usage]`), with its controller's task on `clock`
    /// when it is on; the task ends when the returned value is dropped.
    pub fn start(settings: &Settings, clock: SharedClock) -> Result<Arc<Flex>, ControlError> {
        let params = settings
            .flex
            .params()
            .map_err(|e| ControlError::param("flex", e.to_string()))?;
        let period_ms = params.update_period_ms;
        let controller = FlexController::new(params)?;
        let flex = Arc::new(Flex {
            enabled: settings.flex.enabled,
            classes: settings.flex.class_ids(),
            max_age_ms: settings.usage.max_age_ms(),
            penalty: Default::default(),
            controller: Mutex::new(controller),
        });
        flex.penalty.set(flex.penalty());
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
        p
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
            "qos_source": QOS_SOURCE,
            "update_period_s": c.params().update_period_ms as f64 / 1_000.0,
            "periods": c.history().iter().len(),
            "history": history,
            "classes": self.classes,
        })
    }
}

/// One period after another on the clock: Q(t) from [`QOS_SOURCE`] (none yet), then P.
async fn run(flex: Weak<Flex>, clock: SharedClock, period_ms: u64) {
    loop {
        clock.sleep_ms(period_ms).await;
        let Some(flex) = flex.upgrade() else {
            return;
        };
        let p = flex.on_period(None);
        tracing::debug!(
            penalty = p,
            qos_source = QOS_SOURCE,
            "Flex period: no QoS signal, P unchanged"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[tokio::test]
    async fn without_a_qos_signal_p_stays_at_p_start_period_after_period() {
        let clock = ManualClock::new(0);
        let mut settings = Settings::default();
        settings.flex.enabled = true;
        settings.flex.update_period_s = 10.0;
        let flex = Flex::start(&settings, Arc::new(clock.clone())).unwrap();
        for period in 1..=3 {
            // The task has armed its next period before the clock moves.
            while !clock.deadlines().contains(&(period * 10_000)) {
                tokio::task::yield_now().await;
            }
            clock.advance_ms(10_000);
            while flex.to_json()["periods"] != period {
                tokio::task::yield_now().await;
            }
        }
        let stats = flex.to_json();
        assert_eq!(stats["penalty"], 1.5);
        assert_eq!(stats["qos"], Value::Null);
        assert_eq!(stats["qos_source"], "none");
        assert_eq!(stats["history"][2]["step"], "unchanged");
        let ctx = flex.context(5).unwrap();
        assert_eq!((ctx.penalty, ctx.now_ms, ctx.max_age_ms), (1.5, 5, 180_000));
        // With a signal the same controller moves P (Alg. 3, line 21).
        assert_eq!(flex.on_period(Some(1.0)), 1.5 * 0.99);

        let off = Flex::start(&Settings::default(), Arc::new(clock)).unwrap();
        assert!(off.context(0).is_none());
    }
}
