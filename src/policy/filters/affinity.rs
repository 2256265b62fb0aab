//! `ServerGroupAffinityFilter`: members of an affinity group share one host.

use super::{Filter, FilterEnv};
use crate::domain::{GroupPolicy, HostState, RequestContext};

/// Nova's `ServerGroupAffinityFilter`: for an `affinity` group that already has members,
/// only hosts running a member pass; the first member may go anywhere.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerGroupAffinityFilter;

impl ServerGroupAffinityFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "ServerGroupAffinityFilter";
}

impl Filter for ServerGroupAffinityFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        matches!(&req.group, Some(g) if g.policy == GroupPolicy::Affinity && !g.hosts.is_empty())
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        match &req.group {
            Some(g) if g.policy == GroupPolicy::Affinity && !g.hosts.is_empty() => {
                g.hosts.iter().any(|h| **h == **host.host())
            }
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;
    use crate::domain::ServerGroup;

    #[test]
    fn keeps_hosts_running_a_member() {
        type Case<'a> = (&'a str, Option<(GroupPolicy, &'a [&'a str])>, bool);
        let cases: [Case; 5] = [
            ("no group", None, true),
            ("first member", Some((GroupPolicy::Affinity, &[])), true),
            (
                "member here",
                Some((GroupPolicy::Affinity, &["host2", "host1"])),
                true,
            ),
            (
                "members elsewhere",
                Some((GroupPolicy::Affinity, &["host2"])),
                false,
            ),
            (
                "other policy",
                Some((GroupPolicy::AntiAffinity, &["host2"])),
                true,
            ),
        ];
        for (name, group, want) in cases {
            let mut req = request();
            req.group = group.map(|(policy, hosts)| {
                ServerGroup::new(policy, hosts.iter().map(|s| s.to_string()).collect(), 1)
            });
            let got =
                ServerGroupAffinityFilter.passes(&host(1), &req, &FilterEnv::without_heartbeats());
            assert_eq!(got, want, "{name}");
        }
    }
}
