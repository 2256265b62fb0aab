//! `AvailabilityZoneFilter`: the host is in the availability zone the request asks for.

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// Nova's `AvailabilityZoneFilter` (before Nova 34, which keeps only its request filter
/// `map_az_to_placement_aggregate`): a request with an availability zone keeps only hosts of
/// that zone (exact name); a request without one keeps every host. A host's zone is Nova's:
/// that of its aggregates when the request carries them (`RequestContext::host_zones`), else
/// the zone it was recorded with.
#[derive(Clone, Copy, Debug, Default)]
pub struct AvailabilityZoneFilter;

impl AvailabilityZoneFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "AvailabilityZoneFilter";
}

impl Filter for AvailabilityZoneFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        req.availability_zone.is_some()
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        match &req.availability_zone {
            Some(az) => match &req.host_zones {
                Some(zones) => az == zones.zone_of(host),
                None => **az == **host.availability_zone(),
            },
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;

    #[test]
    fn keeps_hosts_of_the_requested_zone() {
        let cases = [
            ("no zone requested", None, true),
            ("host's zone", Some("nova"), true),
            ("another zone", Some("az2"), false),
            ("zone names are exact", Some("Nova"), false),
        ];
        for (name, az, want) in cases {
            let mut req = request();
            req.availability_zone = az.map(String::from);
            let got =
                AvailabilityZoneFilter.passes(&host(1), &req, &FilterEnv::without_heartbeats());
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn a_zone_of_nova_s_aggregates_wins_over_the_recorded_one() {
        use crate::domain::HostZones;
        use std::collections::BTreeMap;
        use std::sync::Arc;
        let h = host(1);
        let hosts = vec![h.host().to_string()];
        let meta: BTreeMap<String, String> =
            [("availability_zone".to_string(), "zone2".to_string())].into();
        let mut req = request();
        req.host_zones = Some(Arc::new(HostZones::new([(hosts.as_slice(), &meta)])));
        let env = FilterEnv::without_heartbeats();
        for (az, want) in [("zone2", true), ("nova", false), ("zone1", false)] {
            req.availability_zone = Some(az.into());
            assert_eq!(AvailabilityZoneFilter.passes(&h, &req, &env), want, "{az}");
        }
        // A host in no aggregate with a zone keeps its recorded one ("nova").
        let other = host(2);
        req.availability_zone = Some("nova".into());
        assert!(AvailabilityZoneFilter.passes(&other, &req, &env));
        req.availability_zone = Some("zone2".into());
        assert!(!AvailabilityZoneFilter.passes(&other, &req, &env));
    }
}
