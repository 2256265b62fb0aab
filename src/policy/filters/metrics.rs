//! `MetricsFilter` (Nova 34 `metrics_filter.py`): keeps hosts that report every metric named
//! in `[metrics] weight_setting` (`[policy] metrics_weight_setting`), so that
//! `MetricsWeigher` finds them all. A host's metrics are its monitor metrics from Nova's
//! `metrics.update` or, with `[nova_db]`, its `compute_nodes.metrics` (`table::usage`); one older than `[usage] max_age_s` is unavailable, as a
//! metric its node does not report (Nova, reading `compute_nodes.metrics`, never expires
//! them: a node whose monitor stalls keeps its last ones there).

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};
use crate::policy::config::PolicyConfig;

/// Nova's `MetricsFilter`.
#[derive(Clone, Debug, Default)]
pub struct MetricsFilter {
    /// The metric names of the setting (Nova's `self.keys`).
    keys: Vec<String>,
}

impl MetricsFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "MetricsFilter";

    /// The filter over the configured setting (validated when the policy is built; an
    /// element that does not parse names no metric here, as in Nova).
    pub fn new(config: &PolicyConfig) -> Self {
        let mut keys: Vec<String> = config
            .metrics_weight_setting
            .iter()
            .filter_map(|e| crate::policy::parse_metric_weight(e).ok())
            .map(|(name, _)| name)
            .collect();
        keys.sort();
        keys.dedup();
        MetricsFilter { keys }
    }
}

impl Filter for MetricsFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, _req: &RequestContext) -> bool {
        !self.keys.is_empty()
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        let Some(measured) = host.measured.as_deref() else {
            return self.keys.is_empty();
        };
        self.keys
            .iter()
            .all(|k| measured.metric(k, req.readings).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, host_with_metrics, request};
    use super::*;
    use crate::domain::ReadingClock;

    fn filter(setting: &[&str]) -> MetricsFilter {
        MetricsFilter::new(&PolicyConfig {
            metrics_weight_setting: setting.iter().map(|s| s.to_string()).collect(),
            ..PolicyConfig::default()
        })
    }

    /// Nova's `TestMetricsFilter`: `test_metrics_filter_pass` (every named metric reported)
    /// and `test_metrics_filter_missing_metrics` (`foo` and `bar` not reported), plus an empty
    /// setting (Nova's default), which passes every host.
    #[test]
    fn keeps_hosts_that_report_every_named_metric() {
        let env = FilterEnv::without_heartbeats();
        let req = request();
        let reporting = host_with_metrics(1, &[("cpu.frequency", 1000.0), ("cpu.percent", 10.0)]);
        let cases: [(&[&str], &HostState, bool); 5] = [
            (&["cpu.frequency=1", "cpu.percent=2"], &reporting, true),
            (&["foo=1", "bar=2"], &reporting, false),
            (&["cpu.frequency=1", "bar=2"], &reporting, false),
            (&["cpu.frequency=1"], &host(2), false),
            (&[], &host(2), true),
        ];
        for (setting, h, want) in cases {
            let f = filter(setting);
            assert_eq!(f.passes(h, &req, &env), want, "{setting:?}");
            assert_eq!(f.restricts(&req), !setting.is_empty());
        }
    }

    #[test]
    fn an_expired_metric_is_unavailable() {
        let env = FilterEnv::without_heartbeats();
        let h = host_with_metrics(1, &[("cpu.percent", 10.0)]);
        let f = filter(&["cpu.percent=-1"]);
        let mut req = request();
        req.readings = Some(ReadingClock {
            now_ms: 60_000,
            max_age_ms: 60_000,
        });
        assert!(f.passes(&h, &req, &env), "as old as max_age: still fresh");
        req.readings = Some(ReadingClock {
            now_ms: 60_001,
            max_age_ms: 60_000,
        });
        assert!(!f.passes(&h, &req, &env), "older: unavailable");
    }
}
