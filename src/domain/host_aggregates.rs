//! The metadata of each host's aggregates, merged (Nova's `aggregate_metadata_get_by_host`),
//! which the per-aggregate isolation filters read.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Metadata values of one host: key → every value of its aggregates under that key.
pub type MergedMetadata = BTreeMap<String, BTreeSet<String>>;

/// Per service host (Nova's `HostState.aggregates` are by service host), the metadata of
/// every aggregate it is in, values split at commas and trimmed, as Nova's
/// `utils.aggregate_metadata_get_by_host(host_state)`. Hosts in no aggregate with metadata
/// have no entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HostAggregateMetadata {
    by_host: HashMap<String, MergedMetadata>,
    /// Each key's values as the aggregates hold them, not split (Nova's
    /// `aggregate_values_from_key`, which the per-aggregate limits read).
    raw_by_host: HashMap<String, MergedMetadata>,
}

impl HostAggregateMetadata {
    /// Merges `(hosts, metadata)` of every aggregate.
    pub fn new<'a>(
        aggregates: impl IntoIterator<Item = (&'a [String], &'a BTreeMap<String, String>)>,
    ) -> Self {
        let mut by_host: HashMap<String, MergedMetadata> = HashMap::new();
        let mut raw_by_host: HashMap<String, MergedMetadata> = HashMap::new();
        for (hosts, metadata) in aggregates {
            if metadata.is_empty() {
                continue;
            }
            for host in hosts {
                let raw = raw_by_host.entry(host.clone()).or_default();
                for (key, value) in metadata {
                    raw.entry(key.clone()).or_default().insert(value.clone());
                }
                let merged = by_host.entry(host.clone()).or_default();
                for (key, value) in metadata {
                    merged
                        .entry(key.clone())
                        .or_default()
                        .extend(value.split(',').map(|v| v.trim().to_string()));
                }
            }
        }
        HostAggregateMetadata {
            by_host,
            raw_by_host,
        }
    }

    /// The values of `key` in the aggregates of `host`, each as the aggregate holds it (Nova's
    /// `aggregate_values_from_key`); `None` when no aggregate of the host has the key.
    pub fn values_of(&self, host: &str, key: &str) -> Option<&BTreeSet<String>> {
        self.raw_by_host.get(host)?.get(key)
    }

    /// The merged metadata of service host `host`; `None` when it has none.
    pub fn of(&self, host: &str) -> Option<&MergedMetadata> {
        self.by_host.get(host)
    }

    /// True when no host has aggregate metadata (the isolation filters pass every host).
    pub fn is_empty(&self) -> bool {
        self.by_host.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn hosts(names: &[&str]) -> Vec<String> {
        names.iter().map(|h| h.to_string()).collect()
    }

    #[test]
    fn merges_every_aggregate_of_a_host_split_at_commas() {
        let a = (hosts(&["host1", "host2"]), meta(&[("os_type", "linux")]));
        let b = (
            hosts(&["host1"]),
            meta(&[("os_type", " windows , bsd"), ("ssd", "true")]),
        );
        let empty = (hosts(&["host3"]), meta(&[]));
        let all = [a, b, empty];
        let m = HostAggregateMetadata::new(all.iter().map(|(h, m)| (h.as_slice(), m)));
        let set = |vals: &[&str]| vals.iter().map(|v| v.to_string()).collect::<BTreeSet<_>>();
        let host1 = m.of("host1").unwrap();
        assert_eq!(host1["os_type"], set(&["linux", "windows", "bsd"]));
        assert_eq!(host1["ssd"], set(&["true"]));
        assert_eq!(m.of("host2").unwrap().len(), 1);
        assert_eq!(
            m.of("host3"),
            None,
            "an aggregate without metadata adds nothing"
        );
        assert_eq!(m.of("host4"), None);
        assert_eq!(
            m.values_of("host1", "os_type"),
            Some(&set(&["linux", " windows , bsd"])),
            "raw values stay whole"
        );
        assert_eq!(m.values_of("host2", "ssd"), None);
        assert!(!m.is_empty());
        assert!(HostAggregateMetadata::new(std::iter::empty()).is_empty());
    }
}
