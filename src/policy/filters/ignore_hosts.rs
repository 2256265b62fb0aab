//! `IgnoreHostsFilter`: hosts the request says to ignore are removed.

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// Nova's `_strip_ignore_hosts`: removes hosts named in `ignore_hosts` (case-insensitive),
/// e.g. the source host of a resize or migration.
#[derive(Clone, Copy, Debug, Default)]
pub struct IgnoreHostsFilter;

impl IgnoreHostsFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "IgnoreHostsFilter";
}

impl Filter for IgnoreHostsFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        !req.ignore_hosts.is_empty()
    }

    /// Nova's host manager narrows the hosts to these before any filter, a rebuild too.
    fn runs_on_rebuild(&self) -> bool {
        true
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        !req.ignore_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host.host()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;

    #[test]
    fn removes_only_ignored_hosts() {
        let cases: [(&str, &[&str], bool); 4] = [
            ("nothing ignored", &[], true),
            ("this host ignored", &["host1"], false),
            ("this host ignored, other case", &["Host1"], false),
            ("another host ignored", &["host2", "host10"], true),
        ];
        for (name, ignored, want) in cases {
            let mut req = request();
            req.ignore_hosts = ignored.iter().map(|s| s.to_string()).collect();
            let got = IgnoreHostsFilter.passes(&host(1), &req, &FilterEnv::without_heartbeats());
            assert_eq!(got, want, "{name}");
        }
    }
}
