//! `[placement]`: where Placement is and how to authenticate to it.

use crate::auth::{KeystoneCredentials, NovaUser};
use crate::choice::Choice;
use serde::{Deserialize, Serialize};

/// How requests to Placement are authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum AuthKind {
    /// Keystone v3 password authentication; the endpoint may come from the catalog.
    Keystone,
    /// A static token sent as `X-Auth-Token`.
    Token,
    /// Placement's `auth_strategy = noauth2`: the token `admin` (tests, DevStack without auth).
    Noauth,
}

crate::choice_from_string!(AuthKind);

impl Choice for AuthKind {
    const ALL: &'static [Self] = &[AuthKind::Keystone, AuthKind::Token, AuthKind::Noauth];
    fn as_str(self) -> &'static str {
        match self {
            AuthKind::Keystone => "keystone",
            AuthKind::Token => "token",
            AuthKind::Noauth => "noauth",
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlacementSettings {
    /// Seed and refresh host inventories from Placement.
    pub enabled: bool,
    /// Placement endpoint; empty with `auth = "keystone"` means "from the service catalog".
    pub url: String,
    pub auth: AuthKind,
    /// The service user of `auth = "keystone"` (Nova's, by default).
    #[serde(flatten)]
    pub keystone: KeystoneCredentials<NovaUser>,
    /// Catalog interface used to find Placement (`public`, `internal`, `admin`).
    pub interface: String,
    /// The static token of `auth = "token"`.
    pub token: String,
    /// Seconds between two syncs. A sync lists every provider and reads only those whose
    /// generation changed since it last read them.
    pub sync_interval_s: f64,
    /// Seconds between two syncs that read every provider whatever its generation (0: every
    /// sync does). Placement does not raise a provider's generation when an allocation on it
    /// is deleted (`DELETE /allocations/{consumer}`, or a move's `PUT` that leaves it), nor
    /// when its aggregates are set below microversion 1.19: such a change reaches the ledger
    /// at the next full sync (or by Nova's notification, as a deletion usually does).
    pub full_sync_interval_s: f64,
    /// Seconds before a request to Placement or Keystone is abandoned; also the longest a
    /// call waits for a sync (no candidate host, or a just-started compute not loaded yet).
    pub timeout_s: f64,
    /// `OpenStack-API-Version: placement <microversion>` sent on every sync read.
    pub microversion: String,
    /// With `enabled`: claim each placed instance in Placement as nova-scheduler does
    /// (`PUT /allocations/{instance}` at microversion 1.36, after Parasol's own claim).
    pub claims: bool,
    /// Fewest seconds between two syncs triggered by a request that found no candidate.
    pub resync_min_interval_s: f64,
    /// With `claims`: an allocation Parasol made less than this many seconds before a sync
    /// read Placement is not repaired by that sync (its claim in Placement may be in flight).
    pub repair_grace_s: f64,
}

impl Default for PlacementSettings {
    fn default() -> Self {
        PlacementSettings {
            enabled: false,
            url: String::new(),
            auth: AuthKind::Keystone,
            keystone: KeystoneCredentials::default(),
            interface: "public".into(),
            token: String::new(),
            sync_interval_s: 60.0,
            full_sync_interval_s: 600.0,
            timeout_s: 10.0,
            microversion: "1.28".into(),
            claims: true,
            resync_min_interval_s: 1.0,
            repair_grace_s: 60.0,
        }
    }
}

impl PlacementSettings {
    /// Whether placed instances are claimed in Placement (`enabled` and `claims`).
    pub fn claims_active(&self) -> bool {
        self.enabled && self.claims
    }

    /// Checks the keys a sync needs when enabled; the error names the key.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        self.validate_keys()
            .map_err(|(key, message)| (key, message.to_string()))?;
        self.keystone.validate_cafile()?;
        if self.enabled && self.auth == AuthKind::Keystone {
            self.keystone.validate("auth = \"keystone\"")?;
        }
        Ok(())
    }

    /// The checks of [`Self::validate`] but the credentials'.
    fn validate_keys(&self) -> Result<(), (&'static str, &'static str)> {
        if !(self.sync_interval_s.is_finite() && self.sync_interval_s > 0.0) {
            return Err(("sync_interval_s", "must be a positive number of seconds"));
        }
        if !(self.full_sync_interval_s.is_finite() && self.full_sync_interval_s >= 0.0) {
            return Err((
                "full_sync_interval_s",
                "must be a number of seconds, 0 (every sync reads every provider) or more",
            ));
        }
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0) {
            return Err(("timeout_s", "must be a positive number of seconds"));
        }
        if !(self.resync_min_interval_s.is_finite() && self.resync_min_interval_s >= 0.0) {
            return Err((
                "resync_min_interval_s",
                "must be a number of seconds, 0 or more",
            ));
        }
        if !(self.repair_grace_s.is_finite() && self.repair_grace_s >= 0.0) {
            return Err(("repair_grace_s", "must be a number of seconds, 0 or more"));
        }
        let version_ok = self
            .microversion
            .split_once('.')
            .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok());
        if !version_ok {
            return Err(("microversion", "must look like \"1.28\""));
        }
        if !self.enabled {
            return Ok(());
        }
        match self.auth {
            AuthKind::Keystone => {}
            AuthKind::Token if self.token.is_empty() => {
                return Err(("token", "is required when auth = \"token\""));
            }
            _ if self.url.is_empty() => {
                return Err(("url", "is required unless auth = \"keystone\""));
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enabled_sync_without_credentials_is_refused_naming_the_key() {
        let cases = [
            (AuthKind::Keystone, "", "keystone_url"),
            (AuthKind::Token, "http://p", "token"),
            (AuthKind::Noauth, "", "url"),
        ];
        for (auth, url, key) in cases {
            let s = PlacementSettings {
                enabled: true,
                auth,
                url: url.into(),
                ..Default::default()
            };
            assert_eq!(s.validate().unwrap_err().0, key, "{auth:?}");
        }
    }

    #[test]
    fn a_full_sync_interval_below_zero_or_not_a_number_is_refused_naming_the_key() {
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let s = PlacementSettings {
                full_sync_interval_s: bad,
                ..Default::default()
            };
            assert_eq!(s.validate().unwrap_err().0, "full_sync_interval_s", "{bad}");
        }
        for good in [0.0, 600.0] {
            let s = PlacementSettings {
                full_sync_interval_s: good,
                ..Default::default()
            };
            assert!(s.validate().is_ok(), "{good}");
        }
    }

    #[test]
    fn disabled_sync_needs_no_credentials() {
        assert!(PlacementSettings::default().validate().is_ok());
    }
}
