//! `[auth]`: who may call the HTTP API, and whether an address that is not loopback may be
//! served without authentication.

use crate::choice::Choice;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// How HTTP callers are authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum Strategy {
    /// Nobody is asked for anything: only for a loopback address (or `allow_insecure`).
    None,
    /// `X-Auth-Token` must equal `[auth] token` (benchmarks, tests).
    Token,
    /// `X-Auth-Token` is validated by Keystone and must carry one of the configured roles.
    Keystone,
}

crate::choice_from_string!(Strategy);

impl Choice for Strategy {
    const ALL: &'static [Self] = &[Strategy::None, Strategy::Token, Strategy::Keystone];
    fn as_str(self) -> &'static str {
        Strategy::as_str(self)
    }
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::None => "none",
            Strategy::Token => "token",
            Strategy::Keystone => "keystone",
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthSettings {
    pub strategy: Strategy,
    /// Serve a non-loopback `[server] host` with `strategy = "none"` (warned at every start).
    pub allow_insecure: bool,
    /// Paths answered without a token, matched exactly.
    pub open_paths: Vec<String>,
    /// The shared secret of `strategy = "token"`.
    pub token: String,
    /// Roles of which a token needs one for POST routes (select, notifications).
    pub roles: Vec<String>,
    /// Roles of which a token needs one for GET routes (`/v1/hosts`, `/v1/stats`).
    pub read_roles: Vec<String>,
    /// Keystone v3 base URL, e.g. `http://controller/identity/v3` (`/v3` is added if missing).
    pub keystone_url: String,
    /// Parasol's own service user, which validates callers' tokens.
    pub username: String,
    pub password: String,
    pub project_name: String,
    pub user_domain_name: String,
    pub project_domain_name: String,
    /// Longest a validation is trusted before Keystone is asked again (a revoked token is
    /// refused at most this long after its revocation); never past the token's `expires_at`.
    pub cache_ttl_s: f64,
    /// Most validated (or refused) tokens remembered.
    pub cache_size: usize,
    /// Seconds before a request to Keystone is abandoned (the caller then gets 503).
    pub timeout_s: f64,
}

impl Default for AuthSettings {
    fn default() -> Self {
        AuthSettings {
            strategy: Strategy::None,
            allow_insecure: false,
            open_paths: ["/", "/healthz", "/readyz", "/metrics"]
                .map(String::from)
                .to_vec(),
            token: String::new(),
            roles: vec!["admin".into()],
            read_roles: vec!["admin".into()],
            keystone_url: String::new(),
            username: "parasol".into(),
            password: String::new(),
            project_name: "service".into(),
            user_domain_name: "Default".into(),
            project_domain_name: "Default".into(),
            cache_ttl_s: 300.0,
            cache_size: 10_000,
            timeout_s: 5.0,
        }
    }
}

/// Whether `host` (an address or a name, as in `[server] host`) is loopback for certain.
/// A name other than `localhost` is not: it could resolve to anything.
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    }
}

impl AuthSettings {
    /// Checks the keys a strategy needs, and that `server_host` is not served unauthenticated;
    /// the error names the key.
    pub fn validate(&self, server_host: &str) -> Result<(), (&'static str, String)> {
        let err = |key, message: &str| Err((key, message.to_string()));
        if self.strategy == Strategy::None && !self.allow_insecure && !is_loopback_host(server_host)
        {
            return Err(("strategy", insecure_message(server_host)));
        }
        if self.open_paths.iter().any(|p| !p.starts_with('/')) {
            return err("open_paths", "every path must start with /");
        }
        match self.strategy {
            Strategy::None => {}
            Strategy::Token if self.token.len() < 16 => {
                return err(
                    "token",
                    "must be at least 16 bytes when strategy = \"token\"",
                );
            }
            Strategy::Token => {}
            Strategy::Keystone => {
                if self.keystone_url.is_empty() {
                    return err("keystone_url", "is required when strategy = \"keystone\"");
                }
                if self.username.is_empty() || self.password.is_empty() {
                    return err(
                        "password",
                        "username and password are required when strategy = \"keystone\"",
                    );
                }
                if self.roles.is_empty() || self.read_roles.is_empty() {
                    return err("roles", "roles and read_roles must each name a role");
                }
                if !(self.cache_ttl_s.is_finite() && self.cache_ttl_s >= 0.0) {
                    return err("cache_ttl_s", "must be a non-negative number of seconds");
                }
                if self.cache_size == 0 {
                    return err("cache_size", "must be at least 1");
                }
                if !(self.timeout_s.is_finite() && self.timeout_s > 0.0) {
                    return err("timeout_s", "must be a positive number of seconds");
                }
            }
        }
        Ok(())
    }
}

/// Why an address is refused with `strategy = "none"`.
pub fn insecure_message(host: &str) -> String {
    format!(
        "is \"none\" but [server] host {host:?} is not a loopback address: anyone who reaches \
         it could claim capacity and rewrite hosts; set strategy = \"keystone\" (or \"token\"), \
         bind 127.0.0.1, or set allow_insecure = true"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_told_from_other_addresses_and_names() {
        let cases = [
            ("127.0.0.1", true),
            ("127.1.2.3", true),
            ("::1", true),
            ("[::1]", true),
            ("localhost", true),
            ("0.0.0.0", false),
            ("::", false),
            ("10.0.0.5", false),
            ("controller", false),
        ];
        for (host, loopback) in cases {
            assert_eq!(is_loopback_host(host), loopback, "{host}");
        }
    }

    #[test]
    fn no_auth_on_a_public_address_is_refused_unless_allowed() {
        let none = AuthSettings::default();
        assert_eq!(none.validate("0.0.0.0").unwrap_err().0, "strategy");
        assert!(none.validate("127.0.0.1").is_ok());
        let allowed = AuthSettings {
            allow_insecure: true,
            ..Default::default()
        };
        assert!(allowed.validate("0.0.0.0").is_ok());
    }

    #[test]
    fn each_strategy_without_its_keys_is_refused_naming_the_key() {
        let keystone = |f: fn(&mut AuthSettings)| {
            let mut s = AuthSettings {
                strategy: Strategy::Keystone,
                keystone_url: "http://k/v3".into(),
                password: "p".into(),
                ..Default::default()
            };
            f(&mut s);
            s
        };
        let cases = [
            (
                AuthSettings {
                    strategy: Strategy::Token,
                    token: "short".into(),
                    ..Default::default()
                },
                "token",
            ),
            (keystone(|s| s.keystone_url.clear()), "keystone_url"),
            (keystone(|s| s.password.clear()), "password"),
            (keystone(|s| s.roles.clear()), "roles"),
            (keystone(|s| s.cache_size = 0), "cache_size"),
            (keystone(|s| s.timeout_s = 0.0), "timeout_s"),
            (
                keystone(|s| s.open_paths = vec!["healthz".into()]),
                "open_paths",
            ),
        ];
        for (settings, key) in cases {
            assert_eq!(settings.validate("0.0.0.0").unwrap_err().0, key);
        }
        assert!(keystone(|_| {}).validate("0.0.0.0").is_ok());
    }
}
