//! The state of one compute host as a scheduler sees it.

use super::resources::Resources;
use serde::Serialize;
use std::sync::Arc;

/// The ledger's row id of a host; also its fixed order for `first_fit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct HostId(pub i64);

/// One host's inventory and usage, read from the ledger (or a snapshot of it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostState {
    pub id: HostId,
    /// Nova's `service_host`.
    pub host: Arc<str>,
    /// Nova's `nodename`.
    pub node: Arc<str>,
    /// Nova's `compute_node_uuid`.
    pub uuid: Arc<str>,
    pub availability_zone: Arc<str>,
    pub up: bool,
    pub disabled: bool,
    pub forced_down: bool,
    /// When the host last reported, in milliseconds since the Unix epoch.
    pub last_seen_ms: i64,
    /// `(total − reserved) × allocation_ratio` per class.
    pub usable: Resources,
    /// Sum of the allocations on the host per class.
    pub used: Resources,
    pub num_instances: i64,
    pub num_io_ops: i64,
}

impl HostState {
    /// Room left in every class.
    pub fn free(&self) -> Resources {
        self.usable - self.used
    }

    /// True when `demand` fits in the room left in every class.
    pub fn fits(&self, demand: &Resources) -> bool {
        (self.used + *demand).fits_within(&self.usable)
    }

    /// Fraction used per class (`used / usable`); `None` for a class the host has no
    /// capacity of (such classes take no part in utilisation-based ranking).
    pub fn utilisation(&self) -> [Option<f64>; 3] {
        let mut u = [None; 3];
        for (i, slot) in u.iter_mut().enumerate() {
            let cap = self.usable.0[i];
            if cap > 0 {
                *slot = Some(self.used.0[i] as f64 / cap as f64);
            }
        }
        u
    }

    /// Records a successful claim in this copy (Nova's `consume_from_request`).
    pub fn consume(&mut self, demand: &Resources) {
        self.used = self.used + *demand;
        self.num_instances += 1;
        self.num_io_ops += 1;
    }

    /// A host with the given capacity and usage, for tests, the simulator and the benchmark.
    pub fn synthetic(id: i64, usable: Resources, used: Resources) -> Self {
        let name: Arc<str> = Arc::from(format!("host{id}"));
        HostState {
            id: HostId(id),
            host: name.clone(),
            node: name,
            uuid: Arc::from(format!("00000000-0000-4000-8000-{id:012}")),
            availability_zone: Arc::from("nova"),
            up: true,
            disabled: false,
            forced_down: false,
            last_seen_ms: 0,
            usable,
            used,
            num_instances: 0,
            num_io_ops: 0,
        }
    }
}
