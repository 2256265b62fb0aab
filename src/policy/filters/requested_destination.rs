//! `RequestedDestinationFilter`: the host (and node) the request's destination names.

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// Nova's `requested_destination` (a targeted live migration, evacuate or cold migrate):
/// when it names a host, only that host remains; when it names a node, only that node; when
/// it names a cell, only hosts of that cell (a host whose cell Parasol does not know, without
/// `[nova_db]`, passes) — unless the move may cross cells (`allow_cross_cell_move`: the
/// cell is then the source cell `CrossCellWeigher` prefers, not a limit, as Nova's
/// `HostManager.get_host_states_by_uuids` reads it).
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestedDestinationFilter;

impl RequestedDestinationFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "RequestedDestinationFilter";
}

impl Filter for RequestedDestinationFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        req.requested_destination.as_ref().is_some_and(|d| {
            d.host.is_some() || d.node.is_some() || (d.cell.is_some() && !req.cross_cell_move)
        })
    }

    /// Nova's host manager narrows the hosts to these before any filter, a rebuild too.
    fn runs_on_rebuild(&self) -> bool {
        true
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        let Some(dest) = &req.requested_destination else {
            return true;
        };
        let host_ok = dest.host.as_deref().is_none_or(|h| h == &**host.host());
        let node_ok = dest.node.as_deref().is_none_or(|n| n == &**host.node());
        let host_cell = host
            .profile
            .facts
            .as_ref()
            .and_then(|f| f.cell_uuid.as_deref());
        let cell_ok = req.cross_cell_move
            || match (dest.cell.as_deref(), host_cell) {
                (Some(wanted), Some(cell)) => wanted == cell,
                _ => true,
            };
        host_ok && node_ok && cell_ok
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;
    use crate::domain::Destination;

    #[test]
    fn keeps_only_the_requested_host_and_node() {
        let cases = [
            ("no destination", None, true),
            ("empty destination", Some((None, None)), true),
            ("this host", Some((Some("host1"), None)), true),
            ("another host", Some((Some("host2"), None)), false),
            ("this node", Some((None, Some("host1"))), true),
            (
                "this host, another node",
                Some((Some("host1"), Some("node9"))),
                false,
            ),
        ];
        for (name, dest, want) in cases {
            let mut req = request();
            req.requested_destination =
                dest.map(|(h, n): (Option<&str>, Option<&str>)| Destination {
                    host: h.map(String::from),
                    node: n.map(String::from),
                    cell: None,
                });
            let got =
                RequestedDestinationFilter.passes(&host(1), &req, &FilterEnv::without_heartbeats());
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn keeps_only_hosts_of_the_requested_cell_when_their_cell_is_known() {
        let in_cell = |cell: Option<&str>| {
            let mut h = host(1);
            h.profile_mut().facts = cell.map(|c| {
                std::sync::Arc::new(crate::domain::ComputeFacts {
                    cell_uuid: Some(c.to_string()),
                    ..Default::default()
                })
            });
            h
        };
        let mut req = request();
        req.requested_destination = Some(Destination {
            cell: Some("cell-1".into()),
            ..Default::default()
        });
        assert!(RequestedDestinationFilter.restricts(&req));
        let env = FilterEnv::without_heartbeats();
        assert!(RequestedDestinationFilter.passes(&in_cell(Some("cell-1")), &req, &env));
        assert!(!RequestedDestinationFilter.passes(&in_cell(Some("cell-2")), &req, &env));
        assert!(
            RequestedDestinationFilter.passes(&in_cell(None), &req, &env),
            "a host without Nova's records has no known cell"
        );
        // A cross-cell resize names the source cell to prefer, not to stay in.
        req.cross_cell_move = true;
        assert!(!RequestedDestinationFilter.restricts(&req));
        assert!(RequestedDestinationFilter.passes(&in_cell(Some("cell-2")), &req, &env));
    }
}
