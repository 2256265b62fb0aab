//! `ForceHostsFilter`: when the request forces hosts or nodes, only those remain.

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// Nova's `_match_forced_hosts` / `_match_forced_nodes`: a non-empty `force_hosts` keeps the
/// hosts named there (case-insensitive, as Nova compares lowered names); a non-empty
/// `force_nodes` keeps the nodes named there (exact); both together keep the intersection.
///
/// Unlike Nova, forcing does not skip the other filters: a forced host that is down or full
/// is still refused here, where Nova would send it and let the claim fail.
#[derive(Clone, Copy, Debug, Default)]
pub struct ForceHostsFilter;

impl ForceHostsFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "ForceHostsFilter";
}

impl Filter for ForceHostsFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        !(req.force_hosts.is_empty() && req.force_nodes.is_empty())
    }

    /// Nova's host manager narrows the hosts to these before any filter, a rebuild too.
    fn runs_on_rebuild(&self) -> bool {
        true
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        let host_ok = req.force_hosts.is_empty()
            || req
                .force_hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(host.host()));
        let node_ok =
            req.force_nodes.is_empty() || req.force_nodes.iter().any(|n| **n == **host.node());
        host_ok && node_ok
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;

    #[test]
    fn keeps_only_forced_hosts_and_nodes() {
        let cases: [(&str, &[&str], &[&str], bool); 7] = [
            ("nothing forced", &[], &[], true),
            ("host forced", &["host1"], &[], true),
            ("host forced, other case", &["HOST1"], &[], true),
            ("another host forced", &["host2"], &[], false),
            ("node forced", &[], &["host1"], true),
            ("node compared exactly", &[], &["HOST1"], false),
            ("host and another node", &["host1"], &["host2"], false),
        ];
        for (name, hosts, nodes, want) in cases {
            let mut req = request();
            req.force_hosts = hosts.iter().map(|s| s.to_string()).collect();
            req.force_nodes = nodes.iter().map(|s| s.to_string()).collect();
            let got = ForceHostsFilter.passes(&host(1), &req, &FilterEnv::without_heartbeats());
            assert_eq!(got, want, "{name}");
        }
    }
}
