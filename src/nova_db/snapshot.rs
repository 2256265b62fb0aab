//! One read of every cell, indexed for the two questions the scheduler asks: which service
//! host and cell a Placement provider (by uuid or by name) belongs to, and what it is.

use super::records::{CellMapping, CellSnapshot, ComputeNodeRecord};
use super::NovaDbError;
use std::collections::HashMap;
use uuid::Uuid;

/// A cell that could not be read, and why.
#[derive(Debug)]
pub struct CellFailure {
    /// `uuid(name)` of the cell.
    pub cell: String,
    pub error: NovaDbError,
}

/// Every enabled cell's nodes at `read_at_ms`.
#[derive(Debug)]
pub struct NovaDbSnapshot {
    /// When the read began, on the reader's clock: what Nova's databases held then is in it.
    pub began_ms: i64,
    /// When the read finished, on the reader's clock.
    pub read_at_ms: i64,
    pub cells: Vec<CellSnapshot>,
    pub failed_cells: Vec<CellFailure>,
    /// Cells whose mapping is disabled: not read, as Nova schedules to none of them.
    pub disabled_cells: Vec<CellMapping>,
    by_uuid: HashMap<Uuid, (usize, usize)>,
    by_name: HashMap<String, (usize, usize)>,
}

/// A node with the cell it lives in.
#[derive(Clone, Copy, Debug)]
pub struct NodeView<'a> {
    pub cell: &'a CellMapping,
    pub node: &'a ComputeNodeRecord,
}

impl NodeView<'_> {
    /// The `cell_uuid` of a Selection for this node.
    pub fn cell_uuid(&self) -> Uuid {
        self.cell.uuid
    }

    /// The `service_host` of a Selection for this node (its `nodename` is `node.node`).
    pub fn service_host(&self) -> &str {
        &self.node.host
    }
}

impl NovaDbSnapshot {
    pub fn new(
        (began_ms, read_at_ms): (i64, i64),
        cells: Vec<CellSnapshot>,
        failed_cells: Vec<CellFailure>,
        disabled_cells: Vec<CellMapping>,
    ) -> Self {
        let mut by_uuid = HashMap::new();
        let mut by_name = HashMap::new();
        for (c, cell) in cells.iter().enumerate() {
            for (n, node) in cell.nodes.iter().enumerate() {
                by_uuid.insert(node.uuid, (c, n));
                by_name.insert(node.node.clone(), (c, n));
            }
        }
        NovaDbSnapshot {
            began_ms,
            read_at_ms,
            cells,
            failed_cells,
            disabled_cells,
            by_uuid,
            by_name,
        }
    }

    /// The node whose uuid is `uuid` (Placement's resource provider uuid).
    pub fn node(&self, uuid: &Uuid) -> Option<NodeView<'_>> {
        self.by_uuid.get(uuid).map(|&(c, n)| self.view(c, n))
    }

    /// The node whose `hypervisor_hostname` is `name` (Placement's resource provider name).
    pub fn node_by_name(&self, name: &str) -> Option<NodeView<'_>> {
        self.by_name.get(name).map(|&(c, n)| self.view(c, n))
    }

    /// Every node of every cell read.
    pub fn nodes(&self) -> impl Iterator<Item = NodeView<'_>> {
        self.cells.iter().flat_map(|cell| {
            cell.nodes.iter().map(move |node| NodeView {
                cell: &cell.cell,
                node,
            })
        })
    }

    fn view(&self, c: usize, n: usize) -> NodeView<'_> {
        NodeView {
            cell: &self.cells[c].cell,
            node: &self.cells[c].nodes[n],
        }
    }
}
