//! The input and output of one batch solve (docs/architecture.md §12): the hosts' capacity and
//! free amounts per resource class, the requests with their affinities, and the options that
//! choose between the paper's literal rules and the service's.

use thiserror::Error;

/// Host capacities and free amounts, flat: host `h`'s class `k` is at `h * classes + k`.
#[derive(Clone, Debug)]
pub struct Cluster {
    classes: usize,
    capacity: Vec<u64>,
    free: Vec<u64>,
}

impl Cluster {
    /// Checks that both vectors hold `classes` amounts per host and that no host has more free
    /// than capacity.
    pub fn new(classes: usize, capacity: Vec<u64>, free: Vec<u64>) -> Result<Self, BatchError> {
        if classes == 0 {
            return Err(BatchError::NoClasses);
        }
        if !capacity.len().is_multiple_of(classes) || capacity.len() != free.len() {
            return Err(BatchError::ClusterShape {
                classes,
                capacity: capacity.len(),
                free: free.len(),
            });
        }
        if let Some(i) = (0..free.len()).find(|&i| free[i] > capacity[i]) {
            return Err(BatchError::FreeAboveCapacity {
                host: i / classes,
                class: i % classes,
            });
        }
        Ok(Cluster {
            classes,
            capacity,
            free,
        })
    }

    /// The number of resource classes (CPU, memory, …) per host.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// The number of hosts.
    pub fn hosts(&self) -> usize {
        self.capacity.len() / self.classes
    }

    /// Host `h`'s capacity per class.
    pub fn capacity(&self, h: usize) -> &[u64] {
        &self.capacity[h * self.classes..(h + 1) * self.classes]
    }

    /// Host `h`'s free amount per class.
    pub fn free(&self, h: usize) -> &[u64] {
        &self.free[h * self.classes..(h + 1) * self.classes]
    }
}

/// One instance (container) to place.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchRequest {
    /// The amount of each resource class it needs.
    pub demand: Vec<u64>,
    /// Machine affinity (§2.1's MA, eq. 3; Fig. 3a): edges only to these host indices.
    pub hosts: Option<Vec<u32>>,
    /// Its server group, if any.
    pub group: Option<Group>,
}

/// A server group: requests sharing the id are co-located or kept apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Group {
    pub id: u32,
    pub policy: GroupPolicy,
}

/// How the members of a group relate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupPolicy {
    /// Container affinity (§2.1's CA, eq. 2; Fig. 3b's aggregator node): all on one host.
    Affinity,
    /// Nova's anti-affinity: no two on one host (a gate node of capacity 1 per group and host).
    AntiAffinity,
}

/// The edge cost of placing a request on a host (§3.3), negated: the higher the score, the
/// cheaper the edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CostModel {
    /// dp = Σ D·V over classes, V the host's capacity (§3.3, as published).
    DotProduct,
    /// ml = Σ D / V over classes, V the host's capacity (§3.3, as published).
    MostLoaded,
    /// dp on the host's free amounts: Σ D·F.
    DotProductFree,
    /// ml on the host's free amounts: Σ D / F (the fuller the host, the cheaper).
    MostLoadedFree,
}

/// The capacity of a host → sink edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SlotRule {
    /// One request per host per round (§3.2, literal).
    OnePerHost,
    /// As many as fit: min over classes of ⌊free / largest demand in the batch⌋, at least 1.
    AsManyAsFit,
}

/// The cost of the request → unscheduled edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unscheduled {
    /// 0, as published (§3.3): the optimum may leave a request out to place another better.
    Zero,
    /// A penalty larger than any sum of placement costs: place as many as possible first,
    /// then at least cost.
    Penalty,
}

/// The rules of one solve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SolveOptions {
    pub cost: CostModel,
    pub slots: SlotRule,
    pub unscheduled: Unscheduled,
    /// Merge interchangeable hosts and identical requests, and keep per request only the
    /// hosts that can be in an optimum (§12.3). Off: §3.2's network as drawn.
    pub prune: bool,
}

impl SolveOptions {
    /// The paper's rules (§3.2, §3.3) with the given cost model, pruned.
    pub fn paper(cost: CostModel) -> Self {
        SolveOptions {
            cost,
            slots: SlotRule::OnePerHost,
            unscheduled: Unscheduled::Zero,
            prune: true,
        }
    }

    /// The service's rules: as many per host as fit, free-capacity costs, most placed first.
    pub fn service() -> Self {
        SolveOptions {
            cost: CostModel::DotProductFree,
            slots: SlotRule::AsManyAsFit,
            unscheduled: Unscheduled::Penalty,
            prune: true,
        }
    }
}

/// The answer: a host per request, or none (the unscheduled node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Per request, in input order, the host index it goes to.
    pub hosts: Vec<Option<u32>>,
    /// The optimum's placement cost: Σ over placed units of their edge cost, in
    /// [`super::COST_SCALE`] units (the unscheduled penalty, if any, not included).
    pub cost: i64,
    /// The size of the network solved.
    pub stats: SolveStats,
}

impl Placement {
    /// The number of requests left on the unscheduled node.
    pub fn unscheduled(&self) -> usize {
        self.hosts.iter().filter(|h| h.is_none()).count()
    }
}

/// The size of the network solved and the work done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SolveStats {
    /// Flow units: requests, with each affinity group counted once (its aggregator).
    pub units: usize,
    /// Host nodes in the network after pruning (with `prune`, a node is a group of
    /// interchangeable hosts, docs/architecture.md §12.3).
    pub host_nodes: usize,
    /// Unit → host (or gate) edges after pruning (with `prune`, class → group edges).
    pub edges: usize,
    /// Nodes settled by Dijkstra over all augmentations.
    pub settled: usize,
}

/// A batch the solver cannot read.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum BatchError {
    #[error("a cluster needs at least one resource class")]
    NoClasses,
    #[error("capacity ({capacity}) and free ({free}) must both hold {classes} amounts per host")]
    ClusterShape {
        classes: usize,
        capacity: usize,
        free: usize,
    },
    #[error("host {host} has more free than capacity in class {class}")]
    FreeAboveCapacity { host: usize, class: usize },
    #[error("request {request} has {got} demand amounts, the cluster {classes} classes")]
    DemandShape {
        request: usize,
        got: usize,
        classes: usize,
    },
    #[error("request {request} names host {host}, the cluster has {hosts}")]
    UnknownHost {
        request: usize,
        host: u32,
        hosts: usize,
    },
    #[error("group {group} is both affinity and anti-affinity (request {request})")]
    GroupPolicyConflict { group: u32, request: usize },
}
