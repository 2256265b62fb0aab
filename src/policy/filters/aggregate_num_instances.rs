//! `AggregateNumInstancesFilter`: `NumInstancesFilter` with the limit taken from the host's
//! aggregates' `max_instances_per_host` metadata (the smallest), else the configured one
//! (Nova 34's `num_instances_filter.py`).

use super::{aggregate_int_limit, Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};
use crate::policy::config::PolicyConfig;

/// Nova's `AggregateNumInstancesFilter`; a value that is not an integer means the
/// configured limit, as in Nova.
#[derive(Clone, Copy, Debug)]
pub struct AggregateNumInstancesFilter {
    /// `[filter_scheduler] max_instances_per_host` (50): where no aggregate sets one.
    pub max_instances_per_host: i64,
}

impl AggregateNumInstancesFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "AggregateNumInstancesFilter";
    /// The aggregate metadata key.
    pub const KEY: &'static str = "max_instances_per_host";

    /// The filter with the configured default limit.
    pub fn new(config: &PolicyConfig) -> Self {
        AggregateNumInstancesFilter {
            max_instances_per_host: config.max_instances_per_host,
        }
    }
}

impl Filter for AggregateNumInstancesFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        host.num_instances < aggregate_int_limit(host, req, Self::KEY, self.max_instances_per_host)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{self, aggregates, host, request};
    use super::*;

    /// Nova's `test_filter_aggregate_num_instances_value` (none: configured 4 refuses 5;
    /// '6' lets 5 pass) and `_value_error` ('XXX': configured 6 lets 5 pass).
    #[test]
    fn the_aggregates_limit_overrides_the_configured_one() {
        type Case<'a> = (&'a str, i64, &'a [&'a str], i64, bool);
        let cases: [Case; 5] = [
            ("nova: no aggregate value, 5 over 4", 4, &[], 5, false),
            ("nova: aggregate says 6", 4, &["6"], 5, true),
            ("nova: not a number, configured 6", 6, &["XXX"], 5, true),
            ("least of several", 9, &["3", "8"], 3, false),
            ("other host's aggregate", 1, &[], 0, true),
        ];
        for (name, limit, values, n, want) in cases {
            let mut req = request();
            let meta: Vec<testing::Agg<'_>> = values
                .iter()
                .map(|v| (&["host1"][..], vec![("max_instances_per_host", *v)]))
                .chain(std::iter::once((
                    &["host2"][..],
                    vec![("max_instances_per_host", "0")],
                )))
                .collect();
            req.aggregate_metadata = aggregates(&meta);
            let mut h = host(1);
            h.num_instances = n;
            let f = AggregateNumInstancesFilter {
                max_instances_per_host: limit,
            };
            let env = FilterEnv::without_heartbeats();
            assert_eq!(f.passes(&h, &req, &env), want, "{name}");
        }
    }
}
