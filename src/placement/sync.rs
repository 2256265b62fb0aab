//! One full sync: read every provider, its inventories and allocations from Placement, then
//! write them to the ledger. Everything is read before anything is written, so a Placement
//! outage halfway through leaves the ledger as the last complete sync left it.

use super::client::{ConsumerAllocation, PlacementClient, Provider};
use super::PlacementError;
use crate::domain::{ClassId, HostId, HostState, Inventory, Resources};
use crate::ledger::{HostRegistration, Ledger};
use std::collections::{BTreeMap, HashMap};

/// The trait of a provider that shares its inventory with an aggregate (shared storage):
/// not a compute host.
const SHARING_TRAIT: &str = "MISC_SHARES_VIA_AGGREGATE";

/// What a sync changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Compute-node providers registered or refreshed in the ledger.
    pub hosts: usize,
    /// Providers that are not compute nodes: nested (child) providers, sharing providers and
    /// providers without inventory. Requests for their resources are out of scope.
    pub skipped_providers: usize,
    /// Placement allocations of consumers the ledger did not know, now recorded.
    pub imported_allocations: usize,
    /// Allocations an earlier sync imported that Placement no longer has on that host (the
    /// instance was deleted or moved without Parasol hearing of it), now released.
    pub released_allocations: usize,
    /// Placement's allocations on each compute-node provider read, by provider uuid, then
    /// consumer, then class (the consistency check's input; the providers' usages).
    pub placement_allocations: BTreeMap<String, BTreeMap<String, BTreeMap<String, i64>>>,
    /// What the consistency check after the sync repaired in the ledger (filled by
    /// [`super::reconcile`]).
    pub repairs: super::Repairs,
}

/// A compute-node provider as read from Placement.
struct ProviderState {
    provider: Provider,
    inventories: BTreeMap<String, Inventory>,
    traits: Vec<String>,
    aggregates: Vec<String>,
    allocations: BTreeMap<String, ConsumerAllocation>,
}

/// Reads Placement, then registers each root compute-node provider as a host (node = provider
/// name, uuid = compute_node_uuid; every resource class, Placement's unit rules, its traits and
/// aggregates), releases the imported allocations Placement no longer has on it, and records
/// allocations of consumers the ledger lacks. Releases come first, so an imported instance that
/// moved to another provider is recorded there in the same sync.
pub async fn sync_once(
    client: &PlacementClient,
    ledger: &Ledger,
    now_ms: i64,
) -> Result<SyncReport, PlacementError> {
    let mut report = SyncReport::default();
    let read = read_providers(client, &mut report).await?;
    let known: HashMap<String, _> = ledger
        .read_hosts()
        .await?
        .into_iter()
        .map(|h| (h.uuid().to_string(), h))
        .collect();
    let mut hosts = Vec::with_capacity(read.len());
    for state in &read {
        let p = &state.provider;
        let host = ledger
            .register_host(&registration(state, known.get(&p.uuid)), now_ms)
            .await?;
        report.hosts += 1;
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
    report.placement_allocations = read
        .iter()
        .map(|state| {
            let consumers = state
                .allocations
                .iter()
                .map(|(c, a)| (c.clone(), a.resources.clone()))
                .collect();
            (state.provider.uuid.clone(), consumers)
        })
        .collect();
    Ok(report)
}

/// The root compute-node providers of Placement with their inventories, traits, aggregates
/// and allocations; nested and sharing providers, and those without inventory, are counted as
/// skipped.
async fn read_providers(
    client: &PlacementClient,
    report: &mut SyncReport,
) -> Result<Vec<ProviderState>, PlacementError> {
    let mut read = Vec::new();
    for provider in client.providers().await? {
        if provider.parent_provider_uuid.is_some() {
            report.skipped_providers += 1;
            continue;
        }
        let inventories = client.inventories(&provider.uuid).await?;
        let traits = client.traits(&provider.uuid).await?;
        if inventories.is_empty() || traits.iter().any(|t| t == SHARING_TRAIT) {
            report.skipped_providers += 1;
            continue;
        }
        let aggregates = client.aggregates(&provider.uuid).await?;
        let allocations = client.allocations(&provider.uuid).await?;
        read.push(ProviderState {
            provider,
            inventories,
            traits,
            aggregates,
            allocations,
        });
    }
    Ok(read)
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
    allocations: &BTreeMap<String, ConsumerAllocation>,
    parts: &std::collections::HashSet<String>,
    now_ms: i64,
) -> Result<usize, PlacementError> {
    let mut imported = 0;
    for (consumer, allocation) in allocations {
        let key = match ledger.allocation(consumer).await? {
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
fn demand_of(allocation: &ConsumerAllocation) -> Resources {
    let mut demand = Resources::ZERO;
    for (class, amount) in &allocation.resources {
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
        let allocation = ConsumerAllocation {
            resources: [
                ("VCPU", 2),
                ("MEMORY_MB", 512),
                ("DISK_GB", 10),
                ("VGPU", 1),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        };
        let mut want = Resources::new(2, 512, 10);
        want.set(ClassId::intern("VGPU").unwrap(), 1);
        assert_eq!(demand_of(&allocation), want);
    }
}
