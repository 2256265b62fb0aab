//! `CrossCellWeigher`: on a move the conductor allows across cells, hosts in the instance's
//! own cell (`requested_destination.cell`) weigh 1 and the others −1; every other request
//! weighs 0 (Nova 34's `cross_cell.py`, `cross_cell_move_weight_multiplier` 1,000,000).

use super::Weigher;
use crate::domain::{HostState, RequestContext};
use crate::policy::config::PolicyConfig;

/// Nova's `CrossCellWeigher`. A host's cell is its node's from Nova's records; a host
/// without records is in no named cell (Nova's `host_state.cell_uuid` is always set, so with
/// `[nova_db]` off every host weighs −1 alike and the weigher adds nothing).
#[derive(Clone, Copy, Debug)]
pub struct CrossCellWeigher {
    pub multiplier: f64,
}

impl CrossCellWeigher {
    /// The name in `weight_classes`.
    pub const NAME: &'static str = "CrossCellWeigher";

    /// The weigher with the configured multiplier.
    pub fn new(config: &PolicyConfig) -> Self {
        CrossCellWeigher {
            multiplier: config.cross_cell_move_weight_multiplier,
        }
    }

    fn preferred(req: &RequestContext) -> Option<&str> {
        if !req.cross_cell_move {
            return None;
        }
        req.requested_destination.as_ref()?.cell.as_deref()
    }
}

impl Weigher for CrossCellWeigher {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn multiplier(&self) -> f64 {
        self.multiplier
    }

    fn varies(&self, req: &RequestContext) -> bool {
        Self::preferred(req).is_some()
    }

    fn weigh(&self, host: &HostState, req: &RequestContext) -> f64 {
        let Some(cell) = Self::preferred(req) else {
            return 0.0;
        };
        let host_cell = host
            .profile
            .facts
            .as_ref()
            .and_then(|f| f.cell_uuid.as_deref());
        if host_cell == Some(cell) {
            1.0
        } else {
            -1.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ComputeFacts, Destination, Resources};
    use std::sync::Arc;

    fn in_cell(cell: Option<&str>) -> HostState {
        let mut h = HostState::synthetic(1, Resources::new(4, 4096, 40), Resources::ZERO);
        h.profile_mut().facts = Some(Arc::new(ComputeFacts {
            cell_uuid: cell.map(str::to_string),
            ..ComputeFacts::default()
        }));
        h
    }

    /// Nova's `test_cross_cell`: no destination, a destination without a cell, a cell
    /// without `allow_cross_cell_move` weigh 0; a cross-cell move prefers the source cell.
    #[test]
    fn a_cross_cell_move_prefers_the_source_cell() {
        type Case<'a> = (&'a str, Option<&'a str>, bool, Option<&'a str>, f64);
        let cases: [Case; 6] = [
            ("no destination", None, false, Some("c1"), 0.0),
            (
                "cell, not a cross-cell move",
                Some("c1"),
                false,
                Some("c2"),
                0.0,
            ),
            ("cross-cell, same cell", Some("c1"), true, Some("c1"), 1.0),
            ("cross-cell, other cell", Some("c1"), true, Some("c2"), -1.0),
            (
                "cross-cell, host without cell",
                Some("c1"),
                true,
                None,
                -1.0,
            ),
            (
                "cross-cell flag without a cell",
                None,
                true,
                Some("c1"),
                0.0,
            ),
        ];
        let w = CrossCellWeigher::new(&PolicyConfig::default());
        assert_eq!(w.multiplier(), 1_000_000.0);
        for (name, dest_cell, cross, host_cell, want) in cases {
            let mut req = crate::policy::filters::testing::request();
            req.requested_destination = Some(Destination {
                cell: dest_cell.map(str::to_string),
                ..Destination::default()
            });
            req.cross_cell_move = cross;
            assert_eq!(w.weigh(&in_cell(host_cell), &req), want, "{name}");
            assert_eq!(w.varies(&req), dest_cell.is_some() && cross, "{name}");
        }
    }
}
