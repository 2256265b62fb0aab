//! Authentication of the HTTP API (`[auth]`): no check on a loopback address, a shared
//! secret (`token`), or Keystone tokens with a role (`keystone`). Open paths (`/healthz`,
//! `/readyz`, `/metrics`, `/`) need nothing; GET routes need one of `read_roles`, every other
//! route one of `roles`. A missing or refused token is 401, a valid one without the role 403,
//! Keystone unable to answer 503 with the reason: never 500, never let through.
//!
//! # Layout
//! - `settings`: the `[auth]` section and the loopback check.
//! - `settings`: also [`KeystoneCredentials`], the service-user keys `[placement]` shares.
//! - `keystone`: [`KeystoneSession`] (a service user's token, renewed; `[placement]`'s client
//!   uses it too) and token validation.
//! - `time`: Keystone's timestamps.
//! - `cache`: validations remembered until a deadline, bounded in number.
//! - `middleware`: the actix-web `Transform` that applies [`Auth::check`] to every request.

mod cache;
mod keystone;
mod middleware;

mod settings;
mod time;

// Kept for ledger/ and rpc/client.rs, which name it here; everything else uses crate::redact.
pub use crate::redact::{redact_url, redact_urls};
pub use cache::{TokenCache, Verdict};
pub use keystone::{
    http_client, read_cafile, Catalog, ClientError, Identity, KeystoneClient, KeystoneError,
    KeystoneSession, ServiceToken,
};
pub use settings::{
    is_loopback_host, AuthSettings, KeystoneCredentials, NovaUser, ParasolUser, ServiceUser,
    Strategy,
};
pub use time::parse_time;

use crate::clock::SharedClock;
use actix_web::http::{Method, StatusCode};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;

/// The longest `X-Auth-Token` looked at; Keystone's Fernet tokens are about 200 bytes.
pub const MAX_TOKEN_BYTES: usize = 8192;

/// Why the HTTP server may not start as configured.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("[auth] strategy {0}")]
    Insecure(String),
    #[error("[auth] {key} {message}")]
    Invalid { key: &'static str, message: String },
    #[error("[auth] {0}")]
    Client(#[from] ClientError),
}

/// Why a request is not let through.
#[derive(Clone, Debug, PartialEq)]
pub struct Denial {
    pub status: StatusCode,
    pub class: &'static str,
    pub message: String,
}

impl Denial {
    fn unauthorized(message: impl Into<String>) -> Self {
        Denial {
            status: StatusCode::UNAUTHORIZED,
            class: "Unauthorized",
            message: message.into(),
        }
    }
}

/// The configured check, shared by every HTTP worker (cheap to clone).
#[derive(Clone, Debug)]
pub struct Auth(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    settings: AuthSettings,
    open: HashSet<String>,
    keystone: Option<(KeystoneClient, TokenCache)>,
    clock: SharedClock,
}

/// The live page's own script, styles and chart library (`GET /assets/{name}`): code compiled
/// into the binary, holding no data, which a browser loads without a way to send a token.
/// They are always open (like `/` by default): the page then asks for the token the data routes
/// need.
fn is_page_asset(path: &str) -> bool {
    path.strip_prefix("/assets/")
        .is_some_and(|name| !name.is_empty() && !name.contains('/'))
}

impl Auth {
    /// The check for a server bound to `bound`: refused when the strategy is `none` on an
    /// address that is not loopback, unless `allow_insecure` (then warned at each start).
    pub fn new(
        settings: &AuthSettings,
        bound: Option<SocketAddr>,
        clock: SharedClock,
    ) -> Result<Auth, AuthError> {
        let host = check_bind(settings, bound)?;
        if settings.strategy == Strategy::None && !is_loopback_host(&host) {
            tracing::warn!(
                address = %host,
                "[auth] strategy = \"none\" on an address that is not loopback (allow_insecure): \
                 anyone who reaches it can claim capacity and rewrite hosts"
            );
        }
        let keystone = match settings.strategy {
            Strategy::Keystone => Some((
                KeystoneClient::new(settings, clock.clone())?,
                TokenCache::new(settings.cache_size),
            )),
            _ => None,
        };
        Ok(Auth(Arc::new(Inner {
            settings: settings.clone(),
            open: settings.open_paths.iter().cloned().collect(),
            keystone,
            clock,
        })))
    }

    pub fn strategy(&self) -> Strategy {
        self.0.settings.strategy
    }

    /// Tokens remembered (keystone strategy), for tests and diagnostics.
    pub fn cached_tokens(&self) -> usize {
        self.0.keystone.as_ref().map_or(0, |(_, cache)| cache.len())
    }

    /// Lets a request through or says why not; `token` is the raw `X-Auth-Token`.
    pub async fn check(
        &self,
        method: &Method,
        path: &str,
        token: Option<&[u8]>,
    ) -> Result<(), Denial> {
        let s = &self.0.settings;
        if s.strategy == Strategy::None || self.0.open.contains(path) || is_page_asset(path) {
            return Ok(());
        }
        let token = match token {
            None => {
                return Err(Denial::unauthorized(
                    "this route needs an X-Auth-Token header",
                ))
            }
            Some(t) if t.is_empty() || t.len() > MAX_TOKEN_BYTES => {
                return Err(Denial::unauthorized("the X-Auth-Token is refused"))
            }
            Some(t) => std::str::from_utf8(t)
                .map_err(|_| Denial::unauthorized("the X-Auth-Token is refused"))?,
        };
        match &self.0.keystone {
            None => {
                if constant_time_eq(token.as_bytes(), s.token.as_bytes()) {
                    Ok(())
                } else {
                    Err(Denial::unauthorized("the X-Auth-Token is refused"))
                }
            }
            Some((client, cache)) => {
                let identity = self.validate(client, cache, token).await?;
                let needed = if matches!(*method, Method::GET | Method::HEAD) {
                    &s.read_roles
                } else {
                    &s.roles
                };
                if identity.roles.iter().any(|r| needed.contains(r)) {
                    Ok(())
                } else {
                    tracing::info!(user = %identity.user_id, %path, "token without a needed role");
                    Err(Denial {
                        status: StatusCode::FORBIDDEN,
                        class: "Forbidden",
                        message: format!("{method} {path} needs one of the roles {needed:?}"),
                    })
                }
            }
        }
    }

    /// Keystone's verdict on `token`, from the cache when it is still fresh there.
    async fn validate(
        &self,
        client: &KeystoneClient,
        cache: &TokenCache,
        token: &str,
    ) -> Result<Arc<Identity>, Denial> {
        let key = cache::key(token);
        let now = self.0.clock.now_ms();
        let verdict = match cache.get(&key, now) {
            Some(verdict) => verdict,
            None => {
                let answer = client.validate(token).await.map_err(|e| {
                    tracing::warn!(error = %e, "cannot validate a token");
                    Denial {
                        status: StatusCode::SERVICE_UNAVAILABLE,
                        class: "ServiceUnavailable",
                        message: e.to_string(),
                    }
                })?;
                let now = self.0.clock.now_ms();
                let ttl_ms = (self.0.settings.cache_ttl_s * 1000.0) as i64;
                let (until, verdict) = match answer {
                    Some(identity) => (
                        identity.expires_ms.min(now.saturating_add(ttl_ms)),
                        Verdict::Valid(Arc::new(identity)),
                    ),
                    None => (now.saturating_add(ttl_ms), Verdict::Refused),
                };
                cache.insert(key, until, verdict.clone(), now);
                verdict
            }
        };
        match verdict {
            Verdict::Valid(identity) if identity.expires_ms > now => Ok(identity),
            Verdict::Valid(_) => Err(Denial::unauthorized("the X-Auth-Token has expired")),
            Verdict::Refused => Err(Denial::unauthorized(
                "Keystone does not know this X-Auth-Token (malformed, expired or revoked)",
            )),
        }
    }

    /// The `WWW-Authenticate` value of a 401, as keystonemiddleware sends it.
    fn challenge(&self) -> Option<String> {
        self.0
            .keystone
            .as_ref()
            .map(|(client, _)| format!("Keystone uri=\"{}\"", redact_url(client.keystone_url())))
    }
}

/// Checks `settings` for a server bound to `bound` (before anything starts); returns the
/// bound address as text.
pub fn check_bind(settings: &AuthSettings, bound: Option<SocketAddr>) -> Result<String, AuthError> {
    let host = bound.map_or_else(|| "an unknown address".into(), |a| a.ip().to_string());
    match settings.validate(&host) {
        Ok(()) => Ok(host),
        Err(("strategy", message)) => Err(AuthError::Insecure(message)),
        Err((key, message)) => Err(AuthError::Invalid { key, message }),
    }
}

/// Compares two secrets in a time that depends only on their lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests;
