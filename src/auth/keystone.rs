//! Keystone: [`KeystoneSession`], a service user's token (v3 password auth, renewed before it
//! expires, optionally with an endpoint from the catalog), used by `strategy = "keystone"` and
//! by the Placement client; and [`KeystoneClient`], `GET /v3/auth/tokens` with
//! `X-Subject-Token` to validate a caller's token, as keystonemiddleware does.

use super::settings::{AuthSettings, KeystoneCredentials, ServiceUser};
use super::time::parse_time;
use crate::clock::SharedClock;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Who a valid token belongs to, and until when it is valid.
#[derive(Clone, Debug, PartialEq)]
pub struct Identity {
    pub user_id: String,
    pub project_id: Option<String>,
    pub roles: Vec<String>,
    /// `expires_at`, in ms since the Unix epoch.
    pub expires_ms: i64,
}

/// Keystone could not give an answer: the caller gets 503 with this reason, never access.
#[derive(Debug, thiserror::Error)]
pub enum KeystoneError {
    #[error("Keystone is unreachable: {0}")]
    Unreachable(String),
    #[error(
        "Keystone refused the service user's credentials ({section} username, password): {message}"
    )]
    ServiceCredentials {
        section: &'static str,
        message: String,
    },
    #[error("no {interface} {service_type} endpoint in Keystone's catalog; set its url")]
    NoEndpoint {
        service_type: String,
        interface: String,
    },
    #[error("Keystone answered {status} to {what}: {body}")]
    Unexpected {
        what: &'static str,
        status: u16,
        body: String,
    },
}

/// A service user's token, and the endpoint the catalog gave (with a [`Catalog`]).
#[derive(Clone, Debug)]
pub struct ServiceToken {
    pub token: String,
    pub endpoint: Option<String>,
    renew_at_ms: i64,
}

/// The service whose endpoint a session reads from its token's catalog.
#[derive(Clone, Debug)]
pub struct Catalog {
    /// e.g. `placement`.
    pub service_type: String,
    /// `public`, `internal` or `admin`.
    pub interface: String,
}

/// A service user's session with Keystone: the one token cache (one token, asked for again
/// when due for renewal on the service's clock or when refused).
#[derive(Debug)]
pub struct KeystoneSession {
    http: reqwest::Client,
    tokens_url: String,
    keystone_url: String,
    /// The password authentication request, scoped to the project.
    auth_body: Value,
    username: String,
    project_name: String,
    /// Where the credentials are configured (`[auth]`), for errors.
    section: &'static str,
    catalog: Option<Catalog>,
    clock: SharedClock,
    token: tokio::sync::Mutex<Option<Arc<ServiceToken>>>,
}

#[derive(Deserialize)]
struct TokenBody {
    token: TokenData,
}

#[derive(Deserialize)]
struct TokenData {
    expires_at: String,
    #[serde(default)]
    issued_at: Option<String>,
    user: Named,
    #[serde(default)]
    project: Option<Named>,
    #[serde(default)]
    roles: Vec<Named>,
}

#[derive(Deserialize)]
struct Named {
    #[serde(default)]
    id: String,
    #[serde(default)]
    name: String,
}

/// Why an HTTP client for Keystone, Placement or Nova could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cafile {path:?} {why}")]
    CaFile { path: String, why: String },
    #[error("cannot build the HTTP client: {0}")]
    Http(#[from] reqwest::Error),
}

/// The CA certificates of the PEM file at `path` (a bundle of one or more).
pub fn read_cafile(path: &str) -> Result<Vec<reqwest::Certificate>, ClientError> {
    let failed = |why: String| ClientError::CaFile {
        path: path.to_string(),
        why,
    };
    let pem = std::fs::read(path).map_err(|e| failed(format!("cannot be read: {e}")))?;
    let certificates = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| failed(format!("is not a PEM certificate bundle: {e}")))?;
    if certificates.is_empty() {
        return Err(failed("holds no PEM certificate".into()));
    }
    Ok(certificates)
}

/// An HTTP client whose requests are abandoned after `timeout`, trusting the certificates of
/// `cafile` (when not empty) besides the system's trust store.
pub fn http_client(timeout: Duration, cafile: &str) -> Result<reqwest::Client, ClientError> {
    let mut builder = reqwest::Client::builder().timeout(timeout);
    if !cafile.is_empty() {
        for certificate in read_cafile(cafile)? {
            builder = builder.add_root_certificate(certificate);
        }
    }
    Ok(builder.build()?)
}

/// Validates tokens with Keystone on behalf of Parasol's service user.
#[derive(Debug)]
pub struct KeystoneClient {
    session: KeystoneSession,
}

/// `…/v3/auth/tokens` for a configured Keystone URL with or without its `/v3`.
pub fn tokens_url(keystone_url: &str) -> String {
    let base = keystone_url.trim_end_matches('/');
    if base.ends_with("/v3") {
        format!("{base}/auth/tokens")
    } else {
        format!("{base}/v3/auth/tokens")
    }
}

fn unreachable(e: reqwest::Error) -> KeystoneError {
    // reqwest's message names the URL: without a password, whatever the configured URL holds.
    KeystoneError::Unreachable(crate::redact::with_cause(&e))
}

async fn body_excerpt(response: reqwest::Response) -> String {
    let text = response.text().await.unwrap_or_default();
    text.chars().take(300).collect()
}

impl KeystoneSession {
    /// A session for `credentials`, each request abandoned after `timeout`; with `catalog`
    /// the token is asked for with its catalog and the service's endpoint read from it.
    pub fn new<U: ServiceUser>(
        credentials: &KeystoneCredentials<U>,
        timeout: Duration,
        catalog: Option<Catalog>,
        clock: SharedClock,
    ) -> Result<Self, ClientError> {
        let http = http_client(timeout, &credentials.cafile)?;
        let c = credentials;
        let auth_body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": c.username, "password": c.password,
                "domain": {"name": c.user_domain_name}}}},
            "scope": {"project": {"name": c.project_name,
                                  "domain": {"name": c.project_domain_name}}}}});
        Ok(KeystoneSession {
            http,
            tokens_url: tokens_url(&c.keystone_url),
            keystone_url: c.keystone_url.clone(),
            auth_body,
            username: c.username.clone(),
            project_name: c.project_name.clone(),
            section: U::SECTION,
            catalog,
            clock,
            token: tokio::sync::Mutex::new(None),
        })
    }

    pub fn keystone_url(&self) -> &str {
        &self.keystone_url
    }

    /// The HTTP client (its timeout), for requests made with the token.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The service token, asked for again when there is none, it is due for renewal, or
    /// `renew` is set (a service refused it).
    pub async fn token(&self, renew: bool) -> Result<Arc<ServiceToken>, KeystoneError> {
        let mut guard = self.token.lock().await;
        let now = self.clock.now_ms();
        match &*guard {
            Some(current) if !renew && now < current.renew_at_ms => Ok(current.clone()),
            _ => {
                let fresh = Arc::new(self.authenticate(now).await?);
                *guard = Some(fresh.clone());
                Ok(fresh)
            }
        }
    }

    /// `POST /v3/auth/tokens` with the service user's password, scoped to its project.
    async fn authenticate(&self, now_ms: i64) -> Result<ServiceToken, KeystoneError> {
        let mut request = self.http.post(&self.tokens_url);
        if self.catalog.is_none() {
            request = request.query(&[("nocatalog", "1")]);
        }
        let response = request
            .json(&self.auth_body)
            .send()
            .await
            .map_err(unreachable)?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(KeystoneError::ServiceCredentials {
                section: self.section,
                message: format!(
                    "{status} for user {:?} in project {:?}",
                    self.username, self.project_name
                ),
            });
        }
        let unexpected = |body: String| KeystoneError::Unexpected {
            what: "the service user's password authentication",
            status: status.as_u16(),
            body,
        };
        if !status.is_success() {
            return Err(unexpected(body_excerpt(response).await));
        }
        let token = response
            .headers()
            .get("X-Subject-Token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| unexpected("no X-Subject-Token header".into()))?;
        let body: Value = response
            .json()
            .await
            .map_err(|e| unexpected(format!("unreadable token: {e}")))?;
        let endpoint = match &self.catalog {
            None => None,
            Some(c) => Some(
                catalog_endpoint(&body, &c.service_type, &c.interface).ok_or_else(|| {
                    KeystoneError::NoEndpoint {
                        service_type: c.service_type.clone(),
                        interface: c.interface.clone(),
                    }
                })?,
            ),
        };
        let data = TokenBody::deserialize(&body)
            .map_err(|e| unexpected(format!("unreadable token: {e}")))?
            .token;
        let expires = parse_time(&data.expires_at).unwrap_or(now_ms);
        let issued = data
            .issued_at
            .as_deref()
            .and_then(parse_time)
            .unwrap_or(now_ms);
        Ok(ServiceToken {
            token,
            endpoint,
            renew_at_ms: renew_at(now_ms, issued, expires),
        })
    }
}

/// The URL of the first endpoint of `service_type` on `interface` in a token's catalog.
pub fn catalog_endpoint(token_body: &Value, service_type: &str, interface: &str) -> Option<String> {
    token_body["token"]["catalog"]
        .as_array()?
        .iter()
        .filter(|service| service["type"] == service_type)
        .flat_map(|service| service["endpoints"].as_array().into_iter().flatten())
        .find(|endpoint| endpoint["interface"] == interface)
        .and_then(|endpoint| endpoint["url"].as_str())
        .map(str::to_string)
}

impl KeystoneClient {
    pub fn new(settings: &AuthSettings, clock: SharedClock) -> Result<Self, ClientError> {
        let timeout = Duration::from_secs_f64(settings.timeout_s);
        Ok(KeystoneClient {
            session: KeystoneSession::new(&settings.keystone, timeout, None, clock)?,
        })
    }

    pub fn keystone_url(&self) -> &str {
        self.session.keystone_url()
    }

    /// Keystone's verdict on `token`: `Ok(Some(identity))` if valid, `Ok(None)` if Keystone
    /// does not know it (404: malformed, expired or revoked).
    pub async fn validate(&self, token: &str) -> Result<Option<Identity>, KeystoneError> {
        for renew in [false, true] {
            let service = self.session.token(renew).await?;
            let response = self
                .session
                .http
                .get(&self.session.tokens_url)
                .header("X-Auth-Token", &service.token)
                .header("X-Subject-Token", token)
                .header("Accept", "application/json")
                .send()
                .await
                .map_err(unreachable)?;
            match response.status() {
                StatusCode::OK => {
                    let body: TokenBody =
                        response
                            .json()
                            .await
                            .map_err(|e| KeystoneError::Unexpected {
                                what: "a token validation",
                                status: 200,
                                body: format!("unreadable token: {e}"),
                            })?;
                    return Ok(Some(identity(body.token)?));
                }
                StatusCode::NOT_FOUND => return Ok(None),
                // Our own token was refused (expired early, revoked, keys rotated): once more
                // with a fresh one.
                StatusCode::UNAUTHORIZED if !renew => continue,
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                    return Err(KeystoneError::ServiceCredentials {
                        section: self.session.section,
                        message: format!(
                            "the service user may not validate tokens ({}): give it the \
                             service or admin role in its project",
                            response.status()
                        ),
                    })
                }
                status => {
                    return Err(KeystoneError::Unexpected {
                        what: "a token validation",
                        status: status.as_u16(),
                        body: body_excerpt(response).await,
                    })
                }
            }
        }
        Err(KeystoneError::ServiceCredentials {
            section: self.session.section,
            message: "the service token was refused twice".into(),
        })
    }
}

/// When to ask for a new service token: halfway through its life, at most 5 minutes before
/// its end (lifetimes are measured by Keystone's clock, the deadline set on ours).
pub fn renew_at(now_ms: i64, issued_ms: i64, expires_ms: i64) -> i64 {
    let lifetime = (expires_ms - issued_ms).max(0);
    now_ms + lifetime - (lifetime / 2).min(300_000)
}

fn identity(data: TokenData) -> Result<Identity, KeystoneError> {
    let expires_ms = parse_time(&data.expires_at).ok_or_else(|| KeystoneError::Unexpected {
        what: "a token validation",
        status: 200,
        body: format!("expires_at {:?} is not a time", data.expires_at),
    })?;
    Ok(Identity {
        user_id: if data.user.id.is_empty() {
            data.user.name
        } else {
            data.user.id
        },
        project_id: data.project.map(|p| p.id),
        roles: data.roles.into_iter().map(|r| r.name).collect(),
        expires_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_token_is_renewed_before_it_expires() {
        let hour = 3_600_000;
        assert_eq!(renew_at(0, 0, hour), hour - 300_000);
        // A short lifetime: halfway.
        assert_eq!(renew_at(1_000, 0, 60_000), 1_000 + 30_000);
        // Keystone's clock ahead of ours: the lifetime counts, not the absolute time.
        assert_eq!(renew_at(0, 10 * hour, 11 * hour), hour - 300_000);
    }

    #[test]
    fn catalog_endpoint_picks_the_service_on_the_asked_interface() {
        let body = json!({"token": {"catalog": [
            {"type": "compute", "endpoints": [{"interface": "public", "url": "http://n/compute"}]},
            {"type": "placement", "endpoints": [
                {"interface": "internal", "url": "http://10.0.0.1/placement"},
                {"interface": "public", "url": "http://ctl/placement"}]}]}});
        assert_eq!(
            catalog_endpoint(&body, "placement", "public").as_deref(),
            Some("http://ctl/placement")
        );
        assert_eq!(
            catalog_endpoint(&body, "placement", "internal").as_deref(),
            Some("http://10.0.0.1/placement")
        );
        assert_eq!(catalog_endpoint(&body, "placement", "admin"), None);
    }

    #[test]
    fn the_tokens_url_gets_v3_once() {
        assert_eq!(
            tokens_url("http://k/identity"),
            "http://k/identity/v3/auth/tokens"
        );
        assert_eq!(
            tokens_url("http://k/identity/v3/"),
            "http://k/identity/v3/auth/tokens"
        );
    }
}
