//! `MetricsFilter`: Nova 34 keeps hosts that report every metric named in `[metrics]
//! weight_setting` (`metrics_filter.py`).
//!
//! Parasol holds no host metrics and has no `weight_setting`: under Nova's default, an empty
//! `weight_setting`, the filter asks for no metric and passes every host, which is what this
//! filter does. `parasol config from-nova` carries the filter only when `[metrics]
//! weight_setting` is empty, and names the option it cannot carry otherwise.

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// Nova's `MetricsFilter` under an empty `[metrics] weight_setting`.
#[derive(Clone, Copy, Debug, Default)]
pub struct MetricsFilter;

impl MetricsFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "MetricsFilter";
}

impl Filter for MetricsFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, _req: &RequestContext) -> bool {
        false
    }

    fn passes(&self, _host: &HostState, _req: &RequestContext, _env: &FilterEnv) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;

    /// Nova's `TestMetricsFilter.test_metrics_filter_pass` with no metric asked for: a host
    /// with or without metrics passes (its `_missing_metrics_fail` needs `weight_setting`).
    #[test]
    fn no_metric_asked_for_passes_every_host() {
        let env = FilterEnv::without_heartbeats();
        assert!(MetricsFilter.passes(&host(1), &request(), &env));
        assert!(!MetricsFilter.restricts(&request()));
    }
}
