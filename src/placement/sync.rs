//! One sync: list every provider, read the inventories, traits, aggregates and allocations of
//! those whose generation changed since they were last read (all of them on the first sync and
//! on a full one), then write what changed to the ledger. Everything is read before anything is
//! written, so a Placement outage halfway through leaves the ledger as the last complete sync
//! left it.
//!
//! Placement raises a provider's generation whenever its inventories, traits, aggregates (at
//! microversion 1.19 and later, as Nova writes them) are set or allocations are written on it,
//! but not when an allocation leaves it (`DELETE /allocations/{consumer}`, or a `PUT` that
//! moves the consumer elsewhere). So a provider listed at the generation it was last read at
//! is reused as read unless a consumer it lists turned up on a provider just read, or its
//! host's usage in the ledger no longer matches what was read; a full sync every
//! `[placement] full_sync_interval_s` reads every provider (docs/architecture.md, "Placement
//! sync").

use super::client::{Listed, PlacementClient, Provider};
use super::PlacementError;
use crate::domain::{ClassId, HostId, HostState, Inventory, Resources};
use crate::ledger::{HostRegistration, Ledger};
use futures::{StreamExt, TryStreamExt};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// The trait of a provider that shares its inventory with an aggregate (shared storage):
/// not a compute host.
const SHARING_TRAIT: &str = "MISC_SHARES_VIA_AGGREGATE";

/// Providers whose details are read at once (each provider's four reads in turn).
const READS_IN_FLIGHT: usize = 8;

/// Above this many providers to write, the sync reads every host of the ledger at once
/// rather than each by its uuid.
const READ_ALL_HOSTS_ABOVE: usize = 256;

/// One consumer's amounts on one provider, by resource class.
pub type Amounts = BTreeMap<String, i64>;

/// The allocations on one provider: each consumer's amounts there, by consumer uuid.
pub type ProviderAllocations = BTreeMap<String, Amounts>;

/// What a sync changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Compute-node providers registered or refreshed in the ledger, or known unchanged.
    pub hosts: usize,
    /// Providers that are not compute nodes: nested (child) providers, sharing providers and
    /// providers without inventory. Requests for their resources are out of scope.
    pub skipped_providers: usize,
    /// Providers `GET /resource_providers` listed.
    pub listed_providers: usize,
    /// Root providers whose inventories, traits, aggregates and allocations were read: those
    /// whose generation changed since they were last read, or all of them on a full sync.
    pub read_providers: usize,
    /// Root providers of an unchanged generation read again because the ledger's usage of
    /// their host differed from the sum of Placement's allocations there when last read.
    pub disagreeing_providers: usize,
    /// The providers the consistency check compares with the ledger: those read; `None` (a
    /// full sync): every one.
    pub checked: Option<HashSet<String>>,
    /// Whether every provider was read, whatever its generation.
    pub full: bool,
    /// Placement allocations of consumers the ledger did not know, now recorded.
    pub imported_allocations: usize,
    /// Allocations an earlier sync imported that Placement no longer has on that host (the
    /// instance was deleted or moved without Parasol hearing of it), now released.
    pub released_allocations: usize,
    /// Hosts whose compute-node provider an earlier sync of this process read and this one's
    /// listing no longer has (a deleted compute service), now gone from the ledger with
    /// whatever it still held on them.
    pub removed_hosts: usize,
    /// Placement's allocations on each compute-node provider, by provider uuid (the
    /// consistency check's input; the providers' usages): as read now, or as last read for a
    /// provider whose generation did not change.
    /// Shared, not copied, with `/v1/stats`' status.
    pub placement_allocations: Arc<BTreeMap<String, Arc<ProviderAllocations>>>,
    /// What the consistency check after the sync repaired in the ledger (filled by
    /// [`super::reconcile`]).
    pub repairs: super::Repairs,
}

/// A compute-node provider as read from Placement.
#[derive(Debug)]
struct ProviderState {
    provider: Provider,
    inventories: BTreeMap<String, Inventory>,
    traits: Vec<String>,
    aggregates: Vec<String>,
    allocations: Arc<ProviderAllocations>,
    /// The sum of `allocations` (classes Parasol cannot track left out).
    usage: Resources,
}

/// A root provider's reads: a compute node, or a provider skipped (sharing, or without
/// inventory).
enum Read {
    Host(Box<ProviderState>),
    Skipped(Provider),
}

/// What the syncs of one process last read of each root provider, by uuid: kept between
/// syncs so that a provider whose generation did not change is not read again.
#[derive(Debug, Default)]
pub struct ProviderCache {
    providers: HashMap<String, Cached>,
    /// Syncs completed with this cache.
    syncs: u64,
    /// The last sync's allocations by provider ([`SyncReport::placement_allocations`]), shared
    /// by the next sync that reads and forgets nothing (the same providers at the same
    /// generations) instead of built again: 100,000 keys copied and sorted.
    allocations: Option<Arc<BTreeMap<String, Arc<ProviderAllocations>>>>,
    /// How many cached providers the last [`Self::partition`] found listed again.
    listed_again: usize,
}

#[derive(Debug)]
struct Cached {
    generation: i64,
    name: String,
    /// The sync that last listed it.
    listed: u64,
    /// `None`: skipped (sharing, or without inventory).
    state: Option<Arc<ProviderState>>,
}

impl ProviderCache {
    /// Splits the root providers `listed` into those known unchanged (at the generation and
    /// name last read; never on a `full` sync) and those to read;
    /// nested providers, and known skipped ones, are counted in `report`.
    fn partition(
        &mut self,
        listed: &[Listed<'_>],
        full: bool,
        report: &mut SyncReport,
    ) -> (Vec<Arc<ProviderState>>, Vec<Provider>) {
        let this_sync = self.syncs + 1;
        let mut unchanged = Vec::with_capacity(listed.len());
        let mut to_read = Vec::new();
        self.listed_again = 0;
        for provider in listed {
            if provider.parent_provider_uuid.is_some() {
                report.skipped_providers += 1;
                continue;
            }
            let known = self.providers.get_mut(&*provider.uuid).and_then(|c| {
                // Listed again, changed or not: not a provider that left Placement.
                c.listed = this_sync;
                self.listed_again += 1;
                (!full && provider.generation == Some(c.generation) && c.name == provider.name)
                    .then_some(c)
            });
            match known {
                Some(cached) => match &cached.state {
                    Some(state) => unchanged.push(state.clone()),
                    None => report.skipped_providers += 1,
                },
                None => to_read.push(provider.to_provider()),
            }
        }
        (unchanged, to_read)
    }

    /// The compute-node providers an earlier sync read that the listing [`Self::partition`]
    /// just split no longer has: deleted from Placement (nova-api deletes a compute service's
    /// providers, and their allocations with them, before the service).
    fn vanished(&self) -> Vec<String> {
        // The common case, every cached provider listed again, without a walk over them.
        if self.listed_again == self.providers.len() {
            return Vec::new();
        }
        let this_sync = self.syncs + 1;
        let mut gone: Vec<String> = self
            .providers
            .iter()
            .filter(|(_, c)| c.listed != this_sync && c.state.is_some())
            .map(|(uuid, _)| uuid.clone())
            .collect();
        gone.sort();
        gone
    }

    /// Takes what a successful sync `read`, adding its hosts to `hosts`, and forgets the
    /// providers it did not list; then each host's allocations by provider uuid, made again
    /// only when the sync read or forgot a provider.
    fn keep(
        &mut self,
        read: Vec<Read>,
        hosts: &mut Vec<Arc<ProviderState>>,
    ) -> Arc<BTreeMap<String, Arc<ProviderAllocations>>> {
        let this_sync = self.syncs + 1;
        let before = self.providers.len();
        let mut changed = !read.is_empty();
        for r in read {
            let (provider, state) = match r {
                Read::Host(state) => (state.provider.clone(), Some(Arc::new(*state))),
                Read::Skipped(provider) => (provider, None),
            };
            if let Some(state) = &state {
                hosts.push(state.clone());
            }
            match provider.generation {
                Some(generation) => {
                    self.providers.insert(
                        provider.uuid,
                        Cached {
                            generation,
                            name: provider.name,
                            listed: this_sync,
                            state,
                        },
                    );
                }
                None => {
                    self.providers.remove(&provider.uuid);
                }
            }
        }
        self.providers.retain(|_, c| c.listed == this_sync);
        changed |= self.providers.len() != before;
        self.syncs = this_sync;
        match &self.allocations {
            Some(allocations) if !changed => allocations.clone(),
            _ => {
                let allocations: Arc<BTreeMap<_, _>> = Arc::new(
                    hosts
                        .iter()
                        .map(|state| (state.provider.uuid.clone(), state.allocations.clone()))
                        .collect(),
                );
                self.allocations = Some(allocations.clone());
                allocations
            }
        }
    }
}

/// A full sync with nothing known beforehand: every provider read.
pub async fn sync_once(
    client: &PlacementClient,
    ledger: &Ledger,
    now_ms: i64,
) -> Result<SyncReport, PlacementError> {
    sync(client, ledger, &mut ProviderCache::default(), true, now_ms).await
}

/// Lists Placement's providers, reads those not in `cache` at their listed generation (every
/// one if `full`), then registers each root compute-node provider read as a host (node =
/// provider name, uuid = compute_node_uuid; every resource class, Placement's unit rules, its
/// traits and aggregates), releases the imported allocations Placement no longer has on it,
/// and records allocations of consumers the ledger lacks. Releases come first, so an imported
/// instance that moved to another provider is recorded there in the same sync. A provider
/// known unchanged is read again if its host's usage in the ledger is not what was read (or
/// the host is gone). `cache` changes only
/// when the sync succeeds.
pub async fn sync(
    client: &PlacementClient,
    ledger: &Ledger,
    cache: &mut ProviderCache,
    full: bool,
    now_ms: i64,
) -> Result<SyncReport, PlacementError> {
    let mut report = SyncReport {
        full,
        ..SyncReport::default()
    };
    let listing = client.listing().await?;
    let (mut unchanged, mut to_read) = {
        let listed = listing.providers().map_err(PlacementError::Listing)?;
        report.listed_providers = listed.len();
        cache.partition(&listed, full, &mut report)
    };
    let vanished = cache.vanished();
    drop(listing);
    let table = ledger.table();
    // The ledger changes where Placement's generation does not (a notification released a
    // deleted instance whose allocation Placement dropped, which raises nothing): an unchanged
    // provider whose host the table holds at other amounts than the sum of Placement's
    // allocations there when last read is read again, so that what was last read is never
    // written over a newer ledger.
    let (agree, disagree): (Vec<_>, Vec<_>) = unchanged
        .into_iter()
        .partition(|state| table.used_of_uuid(&state.provider.uuid) == Some(state.usage));
    unchanged = agree;
    report.disagreeing_providers = disagree.len();
    to_read.extend(disagree.iter().map(|state| state.provider.clone()));
    let mut read = read_all(client, to_read).await?;
    let left = left_behind(&read, &mut unchanged);
    read.extend(read_all(client, left).await?);
    report.read_providers = read.len();
    let to_write: Vec<&ProviderState> = read
        .iter()
        .filter_map(|r| match r {
            Read::Host(state) => Some(&**state),
            Read::Skipped(_) => None,
        })
        .collect();
    report.skipped_providers += read.len() - to_write.len();
    report.checked = (!full).then(|| {
        to_write
            .iter()
            .map(|state| state.provider.uuid.clone())
            .collect()
    });
    write_read(ledger, &to_write, &mut report, now_ms).await?;
    if !vanished.is_empty() {
        let removed = ledger.remove_hosts_of_providers(&vanished).await?;
        for host in &removed {
            tracing::info!(
                provider = %host.uuid,
                host = %host.host,
                node = %host.node,
                released = host.released,
                "removed a host whose provider left Placement"
            );
        }
        report.removed_hosts = removed.len();
    }

    // Everything written: the cache takes what was read.
    report.placement_allocations = cache.keep(read, &mut unchanged);
    report.hosts = unchanged.len();
    Ok(report)
}

/// Registers the hosts just read, releases the imports Placement no longer has on them and
/// imports what the ledger lacks.
async fn write_read(
    ledger: &Ledger,
    read: &[&ProviderState],
    report: &mut SyncReport,
    now_ms: i64,
) -> Result<(), PlacementError> {
    if read.is_empty() {
        return Ok(());
    }
    let known = known_hosts(ledger, read).await?;
    let mut hosts = Vec::with_capacity(read.len());
    for state in read {
        let p = &state.provider;
        let host = ledger
            .register_host(&registration(state, known.get(&p.uuid)), now_ms)
            .await?;
        // A consumer's allocation here may be held under its own uuid or, when the ledger
        // holds that consumer on another host, under its part's key.
        let parts: Vec<String> = state
            .allocations
            .keys()
            .map(|c| part_key(c, &p.uuid))
            .collect();
        let present: Vec<&str> = state
            .allocations
            .keys()
            .map(String::as_str)
            .chain(parts.iter().map(String::as_str))
            .collect();
        for gone in ledger.release_vanished_imports(host, &present).await? {
            tracing::info!(consumer = %gone.instance_uuid, host = host.0, "released an imported allocation Placement no longer has");
            report.released_allocations += 1;
        }
        hosts.push(host);
    }
    let parts: std::collections::HashSet<String> = ledger.part_keys().await?.into_iter().collect();
    for (state, host) in read.iter().zip(hosts) {
        report.imported_allocations += import(
            ledger,
            host,
            &state.provider.uuid,
            &state.allocations,
            &parts,
            now_ms,
        )
        .await?;
    }
    Ok(())
}

/// The providers of `unchanged` (taken out of it) that list a consumer now on a provider just
/// `read`: it left them (a move, or the conductor's claim of an alternate), and Placement does
/// not raise the generation of the provider an allocation leaves, so they are read again too.
fn left_behind(read: &[Read], unchanged: &mut Vec<Arc<ProviderState>>) -> Vec<Provider> {
    let moved: HashSet<&str> = read
        .iter()
        .filter_map(|r| match r {
            Read::Host(state) => Some(state.allocations.keys().map(String::as_str)),
            Read::Skipped(_) => None,
        })
        .flatten()
        .collect();
    if moved.is_empty() {
        return Vec::new();
    }
    let (stale, kept): (Vec<_>, Vec<_>) = std::mem::take(unchanged)
        .into_iter()
        .partition(|state| state.allocations.keys().any(|c| moved.contains(c.as_str())));
    *unchanged = kept;
    stale.iter().map(|state| state.provider.clone()).collect()
}

/// The details of `providers`, [`READS_IN_FLIGHT`] providers at a time, in their order.
async fn read_all(
    client: &PlacementClient,
    providers: Vec<Provider>,
) -> Result<Vec<Read>, PlacementError> {
    futures::stream::iter(providers.into_iter().map(|p| read_provider(client, p)))
        .buffered(READS_IN_FLIGHT)
        .try_collect()
        .await
}

/// The ledger's hosts of the providers `read`, by uuid: every host at once when many were
/// read (the first sync), else each by its uuid.
async fn known_hosts(
    ledger: &Ledger,
    read: &[&ProviderState],
) -> Result<HashMap<String, HostState>, PlacementError> {
    let hosts = if read.len() > READ_ALL_HOSTS_ABOVE {
        ledger.read_hosts().await?
    } else {
        let mut ids = Vec::with_capacity(read.len());
        for state in read {
            if let Some(id) = ledger.host_id_by_uuid(&state.provider.uuid).await? {
                ids.push(id);
            }
        }
        if ids.is_empty() {
            Vec::new()
        } else {
            ledger.load_hosts(Some(&ids)).await?
        }
    };
    Ok(hosts
        .into_iter()
        .map(|h| (h.uuid().to_string(), h))
        .collect())
}

/// A root provider's inventories, traits, aggregates and allocations; a sharing provider or
/// one without inventory is skipped after its first two reads.
async fn read_provider(
    client: &PlacementClient,
    provider: Provider,
) -> Result<Read, PlacementError> {
    let inventories = client.inventories(&provider.uuid).await?;
    let traits = client.traits(&provider.uuid).await?;
    if inventories.is_empty() || traits.iter().any(|t| t == SHARING_TRAIT) {
        return Ok(Read::Skipped(provider));
    }
    let aggregates = client.aggregates(&provider.uuid).await?;
    let allocations: ProviderAllocations = client
        .allocations(&provider.uuid)
        .await?
        .into_iter()
        .map(|(consumer, a)| (consumer, a.resources))
        .collect();
    let mut usage = Resources::ZERO;
    for amounts in allocations.values() {
        for (class, amount) in amounts {
            if let Ok(class) = ClassId::intern(class) {
                usage.set(class, usage.get(class) + amount);
            }
        }
    }
    Ok(Read::Host(Box::new(ProviderState {
        provider,
        inventories,
        traits,
        aggregates,
        allocations: Arc::new(allocations),
        usage,
    })))
}

/// The registration of `state`'s provider as a host: Placement knows neither zones nor
/// service state, so those stay what notifications said of the `known` host.
fn registration(state: &ProviderState, known: Option<&HostState>) -> HostRegistration {
    let p = &state.provider;
    let (host, zone, up, disabled) = match known {
        Some(h) => (
            h.host().to_string(),
            h.availability_zone().to_string(),
            h.up,
            h.disabled,
        ),
        None => (p.name.clone(), "nova".to_string(), true, false),
    };
    HostRegistration {
        host,
        node: p.name.clone(),
        uuid: p.uuid.clone(),
        availability_zone: zone,
        up,
        disabled,
        inventories: state
            .inventories
            .iter()
            .map(|(c, i)| (c.clone(), *i))
            .collect(),
        traits: state.traits.clone(),
        aggregates: state.aggregates.clone(),
    }
}

/// The ledger's key for the part of `consumer`'s allocation on provider `provider` when the
/// ledger holds that consumer on another host: Placement lets one consumer hold several
/// providers (an evacuated instance keeps its source until the source compute comes back;
/// the ledger has one allocation per consumer). Such a part is imported like any consumer —
/// its usage counted, not an instance — and released once Placement no longer has the
/// consumer on that provider.
pub fn part_key(consumer: &str, provider: &str) -> String {
    format!("{consumer}@{provider}")
}

/// Records the allocations of consumers the ledger has no allocation for, and the parts on
/// this provider of consumers it holds on another host.
async fn import(
    ledger: &Ledger,
    host: HostId,
    provider: &str,
    allocations: &ProviderAllocations,
    parts: &std::collections::HashSet<String>,
    now_ms: i64,
) -> Result<usize, PlacementError> {
    let mut imported = 0;
    for (consumer, allocation) in allocations {
        let unknown = ledger.allocation(consumer).await?;
        let new_consumer = unknown.is_none();
        let key = match unknown {
            None => consumer.clone(),
            Some(held) if held.host_id == host => {
                // The consumer's own allocation is here now: a part imported while it was
                // held elsewhere would count it twice.
                let part = part_key(consumer, provider);
                if parts.contains(&part) {
                    ledger.release(&part).await?;
                    ledger.reload(&[host]).await?;
                    tracing::info!(consumer = %part, host = host.0, "released a part now held as the consumer's own allocation");
                }
                continue;
            }
            Some(_) => {
                let key = part_key(consumer, provider);
                if parts.contains(&key) {
                    continue;
                }
                key
            }
        };
        let consumer = &key;
        let demand = demand_of(allocation);
        if new_consumer {
            let present: Vec<&str> = allocations.keys().map(String::as_str).collect();
            if let Some(instance) = ledger
                .adopt_swapped_source(host, consumer, &demand, &present)
                .await?
            {
                tracing::info!(consumer = %consumer, %instance, host = host.0, "a migration record holds a moving instance's source: the instance's allocation there is that source now");
                continue;
            }
        }
        if ledger
            .record_existing_allocation(host, consumer, &demand, now_ms)
            .await?
        {
            tracing::info!(consumer = %consumer, host = host.0, ?demand, "imported a Placement allocation");
            imported += 1;
        }
    }
    Ok(imported)
}

/// The amounts of an allocation, every class (a class Parasol cannot track is left out and
/// logged).
pub(super) fn demand_of(amounts: &Amounts) -> Resources {
    let mut demand = Resources::ZERO;
    for (class, amount) in amounts {
        match ClassId::intern(class) {
            Ok(c) => demand.set(c, *amount),
            Err(e) => tracing::warn!(error = %e, "allocation amount left out"),
        }
    }
    demand
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demand_keeps_every_class() {
        let allocation: Amounts = [
            ("VCPU", 2),
            ("MEMORY_MB", 512),
            ("DISK_GB", 10),
            ("VGPU", 1),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let mut want = Resources::new(2, 512, 10);
        want.set(ClassId::intern("VGPU").unwrap(), 1);
        assert_eq!(demand_of(&allocation), want);
    }
}
