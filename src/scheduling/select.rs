//! `select`: one `select_destinations` call, whatever transport brought it.

use super::Scheduler;
use crate::backend::{Alternates, ScheduleError};
use crate::domain::numa::{NumaLimits, NumaPciRequest};
use crate::domain::{AggregateExtraSpecs, CapabilitySpecs, HostState, HostZones};
use crate::domain::{
    AggregateId, ClassId, ConsumerOwner, Mark, PlacementQuery, RequestContext, Resources, TraitId,
};
use crate::ledger::LedgerError;
use crate::nova::{
    encode_legacy, encode_selections, resources_from_request_spec, CloudView, ComputeNodeRef,
    Limits, ResourceRequest, SelectDestinationsArgs, Selection, SelectionVersion,
};
use serde_json::Value;
use tracing::Instrument;

/// Why a call got no placement, by whose fault.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    /// Nova's NoValidHost: nothing in the cloud could take every instance of the call.
    #[error("No valid host was found. {reason}")]
    NoValidHost { reason: String },
    /// An operator's `select` plugin denied the call, or failed and is not ignorable: Nova's
    /// NoValidHost whose reason, the plugin's, is the caller's to read as it is, over Nova's
    /// RPC too (docs/plugins.md §4). Not retried after a Placement sync.
    #[error("No valid host was found. {reason}")]
    Denied { reason: String },
    /// The call itself is wrong (the caller's fault).
    #[error("{0}")]
    Invalid(String),
    /// Parasol could not decide or record the decision (the ledger is unavailable).
    #[error("scheduler unavailable: {0}")]
    Unavailable(String),
}

impl SelectError {
    /// Whether this is a NoValidHost for which Placement would have listed no allocation
    /// candidate (`policy::no_allocation_candidate`): nova-scheduler raises
    /// `NoValidHost(reason="")` then, before its filters and its notifications.
    pub fn no_allocation_candidate(&self) -> bool {
        matches!(self, SelectError::NoValidHost { reason } if crate::policy::no_allocation_candidate(reason))
    }
}

impl From<ScheduleError> for SelectError {
    fn from(e: ScheduleError) -> Self {
        match e {
            ScheduleError::NoValidHost { reason } => SelectError::NoValidHost { reason },
            ScheduleError::Ledger(LedgerError::Invalid(message)) => SelectError::Invalid(message),
            // The database refused the call's values, not an outage: the caller's fault.
            ScheduleError::Ledger(e @ (LedgerError::Database(_) | LedgerError::Sqlite(_)))
                if !e.is_outage() =>
            {
                SelectError::Invalid(e.to_string())
            }
            ScheduleError::Ledger(e) => SelectError::Unavailable(e.to_string()),
            e @ ScheduleError::Placement(_) => SelectError::Unavailable(e.to_string()),
        }
    }
}

/// The Selections of one call and how the caller asked to receive them.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// Per instance: the claimed host first, then the alternates.
    pub selections: Vec<Vec<Selection>>,
    pub return_objects: bool,
    pub return_alternates: bool,
    pub version: SelectionVersion,
}

impl Answer {
    /// The answer as Nova's RPC result (and the HTTP body): Selection primitives, or the
    /// legacy host dicts when the caller did not ask for objects.
    pub fn to_json(&self) -> Value {
        if self.return_objects {
            encode_selections(&self.selections, self.version, self.return_alternates)
        } else {
            encode_legacy(&self.selections)
        }
    }

    /// [`Answer::to_json`] as the HTTP body's bytes, Selection primitives written without the
    /// value tree.
    pub fn to_body(&self) -> Vec<u8> {
        self.to_text().into_bytes()
    }

    /// [`Answer::to_body`] as text (the RPC reply's `result`).
    pub fn to_text(&self) -> String {
        if self.return_objects {
            return crate::nova::SelectionsBody {
                per_instance: &self.selections,
                version: self.version,
                return_alternates: self.return_alternates,
            }
            .to_json_string();
        }
        // Strings, integers and maps with string keys: writing them to memory cannot fail.
        serde_json::to_string(&encode_legacy(&self.selections)).unwrap_or_default()
    }
}

/// How often a call waiting for an announced compute's node looks again when no Placement
/// sync can be asked for (one already asked within `resync_min_interval_s`): the node may
/// come from a read of Nova's records instead; and how often one waiting for a read of
/// Nova's records looks whether it came.
const ANNOUNCED_POLL_MS: u64 = 50;

/// Most hosts whose traits one call re-reads from Placement (a host the table has and
/// Placement lacks, registered by notifications alone, disagrees on every call: the bound
/// keeps such a cloud's calls from reading every host).
const MAX_TRAIT_REREADS: usize = 16;

impl Scheduler {
    /// Places every instance of one call on the active backend, all or none: Nova's resource
    /// request (request filters included) first, then the backend; for dedicated CPUs, Nova's
    /// fallback request with VCPU when the PCPU request finds no host.
    ///
    /// A call that finds no valid host asks for a Placement sync and, when one is taken (or
    /// an asked-for sync is still pending), waits for it — at most `[placement] timeout_s` —
    /// and tries once more: a compute node that registered since the last sync (Nova's
    /// scheduler reads Placement on every call) is then found.
    pub async fn select(&self, args: SelectDestinationsArgs) -> Result<Answer, SelectError> {
        let settings = self.settings();
        self.numa_pci_refusal(&args, &settings)?;
        if !settings.placement.enabled {
            return self.select_once(args).await;
        }
        self.wait_for_announced_computes(&settings.placement).await;
        // A compute node Nova has and the table lacks registered since the last sync: wait
        // for the next one first, so it can be chosen or be an alternate.
        if self.resync().node_since_last_sync(self.ledger().table()) {
            if let Some(sync) = self.resync().ask() {
                tracing::info!(sync, "a compute node of Nova's records is not synced yet: waiting for a Placement sync");
                let timeout_ms = (settings.placement.timeout_s * 1000.0).round() as u64;
                self.resync().wait_for(sync, timeout_ms).await;
            }
        }
        let answer = self.select_once(args.clone()).await;
        if !matches!(answer, Err(SelectError::NoValidHost { .. })) {
            return answer;
        }
        let Some(sync) = self.resync().ask() else {
            return answer;
        };
        tracing::info!(
            sync,
            "no candidate host: waiting for a Placement sync to try again"
        );
        let timeout_ms = (settings.placement.timeout_s * 1000.0).round() as u64;
        if !self.resync().wait_for(sync, timeout_ms).await {
            tracing::info!(sync, "the Placement sync did not finish in time");
            return answer;
        }
        self.wait_for_records_of_new_hosts(timeout_ms).await;
        self.select_once(args).await
    }

    /// When Parasol reads Nova's records and a host has none yet (a node the sync just
    /// loaded, which `ComputeFilter` cannot pass without its service's record): asks for a
    /// read and waits for it, one read at most `timeout_ms`, so the retry judges the node on
    /// its record, as Nova's scheduler, reading both on every call, would. A host still
    /// without one after that read is one Nova's records do not have.
    async fn wait_for_records_of_new_hosts(&self, timeout_ms: u64) {
        let table = self.ledger().table();
        let Some(before) = table.records() else {
            return;
        };
        let lacking = table.hosts_without_records();
        if lacking == 0 {
            return;
        }
        tracing::info!(
            hosts = lacking,
            "hosts without Nova's records: waiting for a read of them"
        );
        table.want_records();
        let clock = self.clock();
        let start = clock.now_ms();
        while table
            .records()
            .is_some_and(|r| std::sync::Arc::ptr_eq(&r, &before))
        {
            let left = start + timeout_ms as i64 - clock.now_ms();
            if left <= 0 {
                tracing::info!("Nova's records were not read in time");
                return;
            }
            clock.sleep_ms(ANNOUNCED_POLL_MS.min(left as u64)).await;
        }
    }

    /// A request with a NUMA topology or PCI requests, which Parasol decides only on Nova's
    /// compute-node records (their cells, pinned CPUs, pages and device pools): NoValidHost
    /// naming what is not supported when `[nova_db]` is off, counted either way
    /// (`/v1/stats` `numa_pci`, `parasol_numa_pci_requests_total`). A rebuild check runs
    /// neither filter (Nova's `RUN_ON_REBUILD`), so it is not refused.
    fn numa_pci_refusal(
        &self,
        args: &SelectDestinationsArgs,
        settings: &crate::configuration::Settings,
    ) -> Result<(), SelectError> {
        let np = &args.spec.numa_pci;
        if np.is_empty() || args.spec.is_rebuild() {
            return Ok(());
        }
        let metrics = self.stats().metrics();
        if settings.nova_db.enabled {
            metrics.numa_pci_requests("decided").inc();
            return Ok(());
        }
        metrics.numa_pci_requests("refused").inc();
        let mut parts = Vec::new();
        if let Some(numa) = &np.numa {
            parts.push(format!("a NUMA topology of {} cell(s)", numa.cells.len()));
        }
        if !np.pci.is_empty() {
            parts.push(format!("{} PCI request(s)", np.pci.len()));
        }
        let reason = format!(
            "unsupported request: the instance asks {}; Parasol decides NUMA topologies and PCI \
             devices only on Nova's compute-node records, and [nova_db] is not enabled",
            parts.join(" and ")
        );
        tracing::info!(%reason, "NoValidHost: a NUMA or PCI request Parasol cannot decide");
        Err(SelectError::NoValidHost { reason })
    }

    /// A nova-compute service created less than `[placement] timeout_s` ago
    /// (`service.create`) whose node the table does not hold yet: Nova's scheduler, reading
    /// Placement and the cell database on every call, would see the node its start made, so
    /// this call waits — asking for Placement syncs and reads of Nova's records — until the
    /// node is loaded or `timeout_s` has passed (by the injected clock). Without it a call
    /// that comes right after a compute's start gets no alternate on it (a reschedule then
    /// has nowhere to go).
    async fn wait_for_announced_computes(&self, placement: &crate::placement::PlacementSettings) {
        let table = self.ledger().table();
        let clock = self.clock();
        let timeout_ms = (placement.timeout_s * 1000.0).round() as i64;
        let start = clock.now_ms();
        let mut pending = table.announced_not_loaded(start - timeout_ms);
        if pending.is_empty() {
            return;
        }
        tracing::info!(services = ?pending, "a compute service started and its node is not loaded yet: waiting for it");
        while !pending.is_empty() {
            let left = start + timeout_ms - clock.now_ms();
            if left <= 0 {
                tracing::info!(services = ?pending, "the nodes of these compute services were not loaded in time");
                return;
            }
            table.want_records();
            match self.resync().ask() {
                Some(sync) => {
                    self.resync().wait_for(sync, left as u64).await;
                }
                None => clock.sleep_ms(ANNOUNCED_POLL_MS.min(left as u64)).await,
            }
            pending = table.announced_not_loaded(start - timeout_ms);
        }
    }

    /// For a request with required or forbidden traits, when Parasol claims in Placement:
    /// asks Placement which providers have those traits now (one call, as Nova's scheduler's
    /// allocation candidates ask on every call) and re-reads the traits of every host the
    /// table judges otherwise, so a trait set a moment ago counts on this call. A failure
    /// leaves the table as it is (the periodic sync still follows Placement).
    ///
    /// `COMPUTE_STATUS_DISABLED`, which Nova's `compute_status_filter` forbids on every call,
    /// is left out: nova-compute sets it from its service's state, which Parasol follows from
    /// `service.update` and Nova's records; a call without other traits asks nothing.
    async fn refresh_traits(&self, query: &crate::domain::PlacementQuery) {
        use crate::domain::{Mark, TraitId};
        let Some(placement) = self.placement_claims() else {
            return;
        };
        let status = TraitId::lookup(crate::nova::COMPUTE_STATUS_DISABLED);
        let own = |ids: &[TraitId]| -> Vec<TraitId> {
            ids.iter().copied().filter(|t| Some(*t) != status).collect()
        };
        let (required, forbidden) = (own(&query.required_traits), own(&query.forbidden_traits));
        if required.is_empty() && forbidden.is_empty() {
            return;
        }
        // Boxed: Placement's HTTP calls would otherwise size every call's future.
        Box::pin(self.refresh_traits_now(placement, required, forbidden)).await;
    }

    /// [`Scheduler::refresh_traits`] once it has traits to ask about.
    async fn refresh_traits_now(
        &self,
        placement: &crate::placement::PlacementClaims,
        required: Vec<crate::domain::TraitId>,
        forbidden: Vec<crate::domain::TraitId>,
    ) {
        use crate::domain::Mark;
        let names = |ids: &[crate::domain::TraitId]| -> Vec<std::sync::Arc<str>> {
            ids.iter().map(|t| t.name()).collect()
        };
        let (required_names, forbidden_names) = (names(&required), names(&forbidden));
        let matching = match placement
            .providers_with_traits(&required_names, &forbidden_names)
            .await
        {
            Ok(matching) => matching,
            Err(e) => {
                tracing::warn!(error = %e, "cannot ask Placement which providers have the request's traits; deciding on the synced traits");
                return;
            }
        };
        let stale: Vec<(crate::domain::HostId, String)> =
            self.ledger().table().with_hosts(|hosts| {
                hosts
                    .iter()
                    .filter(|h| {
                        let has = h.profile.traits.contains_all(&required)
                            && !h.profile.traits.contains_any(&forbidden);
                        has != matching.contains(&*h.profile.uuid)
                    })
                    .map(|h| (h.id, h.profile.uuid.to_string()))
                    .take(MAX_TRAIT_REREADS)
                    .collect()
            });
        for (id, uuid) in stale {
            let refreshed = match placement.traits(&uuid).await {
                Ok(traits) => self
                    .ledger()
                    .set_traits(id, &traits)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match refreshed {
                Ok(()) => {
                    tracing::info!(provider = %uuid, "traits changed in Placement since the last sync: re-read")
                }
                Err(error) => {
                    tracing::warn!(provider = %uuid, %error, "cannot re-read a provider's traits")
                }
            }
        }
    }

    async fn select_once(&self, args: SelectDestinationsArgs) -> Result<Answer, SelectError> {
        let settings = self.settings();
        let span = tracing::info_span!(
            "select_destinations",
            instances = args.instance_uuids.len().max(1),
            instance_uuids = %args.instance_uuids.join(","),
            backend = self.backend().kind().as_str()
        );
        // The select chain of the backend this call starts on.
        let plugins = self.backend().plugins().clone();
        let mut requests = self.requests(&args, true, false).await?;
        let additions = self.select_chain(&plugins, &args, &requests).await?;
        additions.apply(&mut requests);
        if let Some(first) = requests.first() {
            self.refresh_traits(&first.query).await;
        }
        let zones = requests.first().and_then(|r| r.host_zones.clone());
        // Nova computes alternates only when the caller reads them (objects with alternates).
        let alternates = if args.return_objects && args.return_alternates {
            Alternates::Wanted
        } else {
            Alternates::Unwanted
        };
        let flat = !args.spec.is_rebuild()
            && self.claims_in_placement()
            && requests.first().is_some_and(|r| r.trees.is_none());
        let mut decided = self.decide(requests, alternates, &span).await;
        if flat && decided.no_valid_host() {
            // No host of the table takes it: a class of the unsuffixed group may be on child
            // providers (Placement ≥ 1.36 takes it anywhere in the tree), which the table
            // lacks. Placement's candidates decide it then, as they decide every call in Nova;
            // the flat answer stands when they give nothing better.
            match self.requests(&args, true, true).await {
                Ok(mut requests) => {
                    additions.apply(&mut requests);
                    let again = self.decide(requests, alternates, &span).await;
                    if !again.no_valid_host() {
                        decided = again;
                    }
                }
                Err(e) => {
                    tracing::info!(error = %e, "Placement's allocation candidates place it nowhere either")
                }
            }
        }
        if decided.no_valid_host()
            && !settings.scheduler.disable_fallback_pcpu_query
            && !args.spec.is_rebuild()
            && self.resource_request(&args, true)?.cpu_pinning_requested
        {
            let mut requests = self.requests(&args, false, false).await?;
            additions.apply(&mut requests);
            decided = self.decide(requests, alternates, &span).await;
        }
        let Decided {
            hosts,
            demands,
            trees,
            instances,
            numa_pci,
        } = decided;
        let per_instance = hosts?;
        super::select_chain::tell_claimed(&plugins, &args, &per_instance, &demands);
        let cell = &settings.scheduler.cell_uuid;
        let selections = per_instance
            .iter()
            .zip(demands)
            .zip(trees.iter().zip(&instances).zip(&numa_pci))
            .map(|((hosts, demand), ((trees, instance), numa_pci))| {
                hosts
                    .iter()
                    .map(|h| {
                        let mut s = selection_of(h, demand, cell, zones.as_deref());
                        s.limits = numa_limits(h, numa_pci.as_deref());
                        if let Some(c) = trees.as_deref().and_then(|t| t.chosen(instance, h.uuid()))
                        {
                            // The candidate claimed on the host (an alternate's: the one it
                            // would be claimed with), as Nova's Selection carries it: its
                            // `mappings` name each group's providers, which the compute's
                            // PCI claim reads.
                            s.demand = c.on_host;
                            s.allocation_request_body = Some(c.body.clone());
                        }
                        s
                    })
                    .collect()
            })
            .collect();
        let version = settings.scheduler.selection_version;
        Ok(Answer {
            selections,
            return_objects: args.return_objects,
            return_alternates: args.return_alternates,
            version,
        })
    }
}

/// One decision of a call: each instance's hosts, or why none, with what each instance asked
/// and, on provider trees, Placement's candidates.
struct Decided {
    hosts: Result<Vec<Vec<HostState>>, ScheduleError>,
    demands: Vec<Resources>,
    trees: Vec<Option<std::sync::Arc<crate::domain::TreeCandidates>>>,
    instances: Vec<String>,
    numa_pci: Vec<Option<std::sync::Arc<NumaPciRequest>>>,
}

impl Decided {
    fn no_valid_host(&self) -> bool {
        matches!(self.hosts, Err(ScheduleError::NoValidHost { .. }))
    }
}

impl Scheduler {
    /// Places `requests` on the active backend.
    async fn decide(
        &self,
        requests: Vec<RequestContext>,
        alternates: Alternates,
        span: &tracing::Span,
    ) -> Decided {
        let demands = requests.iter().map(|r| r.demand).collect();
        let trees = requests.iter().map(|r| r.trees.clone()).collect();
        let instances = requests.iter().map(|r| r.instance_uuid.clone()).collect();
        let numa_pci = requests.iter().map(|r| r.numa_pci.clone()).collect();
        let hosts = self
            .schedule_with(requests, alternates)
            .instrument(span.clone())
            .await;
        Decided {
            hosts,
            demands,
            trees,
            instances,
            numa_pci,
        }
    }

    /// Nova's resource request for the call (`pinned = false`: the PCPU fallback).
    fn resource_request(
        &self,
        args: &SelectDestinationsArgs,
        pinned: bool,
    ) -> Result<ResourceRequest, SelectError> {
        let spec = &args.spec;
        let aggregates = self.cloud().aggregates();
        let nodes = self.named_nodes(args);
        let cloud = CloudView {
            aggregates: &aggregates,
            compute_nodes: &nodes,
            min_compute_service_version: self.cloud().min_compute_version(),
        };
        let options = self.settings().scheduler.request_filters();
        resources_from_request_spec(spec, &options, &cloud, pinned).map_err(|refusal| {
            SelectError::NoValidHost {
                reason: refusal.to_string(),
            }
        })
    }

    /// The compute nodes a forced or requested host or node names (the translation turns
    /// them into `in_tree`); none when the call names none.
    fn named_nodes(&self, args: &SelectDestinationsArgs) -> Vec<ComputeNodeRef> {
        let spec = &args.spec;
        let dest = spec.requested_destination.as_ref();
        let hosts: Vec<&str> = spec
            .force_hosts
            .iter()
            .map(String::as_str)
            .chain(dest.and_then(|d| d.host.as_deref()))
            .collect();
        let nodes: Vec<&str> = spec
            .force_nodes
            .iter()
            .map(String::as_str)
            .chain(dest.and_then(|d| d.node.as_deref()))
            .collect();
        if hosts.is_empty() && nodes.is_empty() {
            return Vec::new();
        }
        self.ledger().table().with_hosts(|all| {
            all.iter()
                .filter(|h| {
                    hosts.iter().any(|n| n.eq_ignore_ascii_case(h.host()))
                        || nodes.iter().any(|n| n.eq_ignore_ascii_case(h.node()))
                })
                .map(|h| ComputeNodeRef {
                    host: h.host().to_string(),
                    node: h.node().to_string(),
                    uuid: h.uuid().to_string(),
                })
                .collect()
        })
    }

    /// One scheduling context per instance, with the resource request's amounts and marks
    /// and what the ledger knows of the server group's members.
    /// `on_trees`: decided on Placement's allocation candidates even when flat.
    async fn requests(
        &self,
        args: &SelectDestinationsArgs,
        pinned: bool,
        on_trees: bool,
    ) -> Result<Vec<RequestContext>, SelectError> {
        let mut requests = if args.spec.is_rebuild() {
            self.rebuild_requests(args)
        } else {
            self.placement_requests(args, pinned, on_trees).await?
        };
        self.add_group_members(args, &mut requests).await?;
        self.add_hints(args, &mut requests).await?;
        Ok(requests)
    }

    /// What Nova's hint filters read: the hosts running the instances `different_host` /
    /// `same_host` name (where the ledger holds their allocations, read once per call), the
    /// `build_near_host_ip` network and the `query`.
    async fn add_hints(
        &self,
        args: &SelectDestinationsArgs,
        requests: &mut [RequestContext],
    ) -> Result<(), SelectError> {
        let (Some(mut hints), different, same) =
            crate::domain::SchedulerHints::read(&args.spec.scheduler_hints)
        else {
            return Ok(());
        };
        let mut uuids: Vec<String> = different.iter().chain(&same).cloned().collect();
        uuids.sort();
        uuids.dedup();
        if !uuids.is_empty() {
            let held = Box::pin(self.ledger().hosts_of(&uuids))
                .await
                .map_err(|e| SelectError::from(ScheduleError::Ledger(e)))?;
            let table = self.ledger().table();
            for (uuid, id) in held {
                let Some(host) = table.get(id).map(|h| h.host().to_string()) else {
                    continue;
                };
                if different.contains(&uuid) {
                    if let Some(set) = hints.different_host.as_mut() {
                        set.insert(host.clone());
                    }
                }
                if same.contains(&uuid) {
                    if let Some(set) = hints.same_host.as_mut() {
                        set.insert(host);
                    }
                }
            }
        }
        let hints = std::sync::Arc::new(hints);
        for req in requests.iter_mut() {
            req.hints = Some(hints.clone());
        }
        Ok(())
    }

    /// A rebuild check: Nova runs no request filter and asks Placement nothing
    /// (`select_destinations` with `is_rebuild`), so neither does Parasol: only the flavor's
    /// amounts (for the answer), no Placement terms, no owner, nothing to claim.
    fn rebuild_requests(&self, args: &SelectDestinationsArgs) -> Vec<RequestContext> {
        self.aggregate_contexts(args)
            .into_iter()
            .map(|mut r| {
                r.rebuild = true;
                r
            })
            .collect()
    }

    /// Nova's `ServerGroupAntiAffinityFilter` and soft weighers count the group's members
    /// among the instances each host runs, and an instance never against itself (a resize to
    /// the same host): the hosts the ledger holds the members' and the instances' own
    /// allocations on, read once per call.
    async fn add_group_members(
        &self,
        args: &SelectDestinationsArgs,
        requests: &mut [RequestContext],
    ) -> Result<(), SelectError> {
        let Some(group) = args.spec.instance_group.as_ref() else {
            return Ok(());
        };
        if requests.iter().all(|r| r.group.is_none()) {
            return Ok(());
        }
        let mut uuids: Vec<String> = group.members.clone();
        uuids.extend(requests.iter().map(|r| r.instance_uuid.clone()));
        uuids.sort();
        uuids.dedup();
        let held = Box::pin(self.ledger().hosts_of(&uuids))
            .await
            .map_err(|e| SelectError::from(ScheduleError::Ledger(e)))?;
        let table = self.ledger().table();
        let held: Vec<(String, String)> = held
            .into_iter()
            .filter_map(|(uuid, id)| Some((uuid, table.get(id)?.host().to_string())))
            .collect();
        for req in requests.iter_mut() {
            let Some(g) = req.group.as_mut() else {
                continue;
            };
            for (uuid, host) in &held {
                if *uuid == req.instance_uuid {
                    g.own_hosts.push(host.clone());
                } else if group.members.contains(uuid) {
                    *g.members_on.entry(host.clone()).or_default() += 1;
                }
            }
        }
        Ok(())
    }

    /// The contexts of a call Placement is asked for: Nova's resource request's amounts and
    /// marks, the owner of the claims, the aggregates' extra specs.
    ///
    /// A request only provider trees answer (suffixed groups, `same_subtree`), or any with
    /// `on_trees`, is decided on Placement's allocation candidates (`trees`); a flat one on
    /// the table alone.
    async fn placement_requests(
        &self,
        args: &SelectDestinationsArgs,
        pinned: bool,
        on_trees: bool,
    ) -> Result<Vec<RequestContext>, SelectError> {
        let rr = self.resource_request(args, pinned)?;
        let owner = self.placement_owner(args)?;
        let (demand, query, trees) = match rr.needs_nested_providers() {
            None if !on_trees => {
                let (demand, query) = placement_terms(&rr)?;
                (demand, query, None)
            }
            None => {
                let shape = "no host of the table takes the unnumbered group";
                Box::pin(self.tree_terms(&rr, shape)).await?
            }
            Some(shape) => Box::pin(self.tree_terms(&rr, &shape)).await?,
        };
        Ok(self
            .aggregate_contexts(args)
            .into_iter()
            .map(|mut r| {
                r.demand = demand;
                r.query = query.clone();
                r.owner = owner.clone();
                r.trees = trees.clone();
                r
            })
            .collect())
    }

    /// One context per instance with what the per-aggregate filters read (the filters
    /// decide whether they run for a rebuild): the hosts' zones, the aggregates' extra specs
    /// and merged metadata, the project and the image's properties.
    fn aggregate_contexts(&self, args: &SelectDestinationsArgs) -> Vec<RequestContext> {
        let host_zones = HostZones::with_default(
            self.cloud().host_zones(),
            &self.settings().policy.default_availability_zone,
        );
        let metadata = self.cloud().host_metadata();
        let aggregate_metadata = (!metadata.is_empty()).then_some(metadata);
        let image_props = args
            .spec
            .image
            .as_ref()
            .filter(|i| !i.truthy_text.is_empty())
            .map(|i| std::sync::Arc::new(i.truthy_text.clone()));
        let aggregates = self.cloud().aggregates();
        let aggregate_extra_specs = AggregateExtraSpecs::new(
            &args.spec.flavor.extra_specs,
            aggregates.iter().map(|a| (a.hosts.as_slice(), &a.metadata)),
        )
        .map(std::sync::Arc::new);
        let capability_specs =
            CapabilitySpecs::new(&args.spec.flavor.extra_specs).map(std::sync::Arc::new);
        let now_ms = self.clock().now_ms();
        let flex = self.flex().context(now_ms);
        // Computed once per call; `None` keeps both filters off a request that asks neither.
        let np = &args.spec.numa_pci;
        let numa_pci = (!np.is_empty() || (np.cpu_dedicated_asked && np.thread_require_asked))
            .then(|| std::sync::Arc::new(np.clone()));
        let readings = Some(crate::domain::ReadingClock {
            now_ms,
            max_age_ms: self.flex().max_age_ms(),
        });
        args.spec
            .contexts(&args.instance_uuids)
            .into_iter()
            .map(|mut r| {
                r.aggregate_extra_specs = aggregate_extra_specs.clone();
                r.capability_specs = capability_specs.clone();
                r.host_zones = host_zones.clone();
                r.aggregate_metadata = aggregate_metadata.clone();
                r.project_id = args.spec.project_id.clone();
                r.image_props = image_props.clone();
                r.image_id = args.spec.image.as_ref().and_then(|i| i.id.clone());
                r.flavor_name = args.spec.flavor.name.clone();
                r.flex = flex.clone();
                r.readings = readings;
                r.numa_pci = numa_pci.clone();
                r
            })
            .collect()
    }

    /// Whom the claims in Placement are for (Nova's `claim_resources`: the RequestSpec's
    /// project and user); none when Parasol does not claim in Placement, for a rebuild or a
    /// call without instance uuids (Nova claims nothing then). Claims need both ids: a spec without them is refused.
    fn placement_owner(
        &self,
        args: &SelectDestinationsArgs,
    ) -> Result<Option<std::sync::Arc<ConsumerOwner>>, SelectError> {
        let spec = &args.spec;
        // Nova claims nothing for a rebuild, nor for a call without instance uuids (an old
        // conductor: `_legacy_find_hosts`), whose consumers would be made up.
        if !self.claims_in_placement() || spec.is_rebuild() || args.instance_uuids.is_empty() {
            return Ok(None);
        }
        let id = |value: &Option<String>, name: &str| {
            value.clone().filter(|v| !v.is_empty()).ok_or_else(|| {
                SelectError::Invalid(format!(
                    "spec_obj.{name} is required: Parasol claims in Placement \
                     ([placement] claims = true) and Placement records whose allocation it is"
                ))
            })
        };
        Ok(Some(std::sync::Arc::new(ConsumerOwner {
            project_id: id(&spec.project_id, "project_id")?,
            user_id: id(&spec.user_id, "user_id")?,
        })))
    }
}

/// The Selection of host `h` for `demand`: in the cell Nova's records name for the node
/// (else `default_cell`, the configured one) and in the zone Nova gives the host (its
/// aggregates', when `zones` knows it: the conductor writes it into the instance on a move).
fn selection_of(
    h: &HostState,
    demand: Resources,
    default_cell: &str,
    zones: Option<&HostZones>,
) -> Selection {
    let cell = h
        .profile
        .facts
        .as_ref()
        .and_then(|f| f.cell_uuid.as_deref())
        .unwrap_or(default_cell);
    let mut selection = Selection::from_host(h, demand, cell);
    if let Some(zones) = zones {
        selection.availability_zone = Some(zones.zone_of(h).to_string());
    }
    selection
}

/// The Selection's limits on `h`: `NUMATopologyFilter`'s NUMATopologyLimits when the
/// instance asks a NUMA topology and the host has one (`host_state.limits['numa_topology']`,
/// which the compute's claim fits the instance under); none otherwise, as before.
fn numa_limits(h: &HostState, numa_pci: Option<&NumaPciRequest>) -> Option<Limits> {
    let np = numa_pci?;
    np.numa.as_deref().filter(|i| !i.cells.is_empty())?;
    let facts = h.profile.facts.as_deref()?;
    facts.numa.as_deref().filter(|n| !n.cells.is_empty())?;
    Some(Limits {
        numa_topology: Some(NumaLimits::of_host(h, np)),
        ..Limits::default()
    })
}

/// The amounts and marks of a resource request in this process' class, trait and aggregate
/// ids. A class beyond what Parasol tracks is NoValidHost with the reason.
fn placement_terms(rr: &ResourceRequest) -> Result<(Resources, PlacementQuery), SelectError> {
    let mut demand = Resources::ZERO;
    for (class, amount) in &rr.resources {
        let id = ClassId::intern(class).map_err(|e| SelectError::NoValidHost {
            reason: e.to_string(),
        })?;
        demand.set(id, i64::try_from(*amount).unwrap_or(i64::MAX));
    }
    let traits = |names: &mut dyn Iterator<Item = &String>| -> Vec<TraitId> {
        let mut ids: Vec<TraitId> = names.map(|n| TraitId::intern(n)).collect();
        ids.sort();
        ids.dedup();
        ids
    };
    let query = PlacementQuery {
        required_traits: traits(&mut rr.required_traits.iter().chain(&rr.root_required)),
        forbidden_traits: traits(&mut rr.forbidden_traits.iter().chain(&rr.root_forbidden)),
        member_of: rr
            .member_of
            .iter()
            .map(|any| any.iter().map(|a| AggregateId::intern(a)).collect())
            .collect(),
        forbidden_aggregates: rr
            .forbidden_aggregates
            .iter()
            .map(|a| AggregateId::intern(a))
            .collect(),
        in_tree: rr.in_tree.clone(),
        unsupported: None,
    };
    Ok((demand, query))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_selection_is_in_the_zone_of_the_host_s_aggregates() {
        let h = HostState::synthetic(1, Resources::new(4, 4096, 40), Resources::ZERO);
        let demand = Resources::new(1, 512, 1);
        let cell = "00000000-0000-0000-0000-000000000001";
        // No aggregate with a zone: the zone the host was recorded with.
        let plain = selection_of(&h, demand, cell, None);
        assert_eq!(plain.availability_zone.as_deref(), Some("nova"));
        assert_eq!(plain.cell_uuid, cell);
        let hosts = vec![h.host().to_string()];
        let meta: BTreeMap<String, String> =
            [("availability_zone".to_string(), "zone2".to_string())].into();
        let zones = HostZones::new([(hosts.as_slice(), &meta)]);
        let zoned = selection_of(&h, demand, cell, Some(&zones));
        assert_eq!(zoned.availability_zone.as_deref(), Some("zone2"));
        assert_eq!(zoned.service_host, "host1");
        // Another host is not in that aggregate.
        let other = HostState::synthetic(2, Resources::new(4, 4096, 40), Resources::ZERO);
        let elsewhere = selection_of(&other, demand, cell, Some(&zones));
        assert_eq!(elsewhere.availability_zone.as_deref(), Some("nova"));
    }
}

#[cfg(test)]
mod future_sizes {
    //! A call's future is moved by value (actix boxes the handler's, tokio the RPC's task)
    //! and holds room for its largest await: a rarely taken branch that awaits a large
    //! future (Placement's or a plugin's HTTP call, the batch window, a multi-create's
    //! release) or arguments held by value made every call copy ~15 KB of mostly cold
    //! memory (issue 41: data L1 misses +25 % a decision). Such branches are boxed, and the
    //! request spec travels boxed; this keeps it so. (Sizes are the generator layout's,
    //! the same in debug and optimised builds.)
    use super::*;
    use crate::scheduling::tests::{call, scheduler};
    use serde_json::json;

    #[tokio::test]
    async fn a_call_s_futures_stay_small_whatever_its_rare_branches_await() {
        // A future's size is its type's: what the call asks does not change it.
        let dir = tempfile::tempdir().unwrap();
        let s = scheduler(&dir).await;
        let instance = "00000000-0000-4000-8000-000000000001";
        let args = call(instance, 1, &[], &[], json!({}), json!({}));
        let requests = s.requests(&args, true, false).await.unwrap();
        let select = s.select(args.clone());
        let mut sizes = vec![("Scheduler::select", std::mem::size_of_val(&select))];
        drop(select);
        let once = s.select_once(args.clone());
        sizes.push(("Scheduler::select_once", std::mem::size_of_val(&once)));
        drop(once);
        let host = s.ledger().table().with_hosts(|h| h[0].clone());
        sizes.extend(s.backend().future_sizes(&requests[0], &host));
        // Before the boxing: 14,880, 11,520, 7,568, 3,280 and 2,376 bytes.
        let bounds = [4096, 4096, 3072, 2048, 1024];
        for ((name, bytes), bound) in sizes.iter().zip(bounds) {
            assert!(
                *bytes <= bound,
                "{name}'s future is {bytes} bytes (at most {bound}): box the branch that grew it"
            );
        }
        assert_eq!(sizes.len(), bounds.len());
        assert!(std::mem::size_of::<SelectDestinationsArgs>() <= 64);
    }
}
