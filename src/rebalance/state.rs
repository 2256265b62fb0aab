//! The cloud as the planner reads it (docs/fmu.md §8.1): hosts of the live table with what
//! each may hold (Placement's usable capacity, allocation ratios applied) and whether it may
//! receive (up, enabled), the ledger's allocations of instances, measured CPU usage from the
//! usage soft state (`table::usage`), and a revision of the ledger's state the plan is made on.

use crate::domain::{ClassId, HostId, HostState, Resources};
use crate::ledger::{HeldMove, StoredAllocation};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// Resource classes whose allocation pins an instance to hardware Nova cannot live-migrate
/// it with (PCI passthrough, SR-IOV, vGPU).
const UNMOVABLE_CLASSES: &[(&str, &str)] = &[
    ("VGPU", "vGPU"),
    ("PGPU", "vGPU"),
    ("SRIOV_NET_VF", "SR-IOV"),
    ("PCI_DEVICE", "PCI passthrough"),
    ("CUSTOM_PCI_", "PCI passthrough (in Placement)"),
];

/// One host as the planner sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanHost {
    pub id: HostId,
    /// Nova's service host: what `os-migrateLive` and Watcher's `destination_node` name.
    pub host: String,
    pub node: String,
    pub uuid: String,
    /// Why the host may not receive instances (down, disabled, forced down), if so.
    pub closed: Option<String>,
    /// What allocations may sum to, per class (after reserved and ratios).
    pub usable: Resources,
    /// What allocations of consumers that are not movable instances (a move's source, a
    /// migration record, parts on other providers) hold on it.
    pub held_by_others: Resources,
    /// The VCPUs the guests share (inventory total less reserved), the FMU capacity.
    pub cpus: f64,
    /// The host's fresh VCPU reading, in VCPUs busy.
    pub cpu_busy: Option<f64>,
    /// Fresh per-instance VCPU readings.
    pub instance_busy: HashMap<String, f64>,
}

impl PlanHost {
    /// Whether the host has fresh measured CPU usage (host or per instance).
    pub fn has_usage(&self) -> bool {
        self.cpu_busy.is_some() || !self.instance_busy.is_empty()
    }
}

/// One instance with an allocation.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanVm {
    pub uuid: String,
    /// Index into [`CloudState::hosts`].
    pub host: usize,
    pub allocation: Resources,
    /// Why Nova cannot live-migrate it, if so.
    pub pinned: Option<String>,
}

/// The state a plan is made on.
#[derive(Clone, Debug, PartialEq)]
pub struct CloudState {
    pub hosts: Vec<PlanHost>,
    pub vms: Vec<PlanVm>,
    /// A digest of the ledger's allocations and of the hosts' capacity and openness: a plan
    /// carries it, and one made on another revision is stale.
    pub revision: String,
}

/// What [`CloudState::build`] reads.
#[derive(Clone, Copy, Debug)]
pub struct Sources<'a> {
    pub hosts: &'a [HostState],
    pub allocations: &'a [StoredAllocation],
    pub held_moves: &'a [HeldMove],
    pub now_ms: i64,
    /// `[usage] max_age_s` in ms: older readings decide nothing.
    pub max_age_ms: i64,
    /// `[policy] host_timeout_s` in ms (0: never): a host silent longer is down.
    pub host_timeout_ms: i64,
}

impl CloudState {
    /// The planner's view of `sources`.
    pub fn build(sources: Sources<'_>) -> CloudState {
        let mut hosts: Vec<PlanHost> = sources.hosts.iter().map(|h| host(h, &sources)).collect();
        let slot: HashMap<HostId, usize> =
            hosts.iter().enumerate().map(|(i, h)| (h.id, i)).collect();
        let moving: HashMap<&str, ()> = sources
            .held_moves
            .iter()
            .map(|m| (m.instance_uuid.as_str(), ()))
            .collect();
        let mut vms = Vec::new();
        for a in sources.allocations {
            let Some(&at) = slot.get(&a.host_id) else {
                continue;
            };
            let is_instance = a.instance && !a.instance_uuid.contains(['@', '#']);
            if !is_instance {
                hosts[at].held_by_others = hosts[at].held_by_others + a.demand;
                continue;
            }
            let pinned = if moving.contains_key(a.instance_uuid.as_str()) {
                Some("a move of it is in progress".to_string())
            } else {
                pinned_by(&a.demand)
            };
            vms.push(PlanVm {
                uuid: a.instance_uuid.clone(),
                host: at,
                allocation: a.demand,
                pinned,
            });
        }
        // Moves' sources are held by the ledger outside `allocations` listing; what the host
        // holds beyond the listed allocations is someone else's.
        let mut listed: Vec<Resources> = hosts.iter().map(|h| h.held_by_others).collect();
        for vm in &vms {
            listed[vm.host] = listed[vm.host] + vm.allocation;
        }
        for ((h, state), listed) in hosts.iter_mut().zip(sources.hosts).zip(listed) {
            for (class, used) in state.used.nonzero() {
                let extra = used - listed.get(class);
                if extra > 0 {
                    h.held_by_others
                        .set(class, h.held_by_others.get(class) + extra);
                }
            }
        }
        let revision = revision(&hosts, sources.allocations);
        CloudState {
            hosts,
            vms,
            revision,
        }
    }
}

fn host(h: &HostState, sources: &Sources<'_>) -> PlanHost {
    let fresh =
        sources.host_timeout_ms == 0 || sources.now_ms - h.last_seen_ms <= sources.host_timeout_ms;
    let closed = if h.disabled {
        Some("disabled".to_string())
    } else if h.forced_down {
        Some("forced down".to_string())
    } else if !h.up || !fresh {
        Some("down".to_string())
    } else {
        None
    };
    let cpus = h
        .profile
        .inventory(ClassId::VCPU)
        .map_or(0.0, |inv| (inv.total - inv.reserved).max(0) as f64);
    let (mut cpu_busy, mut instance_busy) = (None, HashMap::new());
    if let Some(m) = &h.measured {
        cpu_busy = m
            .class(ClassId::VCPU)
            .filter(|c| c.fresh(sources.now_ms, sources.max_age_ms))
            .map(|c| c.value);
        for i in &m.instances {
            let age = sources.now_ms.saturating_sub(i.at_ms);
            if age > sources.max_age_ms {
                continue;
            }
            if let Some((_, v)) = i.classes.iter().find(|(c, _)| *c == ClassId::VCPU) {
                instance_busy.insert(i.instance.to_string(), *v);
            }
        }
    }
    PlanHost {
        id: h.id,
        host: h.host().to_string(),
        node: h.node().to_string(),
        uuid: h.uuid().to_string(),
        closed,
        usable: *h.usable(),
        held_by_others: Resources::ZERO,
        cpus,
        cpu_busy,
        instance_busy,
    }
}

/// Why an allocation pins its instance to its host, when it does.
fn pinned_by(demand: &Resources) -> Option<String> {
    demand.nonzero().find_map(|(class, _)| {
        let name = class.name();
        UNMOVABLE_CLASSES
            .iter()
            .find(|(prefix, _)| name.starts_with(prefix))
            .map(|(_, what)| format!("{what} ({name}) cannot be live-migrated"))
    })
}

fn revision(hosts: &[PlanHost], allocations: &[StoredAllocation]) -> String {
    let mut digest = Sha256::new();
    let mut ordered: Vec<&PlanHost> = hosts.iter().collect();
    ordered.sort_by_key(|h| h.id);
    for h in ordered {
        digest.update(h.id.0.to_le_bytes());
        digest.update([u8::from(h.closed.is_some())]);
        for (class, amount) in h.usable.nonzero() {
            digest.update(class.name().as_bytes());
            digest.update(amount.to_le_bytes());
        }
    }
    // `stored_allocations` reads in instance order.
    for a in allocations {
        digest.update(a.instance_uuid.as_bytes());
        digest.update(a.host_id.0.to_le_bytes());
        digest.update(a.resources_json.as_bytes());
    }
    let bytes = digest.finalize();
    bytes[..8].iter().map(|b| format!("{b:02x}")).collect()
}
