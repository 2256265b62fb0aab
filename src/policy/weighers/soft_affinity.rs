//! `ServerGroupSoftAffinityWeigher`: prefer hosts already running members of the group.

use super::Weigher;
use crate::domain::{GroupPolicy, HostState, RequestContext};
use crate::policy::filters::members_on;

/// Members of a `soft-affinity` group on the host (0 for other requests), as Nova's
/// `ServerGroupSoftAffinityWeigher`.
#[derive(Clone, Copy, Debug)]
pub struct ServerGroupSoftAffinityWeigher {
    /// Normalised weights are multiplied by this (its `*_weight_multiplier` option).
    pub multiplier: f64,
}

impl ServerGroupSoftAffinityWeigher {
    /// The name in `weight_classes`.
    pub const NAME: &'static str = "ServerGroupSoftAffinityWeigher";
}

impl Weigher for ServerGroupSoftAffinityWeigher {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn multiplier(&self) -> f64 {
        self.multiplier
    }

    fn varies(&self, req: &RequestContext) -> bool {
        matches!(&req.group, Some(g) if g.policy == GroupPolicy::SoftAffinity)
    }

    fn weigh(&self, host: &HostState, req: &RequestContext) -> f64 {
        match &req.group {
            Some(g) if g.policy == GroupPolicy::SoftAffinity => members_on(g, host) as f64,
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ServerGroup;
    use crate::policy::filters::testing::{host, request};

    #[test]
    fn weighs_members_on_the_host() {
        type Case<'a> = (&'a str, Option<(GroupPolicy, &'a [&'a str])>, f64);
        let cases: [Case; 5] = [
            ("no group", None, 0.0),
            (
                "no member here",
                Some((GroupPolicy::SoftAffinity, &["host2"])),
                0.0,
            ),
            (
                "one member",
                Some((GroupPolicy::SoftAffinity, &["host1", "host2"])),
                1.0,
            ),
            (
                "two members",
                Some((GroupPolicy::SoftAffinity, &["host1", "host1"])),
                2.0,
            ),
            (
                "other policy",
                Some((GroupPolicy::SoftAntiAffinity, &["host1"])),
                0.0,
            ),
        ];
        let w = ServerGroupSoftAffinityWeigher { multiplier: 1.0 };
        for (name, group, want) in cases {
            let mut req = request();
            req.group = group.map(|(policy, hosts)| ServerGroup {
                policy,
                hosts: hosts.iter().map(|s| s.to_string()).collect(),
                max_server_per_host: 1,
            });
            assert_eq!(w.weigh(&host(1), &req), want, "{name}");
        }
    }
}
