//! Flex's allocation ratios in Placement (`[flex] manage_allocation_ratio`, issue 45 item 3):
//! after each Placement sync, each managed class's ratio is moved to where Flex's filter binds,
//! R* = 1 / (P·u) (`control::flex_cluster_ratio`: u is what each allocated unit uses on the
//! measured hosts), within the operator's bounds and never below what a node's allocations take
//! (`control::flex_floor_ratio`, `flex_provider_ratio`).
//!
//! A change is written to Placement (`PUT /resource_providers/{uuid}/inventories` with the
//! generation just read, so a concurrent write by nova-compute is never overwritten: a 409 is
//! counted and the next sync tries again) and to the ledger (the hard limit of Parasol's own
//! claims). The tighter of the two goes first: a lowered ratio reaches the ledger before
//! Placement, a raised one Placement before the ledger, so that in between Parasol never admits
//! past what Placement allows.
//!
//! Nova keeps a ratio set in Placement only while nova.conf's `cpu_allocation_ratio` (and the RAM
//! and disk ones) are unset or 0.0 (`nova/virt/driver.py`, `_get_allocation_ratios`). When a sync
//! shows a ratio other than the one Parasol last wrote, somebody else manages that inventory
//! (nova.conf, an operator): it is counted as `overridden`, logged once, and left alone until
//! Parasol restarts.

use super::client::PlacementClient;
use super::PlacementError;
use crate::control::{
    flex_cluster_ratio, flex_floor_ratio, flex_provider_ratio, RatioBounds, UsageEvidence,
};
use crate::domain::{ClassId, HostState, Inventory, ReadingClock};
use crate::ledger::Ledger;
use parking_lot::Mutex;
use prometheus_client::metrics::{counter::Counter, family::Family, gauge::Gauge};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Placement's microversion of the inventory writes (1.26: `reserved` may equal `total`, as
/// nova-compute writes them).
const INVENTORY_VERSION: &str = "1.26";

/// `[flex]`'s keys for the ratio manager (built by `configuration`).
#[derive(Clone, Debug, PartialEq)]
pub struct RatioSettings {
    /// The managed classes and their bounds.
    pub classes: Vec<(ClassId, RatioBounds)>,
    /// A ratio is written only when it moved by at least this much (or left its bounds).
    pub min_change: f64,
}

/// P now (Flex's estimation penalty), injected: Flex lives above this layer.
pub type Penalty = Arc<dyn Fn() -> f64 + Send + Sync>;

/// One managed class's last round.
#[derive(Clone, Debug, serde::Serialize)]
struct ClassRound {
    /// R* after the bounds (`None`: no evidence, nothing changed).
    target: Option<f64>,
    /// u = ΣL̂ / ΣA on the measured hosts.
    usage_per_allocated: Option<f64>,
    hosts_measured: usize,
    min: f64,
    max: f64,
}

#[derive(Debug, Default)]
struct State {
    /// The ratio Parasol last wrote, by (provider uuid, class).
    written: HashMap<(String, ClassId), f64>,
    /// Inventories someone else manages: left alone.
    overridden: HashSet<(String, ClassId)>,
    rounds: u64,
    /// Inventory records written.
    writes: u64,
    /// Writes Placement refused for a generation conflict (tried again next round).
    conflicts: u64,
    /// Writes that failed otherwise.
    failures: u64,
    last_round_ms: Option<i64>,
    last_error: Option<String>,
    penalty: Option<f64>,
    classes: BTreeMap<String, ClassRound>,
}

/// `/metrics` labels: `class` (the target gauge) or `outcome` (the writes counter).
type Label = Vec<(String, String)>;

/// The ratio manager's figures in `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct RatioMetrics {
    /// `parasol_flex_allocation_ratio{class}`: the ratio each managed class wants (NaN
    /// without evidence).
    pub target: Family<Label, Gauge<f64, AtomicU64>>,
    /// `parasol_flex_allocation_ratio_writes_total{outcome}`: inventory records written
    /// (`written`), refused for a generation conflict (`conflict`), failed (`failed`), and
    /// found changed by someone else (`overridden`).
    pub writes: Family<Label, Counter>,
}

impl RatioMetrics {
    fn outcome(&self, outcome: &str) -> Counter {
        self.writes
            .get_or_create(&vec![("outcome".to_string(), outcome.to_string())])
            .clone()
    }
}

/// The ratio manager: its settings, P, and what it did (`/v1/stats` `flex.allocation_ratio`).
pub struct RatioManager {
    metrics: RatioMetrics,
    settings: RatioSettings,
    penalty: Penalty,
    /// `[usage] max_age_s`, in ms: the readings that count as evidence.
    max_age_ms: i64,
    // parking_lot: held to update or copy the figures, never across an await.
    state: Mutex<State>,
}

impl std::fmt::Debug for RatioManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RatioManager")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// One provider's change: the host as the table has it, and each class's new ratio.
struct Change {
    host: HostState,
    classes: Vec<(ClassId, f64)>,
}

impl RatioManager {
    pub fn new(settings: RatioSettings, penalty: Penalty, max_age_ms: i64) -> Self {
        RatioManager {
            metrics: RatioMetrics::default(),
            settings,
            penalty,
            max_age_ms,
            state: Mutex::new(State::default()),
        }
    }

    /// One round after a sync: the ratios each managed class wants, then each provider's
    /// change written. `placement_usage` is each provider's usage in Placement at that sync
    /// (by uuid, then class name).
    pub async fn round(
        &self,
        client: &PlacementClient,
        ledger: &Ledger,
        placement_usage: &BTreeMap<String, BTreeMap<String, i64>>,
        now_ms: i64,
    ) {
        let hosts = ledger.table().snapshot();
        let changes = self.plan(&hosts, placement_usage, now_ms);
        for change in changes {
            if let Err(e) = self.write(client, ledger, &change).await {
                tracing::warn!(
                    provider = %change.host.uuid(),
                    error = %e,
                    "could not set Flex's allocation ratio"
                );
                self.metrics.outcome("failed").inc();
                let mut s = self.state.lock();
                s.failures += 1;
                s.last_error = Some(format!("{}: {e}", change.host.uuid()));
            }
        }
    }

    /// The round's targets and each provider's change (none without evidence).
    fn plan(
        &self,
        hosts: &[HostState],
        placement_usage: &BTreeMap<String, BTreeMap<String, i64>>,
        now_ms: i64,
    ) -> Vec<Change> {
        let penalty = (self.penalty)();
        let clock = ReadingClock {
            now_ms,
            max_age_ms: self.max_age_ms,
        };
        let mut s = self.state.lock();
        s.rounds += 1;
        s.last_round_ms = Some(now_ms);
        s.penalty = Some(penalty);
        let mut targets = Vec::new();
        for &(class, bounds) in &self.settings.classes {
            let evidence = evidence(hosts, class, clock);
            let target = flex_cluster_ratio(penalty, evidence, bounds);
            s.classes.insert(
                class.name().to_string(),
                ClassRound {
                    target,
                    usage_per_allocated: evidence.usage_per_allocated(),
                    hosts_measured: evidence.hosts,
                    min: bounds.min,
                    max: bounds.max,
                },
            );
            self.metrics
                .target
                .get_or_create(&vec![("class".to_string(), class.name().to_string())])
                .set(target.unwrap_or(f64::NAN));
            if let Some(target) = target {
                targets.push((class, bounds, target));
            }
        }
        let mut changes = Vec::new();
        for host in hosts {
            let uuid = host.uuid().to_string();
            let mut classes = Vec::new();
            for &(class, bounds, target) in &targets {
                let Some(inv) = host.profile.inventory(class) else {
                    continue;
                };
                let key = (uuid.clone(), class);
                if s.overridden.contains(&key) {
                    continue;
                }
                if let Some(&written) = s.written.get(&key) {
                    if (written - inv.allocation_ratio).abs() > 1e-9 {
                        tracing::warn!(
                            provider = %uuid,
                            class = %class,
                            written,
                            now = inv.allocation_ratio,
                            "allocation ratio changed by someone else (nova.conf's \
                             *_allocation_ratio set?): Flex leaves it alone"
                        );
                        s.overridden.insert(key);
                        self.metrics.outcome("overridden").inc();
                        continue;
                    }
                }
                let used = placement_usage
                    .get(&uuid)
                    .and_then(|u| u.get(&*class.name()).copied())
                    .unwrap_or(0)
                    .max(host.used.get(class));
                let floor = flex_floor_ratio(inv.total - inv.reserved, used);
                if let Some(r) = flex_provider_ratio(
                    target,
                    inv.allocation_ratio,
                    floor,
                    bounds,
                    self.settings.min_change,
                ) {
                    classes.push((class, r));
                }
            }
            if !classes.is_empty() {
                changes.push(Change {
                    host: host.clone(),
                    classes,
                });
            }
        }
        changes
    }

    /// Writes one provider's change: the tighter of Placement and the ledger first.
    async fn write(
        &self,
        client: &PlacementClient,
        ledger: &Ledger,
        change: &Change,
    ) -> Result<(), PlacementError> {
        let uuid = change.host.uuid().to_string();
        let lowers = change.classes.iter().any(|&(class, r)| {
            change
                .host
                .profile
                .inventory(class)
                .is_some_and(|inv| r < inv.allocation_ratio)
        });
        let mine: Vec<(String, Inventory)> = change
            .classes
            .iter()
            .filter_map(|&(class, r)| {
                let inv = change.host.profile.inventory(class)?;
                Some((class.name().to_string(), inv.with(inv.reserved, r)))
            })
            .collect();
        if lowers {
            ledger.set_inventories(change.host.id, &mine).await?;
        }
        let path = format!("/resource_providers/{uuid}/inventories");
        let (status, body) = client
            .send(reqwest::Method::GET, &path, INVENTORY_VERSION, None)
            .await?;
        if status != 200 {
            return Err(PlacementError::status(path, status, &body));
        }
        let generation = body["resource_provider_generation"].clone();
        let mut inventories = body["inventories"].clone();
        // Placement's records as they are now, only the ratio changed (a total or reserved
        // that moved since the sync is kept; the floor was judged on the sync's).
        let mut written = Vec::new();
        for (class, inv) in &mine {
            let Some(record) = inventories.get_mut(class.as_str()) else {
                continue;
            };
            record["allocation_ratio"] = json!(inv.allocation_ratio);
            written.push(class);
        }
        if written.is_empty() {
            return Ok(());
        }
        let put = json!({"resource_provider_generation": generation, "inventories": inventories});
        let (status, body) = client
            .send(reqwest::Method::PUT, &path, INVENTORY_VERSION, Some(&put))
            .await?;
        if status == 409 {
            self.state.lock().conflicts += 1;
            self.metrics.outcome("conflict").inc();
            tracing::info!(provider = %uuid, "Placement's inventory changed meanwhile; Flex's ratio waits for the next sync");
            return Ok(());
        }
        if status != 200 {
            return Err(PlacementError::status(path, status, &body));
        }
        let now: BTreeMap<String, Inventory> =
            serde_json::from_value(body["inventories"].clone()).unwrap_or_default();
        let applied: Vec<(String, Inventory)> = written
            .iter()
            .filter_map(|&class| Some((class.clone(), *now.get(class)?)))
            .collect();
        // Recorded before the ledger's write: should that fail, the next sync brings
        // Placement's record (this one) to the ledger, which must not read as an override.
        {
            let mut s = self.state.lock();
            for (class, inv) in &applied {
                if let Ok(id) = ClassId::intern(class) {
                    s.written.insert((uuid.clone(), id), inv.allocation_ratio);
                }
                s.writes += 1;
                self.metrics.outcome("written").inc();
                tracing::info!(
                    provider = %uuid,
                    class = %class,
                    allocation_ratio = inv.allocation_ratio,
                    "Flex set the allocation ratio"
                );
            }
        }
        ledger.set_inventories(change.host.id, &applied).await?;
        Ok(())
    }

    /// For `/v1/stats` (`flex.allocation_ratio`).
    pub fn to_json(&self) -> Value {
        let s = self.state.lock();
        json!({
            "enabled": true,
            "min_change": self.settings.min_change,
            "rounds": s.rounds,
            "last_round_ms": s.last_round_ms,
            "penalty": s.penalty,
            "classes": s.classes,
            "writes": s.writes,
            "conflicts": s.conflicts,
            "failures": s.failures,
            "overridden": s.overridden.len(),
            "last_error": s.last_error,
        })
    }

    /// Its figures, for `/metrics`.
    pub fn metrics(&self) -> &RatioMetrics {
        &self.metrics
    }
}

/// The evidence for `class`: measured usage and allocations of the hosts whose reading of it is
/// fresh.
fn evidence(hosts: &[HostState], class: ClassId, clock: ReadingClock) -> UsageEvidence {
    let mut e = UsageEvidence::default();
    for h in hosts {
        let Some(reading) = h
            .measured
            .as_deref()
            .and_then(|m| m.class(class))
            .filter(|r| clock.fresh(r.at_ms, r.received_ms))
        else {
            continue;
        };
        e.measured += reading.estimate();
        e.allocated += h.used.get(class) as f64;
        e.hosts += 1;
    }
    e
}
