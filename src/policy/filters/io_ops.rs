//! `IoOpsFilter`: a host already running `max_io_ops_per_host` I/O-heavy operations (builds,
//! resizes, snapshots, …) takes no more (Nova 34's `io_ops_filter.py`).
//!
//! Nova reads the count from the compute node's `io_workload` stat and adds one for each
//! instance it places there within a call; Parasol's ledger counts the host's instances
//! (`HostState::num_io_ops`) and the pipeline consumes placed instances the same way.

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};
use crate::policy::config::PolicyConfig;

/// Nova's `IoOpsFilter`. Not run for a rebuild (`RUN_ON_REBUILD = False`).
#[derive(Clone, Copy, Debug)]
pub struct IoOpsFilter {
    /// `[filter_scheduler] max_io_ops_per_host` (8).
    pub max_io_ops_per_host: i64,
}

impl IoOpsFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "IoOpsFilter";

    /// The filter with the configured limit.
    pub fn new(config: &PolicyConfig) -> Self {
        IoOpsFilter {
            max_io_ops_per_host: config.max_io_ops_per_host,
        }
    }
}

impl Filter for IoOpsFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn passes(&self, host: &HostState, _req: &RequestContext, _env: &FilterEnv) -> bool {
        host.num_io_ops < self.max_io_ops_per_host
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;

    /// Nova's `TestIoOpsFilter.test_filter_num_iops_passes` / `_fails`, and the limit's edges.
    #[test]
    fn passes_hosts_under_the_limit() {
        let cases: [(&str, i64, i64, bool); 5] = [
            ("nova: 7 of 8 passes", 8, 7, true),
            ("nova: 8 of 8 fails", 8, 8, false),
            ("idle host", 8, 0, true),
            ("limit 0 takes nothing", 0, 0, false),
            ("over the limit", 1, 5, false),
        ];
        for (name, limit, io, want) in cases {
            let mut h = host(1);
            h.num_io_ops = io;
            let f = IoOpsFilter {
                max_io_ops_per_host: limit,
            };
            assert_eq!(
                f.passes(&h, &request(), &FilterEnv::without_heartbeats()),
                want,
                "{name}"
            );
        }
        assert_eq!(
            IoOpsFilter::new(&PolicyConfig::default()).max_io_ops_per_host,
            8,
            "Nova's default"
        );
    }
}
