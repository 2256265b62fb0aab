//! `AvailabilityZoneFilter`: the host is in the availability zone the request asks for.

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// Nova's `AvailabilityZoneFilter`: a request with an availability zone keeps only hosts of
/// that zone (exact name); a request without one keeps every host.
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
            Some(az) => **az == **host.availability_zone(),
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
}
