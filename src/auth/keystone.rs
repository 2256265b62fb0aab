//! The Keystone side of `strategy = "keystone"`: Parasol's own service token (v3 password auth,
//! renewed before it expires) and `GET /v3/auth/tokens` with `X-Subject-Token` to validate a
//! caller's token, as keystonemiddleware does.

use super::settings::AuthSettings;
use super::time::parse_time;
use crate::clock::SharedClock;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::json;
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
    #[error("Keystone refused Parasol's own credentials ([auth] username, password): {0}")]
    ServiceCredentials(String),
    #[error("Keystone answered {status} to {what}: {body}")]
    Unexpected {
        what: &'static str,
        status: u16,
        body: String,
    },
}

/// Parasol's service token.
#[derive(Clone, Debug)]
struct ServiceToken {
    token: String,
    renew_at_ms: i64,
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

/// Validates tokens with Keystone on behalf of Parasol's service user.
#[derive(Debug)]
pub struct KeystoneClient {
    http: reqwest::Client,
    tokens_url: String,
    settings: AuthSettings,
    clock: SharedClock,
    service: tokio::sync::Mutex<Option<ServiceToken>>,
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
    KeystoneError::Unreachable(super::redact_urls(&e.to_string()))
}

async fn body_excerpt(response: reqwest::Response) -> String {
    let text = response.text().await.unwrap_or_default();
    text.chars().take(300).collect()
}

impl KeystoneClient {
    pub fn new(settings: &AuthSettings, clock: SharedClock) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs_f64(settings.timeout_s))
            .build()?;
        Ok(KeystoneClient {
            http,
            tokens_url: tokens_url(&settings.keystone_url),
            settings: settings.clone(),
            clock,
            service: tokio::sync::Mutex::new(None),
        })
    }

    pub fn keystone_url(&self) -> &str {
        &self.settings.keystone_url
    }

    /// Keystone's verdict on `token`: `Ok(Some(identity))` if valid, `Ok(None)` if Keystone
    /// does not know it (404: malformed, expired or revoked).
    pub async fn validate(&self, token: &str) -> Result<Option<Identity>, KeystoneError> {
        for renew in [false, true] {
            let service = self.service_token(renew).await?;
            let response = self
                .http
                .get(&self.tokens_url)
                .header("X-Auth-Token", &service)
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
                    return Err(KeystoneError::ServiceCredentials(format!(
                        "the service user may not validate tokens ({}): give it the service \
                         or admin role in its project",
                        response.status()
                    )))
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
        Err(KeystoneError::ServiceCredentials(
            "the service token was refused twice".into(),
        ))
    }

    /// The service token, asked for again when there is none, it is due for renewal, or
    /// `renew` is set.
    async fn service_token(&self, renew: bool) -> Result<String, KeystoneError> {
        let mut guard = self.service.lock().await;
        let now = self.clock.now_ms();
        match &*guard {
            Some(current) if !renew && now < current.renew_at_ms => Ok(current.token.clone()),
            _ => {
                let fresh = self.authenticate(now).await?;
                let token = fresh.token.clone();
                *guard = Some(fresh);
                Ok(token)
            }
        }
    }

    /// `POST /v3/auth/tokens` with the service user's password, scoped to its project.
    async fn authenticate(&self, now_ms: i64) -> Result<ServiceToken, KeystoneError> {
        let s = &self.settings;
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": s.username, "password": s.password,
                "domain": {"name": s.user_domain_name}}}},
            "scope": {"project": {"name": s.project_name,
                                  "domain": {"name": s.project_domain_name}}}}});
        let response = self
            .http
            .post(&self.tokens_url)
            .query(&[("nocatalog", "1")])
            .json(&body)
            .send()
            .await
            .map_err(unreachable)?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(KeystoneError::ServiceCredentials(format!(
                "{status} for user {:?} in project {:?}",
                s.username, s.project_name
            )));
        }
        if !status.is_success() {
            return Err(KeystoneError::Unexpected {
                what: "Parasol's password authentication",
                status: status.as_u16(),
                body: body_excerpt(response).await,
            });
        }
        let token = response
            .headers()
            .get("X-Subject-Token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| KeystoneError::Unexpected {
                what: "Parasol's password authentication",
                status: status.as_u16(),
                body: "no X-Subject-Token header".into(),
            })?;
        let data = response
            .json::<TokenBody>()
            .await
            .map_err(|e| KeystoneError::Unexpected {
                what: "Parasol's password authentication",
                status: status.as_u16(),
                body: format!("unreadable token: {e}"),
            })?
            .token;
        let expires = parse_time(&data.expires_at).unwrap_or(now_ms);
        let issued = data
            .issued_at
            .as_deref()
            .and_then(parse_time)
            .unwrap_or(now_ms);
        Ok(ServiceToken {
            token,
            renew_at_ms: renew_at(now_ms, issued, expires),
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
