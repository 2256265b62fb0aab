//! What Parasol knows of the cloud besides its hosts: Nova's host aggregates with their
//! metadata (which the request filters read: tenant isolation, zones, trait isolation), learnt
//! from nova-api's `update_aggregates` / `delete_aggregate` casts to the schedulers, and the
//! lowest nova-compute service version when Nova's records are read.

use crate::domain::HostAggregateMetadata;
use crate::nova::Aggregate;
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// The aggregates and facts the request filters need. Shared by every call.
#[derive(Debug, Default)]
pub struct Cloud {
    // parking_lot: held to copy or replace entries, never across an await.
    aggregates: RwLock<BTreeMap<String, Aggregate>>,
    /// The aggregates' metadata merged per host, rebuilt on each change (read per call by
    /// the isolation filters).
    host_metadata: RwLock<Arc<HostAggregateMetadata>>,
    /// The lowest nova-compute service version, or -1 when unknown.
    min_compute_version: AtomicI64,
}

impl Cloud {
    pub fn new() -> Self {
        Cloud {
            aggregates: RwLock::default(),
            host_metadata: RwLock::default(),
            min_compute_version: AtomicI64::new(-1),
        }
    }

    /// Adds or replaces aggregates (`update_aggregates`: Nova sends each changed aggregate
    /// whole, with its metadata).
    pub fn update_aggregates(&self, aggregates: impl IntoIterator<Item = Aggregate>) {
        let mut map = self.aggregates.write();
        for a in aggregates {
            map.insert(a.uuid.clone(), a);
        }
        self.remerge(&map);
    }

    /// Forgets an aggregate (`delete_aggregate`).
    pub fn delete_aggregate(&self, uuid: &str) {
        let mut map = self.aggregates.write();
        map.remove(uuid);
        self.remerge(&map);
    }

    /// Each host's aggregate metadata merged (Nova's `aggregate_metadata_get_by_host`).
    pub fn host_metadata(&self) -> Arc<HostAggregateMetadata> {
        self.host_metadata.read().clone()
    }

    /// Rebuilds [`Cloud::host_metadata`] while the aggregates' write lock is held, so two
    /// changes cannot store their merges out of order.
    fn remerge(&self, map: &BTreeMap<String, Aggregate>) {
        let merged =
            HostAggregateMetadata::new(map.values().map(|a| (a.hosts.as_slice(), &a.metadata)));
        *self.host_metadata.write() = Arc::new(merged);
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
        cloud.set_min_compute_version(Some(73));
        assert_eq!(cloud.min_compute_version(), Some(73));
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
