//! The live host table: every host's profile, usage and liveness in memory, which every
//! decision reads (`filter` in place, `caching`/`asc` as snapshots, `apsr` as samples) and
//! every claim checks and reserves atomically before the ledger makes it durable.
//!
//! The ledger is the durable record and, between processes, the authority: the table holds
//! what the ledger has committed plus the claims reserved here and not yet finalized
//! (`pending`), so that a reload of a host from the ledger gives exactly
//! `used = committed + pending`. Nothing here does I/O; the ledger drives the table.
//!
//! One `parking_lot` RwLock guards the whole table: reads (a full scan of 10,000 hosts takes a
//! few hundred µs) share it, and each reserve, finalize or reload holds it for a few µs; it is
//! never held across an await.

use crate::domain::{
    AggregateMembers, ComputeFacts, HostId, HostProfile, HostScan, HostState, Resources,
};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

mod events;
pub mod failed;
mod usage;
pub use events::{EventOrder, HostCounters};
pub use usage::{Amount, NodeRef, PollOutcome, UsageCounters, UsageCounts, UsageReading};

/// What a reserve came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserve {
    /// The demand is reserved on the host (used and pending grew by it).
    Reserved,
    /// The host no longer has room for it (or no longer exists).
    NoRoom,
}

/// A host this process re-registered, as the table takes it without reading it back
/// ([`HostTable::load_profiles`]): its new profile and liveness.
#[derive(Clone, Debug)]
pub struct ProfilePatch {
    pub id: HostId,
    pub profile: Arc<HostProfile>,
    pub up: bool,
    pub disabled: bool,
    pub last_seen_ms: i64,
}

/// What Nova's compute-node records (`[nova_db]`) say of one node: the service host the
/// conductor sends builds to, the facts Nova's filters read and the service's state. Laid
/// over the ledger's row on every load, so a reload never loses them.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeRecord {
    /// The nova-compute service's `host` (a Selection's `service_host`).
    pub service_host: Arc<str>,
    pub facts: Arc<ComputeFacts>,
    /// The service is up by its last heartbeat under `service_down_time`.
    pub up: bool,
    pub disabled: bool,
    pub forced_down: bool,
}

/// Every node Nova's records know, by compute node uuid (= Placement provider uuid).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeRecords {
    pub by_uuid: HashMap<String, NodeRecord>,
    /// False until Nova's databases were read once: meanwhile no host is schedulable, as
    /// nova-scheduler schedules nowhere without its databases.
    pub read: bool,
    /// When (ms, the service's clock) the read these records come from began: a
    /// `service.update` noted before it is in them ([`HostTable::note_service`]).
    pub began_ms: i64,
}

impl NodeRecords {
    /// Lays the record of `uuid` over a host's profile and state. A host Nova has no compute
    /// node record of is down: nova-scheduler's `HostManager` skips such a provider.
    /// Returns whether the profile changed.
    fn lay_over(
        &self,
        profile: &mut Arc<HostProfile>,
        up: &mut bool,
        disabled: &mut bool,
        forced_down: &mut bool,
    ) -> bool {
        let Some(record) = self.by_uuid.get(&*profile.uuid) else {
            *up = false;
            return false;
        };
        *up = record.up;
        *disabled = record.disabled;
        *forced_down = record.forced_down;
        let same =
            profile.host == record.service_host && profile.facts.as_ref() == Some(&record.facts);
        if !same {
            let p = Arc::make_mut(profile);
            p.encoded.clear();
            // A name laid over one laid before may also differ from the ledger's: counted too.
            p.renamed |= p.host != record.service_host;
            p.host = record.service_host.clone();
            p.facts = Some(record.facts.clone());
        }
        !same
    }
}

/// A service's state as a `service.update` said it, newer than the read of Nova's records
/// laid over the table ([`HostTable::note_service`]).
#[derive(Clone, Copy, Debug, PartialEq)]
struct ServiceNote {
    disabled: bool,
    forced_down: bool,
    at_ms: i64,
}

#[derive(Default)]
struct Inner {
    /// Nova's records, when Parasol reads them; `None` until the first read.
    records: Option<Arc<NodeRecords>>,
    /// `service.update`s newer than `records`, by service host: laid over them until a read
    /// that began after the note replaces them.
    notes: HashMap<Arc<str>, ServiceNote>,
    /// Nova's membership of its aggregates, laid over the Placement aggregates of every
    /// host loaded ([`HostTable::set_members`]).
    members: Arc<AggregateMembers>,
    hosts: Vec<HostState>,
    /// `rows[slot]` is `HostScan::of(&hosts[slot])`, rebuilt by [`Inner::touch`] after every
    /// change of a host: what a full scan reads, dense.
    rows: Vec<HostScan>,
    /// Reserved and not yet finalized, per slot: the amounts and the number of claims.
    pending: Vec<(Resources, i64)>,
    slot_of: FastMap<HostId, usize>,
    by_uuid: FastMap<Arc<str>, usize>,
    /// Service host name → its slots (one per node; several for an Ironic-style service).
    by_host: FastMap<Arc<str>, Vec<usize>>,
}

/// Whether `used` is over `usable` in some class.
fn exceeds(used: &Resources, usable: &Resources) -> bool {
    used.nonzero().any(|(c, u)| u > usable.get(c))
}

/// The table's indexes hash with foldhash (seeded per process) instead of SipHash: every
/// host-state event and claim looks hosts up by id or uuid, and SipHash was 1.6 % of a
/// notification backlog drain's instructions (BENCHMARKS.md). Their keys come from Nova and
/// the hosts' own events, not from anonymous callers.
pub(crate) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

impl Inner {
    /// Lays a `service.update` newer than Nova's records over a host of `host`.
    fn lay_note(&self, host: &str, disabled: &mut bool, forced_down: &mut bool) {
        if let Some(note) = self.notes.get(host) {
            *disabled = note.disabled;
            *forced_down = note.forced_down;
        }
    }

    /// Lays Nova's aggregate membership over a profile's aggregates (by its service host,
    /// so after Nova's records named it). Returns whether the profile changed.
    fn lay_members(&self, profile: &mut Arc<HostProfile>) -> bool {
        let named_by_nova = profile.facts.is_some();
        match self
            .members
            .lay_over(&profile.host, named_by_nova, &profile.aggregates)
        {
            Some(aggregates) => {
                let p = Arc::make_mut(profile);
                p.encoded.clear();
                p.aggregates = aggregates;
                true
            }
            None => false,
        }
    }

    /// Rebuilds the scan row of `slot` after its host changed.
    #[inline]
    fn touch(&mut self, slot: usize) {
        self.rows[slot] = HostScan::of(&self.hosts[slot]);
    }

    fn index(&mut self, slot: usize) {
        let h = &self.hosts[slot];
        self.slot_of.insert(h.id, slot);
        self.by_uuid.insert(h.profile.uuid.clone(), slot);
        let nodes = self.by_host.entry(h.profile.host.clone()).or_default();
        if !nodes.contains(&slot) {
            nodes.push(slot);
        }
    }

    fn unindex_names(&mut self, slot: usize) {
        let h = &self.hosts[slot];
        self.by_uuid.remove(&h.profile.uuid);
        if let Some(nodes) = self.by_host.get_mut(&h.profile.host) {
            nodes.retain(|s| *s != slot);
            if nodes.is_empty() {
                self.by_host.remove(&h.profile.host);
            }
        }
    }
}

/// The live table. Cheap to share behind an `Arc`.
#[derive(Default)]
pub struct HostTable {
    inner: RwLock<Inner>,
    /// Signalled when a host Nova's records do not know is loaded (a new compute node):
    /// the `[nova_db]` refresh reads again without waiting for its interval.
    missing_record: tokio::sync::Notify,
    /// Bumped whenever a host is added or its profile changes (samplers re-read their list).
    generation: AtomicU64,
    /// nova-compute services announced by `service.create`, with when (ms), until a node of
    /// theirs is loaded with Nova's record ([`HostTable::announced_not_loaded`]).
    announced: parking_lot::Mutex<HashMap<String, i64>>,
    /// Signalled by each announcement: the Placement sync loads the new node without
    /// waiting for its interval ([`HostTable::announcement`]).
    announcement: tokio::sync::Notify,
    /// Whether a Placement sync runs and keeps the parts of consumers held on several
    /// providers (`<consumer>@<provider>`) in step with Placement: then an evacuation's held
    /// source is kept as such a part ([`HostTable::follows_placement`]).
    follows_placement: std::sync::atomic::AtomicBool,
    /// Failed operations waiting for the Placement sync task's read (`failed`).
    failed: failed::FailedChecks,
    /// The order of each host's host-state events, and the registration counters.
    events: events::EventClocks,
    /// What became of the usage readings (`table::usage`).
    usage: UsageCounters,
}

impl std::fmt::Debug for HostTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostTable")
            .field("hosts", &self.len())
            .finish()
    }
}

impl HostTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of hosts.
    pub fn len(&self) -> usize {
        self.inner.read().hosts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Changes whenever a host is added or re-registered with another profile.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Loads or refreshes hosts from ledger rows: a host's usage becomes what the ledger has
    /// committed plus what is reserved here and not finalized. New hosts are appended.
    pub fn load(&self, rows: impl IntoIterator<Item = HostState>) {
        let mut inner = self.inner.write();
        self.load_locked(&mut inner, rows);
    }

    fn load_locked(&self, inner: &mut Inner, rows: impl IntoIterator<Item = HostState>) {
        let mut changed = false;
        let mut missing = false;
        for mut row in rows {
            if let Some(records) = inner.records.clone() {
                records.lay_over(
                    &mut row.profile,
                    &mut row.up,
                    &mut row.disabled,
                    &mut row.forced_down,
                );
                inner.lay_note(&row.profile.host, &mut row.disabled, &mut row.forced_down);
                missing |= !records.by_uuid.contains_key(&*row.profile.uuid);
            }
            inner.lay_members(&mut row.profile);
            match inner.slot_of.get(&row.id).copied() {
                Some(slot) => {
                    let (pending, claims) = inner.pending[slot];
                    let old = &inner.hosts[slot].profile;
                    if *old != row.profile {
                        // The name indexes change only with the names (a re-registration
                        // mostly changes capacity).
                        let renamed = old.uuid != row.profile.uuid || old.host != row.profile.host;
                        if renamed {
                            inner.unindex_names(slot);
                        }
                        inner.hosts[slot].profile = row.profile.clone();
                        if renamed {
                            inner.index(slot);
                        }
                        changed = true;
                    }
                    let h = &mut inner.hosts[slot];
                    h.used = row.used + pending;
                    h.num_instances = row.num_instances + claims;
                    h.num_io_ops = row.num_io_ops + claims;
                    h.up = row.up;
                    h.disabled = row.disabled;
                    h.forced_down = row.forced_down;
                    h.last_seen_ms = row.last_seen_ms;
                    inner.touch(slot);
                }
                None => {
                    let slot = inner.hosts.len();
                    inner.hosts.push(row);
                    inner.pending.push((Resources::ZERO, 0));
                    let row = HostScan::of(&inner.hosts[slot]);
                    inner.rows.push(row);
                    inner.index(slot);
                    changed = true;
                }
            }
        }
        if changed {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        if missing {
            self.missing_record.notify_one();
        }
    }

    /// A host re-registered by this process: its new profile and liveness, with the usage,
    /// instance counts and forced-down state the table holds, taken as the ledger's row (a
    /// registration changes none of those, so the hosts need not be read back). Hosts the
    /// table does not know are skipped and returned, for the caller to reload.
    pub fn load_profiles(&self, updates: impl IntoIterator<Item = ProfilePatch>) -> Vec<HostId> {
        let mut unknown = Vec::new();
        // One write lock throughout: a claim finalized in between would otherwise be counted
        // from a stale committed usage.
        let mut inner = self.inner.write();
        let rows: Vec<HostState> = updates
            .into_iter()
            .filter_map(|patch| {
                let ProfilePatch {
                    id,
                    profile,
                    up,
                    disabled,
                    last_seen_ms,
                } = patch;
                let Some(&slot) = inner.slot_of.get(&id) else {
                    unknown.push(id);
                    return None;
                };
                let (pending, claims) = inner.pending[slot];
                let h = &inner.hosts[slot];
                Some(HostState {
                    id,
                    profile,
                    used: h.used - pending,
                    num_instances: h.num_instances - claims,
                    num_io_ops: h.num_io_ops - claims,
                    up,
                    disabled,
                    forced_down: h.forced_down,
                    last_seen_ms,
                    measured: None,
                })
            })
            .collect();
        self.load_locked(&mut inner, rows);
        unknown
    }

    /// Replaces Nova's compute-node records and lays them over every host now (and over
    /// every later load): service host, facts, and the service's up / disabled / forced-down
    /// state, which from now on come from Nova's records and the `service.update`s newer
    /// than them ([`HostTable::note_service`]).
    ///
    /// A `service.update` noted before the read began is in it and leaves; a later one stays
    /// laid over it.
    pub fn set_records(&self, records: Arc<NodeRecords>) {
        let mut inner = self.inner.write();
        let mut changed = false;
        let mut missing = false;
        inner.notes.retain(|_, note| note.at_ms >= records.began_ms);
        for slot in 0..inner.hosts.len() {
            let h = &mut inner.hosts[slot];
            let mut profile = h.profile.clone();
            let (mut disabled, mut forced_down) = (h.disabled, h.forced_down);
            let renamed =
                records.lay_over(&mut profile, &mut h.up, &mut disabled, &mut forced_down);
            inner.lay_note(&profile.host, &mut disabled, &mut forced_down);
            let h = &mut inner.hosts[slot];
            (h.disabled, h.forced_down) = (disabled, forced_down);
            missing |= !records.by_uuid.contains_key(&*profile.uuid);
            if renamed {
                // Nova's membership is by service host: the new name's.
                inner.lay_members(&mut profile);
                inner.unindex_names(slot);
                inner.hosts[slot].profile = profile;
                inner.index(slot);
                changed = true;
            }
            inner.touch(slot);
        }
        inner.records = Some(records);
        drop(inner);
        if changed {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        if missing {
            self.missing_record.notify_one();
        }
    }

    /// The uuids of Nova's compute-node records no host of the table has yet (a node whose
    /// provider Placement's sync has not loaded); empty when Parasol reads no records. With the
    /// generation and the records it was computed from, to cache it.
    pub fn nodes_not_loaded(&self) -> (u64, Option<Arc<NodeRecords>>, Vec<String>) {
        let inner = self.inner.read();
        let generation = self.generation.load(Ordering::Acquire);
        let Some(records) = inner.records.clone() else {
            return (generation, None, Vec::new());
        };
        let mut missing: Vec<String> = records
            .by_uuid
            .keys()
            .filter(|u| !inner.by_uuid.contains_key(u.as_str()))
            .cloned()
            .collect();
        missing.sort();
        (generation, Some(records), missing)
    }

    /// Nova's compute-node records laid over the hosts, when Parasol reads them.
    pub fn records(&self) -> Option<Arc<NodeRecords>> {
        self.inner.read().records.clone()
    }

    /// Resolves when Nova's records should be read again before their interval: a host
    /// without a record was loaded, or a service changed ([`HostTable::want_records`]).
    pub async fn missing_record(&self) {
        self.missing_record.notified().await
    }

    /// How many hosts have no record of Nova's laid over them: a node Placement's sync
    /// loaded since the last read of Nova's records (0 when Parasol reads none).
    pub fn hosts_without_records(&self) -> usize {
        let inner = self.inner.read();
        let Some(records) = inner.records.as_ref() else {
            return 0;
        };
        inner
            .hosts
            .iter()
            .filter(|h| !records.by_uuid.contains_key(&*h.profile.uuid))
            .count()
    }

    /// A `service.update` of nova-compute service `host` committed at `at_ms`: with Nova's
    /// records laid over the table, their read is older than this, so until a read that
    /// began after it its nodes take this state (Nova's scheduler reads the service on every
    /// call; an operator's disable counts on the next one). Without records the ledger's
    /// rows carry it and this is a no-op. The caller reloads the nodes.
    pub fn note_service(&self, host: &str, disabled: bool, forced_down: bool, at_ms: i64) {
        let mut inner = self.inner.write();
        if inner.records.is_none() {
            return;
        }
        let note = ServiceNote {
            disabled,
            forced_down,
            at_ms,
        };
        inner.notes.insert(Arc::from(host), note);
        let slots = inner.by_host.get(host).cloned().unwrap_or_default();
        for slot in slots {
            let h = &mut inner.hosts[slot];
            (h.disabled, h.forced_down) = (disabled, forced_down);
            inner.touch(slot);
        }
    }

    /// Replaces Nova's membership of its aggregates (from nova-api's casts, or read from its
    /// API database) and lays it over every host now and over every later load: a host
    /// nova-api added to an aggregate is a member on the next call, as it is for Nova's
    /// scheduler, which asks Placement on every call (nova-api writes Placement right after
    /// its cast), where Parasol's sync would see it only at its next read.
    pub fn set_members(&self, members: Arc<AggregateMembers>) {
        let mut inner = self.inner.write();
        if inner.members == members {
            return;
        }
        inner.members = members;
        let mut changed = false;
        for slot in 0..inner.hosts.len() {
            let mut profile = inner.hosts[slot].profile.clone();
            if inner.lay_members(&mut profile) {
                inner.hosts[slot].profile = profile;
                inner.touch(slot);
                changed = true;
            }
        }
        drop(inner);
        if changed {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Asks for a read of Nova's records now (a `service.update` arrived); a no-op when
    /// Parasol does not read them.
    pub fn want_records(&self) {
        self.missing_record.notify_one();
    }

    /// A nova-compute service was created at `now_ms` (`service.create`): its compute node
    /// record and resource provider are made next, in the same service start, before it
    /// takes any build — so a request that arrives meanwhile is about a cloud with one more
    /// host than the table holds.
    pub fn announce_service(&self, host: &str, now_ms: i64) {
        self.announced.lock().insert(host.to_string(), now_ms);
        self.announcement.notify_one();
        self.want_records();
    }

    /// Resolves after a `service.create` announced a compute service, a `service.update`
    /// changed one or a `service.delete` removed one (one wake-up stored when nobody waits, as
    /// `tokio::sync::Notify::notify_one`).
    pub async fn announcement(&self) {
        self.announcement.notified().await
    }

    /// A nova-compute service changed state (`service.update`: enabled, disabled, forced down
    /// or back up): the Placement sync runs without waiting for its interval. A compute that
    /// comes back after an evacuation has dropped its part of the evacuated instances'
    /// allocations (`_destroy_evacuated_instances`) by the time the operator clears its
    /// forced-down flag; the sync then releases those parts.
    pub fn want_placement_sync(&self) {
        self.announcement.notify_one();
    }

    /// Failed operations waiting for their instance's allocations to be read in Placement.
    pub fn failed(&self) -> &failed::FailedChecks {
        &self.failed
    }

    /// A Placement sync runs from now on (`placement::run_sync`): it imports and releases the
    /// parts of consumers Placement holds on several providers.
    pub fn set_follows_placement(&self) {
        self.follows_placement
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether a Placement sync keeps the parts of consumers held on several providers in
    /// step with Placement (an evacuated instance's failed source, until that compute cleans
    /// up): the ledger keeps such a part only then, since nothing else would release it.
    pub fn follows_placement(&self) -> bool {
        self.follows_placement
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// A nova-compute service was deleted (`service.delete`): no node of it is awaited, and
    /// the Placement sync runs without waiting for its interval (nova-api deleted the
    /// service's providers before the service: the sync takes their hosts out).
    pub fn forget_service(&self, host: &str) {
        self.announced.lock().remove(host);
        self.want_placement_sync();
    }

    /// The services announced at or after `since_ms` that have no node in the table yet
    /// (with Nova's record laid over it, when Parasol reads Nova's records). Services whose
    /// node is loaded, and those announced before `since_ms`, are forgotten.
    pub fn announced_not_loaded(&self, since_ms: i64) -> Vec<String> {
        let mut announced = self.announced.lock();
        if announced.is_empty() {
            return Vec::new();
        }
        let inner = self.inner.read();
        announced.retain(|host, at| {
            let loaded = inner.by_host.get(host.as_str()).is_some_and(|slots| {
                slots.iter().any(|s| {
                    inner
                        .records
                        .as_ref()
                        .is_none_or(|r| r.by_uuid.contains_key(&*inner.hosts[*s].profile.uuid))
                })
            });
            !loaded && *at >= since_ms
        });
        let mut hosts: Vec<String> = announced.keys().cloned().collect();
        hosts.sort();
        hosts
    }

    /// Drops hosts the ledger no longer has (a compute node retired beside its re-created
    /// successor, whose last allocation went: migration 0014), unless a claim of this
    /// process is in flight on one (kept until it settles). The last host takes the slot.
    pub fn forget(&self, ids: &[HostId]) {
        let mut inner = self.inner.write();
        let mut changed = false;
        for id in ids {
            let Some(slot) = inner.slot_of.get(id).copied() else {
                continue;
            };
            if inner.pending[slot].1 != 0 {
                continue;
            }
            let last = inner.hosts.len() - 1;
            inner.unindex_names(slot);
            inner.slot_of.remove(id);
            if slot != last {
                inner.unindex_names(last);
                inner.hosts.swap(slot, last);
                inner.rows.swap(slot, last);
                inner.pending.swap(slot, last);
            }
            inner.hosts.pop();
            inner.rows.pop();
            inner.pending.pop();
            if slot != last {
                inner.index(slot);
            }
            changed = true;
        }
        if changed {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Sets a host's liveness (a heartbeat or a service update the ledger has committed).
    pub fn set_liveness(
        &self,
        id: HostId,
        up: bool,
        disabled: bool,
        forced_down: bool,
        last_seen_ms: i64,
    ) {
        let mut inner = self.inner.write();
        let from_nova = inner.records.is_some();
        if let Some(slot) = inner.slot_of.get(&id).copied() {
            let h = &mut inner.hosts[slot];
            if !from_nova {
                h.up = up;
                h.disabled = disabled;
                h.forced_down = forced_down;
            }
            h.last_seen_ms = last_seen_ms;
            inner.touch(slot);
        }
    }

    /// Checks that `demand` fits on `host` now and reserves it, atomically: no two reserves
    /// can take the same room.
    pub fn reserve(&self, host: HostId, demand: &Resources) -> Reserve {
        let mut inner = self.inner.write();
        let Some(slot) = inner.slot_of.get(&host).copied() else {
            return Reserve::NoRoom;
        };
        if !inner.hosts[slot].fits(demand) {
            return Reserve::NoRoom;
        }
        inner.hosts[slot].consume(demand);
        inner.touch(slot);
        let (amount, claims) = inner.pending[slot];
        inner.pending[slot] = (amount + *demand, claims + 1);
        Reserve::Reserved
    }

    /// The ledger committed a reserved claim: it is no longer pending.
    pub fn finalize(&self, host: HostId, demand: &Resources) {
        let mut inner = self.inner.write();
        if let Some(slot) = inner.slot_of.get(&host).copied() {
            let (amount, claims) = inner.pending[slot];
            inner.pending[slot] = (amount - *demand, claims - 1);
        }
    }

    /// The ledger did not commit a reserved claim: give the room back.
    pub fn undo(&self, host: HostId, demand: &Resources) {
        let mut inner = self.inner.write();
        if let Some(slot) = inner.slot_of.get(&host).copied() {
            let (amount, claims) = inner.pending[slot];
            inner.pending[slot] = (amount - *demand, claims - 1);
            let h = &mut inner.hosts[slot];
            h.used = h.used - *demand;
            h.num_instances = (h.num_instances - 1).max(0);
            h.num_io_ops = (h.num_io_ops - 1).max(0);
            if let Some(measured) = &mut h.measured {
                Arc::make_mut(measured).remove_placed(demand);
            }
            inner.touch(slot);
        }
    }

    /// Removes a committed allocation of `demand` from `host` (a release the ledger committed).
    pub fn remove(&self, host: HostId, demand: &Resources) {
        let mut inner = self.inner.write();
        if let Some(slot) = inner.slot_of.get(&host).copied() {
            let h = &mut inner.hosts[slot];
            h.used = h.used - *demand;
            h.num_instances = (h.num_instances - 1).max(0);
            h.num_io_ops = (h.num_io_ops - 1).max(0);
            inner.touch(slot);
        }
    }

    /// Runs `f` over every host in id order, in place (the `filter` backend's read).
    pub fn with_hosts<R>(&self, f: impl FnOnce(&[HostState]) -> R) -> R {
        f(&self.inner.read().hosts)
    }

    /// Runs `f` over every host and its scan row (`rows[i]` is `hosts[i]`'s), in place: the
    /// `filter` backend's read.
    pub fn with_scan<R>(&self, f: impl FnOnce(&[HostState], &[HostScan]) -> R) -> R {
        let inner = self.inner.read();
        f(&inner.hosts, &inner.rows)
    }

    /// How many hosts hold more than they can give in some class, counting what the ledger
    /// has committed to them: the `parasol_oversubscribed_hosts` gauge. A claim reserved here
    /// and not committed yet is left out: once another process has filled the host, a reload
    /// shows the reservation on top of the other's commit until the ledger declines it, and
    /// the host is not over for that.
    pub fn oversubscribed(&self) -> usize {
        let inner = self.inner.read();
        inner
            .hosts
            .iter()
            .zip(&inner.pending)
            .filter(|(h, (reserved, _))| exceeds(&(h.used - *reserved), h.usable()))
            .count()
    }

    /// A copy of every host (a `caching`/`asc` snapshot).
    pub fn snapshot(&self) -> Vec<HostState> {
        self.inner.read().hosts.clone()
    }

    /// A copy of every host and its scan row, taken under one read lock (a `caching`/`asc`
    /// snapshot that its workers scan as `filter` scans the table).
    pub fn snapshot_scan(&self) -> (Vec<HostState>, Vec<HostScan>) {
        let inner = self.inner.read();
        (inner.hosts.clone(), inner.rows.clone())
    }

    /// Copies the hosts at `slots` into `out` (an `apsr` sample); slots beyond the table are
    /// skipped.
    pub fn sample_into(&self, slots: impl IntoIterator<Item = usize>, out: &mut Vec<HostState>) {
        out.clear();
        let inner = self.inner.read();
        out.extend(
            slots
                .into_iter()
                .filter_map(|s| inner.hosts.get(s).cloned()),
        );
    }

    /// One host's current state.
    pub fn get(&self, id: HostId) -> Option<HostState> {
        let inner = self.inner.read();
        inner.slot_of.get(&id).map(|s| inner.hosts[*s].clone())
    }

    /// The host with this compute-node (provider) uuid.
    pub fn by_uuid(&self, uuid: &str) -> Option<HostState> {
        let inner = self.inner.read();
        inner.by_uuid.get(uuid).map(|s| inner.hosts[*s].clone())
    }

    /// The id of the host with this compute-node (provider) uuid.
    pub fn id_of_uuid(&self, uuid: &str) -> Option<HostId> {
        let inner = self.inner.read();
        inner.by_uuid.get(uuid).map(|s| inner.hosts[*s].id)
    }

    /// What the ledger holds on the host with this compute-node (provider) uuid.
    pub fn used_of_uuid(&self, uuid: &str) -> Option<Resources> {
        let inner = self.inner.read();
        inner.by_uuid.get(uuid).map(|s| inner.hosts[*s].used)
    }

    /// The host of this service host and, when given, node; without a node the first of the
    /// service's nodes.
    pub fn by_name(&self, host: &str, node: Option<&str>) -> Option<HostState> {
        let inner = self.inner.read();
        let slots = inner.by_host.get(host)?;
        let found = slots
            .iter()
            .map(|s| &inner.hosts[*s])
            .filter(|h| node.is_none_or(|n| *h.profile.node == *n))
            .min_by_key(|h| h.id)?;
        Some(found.clone())
    }

    /// Every node of this service host (one, or several for an Ironic-style service), in
    /// id order.
    pub fn ids_of_service(&self, host: &str) -> Vec<HostId> {
        let inner = self.inner.read();
        let mut ids: Vec<HostId> = inner
            .by_host
            .get(host)
            .map(|slots| slots.iter().map(|s| inner.hosts[*s].id).collect())
            .unwrap_or_default();
        ids.sort();
        ids
    }

    /// Ids of every host, in table order.
    pub fn ids(&self) -> Vec<HostId> {
        self.inner.read().hosts.iter().map(|h| h.id).collect()
    }

    /// Reserved and not finalized, per host (for tests and `/v1/hosts`).
    pub fn pending(&self, id: HostId) -> Option<Resources> {
        let inner = self.inner.read();
        inner.slot_of.get(&id).map(|s| inner.pending[*s].0)
    }
}

#[cfg(test)]
mod tests;
