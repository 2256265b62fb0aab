//! The RequestSpec's `requested_destination` (Destination 1.x) and `request_level_params`
//! (RequestLevelParams 1.x); its `requested_resources` are [`super::request_group`]'s.

use super::bounds::strings;
use super::error::Result;
use super::object::Fields;
use crate::domain::Destination;
use serde::Serialize;
use std::collections::BTreeSet;

/// Destination 1.4: where a move or a forced boot must go. Its `cell` is not read: Parasol
/// sees the compute nodes of every cell as one set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RequestedDestination {
    pub host: Option<String>,
    pub node: Option<String>,
    /// Required aggregates: each entry is a comma-separated any-of set
    /// (`Destination.require_aggregates`); all entries must hold.
    pub aggregates: Vec<String>,
    /// Aggregates the destination must not be in.
    pub forbidden_aggregates: BTreeSet<String>,
    pub allow_cross_cell_move: bool,
}

impl RequestedDestination {
    /// Reads a Destination object's data.
    pub fn from_fields(d: &Fields<'_>) -> Result<Self> {
        Ok(RequestedDestination {
            host: d.opt_str("host")?,
            node: d.opt_str("node")?,
            aggregates: d.opt_str_list("aggregates")?.unwrap_or_default(),
            forbidden_aggregates: d
                .opt_str_list("forbidden_aggregates")?
                .unwrap_or_default()
                .into_iter()
                .collect(),
            allow_cross_cell_move: d.opt_bool("allow_cross_cell_move")?.unwrap_or(false),
        })
    }

    /// The host and node, as the scheduling context carries them.
    pub fn host_and_node(&self) -> Destination {
        Destination {
            host: self.host.clone(),
            node: self.node.clone(),
            cell: None,
        }
    }
}

/// RequestLevelParams 1.1: traits on the root provider and `same_subtree`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RequestLevelParams {
    pub root_required: BTreeSet<String>,
    pub root_forbidden: BTreeSet<String>,
    /// Groups of request-group suffixes that must come from one subtree.
    pub same_subtree: Vec<Vec<String>>,
}

impl RequestLevelParams {
    /// Reads a RequestLevelParams object's data.
    pub fn from_fields(p: &Fields<'_>) -> Result<Self> {
        let set = |key: &str| -> Result<BTreeSet<String>> {
            Ok(p.opt_str_list(key)?
                .unwrap_or_default()
                .into_iter()
                .collect())
        };
        let same_subtree = match p.opt_list("same_subtree")? {
            None => Vec::new(),
            Some(lists) => lists
                .iter()
                .enumerate()
                .map(|(i, l)| strings(l, &format!("{}[{i}]", p.path_of("same_subtree"))))
                .collect::<Result<Vec<_>>>()?,
        };
        Ok(RequestLevelParams {
            root_required: set("root_required")?,
            root_forbidden: set("root_forbidden")?,
            same_subtree,
        })
    }
}
