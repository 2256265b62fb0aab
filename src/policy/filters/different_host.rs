//! `DifferentHostFilter`: with the `different_host` hint (instance uuids), only hosts
//! running none of those instances pass (Nova 34's `affinity_filter.py`).

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// Nova's `DifferentHostFilter`. Not run for a rebuild (`RUN_ON_REBUILD = False`). The
/// hinted instances' hosts are the ledger's (where their allocations are), looked up once
/// per call.
#[derive(Clone, Copy, Debug, Default)]
pub struct DifferentHostFilter;

impl DifferentHostFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "DifferentHostFilter";
}

impl Filter for DifferentHostFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        req.hints
            .as_ref()
            .is_some_and(|h| h.different_host.is_some())
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        match req.hints.as_ref().and_then(|h| h.different_host.as_ref()) {
            Some(hosts) => !hosts.contains(&**host.host()),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request, with_hints};
    use super::*;

    /// Nova's `TestDifferentHostFilter`: passes when the hinted instance is elsewhere (or
    /// unknown), fails when it runs here, passes without hints.
    #[test]
    fn keeps_out_of_the_hinted_instances_hosts() {
        type Case<'a> = (&'a str, Option<&'a [&'a str]>, bool);
        let cases: [Case; 4] = [
            ("nova: passes (instance elsewhere)", Some(&["host2"]), true),
            ("nova: fails (instance here)", Some(&["host1"]), false),
            ("nova: handles none", None, true),
            ("unknown instance", Some(&[]), true),
        ];
        for (name, hosts, want) in cases {
            let req = with_hints(request(), |h| {
                h.different_host = hosts.map(|v| v.iter().map(|s| s.to_string()).collect())
            });
            let env = FilterEnv::without_heartbeats();
            assert_eq!(
                DifferentHostFilter.passes(&host(1), &req, &env),
                want,
                "{name}"
            );
            assert_eq!(
                DifferentHostFilter.restricts(&req),
                hosts.is_some(),
                "{name}"
            );
        }
    }
}
