//! `ServerGroupAntiAffinityFilter`: members of an anti-affinity group spread out.

use super::{Filter, FilterEnv};
use crate::domain::{GroupPolicy, HostState, RequestContext, ServerGroup};

/// Nova's `ServerGroupAntiAffinityFilter`: for an `anti-affinity` group, a host passes while
/// the members already on it are fewer than the group's `max_server_per_host` (1 by default).
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerGroupAntiAffinityFilter;

impl ServerGroupAntiAffinityFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "ServerGroupAntiAffinityFilter";
}

/// Members of `group` on `host`: `group.hosts` holds one entry per member, so a host name
/// appearing twice means two members there.
pub fn members_on(group: &ServerGroup, host: &HostState) -> usize {
    group.hosts.iter().filter(|h| ***h == **host.host()).count()
}

impl Filter for ServerGroupAntiAffinityFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        matches!(&req.group, Some(g) if g.policy == GroupPolicy::AntiAffinity)
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        match &req.group {
            Some(g) if g.policy == GroupPolicy::AntiAffinity => {
                (members_on(g, host) as i64) < g.max_server_per_host.max(1)
            }
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;

    #[test]
    fn counts_members_against_max_server_per_host() {
        let cases: [(&str, GroupPolicy, &[&str], i64, bool); 7] = [
            ("no members", GroupPolicy::AntiAffinity, &[], 1, true),
            (
                "member elsewhere",
                GroupPolicy::AntiAffinity,
                &["host2"],
                1,
                true,
            ),
            (
                "member here",
                GroupPolicy::AntiAffinity,
                &["host1"],
                1,
                false,
            ),
            (
                "one of two allowed",
                GroupPolicy::AntiAffinity,
                &["host1"],
                2,
                true,
            ),
            (
                "two of two",
                GroupPolicy::AntiAffinity,
                &["host1", "host1"],
                2,
                false,
            ),
            (
                "zero read as one",
                GroupPolicy::AntiAffinity,
                &["host1"],
                0,
                false,
            ),
            (
                "soft policy not filtered",
                GroupPolicy::SoftAntiAffinity,
                &["host1"],
                1,
                true,
            ),
        ];
        for (name, policy, hosts, max, want) in cases {
            let mut req = request();
            req.group = Some(ServerGroup {
                policy,
                hosts: hosts.iter().map(|s| s.to_string()).collect(),
                max_server_per_host: max,
            });
            let got = ServerGroupAntiAffinityFilter.passes(
                &host(1),
                &req,
                &FilterEnv::without_heartbeats(),
            );
            assert_eq!(got, want, "{name}");
        }
        assert!(ServerGroupAntiAffinityFilter.passes(
            &host(1),
            &request(),
            &FilterEnv::without_heartbeats()
        ));
    }
}
