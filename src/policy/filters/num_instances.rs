//! `NumInstancesFilter`: a host already running `max_instances_per_host` instances takes no
//! more (Nova 34's `num_instances_filter.py`). The count is the ledger's (Nova's compute
//! node `num_instances` stat), plus the instances placed there earlier in the same call.

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};
use crate::policy::config::PolicyConfig;

/// Nova's `NumInstancesFilter`. Not run for a rebuild (`RUN_ON_REBUILD = False`).
#[derive(Clone, Copy, Debug)]
pub struct NumInstancesFilter {
    /// `[filter_scheduler] max_instances_per_host` (50).
    pub max_instances_per_host: i64,
}

impl NumInstancesFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "NumInstancesFilter";

    /// The filter with the configured limit.
    pub fn new(config: &PolicyConfig) -> Self {
        NumInstancesFilter {
            max_instances_per_host: config.max_instances_per_host,
        }
    }
}

impl Filter for NumInstancesFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn passes(&self, host: &HostState, _req: &RequestContext, _env: &FilterEnv) -> bool {
        host.num_instances < self.max_instances_per_host
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;

    /// Nova's `TestNumInstancesFilter.test_filter_num_instances_passes` / `_fails`.
    #[test]
    fn passes_hosts_under_the_limit() {
        let cases: [(&str, i64, i64, bool); 4] = [
            ("nova: 4 of 5 passes", 5, 4, true),
            ("nova: 5 of 5 fails", 5, 5, false),
            ("empty host", 1, 0, true),
            ("over", 1, 3, false),
        ];
        for (name, limit, n, want) in cases {
            let mut h = host(1);
            h.num_instances = n;
            let f = NumInstancesFilter {
                max_instances_per_host: limit,
            };
            assert_eq!(
                f.passes(&h, &request(), &FilterEnv::without_heartbeats()),
                want,
                "{name}"
            );
        }
        assert_eq!(
            NumInstancesFilter::new(&PolicyConfig::default()).max_instances_per_host,
            50
        );
    }
}
