//! What Parasol knows of the cloud besides its hosts: Nova's host aggregates with their
//! metadata (which the request filters read: tenant isolation, zones, trait isolation), learnt
//! from nova-api's `update_aggregates` / `delete_aggregate` casts to the schedulers, and the
//! lowest nova-compute service version when Nova's records are read. With `[nova_db]
//! api_database_url`, the aggregates are first loaded from Nova's API database at start
//! ([`Cloud::load_aggregates`]), as nova-scheduler's `HostManager._init_aggregates` does.
//! Every change also lays Nova's membership of its aggregates over the live table's
//! Placement aggregates ([`crate::domain::AggregateMembers`]).

use crate::domain::{AggregateMembers, HostAggregateMetadata, HostZones};
use crate::nova::Aggregate;
use crate::table::HostTable;
use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

/// The aggregates and facts the request filters need. Shared by every call.
#[derive(Debug, Default)]
pub struct Cloud {
    // parking_lot: held to copy or replace entries, never across an await.
    aggregates: RwLock<BTreeMap<String, Aggregate>>,
    /// The hosts' zones from the aggregates above, rebuilt on every change (read per call);
    /// `None` while no aggregate has a zone.
    zones: RwLock<Option<Arc<HostZones>>>,
    /// The aggregates' metadata merged per host, rebuilt on each change (read per call by
    /// the isolation filters).
    host_metadata: RwLock<Arc<HostAggregateMetadata>>,
    /// The lowest nova-compute service version, or -1 when unknown.
    min_compute_version: AtomicI64,
    /// Counts the casts; changed only with the aggregates' write lock held.
    casts: AtomicU64,
    /// Per aggregate uuid, the count of the last cast that updated or deleted it, so that a
    /// load read before that cast does not undo it (written with the aggregates' lock held).
    cast_at: parking_lot::Mutex<HashMap<String, u64>>,
    /// Whether the aggregates were loaded from Nova's API database (`/healthz`).
    loaded: AtomicBool,
    /// The live table Nova's membership is laid over, when there is one.
    table: Option<Arc<HostTable>>,
}

impl Cloud {
    pub fn new() -> Self {
        Cloud {
            aggregates: RwLock::default(),
            zones: RwLock::default(),
            host_metadata: RwLock::default(),
            min_compute_version: AtomicI64::new(-1),
            casts: AtomicU64::new(0),
            cast_at: parking_lot::Mutex::default(),
            loaded: AtomicBool::new(false),
            table: None,
        }
    }

    /// A cloud view that lays Nova's aggregate membership over `table`'s hosts.
    pub fn with_table(table: Arc<HostTable>) -> Self {
        Cloud {
            table: Some(table),
            ..Cloud::new()
        }
    }

    /// How many casts were applied so far: taken before reading the aggregates from Nova's
    /// database, and given back to [`Cloud::load_aggregates`].
    pub fn casts_applied(&self) -> u64 {
        let _map = self.aggregates.read();
        self.casts.load(Ordering::SeqCst)
    }

    /// Replaces every aggregate with those read from Nova's API database (`loaded`), except
    /// the aggregates a cast updated or deleted after `casts_before_read` (what
    /// [`Cloud::casts_applied`] said before the read began): the cast is newer than the read,
    /// so it stays. Returns how many aggregates were kept from such casts.
    pub fn load_aggregates(&self, casts_before_read: u64, loaded: Vec<Aggregate>) -> usize {
        let mut map = self.aggregates.write();
        let cast_at = self.cast_at.lock();
        let newer = |uuid: &str| cast_at.get(uuid).is_some_and(|&n| n > casts_before_read);
        let mut next: BTreeMap<String, Aggregate> = loaded
            .into_iter()
            .filter(|a| !newer(&a.uuid))
            .map(|a| (a.uuid.clone(), a))
            .collect();
        let mut kept = 0;
        for (uuid, &n) in cast_at.iter() {
            if n > casts_before_read {
                kept += 1;
                if let Some(a) = map.get(uuid) {
                    next.insert(uuid.clone(), a.clone());
                }
            }
        }
        *map = next;
        self.changed(&map);
        self.loaded.store(true, Ordering::Relaxed);
        kept
    }

    /// Whether [`Cloud::load_aggregates`] ran (else they are known only from casts).
    pub fn aggregates_loaded(&self) -> bool {
        self.loaded.load(Ordering::Relaxed)
    }

    /// How many aggregates are known.
    pub fn aggregate_count(&self) -> usize {
        self.aggregates.read().len()
    }

    /// Records a cast touching `uuid`; called with the aggregates' write lock held.
    fn cast(&self, uuid: &str) {
        let n = self.casts.fetch_add(1, Ordering::SeqCst) + 1;
        self.cast_at.lock().insert(uuid.to_string(), n);
    }

    /// Adds or replaces aggregates (`update_aggregates`: Nova sends each changed aggregate
    /// whole, with its metadata).
    pub fn update_aggregates(&self, aggregates: impl IntoIterator<Item = Aggregate>) {
        let mut map = self.aggregates.write();
        for a in aggregates {
            self.cast(&a.uuid);
            map.insert(a.uuid.clone(), a);
        }
        self.changed(&map);
    }

    /// Forgets an aggregate (`delete_aggregate`).
    pub fn delete_aggregate(&self, uuid: &str) {
        let mut map = self.aggregates.write();
        self.cast(uuid);
        map.remove(uuid);
        self.changed(&map);
    }

    /// Each host's zone from the aggregates (Nova's zones are aggregate metadata); `None`
    /// while no aggregate has a zone.
    pub fn host_zones(&self) -> Option<Arc<HostZones>> {
        self.zones.read().clone()
    }

    /// Rebuilds the zones and the merged metadata; called with the aggregates' write lock
    /// held, so that they and the aggregates change together and two changes cannot store
    /// their results out of order.
    fn changed(&self, map: &BTreeMap<String, Aggregate>) {
        let zones = HostZones::new(map.values().map(|a| (a.hosts.as_slice(), &a.metadata)));
        *self.zones.write() = (!zones.is_empty()).then(|| Arc::new(zones));
        let merged =
            HostAggregateMetadata::new(map.values().map(|a| (a.hosts.as_slice(), &a.metadata)));
        *self.host_metadata.write() = Arc::new(merged);
        if let Some(table) = &self.table {
            let members =
                AggregateMembers::new(map.values().map(|a| (a.uuid.as_str(), a.hosts.as_slice())));
            table.set_members(Arc::new(members));
        }
    }

    /// Each host's aggregate metadata merged (Nova's `aggregate_metadata_get_by_host`).
    pub fn host_metadata(&self) -> Arc<HostAggregateMetadata> {
        self.host_metadata.read().clone()
    }

    /// Every aggregate known, by uuid.
    pub fn aggregates(&self) -> Vec<Aggregate> {
        self.aggregates.read().values().cloned().collect()
    }

    pub fn set_min_compute_version(&self, version: Option<i64>) {
        self.min_compute_version
            .store(version.unwrap_or(-1), Ordering::Relaxed);
    }

    pub fn min_compute_version(&self) -> Option<i64> {
        let v = self.min_compute_version.load(Ordering::Relaxed);
        (v >= 0).then_some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aggregate(uuid: &str, key: &str, value: &str) -> Aggregate {
        Aggregate {
            uuid: uuid.into(),
            metadata: [(key.to_string(), value.to_string())].into(),
            hosts: Vec::new(),
        }
    }

    #[test]
    fn updates_replace_whole_aggregates_and_deletes_forget_them() {
        let cloud = Cloud::new();
        cloud.update_aggregates([aggregate("a", "availability_zone", "az1")]);
        cloud.update_aggregates([
            aggregate("a", "filter_tenant_id", "p1"),
            aggregate("b", "availability_zone", "az2"),
        ]);
        let all = cloud.aggregates();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0], aggregate("a", "filter_tenant_id", "p1"));
        cloud.delete_aggregate("a");
        assert_eq!(
            cloud.aggregates(),
            [aggregate("b", "availability_zone", "az2")]
        );
        assert_eq!(cloud.min_compute_version(), None);
        // "b" lists no host: no host has a zone.
        assert!(cloud.host_zones().is_none());
        cloud.set_min_compute_version(Some(73));
        assert_eq!(cloud.min_compute_version(), Some(73));
    }

    #[test]
    fn the_hosts_zones_follow_every_aggregate_change() {
        use crate::domain::{HostId, HostProfile, HostState};
        let host = |name: &str| {
            HostState::new(
                HostId(1),
                Arc::new(HostProfile::new(name, name, "u", "nova", Vec::new())),
            )
        };
        let cloud = Cloud::new();
        let mut zone2 = aggregate("z", "availability_zone", "zone2");
        zone2.hosts = vec!["host2".into()];
        cloud.update_aggregates([zone2.clone()]);
        let zones = cloud.host_zones().expect("a zone");
        assert_eq!(zones.zone_of(&host("host2")), "zone2");
        assert_eq!(zones.zone_of(&host("host1")), "nova");
        // The host moves to another aggregate's zone.
        zone2.hosts.clear();
        let mut zone1 = aggregate("y", "availability_zone", "zone1");
        zone1.hosts = vec!["host2".into()];
        cloud.update_aggregates([zone2, zone1]);
        assert_eq!(cloud.host_zones().unwrap().zone_of(&host("host2")), "zone1");
        cloud.delete_aggregate("y");
        assert!(cloud.host_zones().is_none());
    }

    #[test]
    fn a_load_replaces_every_aggregate_but_those_cast_during_its_read() {
        let cloud = Cloud::new();
        cloud.update_aggregates([aggregate("stale", "availability_zone", "old")]);
        assert!(!cloud.aggregates_loaded());
        let before = cloud.casts_applied();
        // Casts arriving while the database is read: they are newer than the read.
        cloud.update_aggregates([aggregate("a", "availability_zone", "cast")]);
        cloud.delete_aggregate("b");
        let kept = cloud.load_aggregates(
            before,
            vec![
                aggregate("a", "availability_zone", "read"),
                aggregate("b", "availability_zone", "read"),
                aggregate("c", "availability_zone", "read"),
            ],
        );
        assert_eq!(kept, 2);
        assert!(cloud.aggregates_loaded());
        assert_eq!(
            cloud.aggregates(),
            [
                aggregate("a", "availability_zone", "cast"),
                aggregate("c", "availability_zone", "read"),
            ],
            "\"stale\" is not in Nova's database; the casts of a and b stay"
        );
        // A later load, with no cast during its read, is taken whole.
        let before = cloud.casts_applied();
        assert_eq!(
            cloud.load_aggregates(before, vec![aggregate("b", "k", "v")]),
            0
        );
        assert_eq!(cloud.aggregates(), [aggregate("b", "k", "v")]);
    }

    #[test]
    fn host_metadata_follows_updates_and_deletes() {
        let cloud = Cloud::new();
        assert!(cloud.host_metadata().is_empty());
        let mut a = aggregate("a", "filter_tenant_id", "p1");
        a.hosts = vec!["host1".into()];
        cloud.update_aggregates([a.clone()]);
        let merged = cloud.host_metadata();
        assert!(merged.of("host1").unwrap()["filter_tenant_id"].contains("p1"));
        a.hosts = vec!["host2".into()];
        cloud.update_aggregates([a]);
        assert_eq!(
            cloud.host_metadata().of("host1"),
            None,
            "host1 left the aggregate"
        );
        assert!(cloud.host_metadata().of("host2").is_some());
        cloud.delete_aggregate("a");
        assert!(cloud.host_metadata().is_empty());
    }
}
