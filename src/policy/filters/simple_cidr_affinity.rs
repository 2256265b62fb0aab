//! `SimpleCIDRAffinityFilter`: with the `build_near_host_ip` hint, only hosts whose IP is in
//! that address' network (`cidr` hint, `/24` by default) pass (Nova 34's
//! `affinity_filter.py`).

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// Nova's `SimpleCIDRAffinityFilter`. The host's IP is its compute node's `host_ip` from
/// Nova's records (`[nova_db]`); a host whose IP Parasol does not know fails, as Nova fails
/// the request on a host without one. Hints that make no network (a bad address or prefix)
/// pass no host (Nova raises). Not run for a rebuild.
#[derive(Clone, Copy, Debug, Default)]
pub struct SimpleCIDRAffinityFilter;

impl SimpleCIDRAffinityFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "SimpleCIDRAffinityFilter";
}

impl Filter for SimpleCIDRAffinityFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        req.hints.as_ref().is_some_and(|h| h.near.is_some())
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        let Some(near) = req.hints.as_ref().and_then(|h| h.near.as_ref()) else {
            return true;
        };
        let Ok(net) = near else {
            return false;
        };
        host.profile
            .facts
            .as_ref()
            .and_then(|f| f.host_ip)
            .is_some_and(|ip| net.contains(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request, with_hints};
    use super::*;
    use crate::domain::hints::IpNetwork;
    use crate::domain::ComputeFacts;
    use std::sync::Arc;

    /// Nova's `TestSimpleCIDRAffinityFilter` (host 10.8.1.1 near 10.8.1.100: /24 passes, /32
    /// fails; no hint passes), and the cases Nova raises on.
    #[test]
    fn keeps_hosts_in_the_hinted_network() {
        type Case<'a> = (&'a str, Option<&'a str>, Option<&'a str>, bool);
        let cases: [Case; 6] = [
            (
                "nova: /24 passes",
                Some("10.8.1.100/24"),
                Some("10.8.1.1"),
                true,
            ),
            (
                "nova: /32 fails",
                Some("10.8.1.100/32"),
                Some("10.8.1.1"),
                false,
            ),
            ("nova: no hint", None, Some("10.8.1.1"), true),
            ("host without an IP", Some("10.8.1.100/24"), None, false),
            (
                "bad network",
                Some("10.8.1.100/99"),
                Some("10.8.1.1"),
                false,
            ),
            (
                "v6 network, v4 host",
                Some("fd00::/8"),
                Some("10.8.1.1"),
                false,
            ),
        ];
        for (name, net, ip, want) in cases {
            let req = with_hints(request(), |h| h.near = net.map(IpNetwork::parse));
            let mut h = host(1);
            h.profile_mut().facts = Some(Arc::new(ComputeFacts {
                host_ip: ip.map(|i| i.parse().unwrap()),
                ..ComputeFacts::default()
            }));
            let env = FilterEnv::without_heartbeats();
            assert_eq!(
                SimpleCIDRAffinityFilter.passes(&h, &req, &env),
                want,
                "{name}"
            );
        }
    }
}
