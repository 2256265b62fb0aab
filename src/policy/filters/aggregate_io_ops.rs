//! `AggregateIoOpsFilter`: `IoOpsFilter` with the limit taken from the host's aggregates'
//! `max_io_ops_per_host` metadata (the smallest when several aggregates set it), else the
//! configured one (Nova 34's `io_ops_filter.py`).

use super::{aggregate_int_limit, Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};
use crate::policy::config::PolicyConfig;

/// Nova's `AggregateIoOpsFilter`. A value that is not an integer makes Nova use the
/// configured limit (and log a warning); so does Parasol.
#[derive(Clone, Copy, Debug)]
pub struct AggregateIoOpsFilter {
    /// `[filter_scheduler] max_io_ops_per_host` (8): the limit where no aggregate sets one.
    pub max_io_ops_per_host: i64,
}

impl AggregateIoOpsFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "AggregateIoOpsFilter";
    /// The aggregate metadata key.
    pub const KEY: &'static str = "max_io_ops_per_host";

    /// The filter with the configured default limit.
    pub fn new(config: &PolicyConfig) -> Self {
        AggregateIoOpsFilter {
            max_io_ops_per_host: config.max_io_ops_per_host,
        }
    }
}

impl Filter for AggregateIoOpsFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        host.num_io_ops < aggregate_int_limit(host, req, Self::KEY, self.max_io_ops_per_host)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{self, aggregates, host, request};
    use super::*;

    /// Nova's `test_aggregate_filter_num_iops_value` (no value: the configured 7; '8' lets 7
    /// pass) and `_value_error` ('XXX': the configured 8), and several aggregates (the least).
    #[test]
    fn the_aggregates_limit_overrides_the_configured_one() {
        type Case<'a> = (&'a str, i64, &'a [&'a str], i64, bool);
        let cases: [Case; 8] = [
            ("nova: no aggregate value, 7 of 7", 7, &[], 7, false),
            ("nova: aggregate says 8", 7, &["8"], 7, true),
            ("nova: not a number, configured 8", 8, &["XXX"], 7, true),
            ("least of several", 8, &["9", "7"], 7, false),
            ("one bad value spoils all", 1, &["9", "x"], 7, false),
            ("spaces around a number", 1, &[" 9 "], 7, true),
            ("negative", 8, &["-1"], 0, false),
            ("comma list is not a number", 8, &["9,10"], 7, true),
        ];
        for (name, limit, values, io, want) in cases {
            let mut req = request();
            let meta: Vec<testing::Agg<'_>> = values
                .iter()
                .map(|v| (&["host1"][..], vec![("max_io_ops_per_host", *v)]))
                .collect();
            req.aggregate_metadata = aggregates(&meta);
            let mut h = host(1);
            h.num_io_ops = io;
            let f = AggregateIoOpsFilter {
                max_io_ops_per_host: limit,
            };
            let env = FilterEnv::without_heartbeats();
            assert_eq!(f.passes(&h, &req, &env), want, "{name}");
        }
    }
}
