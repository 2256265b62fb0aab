//! One full sync: read every provider, its inventories and allocations from Placement, then
//! write them to the ledger. Everything is read before anything is written, so a Placement
//! outage halfway through leaves the ledger as the last complete sync left it.

use super::client::{ConsumerAllocation, PlacementClient, Provider};
use super::PlacementError;
use crate::domain::{HostId, Inventory, ResourceClass, Resources, CLASSES};
use crate::ledger::{HostRegistration, Ledger};
use std::collections::{BTreeMap, HashMap};

/// What a sync changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Compute-node providers registered or refreshed in the ledger.
    pub hosts: usize,
    /// Providers without VCPU, MEMORY_MB or DISK_GB inventory (nested or sharing providers).
    pub skipped_providers: usize,
    /// Placement allocations of consumers the ledger did not know, now recorded.
    pub imported_allocations: usize,
    /// Allocations an earlier sync imported that Placement no longer has on that host (the
    /// instance was deleted or moved without Parasol hearing of it), now released.
    pub released_allocations: usize,
}

/// A compute-node provider as read from Placement.
struct ProviderState {
    provider: Provider,
    inventory: [Inventory; 3],
    allocations: BTreeMap<String, ConsumerAllocation>,
}

/// Reads Placement, then registers each compute-node provider as a host (name = provider
/// name, uuid = compute_node_uuid), releases the imported allocations Placement no longer has
/// on it, and records allocations of consumers the ledger lacks. Releases come first, so an
/// imported instance that moved to another provider is recorded there in the same sync.
pub async fn sync_once(
    client: &PlacementClient,
    ledger: &Ledger,
    now_ms: i64,
) -> Result<SyncReport, PlacementError> {
    let mut report = SyncReport::default();
    let mut read = Vec::new();
    for provider in client.providers().await? {
        let inventories = client.inventories(&provider.uuid).await?;
        if !CLASSES.iter().any(|c| inventories.contains_key(c.as_str())) {
            report.skipped_providers += 1;
            continue;
        }
        let inventory = CLASSES.map(|c| {
            inventories.get(c.as_str()).copied().unwrap_or(Inventory {
                total: 0,
                reserved: 0,
                allocation_ratio: 1.0,
            })
        });
        let allocations = client.allocations(&provider.uuid).await?;
        read.push(ProviderState {
            provider,
            inventory,
            allocations,
        });
    }
    let known: HashMap<String, _> = ledger
        .read_hosts()
        .await?
        .into_iter()
        .map(|h| (h.uuid.to_string(), h))
        .collect();
    let mut hosts = Vec::with_capacity(read.len());
    for state in &read {
        let p = &state.provider;
        // Placement knows neither zones nor service state: keep what notifications said.
        let (zone, up, disabled) = match known.get(&p.uuid) {
            Some(h) => (h.availability_zone.to_string(), h.up, h.disabled),
            None => ("nova".to_string(), true, false),
        };
        let registration = HostRegistration {
            host: p.name.clone(),
            node: p.name.clone(),
            uuid: p.uuid.clone(),
            availability_zone: zone,
            up,
            disabled,
            inventory: state.inventory,
        };
        let host = ledger.register_host(&registration, now_ms).await?;
        report.hosts += 1;
        let present: Vec<&str> = state.allocations.keys().map(String::as_str).collect();
        for gone in ledger.release_vanished_imports(host, &present).await? {
            tracing::info!(consumer = %gone.instance_uuid, host = host.0, "released an imported allocation Placement no longer has");
            report.released_allocations += 1;
        }
        hosts.push(host);
    }
    for (state, host) in read.iter().zip(hosts) {
        report.imported_allocations += import(ledger, host, &state.allocations, now_ms).await?;
    }
    Ok(report)
}

/// Records the allocations of consumers the ledger has no allocation for.
async fn import(
    ledger: &Ledger,
    host: HostId,
    allocations: &BTreeMap<String, ConsumerAllocation>,
    now_ms: i64,
) -> Result<usize, PlacementError> {
    let mut imported = 0;
    for (consumer, allocation) in allocations {
        if ledger.allocation(consumer).await?.is_some() {
            continue;
        }
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

/// The VCPU, MEMORY_MB and DISK_GB amounts of an allocation (other classes are ignored).
fn demand_of(allocation: &ConsumerAllocation) -> Resources {
    let mut demand = Resources::ZERO;
    for (class, amount) in &allocation.resources {
        if let Some(c) = ResourceClass::parse(class) {
            demand.0[c.index()] = *amount;
        }
    }
    demand
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demand_keeps_the_three_classes_and_ignores_others() {
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
        assert_eq!(demand_of(&allocation), Resources::new(2, 512, 10));
    }
}
