//! The consistency check after each periodic sync: Placement's allocations on the synced
//! providers against the ledger's, the ledger repaired to match (Placement holds the claims
//! Nova acts on: the conductor's claim of an alternate, its moves to a migration record,
//! compute's deletions). Each repair is counted (`/metrics`, `/healthz`, `/v1/stats`).
//!
//! - An allocation the ledger has on a host where Placement has the same consumer with other
//!   amounts takes Placement's amounts (`resized`). Put back where its move's source is held,
//!   with the source's amounts, the instance's move was undone (a failed `prep_resize` or
//!   `resize_instance`): the held source goes with it (`Ledger::repair_allocation`).
//! - With claims on, an allocation Parasol made that Placement has on another synced provider
//!   moves there (`moved`: the conductor claimed an alternate), and one Placement has nowhere
//!   is released (`released`: the instance was deleted or its build cleaned up, and the
//!   notification did not reach Parasol) once two syncs in a row found it missing (a
//!   reschedule deletes the failed host's claim just before the conductor claims the
//!   alternate). Allocations made after `created_before_ms` are left alone: their claim in
//!   Placement may still be in flight.
//! - Consumers the ledger lacks were already imported by the sync, and imported allocations
//!   Placement no longer has released by it.

use super::sync::{ProviderAllocations, SyncReport};
use super::PlacementError;
use crate::domain::{ClassId, HostId, Resources};
use crate::ledger::Ledger;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Repairs of one consistency check, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Repairs {
    pub released: u64,
    pub moved: u64,
    pub resized: u64,
}

impl Repairs {
    /// `(kind, count)` for each kind, in a fixed order.
    pub fn by_kind(&self) -> [(&'static str, u64); 3] {
        [
            ("released", self.released),
            ("moved", self.moved),
            ("resized", self.resized),
        ]
    }

    pub fn total(&self) -> u64 {
        self.released + self.moved + self.resized
    }

    pub fn add(&mut self, other: &Repairs) {
        self.released += other.released;
        self.moved += other.moved;
        self.resized += other.resized;
    }
}

/// Each provider's usage by class (the sum of its consumers' allocations, as Placement's
/// `GET /resource_providers/{uuid}/usages` answers it).
pub fn provider_usages(report: &SyncReport) -> BTreeMap<String, BTreeMap<String, i64>> {
    report
        .placement_allocations
        .iter()
        .map(|(provider, consumers)| (provider.clone(), usage_of(consumers)))
        .collect()
}

/// One provider's usage by class: the sum of its consumers' allocations.
pub(super) fn usage_of(consumers: &ProviderAllocations) -> BTreeMap<String, i64> {
    let mut usage: BTreeMap<String, i64> = BTreeMap::new();
    for resources in consumers.values() {
        for (class, amount) in resources {
            *usage.entry(class.clone()).or_default() += amount;
        }
    }
    usage
}

/// One consumer's allocation on one synced provider, as Placement has it.
type HeldOn<'a> = (HostId, &'a BTreeMap<String, i64>);

fn demand_of(resources: &BTreeMap<String, i64>) -> Option<Resources> {
    let mut demand = Resources::ZERO;
    for (class, amount) in resources {
        demand.set(ClassId::intern(class).ok()?, *amount);
    }
    Some(demand)
}

/// What one consistency check compares.
struct Compared<'a> {
    /// The checked hosts' providers.
    provider_of: HashMap<HostId, &'a str>,
    /// The ledger's allocations on the checked hosts.
    stored: Vec<crate::ledger::StoredAllocation>,
    /// The hosts of the providers whose allocations are looked at.
    host_of: HashMap<&'a str, HostId>,
}

/// The hosts a consistency check compares and what the ledger holds on them: every synced
/// provider's, or (when the sync checks only the providers it read or found changed) those of
/// the providers checked, with the providers where a consumer they hold is.
async fn compared<'a>(
    ledger: &Ledger,
    report: &'a SyncReport,
) -> Result<Compared<'a>, PlacementError> {
    let table = ledger.table();
    Ok(match &report.checked {
        None => {
            let host_of: HashMap<&str, HostId> = table.with_hosts(|hosts| {
                hosts
                    .iter()
                    .filter_map(|h| {
                        report
                            .placement_allocations
                            .get_key_value(&**h.uuid())
                            .map(|(uuid, _)| (uuid.as_str(), h.id))
                    })
                    .collect()
            });
            let provider_of = host_of.iter().map(|(u, id)| (*id, *u)).collect();
            Compared {
                provider_of,
                stored: ledger.stored_allocations().await?,
                host_of,
            }
        }
        Some(checked) => {
            let provider_of: HashMap<HostId, &str> = checked
                .iter()
                .filter(|uuid| report.placement_allocations.contains_key(*uuid))
                .filter_map(|uuid| table.id_of_uuid(uuid).map(|id| (id, uuid.as_str())))
                .collect();
            let mut ids: Vec<HostId> = provider_of.keys().copied().collect();
            ids.sort();
            let stored = if ids.is_empty() {
                Vec::new()
            } else {
                ledger.stored_allocations_on(&ids).await?
            };
            let wanted: HashSet<&str> = stored.iter().map(|s| s.instance_uuid.as_str()).collect();
            let mut host_of = HashMap::new();
            if !wanted.is_empty() {
                for (provider, consumers) in report.placement_allocations.iter() {
                    if consumers.keys().any(|c| wanted.contains(c.as_str())) {
                        if let Some(id) = table.id_of_uuid(provider) {
                            host_of.insert(provider.as_str(), id);
                        }
                    }
                }
            }
            Compared {
                provider_of,
                stored,
                host_of,
            }
        }
    })
}

/// Compares the providers of `report` with the ledger and repairs the ledger (see the module
/// documentation); `own_claims`: Parasol claims in Placement, so its own allocations are
/// checked too.
///
/// `missing` holds the consumers the previous check found missing from Placement; it is
/// replaced by those this one found missing and did not release.
pub async fn reconcile(
    ledger: &Ledger,
    report: &SyncReport,
    own_claims: bool,
    created_before_ms: i64,
    now_ms: i64,
    missing: &mut HashSet<String>,
) -> Result<Repairs, PlacementError> {
    let seen_missing = std::mem::take(missing);
    let mut repairs = Repairs::default();
    let Compared {
        provider_of,
        stored,
        host_of,
    } = compared(ledger, report).await?;
    // Consumer → its allocations on synced providers, in provider order.
    let mut placed: HashMap<&str, Vec<HeldOn<'_>>> = HashMap::new();
    for (provider, consumers) in report.placement_allocations.iter() {
        let Some(host) = host_of.get(provider.as_str()) else {
            continue;
        };
        for (consumer, resources) in consumers.iter() {
            placed
                .entry(consumer.as_str())
                .or_default()
                .push((*host, resources));
        }
    }
    for stored in stored {
        let Some(provider) = provider_of.get(&stored.host_id) else {
            continue; // a host this sync did not read
        };
        let there = placed.get(stored.instance_uuid.as_str());
        let here = there.and_then(|list| list.iter().find(|(h, _)| *h == stored.host_id));
        let settled = stored.created_ms < created_before_ms;
        let (kind, to) = match (here, there) {
            // Parasol's own claim waits for the grace as the other repairs do: Placement was
            // read before the ledger, so a claim made since (a resize on the same host: the
            // instance's new amounts) may not be in what was read.
            (Some((_, resources)), _) if stored.imported || (own_claims && settled) => {
                match demand_of(resources) {
                    Some(d) if d != stored.demand && !d.is_zero() => {
                        ("resized", Some((stored.host_id, d)))
                    }
                    _ => continue,
                }
            }
            (None, Some(list)) if own_claims && !stored.imported && settled => {
                let (host, resources) = list[0];
                match demand_of(resources) {
                    Some(d) if !d.is_zero() => ("moved", Some((host, d))),
                    _ => continue,
                }
            }
            (None, None) if own_claims && !stored.imported && settled => {
                if !seen_missing.contains(&stored.instance_uuid) {
                    missing.insert(stored.instance_uuid.clone());
                    continue;
                }
                ("released", None)
            }
            _ => continue,
        };
        let applied = ledger
            .repair_allocation(&stored, to.as_ref().map(|(h, d)| (*h, d)), now_ms)
            .await?;
        if !applied {
            continue; // changed meanwhile: the next sync looks again
        }
        tracing::info!(
            consumer = %stored.instance_uuid,
            provider = %provider,
            to = ?to.as_ref().map(|(h, _)| provider_of.get(h)),
            kind,
            "ledger repaired from Placement"
        );
        match kind {
            "released" => repairs.released += 1,
            "moved" => repairs.moved += 1,
            _ => repairs.resized += 1,
        }
    }
    Ok(repairs)
}
