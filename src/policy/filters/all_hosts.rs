//! `AllHostsFilter`: Nova's no-op filter (`all_hosts_filter.py`), which passes every host.
//! Accepted so that a nova.conf naming it (some tests and small clouds do, to switch host
//! filtering off) carries over unchanged.

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// Nova's `AllHostsFilter`: every host passes.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllHostsFilter;

impl AllHostsFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "AllHostsFilter";
}

impl Filter for AllHostsFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    /// Nothing to check: the pipeline skips it.
    fn restricts(&self, _req: &RequestContext) -> bool {
        false
    }

    fn passes(&self, _host: &HostState, _req: &RequestContext, _env: &FilterEnv) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;

    #[test]
    fn passes_every_host_and_is_skipped() {
        let env = FilterEnv::without_heartbeats();
        let mut down = host(2);
        down.up = false;
        let req = request();
        assert!(!AllHostsFilter.restricts(&req));
        assert!(AllHostsFilter.passes(&host(1), &req, &env));
        assert!(
            AllHostsFilter.passes(&down, &req, &env),
            "even a host that is down"
        );
    }
}
