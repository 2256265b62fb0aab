//! Nova's `ServerGroupSoftAffinityWeigher` and `ServerGroupSoftAntiAffinityWeigher` as one
//! weigher with a sign: the members of the request's group on the host, counted for the
//! group's policy only, positive to gather members and negative to spread them (Nova negates
//! the anti-affinity count so that its default positive multiplier spreads).

use super::Weigher;
use crate::domain::{GroupPolicy, HostState, RequestContext};
use crate::policy::config::PolicyConfig;
use crate::policy::filters::members_on;

/// One row of [`GROUP_WEIGHERS`].
#[derive(Debug)]
pub struct GroupWeigherSpec {
    /// The name in `weight_classes` (Nova's class name).
    pub name: &'static str,
    /// The group policy this weigher serves; other requests weigh 0 on every host.
    pub policy: GroupPolicy,
    /// +1.0 gathers members, −1.0 spreads them.
    pub sign: f64,
    /// Nova's option for the multiplier, the same key in `[policy]`.
    pub option: &'static str,
    /// Reads the option from the policy configuration (default 1.0 for both).
    pub multiplier: fn(&PolicyConfig) -> f64,
}

/// Both soft server-group weighers, in Nova's `all_weighers` order.
pub static GROUP_WEIGHERS: [GroupWeigherSpec; 2] = [
    GroupWeigherSpec {
        name: "ServerGroupSoftAffinityWeigher",
        policy: GroupPolicy::SoftAffinity,
        sign: 1.0,
        option: "soft_affinity_weight_multiplier",
        multiplier: |c| c.soft_affinity_weight_multiplier,
    },
    GroupWeigherSpec {
        name: "ServerGroupSoftAntiAffinityWeigher",
        policy: GroupPolicy::SoftAntiAffinity,
        sign: -1.0,
        option: "soft_anti_affinity_weight_multiplier",
        multiplier: |c| c.soft_anti_affinity_weight_multiplier,
    },
];

/// A soft server-group weigher: one row of [`GROUP_WEIGHERS`] with its configured multiplier.
#[derive(Clone, Copy, Debug)]
pub struct SoftGroupWeigher {
    /// Which policy, under which name, with which sign.
    pub spec: &'static GroupWeigherSpec,
    /// Normalised weights are multiplied by this.
    pub multiplier: f64,
}

impl SoftGroupWeigher {
    /// The weigher of `spec`, its multiplier read from `config`.
    pub fn new(spec: &'static GroupWeigherSpec, config: &PolicyConfig) -> Self {
        SoftGroupWeigher {
            spec,
            multiplier: (spec.multiplier)(config),
        }
    }
}

impl Weigher for SoftGroupWeigher {
    fn name(&self) -> &'static str {
        self.spec.name
    }

    fn multiplier(&self) -> f64 {
        self.multiplier
    }

    fn varies(&self, req: &RequestContext) -> bool {
        matches!(&req.group, Some(g) if g.policy == self.spec.policy)
    }

    fn weigh(&self, host: &HostState, req: &RequestContext) -> f64 {
        match &req.group {
            Some(g) if g.policy == self.spec.policy => self.spec.sign * members_on(g, host) as f64,
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ServerGroup;
    use crate::policy::filters::testing::{host, request};

    /// Checks the row named `name` of policy `policy` (the other soft policy is `other`):
    /// its option, default multiplier and raw values for 0, 1 and 2 members on the host.
    fn check_row(name: &str, option: &str, policy: GroupPolicy, other: GroupPolicy, sign: f64) {
        let spec = GROUP_WEIGHERS
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no row {name}"));
        assert_eq!(
            (spec.option, spec.policy, spec.sign),
            (option, policy, sign)
        );
        let w = SoftGroupWeigher::new(spec, &PolicyConfig::default());
        assert_eq!((w.name(), w.multiplier()), (name, 1.0));
        let set: PolicyConfig = toml::from_str(&format!("{option} = 2.5")).unwrap();
        assert_eq!(
            SoftGroupWeigher::new(spec, &set).multiplier(),
            2.5,
            "{option}"
        );

        type Case<'a> = (&'a str, Option<(GroupPolicy, &'a [&'a str])>, f64, bool);
        let cases: [Case; 5] = [
            ("no group", None, 0.0, false),
            ("no member here", Some((policy, &["host2"])), 0.0, true),
            (
                "one member",
                Some((policy, &["host1", "host2"])),
                sign,
                true,
            ),
            (
                "two members",
                Some((policy, &["host1", "host1"])),
                2.0 * sign,
                true,
            ),
            ("other policy", Some((other, &["host1"])), 0.0, false),
        ];
        for (case, group, want, varies) in cases {
            let mut req = request();
            req.group =
                group.map(|(policy, hosts)| ServerGroup::from_member_hosts(policy, hosts, 1));
            assert_eq!(w.weigh(&host(1), &req), want, "{name}: {case}");
            assert_eq!(w.varies(&req), varies, "{name}: {case}");
        }
    }

    #[test]
    fn soft_affinity_weighs_members_on_the_host() {
        check_row(
            "ServerGroupSoftAffinityWeigher",
            "soft_affinity_weight_multiplier",
            GroupPolicy::SoftAffinity,
            GroupPolicy::SoftAntiAffinity,
            1.0,
        );
    }

    #[test]
    fn soft_anti_affinity_weighs_minus_the_members_on_the_host() {
        check_row(
            "ServerGroupSoftAntiAffinityWeigher",
            "soft_anti_affinity_weight_multiplier",
            GroupPolicy::SoftAntiAffinity,
            GroupPolicy::SoftAffinity,
            -1.0,
        );
    }
}
