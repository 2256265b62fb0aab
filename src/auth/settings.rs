//! `[auth]`: who may call the HTTP API, and whether an address that is not loopback may be
//! served without authentication.

use crate::choice::Choice;
use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use std::net::IpAddr;

/// Whose credentials a [`KeystoneCredentials`] holds by default: the user name differs
/// (`[auth]` validates as Parasol's own user, `[placement]` acts as Nova's).
pub trait ServiceUser {
    const DEFAULT_USERNAME: &'static str;
    /// The section that holds the keys, for errors (`[auth]`).
    const SECTION: &'static str;
}

/// Parasol's own service user (`[auth]`).
#[derive(Clone, Copy, Debug)]
pub struct ParasolUser;

impl ServiceUser for ParasolUser {
    const DEFAULT_USERNAME: &'static str = "parasol";
    const SECTION: &'static str = "[auth]";
}

/// Nova's service user, whose Placement access Parasol shares (`[placement]`).
#[derive(Clone, Copy, Debug)]
pub struct NovaUser;

impl ServiceUser for NovaUser {
    const DEFAULT_USERNAME: &'static str = "nova";
    const SECTION: &'static str = "[placement]";
}

/// A service user's Keystone v3 password credentials, scoped to a project: the same keys in
/// `[auth]` and `[placement]` (flattened into each), read by [`super::KeystoneSession`].
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, bound = "")]
pub struct KeystoneCredentials<U: ServiceUser> {
    /// Keystone v3 base URL, e.g. `http://controller/identity/v3` (`/v3` is added if missing).
    #[serde(deserialize_with = "scalar_text")]
    pub keystone_url: String,
    #[serde(deserialize_with = "scalar_text")]
    pub username: String,
    #[serde(deserialize_with = "scalar_text")]
    pub password: String,
    #[serde(deserialize_with = "scalar_text")]
    pub project_name: String,
    #[serde(deserialize_with = "scalar_text")]
    pub user_domain_name: String,
    #[serde(deserialize_with = "scalar_text")]
    pub project_domain_name: String,
    /// A PEM file of CA certificates to trust, besides the system's trust store
    /// (`/etc/ssl/certs`, or `SSL_CERT_FILE`), for this section's HTTPS endpoints: Keystone
    /// and, in `[placement]`, Placement (and Nova's API for `rebalance apply`). keystoneauth's `cafile`, as Nova's `[placement] cafile`; empty: the
    /// system's only.
    #[serde(deserialize_with = "scalar_text")]
    pub cafile: String,
    #[serde(skip)]
    user: PhantomData<U>,
}

/// A flattened table reaches its fields as whatever the source made of them: an environment
/// variable `PARASOL__AUTH__PASSWORD=12345` arrives as a number. Any scalar is taken as its
/// text, as the `config` crate does for a field that is not flattened.
fn scalar_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    struct Text;
    impl serde::de::Visitor<'_> for Text {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<String, E> {
            Ok(v.to_string())
        }
    }
    d.deserialize_any(Text)
}

impl<U: ServiceUser> Default for KeystoneCredentials<U> {
    fn default() -> Self {
        KeystoneCredentials {
            keystone_url: String::new(),
            username: U::DEFAULT_USERNAME.into(),
            password: String::new(),
            project_name: "service".into(),
            user_domain_name: "Default".into(),
            project_domain_name: "Default".into(),
            cafile: String::new(),
            user: PhantomData,
        }
    }
}

impl<U: ServiceUser> KeystoneCredentials<U> {
    /// Checks `cafile` when set: a readable PEM file holding at least one certificate.
    pub fn validate_cafile(&self) -> Result<(), (&'static str, String)> {
        if self.cafile.is_empty() {
            return Ok(());
        }
        super::keystone::read_cafile(&self.cafile)
            .map(drop)
            .map_err(|e| ("cafile", e.to_string()))
    }

    /// Checks what password authentication needs; the error names the key. `when` says
    /// which setting asks for it (`strategy = "keystone"`).
    pub fn validate(&self, when: &str) -> Result<(), (&'static str, String)> {
        self.validate_cafile()?;
        if self.keystone_url.is_empty() {
            return Err(("keystone_url", format!("is required when {when}")));
        }
        if self.username.is_empty() || self.password.is_empty() {
            return Err((
                "password",
                format!("username and password are required when {when}"),
            ));
        }
        Ok(())
    }
}

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
    /// Parasol's own service user, which validates callers' tokens.
    #[serde(flatten)]
    pub keystone: KeystoneCredentials<ParasolUser>,
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
            keystone: KeystoneCredentials::default(),
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
                self.keystone.validate("strategy = \"keystone\"")?;
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
                keystone: KeystoneCredentials {
                    keystone_url: "http://k/v3".into(),
                    password: "p".into(),
                    ..Default::default()
                },
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
            (
                keystone(|s| s.keystone.keystone_url.clear()),
                "keystone_url",
            ),
            (keystone(|s| s.keystone.password.clear()), "password"),
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
