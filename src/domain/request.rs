//! The typed scheduling context: everything a filter or weigher needs from a RequestSpec,
//! computed once per request rather than per host.

use super::host::HostState;
use super::markers::{AggregateId, Mark, TraitId};
use super::resources::Resources;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Nova's `requested_destination` (Destination 1.4), the parts that constrain a host.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Destination {
    pub host: Option<String>,
    pub node: Option<String>,
    /// The cell's uuid (`Destination.cell`): a move stays in the instance's cell unless the
    /// conductor allows a cross-cell move (nova-scheduler's `HostManager` reads that cell only).
    pub cell: Option<String>,
}

/// Server-group policies Nova knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum GroupPolicy {
    Affinity,
    AntiAffinity,
    SoftAffinity,
    SoftAntiAffinity,
}

impl GroupPolicy {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "affinity" => Some(GroupPolicy::Affinity),
            "anti-affinity" => Some(GroupPolicy::AntiAffinity),
            "soft-affinity" => Some(GroupPolicy::SoftAffinity),
            "soft-anti-affinity" => Some(GroupPolicy::SoftAntiAffinity),
            _ => None,
        }
    }
}

/// The instance group of a request: its policy and the hosts its members already run on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerGroup {
    pub policy: GroupPolicy,
    /// Nova's `InstanceGroup.hosts`: the service hosts of the group's members, each once.
    pub hosts: Vec<String>,
    /// Anti-affinity `max_server_per_host` rule (1 when absent).
    pub max_server_per_host: i64,
    /// The group's other members (not the instance being placed) per service host, as the
    /// ledger holds their allocations, plus those placed earlier in the same call: Nova's
    /// `host_state.instances ∩ group.members`. Empty when nothing was looked up.
    pub members_on: BTreeMap<String, usize>,
    /// Service hosts where the instance being placed already runs (a move's source): Nova's
    /// `spec_obj.instance_uuid in host_state.instances`, where an instance never counts
    /// against itself.
    pub own_hosts: Vec<String>,
}

impl ServerGroup {
    /// A group of `policy` whose members run on `hosts` (nothing looked up in the ledger).
    pub fn new(policy: GroupPolicy, hosts: Vec<String>, max_server_per_host: i64) -> Self {
        ServerGroup {
            policy,
            hosts,
            max_server_per_host,
            members_on: BTreeMap::new(),
            own_hosts: Vec::new(),
        }
    }

    /// A group of `policy` with one member on each entry of `member_hosts` (a host named
    /// twice holds two members), as if the ledger held them.
    pub fn from_member_hosts(
        policy: GroupPolicy,
        member_hosts: &[&str],
        max_server_per_host: i64,
    ) -> Self {
        let mut group = ServerGroup::new(policy, Vec::new(), max_server_per_host);
        for host in member_hosts {
            group.add_member_on(host);
        }
        group
    }

    /// Whether the instance being placed runs on service host `host` already.
    pub fn is_own_host(&self, host: &str) -> bool {
        self.own_hosts.iter().any(|h| h == host)
    }

    /// The group's other members on service host `host`: those the ledger holds there, and
    /// at least one when Nova's group hosts name it (a member whose allocation the ledger
    /// lacks still counts, as in Nova), the instance itself never.
    pub fn others_on(&self, host: &str) -> usize {
        let held = self.members_on.get(host).copied().unwrap_or(0);
        let named = self.hosts.iter().any(|h| h == host) && !self.is_own_host(host);
        held.max(usize::from(named))
    }

    /// Records that an instance of the same call was placed on `host`, for the next ones.
    pub fn add_member_on(&mut self, host: &str) {
        if !self.hosts.iter().any(|h| h == host) {
            self.hosts.push(host.to_string());
        }
        *self.members_on.entry(host.to_string()).or_default() += 1;
    }
}

/// What Placement's allocation-candidates query asks of a provider besides capacity (Nova's
/// `ResourceRequest` for the unnumbered group, in ids): required and forbidden traits, aggregate
/// membership, a provider tree.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PlacementQuery {
    pub required_traits: Vec<TraitId>,
    pub forbidden_traits: Vec<TraitId>,
    /// Each group: the host must be in at least one of its aggregates (`member_of=in:a,b`);
    /// every group must be met.
    pub member_of: Vec<Vec<AggregateId>>,
    pub forbidden_aggregates: Vec<AggregateId>,
    /// The host must be this provider (Nova's `in_tree`, from a forced host or node).
    pub in_tree: Option<String>,
    /// Set when the request needs what Parasol does not model (nested providers, numbered
    /// request groups): no host qualifies, and this is the reason.
    pub unsupported: Option<String>,
}

/// How a scan tests a host against a [`PlacementQuery`], decided once per request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueryTest {
    /// The query asks nothing beyond capacity.
    Nothing,
    /// Only traits, each with an id below [`super::markers::LOW_MARKS`]: the scan row's trait
    /// mask answers, the host's profile is not read.
    Marks { required: u32, forbidden: u32 },
    /// Anything else: [`PlacementQuery::accepts`] on the host.
    Host,
}

impl QueryTest {
    /// Whether a host whose scan row has the trait mask `traits` passes; `accepts` asks the
    /// host itself when the mask cannot answer.
    #[inline]
    pub fn passes(self, traits: u32, accepts: impl FnOnce() -> bool) -> bool {
        match self {
            QueryTest::Nothing => true,
            QueryTest::Marks {
                required,
                forbidden,
            } => traits & required == required && traits & forbidden == 0,
            QueryTest::Host => accepts(),
        }
    }
}

impl PlacementQuery {
    /// How a scan tests hosts against this query.
    pub fn scan_test(&self) -> QueryTest {
        use super::markers::{low_bit, low_mask, LOW_MARKS};
        if self.is_empty() {
            return QueryTest::Nothing;
        }
        let low = |t: &TraitId| low_bit(*t) != 1 << LOW_MARKS;
        let marks_only = self.unsupported.is_none()
            && self.member_of.is_empty()
            && self.forbidden_aggregates.is_empty()
            && self.in_tree.is_none()
            && self.required_traits.iter().all(low)
            && self.forbidden_traits.iter().all(low);
        if !marks_only {
            return QueryTest::Host;
        }
        QueryTest::Marks {
            required: low_mask(&self.required_traits),
            forbidden: low_mask(&self.forbidden_traits),
        }
    }

    /// True when the query asks nothing beyond capacity.
    pub fn is_empty(&self) -> bool {
        self == &PlacementQuery::default()
    }

    /// True when `host` is a candidate for the query (capacity aside).
    pub fn accepts(&self, host: &HostState) -> bool {
        let p = &host.profile;
        self.unsupported.is_none()
            && p.traits.contains_all(&self.required_traits)
            && !p.traits.contains_any(&self.forbidden_traits)
            && self
                .member_of
                .iter()
                .all(|any| p.aggregates.contains_any(any))
            && !p.aggregates.contains_any(&self.forbidden_aggregates)
            && self.in_tree.as_deref().is_none_or(|u| *p.uuid == *u)
    }

    /// Names of the required traits no host in `hosts` has: Nova's reason for NoValidHost
    /// when a flavor asks for a trait unknown to the cloud.
    pub fn missing_traits<'a>(
        &self,
        hosts: impl IntoIterator<Item = &'a HostState>,
    ) -> Vec<String> {
        let mut missing: Vec<TraitId> = self.required_traits.clone();
        for h in hosts {
            missing.retain(|t| !h.profile.traits.contains(*t));
            if missing.is_empty() {
                break;
            }
        }
        missing.iter().map(|t| t.name().to_string()).collect()
    }
}

/// One instance to place, with its demand and constraints.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestContext {
    pub instance_uuid: String,
    /// The resources to allocate, every class (Placement's `resources=`).
    pub demand: Resources,
    /// Placement's qualitative constraints.
    pub query: PlacementQuery,
    /// Flavor name (or id), used as the per-flavor key of APSR's sample counters.
    pub flavor: String,
    pub availability_zone: Option<String>,
    pub force_hosts: Vec<String>,
    pub force_nodes: Vec<String>,
    pub ignore_hosts: Vec<String>,
    pub requested_destination: Option<Destination>,
    pub group: Option<ServerGroup>,
    /// Whom the instance's allocation in Placement is for; `None`: no claim in Placement for
    /// this instance (claims are off, or a rebuild, for which Nova claims nothing).
    pub owner: Option<Arc<ConsumerOwner>>,
    /// The flavor's extra specs against the host aggregates' metadata
    /// (`AggregateInstanceExtraSpecsFilter`); `None`: nothing to check (no such spec, or a
    /// rebuild).
    pub aggregate_extra_specs: Option<Arc<super::extra_specs::AggregateExtraSpecs>>,
    /// The flavor's extra specs against the host's own attributes
    /// (`ComputeCapabilitiesFilter`); `None`: nothing to check.
    pub capability_specs: Option<Arc<super::capabilities::CapabilitySpecs>>,
    /// The hosts' availability zones from Nova's aggregates (`AvailabilityZoneFilter`);
    /// `None`: every host is in the zone it was recorded with.
    pub host_zones: Option<Arc<super::zones::HostZones>>,
    /// Each host's aggregate metadata (`AggregateMultiTenancyIsolation`,
    /// `AggregateImagePropertiesIsolation`); `None`: no host has any.
    pub aggregate_metadata: Option<Arc<super::host_aggregates::HostAggregateMetadata>>,
    /// The instance's project (Nova's `spec_obj.project_id`).
    pub project_id: Option<String>,
    /// The image's properties that are set and true, as Python's `str()` renders them
    /// (`AggregateImagePropertiesIsolation`); `None`: no image or no such property.
    pub image_props: Option<Arc<BTreeMap<String, String>>>,
    /// A rebuild check (`_nova_check_type: ["rebuild"]`): Nova asks only whether the
    /// instance's own (forced) host still suits the new image — no Placement query, only the
    /// filters that run on a rebuild, and no claim (the instance keeps its allocation).
    pub rebuild: bool,
    /// What Nova's hint filters read (`different_host`, `same_host`, `build_near_host_ip`,
    /// `query`); `None`: no such hint.
    pub hints: Option<Arc<super::hints::SchedulerHints>>,
    /// The image's id (`IsolatedHostsFilter`); `None`: no image (volume-backed).
    pub image_id: Option<String>,
    /// The flavor's name (`AggregateTypeAffinityFilter`); `None`: the spec names none.
    pub flavor_name: Option<String>,
    /// The conductor allows this move across cells (`requested_destination
    /// .allow_cross_cell_move`, `CrossCellWeigher`).
    pub cross_cell_move: bool,
    /// Flex's penalty and classes (`[flex] enabled`); `None`: Flex is off.
    #[serde(skip)]
    pub flex: Option<Arc<super::usage::FlexContext>>,
    /// The time against which hosts' monitor metrics expire (`MetricsFilter`,
    /// `MetricsWeigher`); `None` (the simulator, unit tests): every reported metric counts.
    #[serde(skip)]
    pub readings: Option<super::usage::ReadingClock>,
    /// In a multi-create, what the call's earlier instances claimed; `None` otherwise.
    #[serde(skip)]
    pub call_claims: Option<Arc<CallClaims>>,
    /// A request only provider trees answer (suffixed groups, `same_subtree`, …): Placement's
    /// allocation candidates, the only hosts it may go to, and what each claims
    /// (docs/placement-claims.md); `None` for a flat request.
    #[serde(skip)]
    pub trees: Option<Arc<super::candidates::TreeCandidates>>,
    /// What the instance asks of NUMA cells and PCI devices (`NUMATopologyFilter`,
    /// `PciPassthroughFilter`); `None` when it asks neither: those filters skip it.
    #[serde(skip)]
    pub numa_pci: Option<Arc<super::numa::NumaPciRequest>>,
}

/// What the earlier instances of one call claimed, per host. Nova's allocation candidates are
/// Placement's answer when the call starts, so a host the call itself filled stays a
/// candidate for the call's later instances — weighed with the call's usage, and a claim
/// there refused (`SchedulerManager._schedule`): the capacity test gives such a host back
/// what the call took from it, and the placement loop never claims it while it has no room.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallClaims {
    hosts: Vec<(super::host::HostId, Resources)>,
    /// On provider trees, the allocation request each earlier instance claimed, in order:
    /// its `mappings` say which providers' PCI devices it took (Nova's
    /// `consume_from_request` with the claimed candidate's request group mapping).
    candidates: Vec<(super::host::HostId, Arc<serde_json::Value>)>,
}

impl CallClaims {
    /// What the call claimed on host `id`, if anything.
    pub fn on(&self, id: super::host::HostId) -> Option<&Resources> {
        self.hosts.iter().find(|(h, _)| *h == id).map(|(_, r)| r)
    }

    /// Records a claim of `demand` on host `id`.
    pub fn add(&mut self, id: super::host::HostId, demand: Resources) {
        match self.hosts.iter_mut().find(|(h, _)| *h == id) {
            Some((_, taken)) => *taken = *taken + demand,
            None => self.hosts.push((id, demand)),
        }
    }

    /// Records that an earlier instance claimed Placement's allocation request `body` on
    /// host `id`.
    pub fn add_candidate(&mut self, id: super::host::HostId, body: Arc<serde_json::Value>) {
        self.candidates.push((id, body));
    }

    /// The allocation requests the call's earlier instances claimed on host `id`, in order.
    pub fn candidates_on(
        &self,
        id: super::host::HostId,
    ) -> impl Iterator<Item = &serde_json::Value> + '_ {
        self.candidates
            .iter()
            .filter(move |(h, _)| *h == id)
            .map(|(_, body)| &**body)
    }

    /// How many hosts the call claimed on.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }
}

/// The `project_id` and `user_id` of a claim in Placement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConsumerOwner {
    pub project_id: String,
    pub user_id: String,
}

impl RequestContext {
    /// A request with only a demand, for the simulator, the benchmark and tests.
    pub fn with_demand(
        instance_uuid: impl Into<String>,
        flavor: impl Into<String>,
        demand: Resources,
    ) -> Self {
        RequestContext {
            instance_uuid: instance_uuid.into(),
            demand,
            query: PlacementQuery::default(),
            flavor: flavor.into(),
            availability_zone: None,
            force_hosts: Vec::new(),
            force_nodes: Vec::new(),
            ignore_hosts: Vec::new(),
            requested_destination: None,
            group: None,
            owner: None,
            aggregate_extra_specs: None,
            capability_specs: None,
            host_zones: None,
            aggregate_metadata: None,
            project_id: None,
            image_props: None,
            rebuild: false,
            hints: None,
            image_id: None,
            flavor_name: None,
            cross_cell_move: false,
            flex: None,
            readings: None,
            call_claims: None,
            trees: None,
            numa_pci: None,
        }
    }

    /// Whether `host` had room for this request before the call's earlier instances claimed
    /// on it (see [`CallClaims`]): false for a host the call did not claim on.
    pub fn fitted_before_the_call(&self, host: &HostState) -> bool {
        let Some(taken) = self.call_claims.as_ref().and_then(|c| c.on(host.id)) else {
            return false;
        };
        let usable = host.usable();
        self.demand.nonzero().all(|(class, amount)| {
            let used = host.used.get(class) - taken.get(class);
            used.checked_add(amount)
                .is_some_and(|total| total <= usable.get(class))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{HostId, HostProfile, HostScan, Traits};
    use rand::{Rng, SeedableRng};

    /// A scan row's trait mask answers as `accepts` does whenever the query's test is
    /// `Marks`; traits with ids past the mask (interned here, 40 of them) send the scan to the
    /// host, as do aggregates and trees.
    #[test]
    fn a_rows_trait_mask_answers_as_the_hosts_traits_do() {
        let status = TraitId::lookup(crate::domain::COMPUTE_STATUS_DISABLED);
        assert_eq!(
            status.map(|t| t.raw()),
            Some(0),
            "Nova's status trait is id 0"
        );
        let mut names = vec![crate::domain::COMPUTE_STATUS_DISABLED.to_string()];
        names.extend((0..40).map(|i| format!("CUSTOM_SCAN_MASK_TEST_{i}")));
        let ids: Vec<TraitId> = names.iter().map(|n| TraitId::intern(n)).collect();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(15);
        let pick = |rng: &mut rand_chacha::ChaCha8Rng, n: usize| -> Vec<TraitId> {
            (0..n).map(|_| ids[rng.gen_range(0..ids.len())]).collect()
        };
        let hosts: Vec<HostState> = (0..200)
            .map(|i| {
                let name = format!("h{i}");
                let mut profile = HostProfile::new(&name, &name, &name, "nova", Vec::new());
                let n = rng.gen_range(0..12);
                profile.traits = Traits::new(pick(&mut rng, n));
                HostState::new(HostId(i as i64), Arc::new(profile))
            })
            .collect();
        let (mut by_mask, mut by_host) = (0, 0);
        for _ in 0..500 {
            let (r, f) = (rng.gen_range(0..3), rng.gen_range(0..3));
            let query = PlacementQuery {
                required_traits: pick(&mut rng, r),
                forbidden_traits: pick(&mut rng, f),
                ..Default::default()
            };
            let test = query.scan_test();
            match test {
                QueryTest::Marks { .. } => by_mask += 1,
                QueryTest::Host => by_host += 1,
                QueryTest::Nothing => assert!(query.is_empty()),
            }
            for h in &hosts {
                let row = HostScan::of(h);
                let mut asked = false;
                let passes = test.passes(row.traits, || {
                    asked = true;
                    query.accepts(h)
                });
                assert_eq!(
                    passes,
                    query.accepts(h),
                    "{query:?} on {:?}",
                    h.profile.traits
                );
                assert_eq!(asked, test == QueryTest::Host, "{test:?}");
            }
        }
        assert!(
            by_mask > 50 && by_host > 50,
            "{by_mask} by mask, {by_host} by host"
        );

        // What every call of Nova's asks: answered by the mask.
        let nova = PlacementQuery {
            forbidden_traits: vec![status.unwrap()],
            ..Default::default()
        };
        assert_eq!(
            nova.scan_test(),
            QueryTest::Marks {
                required: 0,
                forbidden: 1
            }
        );
        let in_tree = PlacementQuery {
            in_tree: Some("u".into()),
            ..nova
        };
        assert_eq!(in_tree.scan_test(), QueryTest::Host);
    }
}
