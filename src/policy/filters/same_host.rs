//! `SameHostFilter`: with the `same_host` hint (instance uuids), only hosts running one of
//! those instances pass (Nova 34's `affinity_filter.py`).

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// Nova's `SameHostFilter`. Not run for a rebuild (`RUN_ON_REBUILD = False`). A hint naming
/// only unknown instances passes no host, as in Nova.
#[derive(Clone, Copy, Debug, Default)]
pub struct SameHostFilter;

impl SameHostFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "SameHostFilter";
}

impl Filter for SameHostFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        req.hints.as_ref().is_some_and(|h| h.same_host.is_some())
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        match req.hints.as_ref().and_then(|h| h.same_host.as_ref()) {
            Some(hosts) => hosts.contains(&**host.host()),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request, with_hints};
    use super::*;

    /// Nova's `TestSameHostFilter`: passes when the instance runs here, fails for an
    /// instance elsewhere or unknown (also on an empty host), passes without hints.
    #[test]
    fn keeps_to_the_hinted_instances_hosts() {
        type Case<'a> = (&'a str, Option<&'a [&'a str]>, bool);
        let cases: [Case; 5] = [
            ("nova: passes", Some(&["host1"]), true),
            ("nova: no list (unknown instance)", Some(&[]), false),
            ("nova: fails (instance elsewhere)", Some(&["host2"]), false),
            ("nova: handles none", None, true),
            ("one of several here", Some(&["host3", "host1"]), true),
        ];
        for (name, hosts, want) in cases {
            let req = with_hints(request(), |h| {
                h.same_host = hosts.map(|v| v.iter().map(|s| s.to_string()).collect())
            });
            let env = FilterEnv::without_heartbeats();
            assert_eq!(SameHostFilter.passes(&host(1), &req, &env), want, "{name}");
        }
    }
}
