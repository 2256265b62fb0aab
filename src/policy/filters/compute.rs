//! `ComputeFilter`: the host's service is up, enabled and has reported recently.

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// Passes hosts that are up, not disabled, not forced down, and heard from within the host
/// timeout (Nova's `ComputeFilter` with `servicegroup_api.service_is_up`).
///
/// The ledger sets `last_seen_ms` on every report, so `last_seen_ms == 0` means the host has
/// never reported: down. As in Nova's DB servicegroup driver, the distance to now is taken
/// in absolute value, so a heartbeat far in the future (clock skew) is down too. A timeout of
/// 0 turns the heartbeat check (both rules) off.
#[derive(Clone, Copy, Debug, Default)]
pub struct ComputeFilter;

impl ComputeFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "ComputeFilter";
}

/// True when the host's last report is recent enough under `env`.
pub fn heard_from_recently(host: &HostState, env: &FilterEnv) -> bool {
    if env.host_timeout_ms == 0 {
        return true;
    }
    host.last_seen_ms != 0
        && env.now_ms.abs_diff(host.last_seen_ms) <= env.host_timeout_ms.unsigned_abs()
}

impl Filter for ComputeFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn passes(&self, host: &HostState, _req: &RequestContext, env: &FilterEnv) -> bool {
        host.up && !host.disabled && !host.forced_down && heard_from_recently(host, env)
    }

    fn scan_check(&self) -> Option<super::ScanCheck> {
        Some(super::ScanCheck::Compute)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;

    #[test]
    fn passes_only_live_enabled_hosts() {
        let now = 1_000_000;
        let env = FilterEnv {
            now_ms: now,
            host_timeout_ms: 60_000,
        };
        type Edit = fn(&mut HostState);
        let cases: [(&str, Edit, bool); 8] = [
            ("fresh report", |h| h.last_seen_ms = 1_000_000, true),
            (
                "report exactly at the timeout",
                |h| h.last_seen_ms = 940_000,
                true,
            ),
            ("stale report", |h| h.last_seen_ms = 939_999, false),
            ("never reported", |h| h.last_seen_ms = 0, false),
            (
                "report from the far future",
                |h| h.last_seen_ms = 1_060_001,
                false,
            ),
            ("down", |h| h.up = false, false),
            ("disabled", |h| h.disabled = true, false),
            ("forced down", |h| h.forced_down = true, false),
        ];
        for (name, edit, want) in cases {
            let mut h = host(1);
            h.last_seen_ms = now - 1;
            edit(&mut h);
            assert_eq!(ComputeFilter.passes(&h, &request(), &env), want, "{name}");
        }
    }

    #[test]
    fn zero_timeout_skips_the_heartbeat_but_not_the_state() {
        let env = FilterEnv::without_heartbeats();
        let mut h = host(1);
        assert!(ComputeFilter.passes(&h, &request(), &env));
        h.disabled = true;
        assert!(!ComputeFilter.passes(&h, &request(), &env));
    }
}
