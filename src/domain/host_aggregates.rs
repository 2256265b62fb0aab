//! The metadata of each host's aggregates, merged (Nova's `aggregate_metadata_get_by_host`),
//! which the per-aggregate isolation filters read; and Nova's membership of its aggregates,
//! which Parasol lays over the Placement aggregates its syncs read ([`AggregateMembers`]).

use super::markers::{AggregateId, Aggregates, Mark};
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

/// Nova's membership of its own aggregates, by service host: what nova-api writes into
/// Placement right after it casts the change to the schedulers (`API.add_host_to_aggregate`
/// casts `update_aggregates`, then `aggregate_add_host` adds the aggregate's uuid to the
/// host's provider; removal the other way round). Nova's scheduler reads Placement on every
/// call, so it sees the change at once; Parasol reads Placement only in its syncs, so the
/// live table lays this over the aggregates of the last sync (`HostTable::set_members`):
/// for every aggregate Nova has, a node is a member exactly when its service host is in the
/// aggregate's hosts. Placement aggregates Nova does not have (a sharing provider's, a
/// routed network segment's) stay as Placement said.
///
/// A service with several nodes (Ironic) is not supported in aggregates by Nova (nova-api
/// mirrors the membership to its first node only; `nova-manage placement sync_aggregates`
/// refuses it); Parasol counts every node of the service, as Nova's own aggregate filters
/// (by service host) do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AggregateMembers {
    /// Every aggregate Nova has, sorted.
    known: Vec<AggregateId>,
    /// Per service host, the aggregates it is in, sorted.
    by_host: HashMap<String, Vec<AggregateId>>,
}

impl AggregateMembers {
    /// From `(uuid, hosts)` of every aggregate Nova has.
    pub fn new<'a>(aggregates: impl IntoIterator<Item = (&'a str, &'a [String])>) -> Self {
        let mut known = Vec::new();
        let mut by_host: HashMap<String, Vec<AggregateId>> = HashMap::new();
        for (uuid, hosts) in aggregates {
            let id = AggregateId::intern(uuid);
            known.push(id);
            for host in hosts {
                by_host.entry(host.clone()).or_default().push(id);
            }
        }
        known.sort_unstable();
        known.dedup();
        for ids in by_host.values_mut() {
            ids.sort_unstable();
            ids.dedup();
        }
        AggregateMembers { known, by_host }
    }

    /// The aggregates of a node of service host `host` with Nova's membership laid over
    /// `placement`'s (what the last sync read); `None` when they already agree, or when
    /// `host` may not be Nova's name for the service: it is in none of Nova's aggregates and
    /// not `named_by_nova` (its name read from Nova's records). A node known only by its
    /// Placement provider name (a libvirt FQDN where the service is `CONF.host`'s short name)
    /// would otherwise lose the memberships Placement gives it.
    pub fn lay_over(
        &self,
        host: &str,
        named_by_nova: bool,
        placement: &Aggregates,
    ) -> Option<Aggregates> {
        if self.known.is_empty() {
            return None;
        }
        let nova: &[AggregateId] = match self.by_host.get(host) {
            Some(ids) => ids,
            None if named_by_nova => &[],
            None => return None,
        };
        let is_known = |id: &AggregateId| self.known.binary_search(id).is_ok();
        let agrees = nova.iter().all(|id| placement.contains(*id))
            && placement
                .iter()
                .filter(is_known)
                .all(|id| nova.binary_search(&id).is_ok());
        if agrees {
            return None;
        }
        let others = placement.iter().filter(|id| !is_known(id));
        Some(Aggregates::new(others.chain(nova.iter().copied())))
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

    #[test]
    fn nova_s_membership_replaces_placement_s_for_nova_s_aggregates_only() {
        let agg1 = hosts(&["host1"]);
        let agg2 = hosts(&["host2"]);
        let members =
            AggregateMembers::new([("m-agg1", agg1.as_slice()), ("m-agg2", agg2.as_slice())]);
        let names = |a: &Aggregates| a.names();
        // The last sync read host1 in no aggregate and host2 in agg1 and a segment's.
        let host1 = Aggregates::from_names([]);
        let host2 = Aggregates::from_names(["m-agg1", "m-segment"]);
        assert_eq!(
            members.lay_over("host1", true, &host1).map(|a| names(&a)),
            Some(vec!["m-agg1".to_string()]),
            "a host nova-api added is a member before Placement's next read"
        );
        assert_eq!(
            members.lay_over("host2", true, &host2).map(|a| names(&a)),
            Some(vec!["m-agg2".to_string(), "m-segment".to_string()]),
            "Nova's aggregates follow Nova, Placement's own stay"
        );
        let agreed = Aggregates::from_names(["m-agg2", "m-segment"]);
        assert_eq!(members.lay_over("host2", true, &agreed), None);
        assert_eq!(
            members.lay_over("host3", true, &Aggregates::from_names(["m-segment"])),
            None,
            "a host in none of Nova's aggregates keeps Placement's"
        );
        assert_eq!(
            members
                .lay_over("host3", true, &Aggregates::from_names(["m-agg1"]))
                .map(|a| a.len()),
            Some(0),
            "a host nova-api removed is no member"
        );
        assert_eq!(
            members.lay_over(
                "host3.example.org",
                false,
                &Aggregates::from_names(["m-agg1"])
            ),
            None,
            "a provider name Nova may not know keeps Placement's membership"
        );
        let none = AggregateMembers::new(std::iter::empty());
        assert_eq!(none.lay_over("host2", true, &host2), None);
    }
}
