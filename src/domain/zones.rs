//! The availability zone of each host as Nova defines it: the `availability_zone` metadata of
//! the host aggregates the service host is in (nova-api's zones are aggregates), else the
//! zone the host was recorded with (Nova's `[DEFAULT] default_availability_zone` for a host
//! Parasol learnt from Placement, the zone an emulated host reported). Built once per request
//! from the aggregates Nova cast and `[policy] default_availability_zone`, read by
//! `AvailabilityZoneFilter` and for the Selections.

use super::host::HostState;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The aggregate metadata key of a zone.
pub const ZONE_KEY: &str = "availability_zone";

/// Nova's default `[DEFAULT] default_availability_zone`: the zone Parasol records for a host
/// nobody told it the zone of (a compute node learnt from Placement).
pub const NOVA_DEFAULT_ZONE: &str = "nova";

/// Service host → its zone, for the hosts in an aggregate with a zone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HostZones {
    by_host: BTreeMap<String, String>,
    /// `[policy] default_availability_zone` when it is not Nova's default: the zone of a host
    /// in no aggregate with a zone and recorded with [`NOVA_DEFAULT_ZONE`].
    default: Option<String>,
}

impl HostZones {
    /// The zones of `aggregates` (each aggregate's hosts and metadata). A host in several
    /// aggregates with different zones (nova-api refuses to make one, but older data may have
    /// it) gets the first name in order: Nova's `Selection.from_host_state` takes any one of
    /// the set `aggregate_metadata_get_by_host` returns (its values split at commas and
    /// trimmed, as here).
    pub fn new<'a>(
        aggregates: impl IntoIterator<Item = (&'a [String], &'a BTreeMap<String, String>)>,
    ) -> Self {
        let mut zones: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (hosts, metadata) in aggregates {
            let Some(zone) = metadata.get(ZONE_KEY) else {
                continue;
            };
            for host in hosts {
                zones
                    .entry(host)
                    .or_default()
                    .extend(zone.split(',').map(str::trim).filter(|z| !z.is_empty()));
            }
        }
        HostZones {
            by_host: zones
                .into_iter()
                .filter_map(|(h, z)| Some((h.to_string(), z.first()?.to_string())))
                .collect(),
            default: None,
        }
    }

    /// `zones` (the aggregates' zones, if any) with the default zone `default` (`[policy]
    /// default_availability_zone`): unchanged when `default` is Nova's own default, since
    /// hosts are recorded with that one.
    pub fn with_default(zones: Option<Arc<HostZones>>, default: &str) -> Option<Arc<HostZones>> {
        if default == NOVA_DEFAULT_ZONE {
            return zones;
        }
        let by_host = zones.map(|z| z.by_host.clone()).unwrap_or_default();
        Some(Arc::new(HostZones {
            by_host,
            default: Some(default.to_string()),
        }))
    }

    /// True when no host is in an aggregate with a zone and the default zone is Nova's
    /// (every host keeps its recorded one).
    pub fn is_empty(&self) -> bool {
        self.by_host.is_empty() && self.default.is_none()
    }

    /// The zone of `host`: its aggregates' zone, else the one it was recorded with, where
    /// Nova's default stands for the configured default.
    pub fn zone_of<'a>(&'a self, host: &'a HostState) -> &'a str {
        if let Some(zone) = self.by_host.get(&**host.host()) {
            return zone;
        }
        match &self.default {
            Some(default) if **host.availability_zone() == *NOVA_DEFAULT_ZONE => default,
            _ => host.availability_zone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{HostId, HostProfile};
    use std::sync::Arc;

    fn host(name: &str, zone: &str) -> HostState {
        let profile = HostProfile::new(name, name, &format!("uuid-{name}"), zone, Vec::new());
        HostState::new(HostId(1), Arc::new(profile))
    }

    fn meta(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_host_s_zone_is_its_aggregates_zone_else_its_recorded_one() {
        let aggs = [
            (
                vec!["host1".to_string()],
                meta(&[("availability_zone", "zone1")]),
            ),
            (
                vec!["host2".to_string(), "host3".to_string()],
                meta(&[("availability_zone", " zone2 ")]),
            ),
            // An aggregate without a zone says nothing of its hosts' zone.
            (vec!["host4".to_string()], meta(&[("ssd", "true")])),
            // Two zones for one host (old data): the first name, every time.
            (
                vec!["host3".to_string()],
                meta(&[("availability_zone", "a-zone")]),
            ),
        ];
        let zones = HostZones::new(aggs.iter().map(|(h, m)| (h.as_slice(), m)));
        assert!(!zones.is_empty());
        assert_eq!(zones.zone_of(&host("host1", "nova")), "zone1");
        assert_eq!(zones.zone_of(&host("host2", "nova")), "zone2");
        assert_eq!(zones.zone_of(&host("host3", "nova")), "a-zone");
        assert_eq!(zones.zone_of(&host("host4", "nova")), "nova");
        assert_eq!(zones.zone_of(&host("host5", "az9")), "az9");
        // Service host names are exact, as in Nova's aggregate host lists.
        assert_eq!(zones.zone_of(&host("HOST1", "nova")), "nova");
        assert!(HostZones::new(std::iter::empty()).is_empty());
    }

    #[test]
    fn the_default_zone_is_the_zone_of_a_host_no_aggregate_and_no_report_put_in_one() {
        let aggs = [(
            vec!["host1".to_string()],
            meta(&[("availability_zone", "zone1")]),
        )];
        let zones = Some(Arc::new(HostZones::new(
            aggs.iter().map(|(h, m)| (h.as_slice(), m)),
        )));
        // Nova's own default changes nothing (hosts are recorded with it).
        assert_eq!(HostZones::with_default(zones.clone(), "nova"), zones);
        assert_eq!(HostZones::with_default(None, "nova"), None);

        let z = HostZones::with_default(zones, "az0").expect("zones");
        assert!(!z.is_empty());
        // An aggregate's zone wins; a host recorded with Nova's default is in the default
        // zone; a zone the host reported itself stays.
        assert_eq!(z.zone_of(&host("host1", "nova")), "zone1");
        assert_eq!(z.zone_of(&host("host2", "nova")), "az0");
        assert_eq!(z.zone_of(&host("host3", "az9")), "az9");

        // Without any aggregate zone, the default still applies.
        let z = HostZones::with_default(None, "az0").expect("zones");
        assert!(!z.is_empty());
        assert_eq!(z.zone_of(&host("host2", "nova")), "az0");
    }
}
