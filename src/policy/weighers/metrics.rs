//! `MetricsWeigher` (Nova 34 `weights/metrics.py`): a host weighs the sum of its monitor
//! metrics named in `[metrics] weight_setting`, each times its ratio. A metric the host does
//! not report (or whose reading is older than `[usage] max_age_s`) makes the host weigh
//! `[metrics] weight_of_unavailable`, unless that metric's ratio times the multiplier is 0
//! (then it is skipped). With `[metrics] required` Nova fails the whole request on such a
//! host (`ComputeHostMetricNotFound`); Parasol's policy refuses `required` unless
//! `MetricsFilter` runs first and removes such hosts, so the weigher never meets one.

use super::Weigher;
use crate::domain::{HostState, RequestContext};
use crate::policy::config::PolicyConfig;

/// Nova's `MetricsWeigher`.
#[derive(Clone, Debug)]
pub struct MetricsWeigher {
    /// (metric, ratio), in the setting's order (Nova's `self.setting`).
    setting: Vec<(String, f64)>,
    multiplier: f64,
    unavailable: f64,
}

impl MetricsWeigher {
    /// The name in `weight_classes`.
    pub const NAME: &'static str = "MetricsWeigher";

    /// The weigher over the configured setting (validated when the policy is built; an
    /// element that does not parse is left out, as Nova leaves it out).
    pub fn new(config: &PolicyConfig) -> Self {
        MetricsWeigher {
            setting: config
                .metrics_weight_setting
                .iter()
                .filter_map(|e| crate::policy::parse_metric_weight(e).ok())
                .collect(),
            multiplier: config.metrics_weight_multiplier,
            unavailable: config.metrics_weight_of_unavailable,
        }
    }
}

impl Weigher for MetricsWeigher {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn multiplier(&self) -> f64 {
        self.multiplier
    }

    fn varies(&self, _req: &RequestContext) -> bool {
        !self.setting.is_empty()
    }

    fn weigh(&self, host: &HostState, req: &RequestContext) -> f64 {
        let measured = host.measured.as_deref();
        let mut value = 0.0;
        for (name, ratio) in &self.setting {
            match measured.and_then(|m| m.metric(name, req.readings)) {
                Some(v) => value += v * ratio,
                None if ratio * self.multiplier != 0.0 => return self.unavailable,
                None => {}
            }
        }
        value
    }
}

#[cfg(test)]
mod tests {
    use super::super::add_normalised;
    use super::*;
    use crate::policy::filters::testing::{host, host_with_metrics, request};

    const IDLE: &str = "cpu.idle.time";
    const KERNEL: &str = "cpu.kernel.time";
    const USER: &str = "cpu.user.time";

    /// Nova's `MetricsWeigherTestCase._get_all_hosts`.
    fn hosts() -> Vec<HostState> {
        let table: [&[(&str, f64)]; 6] = [
            &[(IDLE, 512.0), (KERNEL, 1.0)],
            &[(IDLE, 1024.0), (KERNEL, 2.0)],
            &[(IDLE, 3072.0), (KERNEL, 1.0)],
            &[(IDLE, 8192.0), (KERNEL, 0.0)],
            &[(IDLE, 768.0), (KERNEL, 0.0), (USER, 1.0)],
            &[(IDLE, 2048.0), (KERNEL, 0.0), (USER, 2.0)],
        ];
        (1..)
            .zip(table)
            .map(|(id, m)| host_with_metrics(id, m))
            .collect()
    }

    /// The best host's name and final weight under Nova's handler (normalise, multiply).
    fn best(config: &PolicyConfig, hosts: &[HostState]) -> (String, f64) {
        let w = MetricsWeigher::new(config);
        let req = request();
        let raw: Vec<f64> = hosts.iter().map(|h| w.weigh(h, &req)).collect();
        let mut scores = vec![0.0; hosts.len()];
        add_normalised(&raw, w.multiplier(), w.minval(), &mut scores);
        let (i, s) = scores
            .iter()
            .enumerate()
            .fold(
                (0, f64::NEG_INFINITY),
                |b, (i, s)| if *s > b.1 { (i, *s) } else { b },
            );
        (hosts[i].host().to_string(), s)
    }

    fn config(setting: &[String], required: bool) -> PolicyConfig {
        PolicyConfig {
            metrics_weight_setting: setting.to_vec(),
            metrics_required: required,
            ..PolicyConfig::default()
        }
    }

    /// Nova's `test_weights_metrics.py` as a golden table: setting → winner and its weight.
    /// `test_multiple_resource_missing_ratio` and `_wrong_ratio` set an element Nova ignores,
    /// which Parasol refuses (`elements_nova_ignores_are_refused`); here without it.
    /// `test_metric_not_found_required` raises in Nova; Parasol refuses that configuration
    /// without `MetricsFilter` (`policy::tests`).
    #[test]
    fn novas_golden_table() {
        let s = |parts: &[(&str, &str)]| -> Vec<String> {
            parts.iter().map(|(n, r)| format!("{n}={r}")).collect()
        };
        let cases: [(&str, Vec<String>, bool, &str, f64); 6] = [
            ("single_resource", s(&[(IDLE, "1")]), true, "host4", 1.0),
            (
                "multiple_resource",
                s(&[(IDLE, "0.0001"), (KERNEL, "1")]),
                true,
                "host2",
                1.0,
            ),
            (
                "single_resource_duplicate_setting",
                s(&[(IDLE, "-2"), (IDLE, "1")]),
                true,
                "host1",
                1.0,
            ),
            (
                "single_resourcenegative_ratio",
                s(&[(IDLE, "-1")]),
                true,
                "host1",
                1.0,
            ),
            (
                "multiple_resource_missing_ratio",
                s(&[(IDLE, "0.0001")]),
                true,
                "host4",
                1.0,
            ),
            (
                "metric_not_found_non_required",
                s(&[(IDLE, "0.0001"), (USER, "-1")]),
                false,
                "host5",
                1.0,
            ),
        ];
        let hosts = hosts();
        for (name, setting, required, want_host, want_weight) in cases {
            let got = best(&config(&setting, required), &hosts);
            assert_eq!(got, (want_host.to_string(), want_weight), "{name}");
        }
    }

    #[test]
    fn unavailable_metrics_weigh_the_configured_value_unless_their_ratio_is_zero() {
        let req = request();
        let mut cfg = config(&["cpu.percent=2".into(), "nope=1".into()], false);
        let reporting = host_with_metrics(1, &[("cpu.percent", 7.0)]);
        assert_eq!(MetricsWeigher::new(&cfg).weigh(&reporting, &req), -10_000.0);
        assert_eq!(MetricsWeigher::new(&cfg).weigh(&host(2), &req), -10_000.0);
        cfg.metrics_weight_setting[1] = "nope=0".into();
        assert_eq!(MetricsWeigher::new(&cfg).weigh(&reporting, &req), 14.0);
        cfg.metrics_weight_multiplier = 0.0;
        cfg.metrics_weight_setting[1] = "nope=1".into();
        assert_eq!(MetricsWeigher::new(&cfg).weigh(&reporting, &req), 14.0);
        assert!(!MetricsWeigher::new(&config(&[], true)).varies(&req));
    }
}
