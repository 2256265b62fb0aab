//! `ServerGroupAntiAffinityFilter`: members of an anti-affinity group spread out.

use super::{Filter, FilterEnv};
use crate::domain::{GroupPolicy, HostState, RequestContext, ServerGroup};

/// Nova's `ServerGroupAntiAffinityFilter`: for an `anti-affinity` group, a host passes while
/// the other members already on it are fewer than the group's `max_server_per_host` (1 by
/// default); the host the instance itself runs on (a resize to the same host) always passes.
/// Not run for a rebuild (Nova's `RUN_ON_REBUILD = False`).
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerGroupAntiAffinityFilter;

impl ServerGroupAntiAffinityFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "ServerGroupAntiAffinityFilter";
}

/// Members of `group` on `host`, the instance being placed included when it runs there
/// (Nova's soft weighers count `host_state.instances ∩ group.members`).
pub fn members_on(group: &ServerGroup, host: &HostState) -> usize {
    group.others_on(host.host()) + usize::from(group.is_own_host(host.host()))
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
                g.is_own_host(host.host())
                    || (g.others_on(host.host()) as i64) < g.max_server_per_host.max(1)
            }
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;
    use std::collections::BTreeMap;

    /// (name, policy, Nova's group hosts, members per host from the ledger, own hosts,
    /// max_server_per_host, passes host1).
    type Case<'a> = (
        &'a str,
        GroupPolicy,
        &'a [&'a str],
        &'a [(&'a str, usize)],
        &'a [&'a str],
        i64,
        bool,
    );

    const CASES: [Case<'static>; 12] = [
        (
            "no members",
            GroupPolicy::AntiAffinity,
            &[],
            &[],
            &[],
            1,
            true,
        ),
        (
            "member elsewhere",
            GroupPolicy::AntiAffinity,
            &["host2"],
            &[("host2", 1)],
            &[],
            1,
            true,
        ),
        (
            "member here",
            GroupPolicy::AntiAffinity,
            &["host1"],
            &[("host1", 1)],
            &[],
            1,
            false,
        ),
        (
            "member here, ledger unaware",
            GroupPolicy::AntiAffinity,
            &["host1"],
            &[],
            &[],
            1,
            false,
        ),
        (
            "one of two allowed",
            GroupPolicy::AntiAffinity,
            &["host1"],
            &[("host1", 1)],
            &[],
            2,
            true,
        ),
        (
            "two of two",
            GroupPolicy::AntiAffinity,
            &["host1"],
            &[("host1", 2)],
            &[],
            2,
            false,
        ),
        (
            "host named once, two members",
            GroupPolicy::AntiAffinity,
            &["host1", "host2"],
            &[("host1", 2), ("host2", 1)],
            &[],
            2,
            false,
        ),
        (
            "zero read as one",
            GroupPolicy::AntiAffinity,
            &["host1"],
            &[("host1", 1)],
            &[],
            0,
            false,
        ),
        (
            "the instance's own host (resize to the same host)",
            GroupPolicy::AntiAffinity,
            &["host1", "host2"],
            &[("host2", 1)],
            &["host1"],
            1,
            true,
        ),
        (
            "own host even with another member there",
            GroupPolicy::AntiAffinity,
            &["host1"],
            &[("host1", 1)],
            &["host1"],
            1,
            true,
        ),
        (
            "own host elsewhere",
            GroupPolicy::AntiAffinity,
            &["host1", "host2"],
            &[("host1", 1)],
            &["host2"],
            1,
            false,
        ),
        (
            "soft policy not filtered",
            GroupPolicy::SoftAntiAffinity,
            &["host1"],
            &[("host1", 1)],
            &[],
            1,
            true,
        ),
    ];

    #[test]
    fn counts_other_members_against_max_server_per_host() {
        for (name, policy, hosts, held, own, max, want) in CASES {
            let mut req = request();
            let mut group =
                ServerGroup::new(policy, hosts.iter().map(|s| s.to_string()).collect(), max);
            group.members_on = held
                .iter()
                .map(|(h, n)| (h.to_string(), *n))
                .collect::<BTreeMap<_, _>>();
            group.own_hosts = own.iter().map(|s| s.to_string()).collect();
            req.group = Some(group);
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

    #[test]
    fn members_on_counts_the_instance_itself_for_the_weighers() {
        let mut group = ServerGroup::new(GroupPolicy::SoftAntiAffinity, vec!["host1".into()], 1);
        group.members_on.insert("host1".into(), 2);
        assert_eq!(members_on(&group, &host(1)), 2);
        group.own_hosts.push("host1".into());
        assert_eq!(members_on(&group, &host(1)), 3);
        assert_eq!(members_on(&group, &host(2)), 0);
    }

    #[test]
    fn a_multi_create_counts_the_instances_it_placed() {
        let mut group = ServerGroup::new(GroupPolicy::AntiAffinity, vec![], 2);
        group.add_member_on("host1");
        assert_eq!(
            (group.others_on("host1"), group.hosts.clone()),
            (1, vec!["host1".to_string()])
        );
        group.add_member_on("host1");
        assert_eq!((group.others_on("host1"), group.hosts.len()), (2, 1));
    }
}
