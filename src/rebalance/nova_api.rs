//! The few calls of Nova's compute API that `parasol rebalance apply` makes (docs/fmu.md
//! §8.6), all at microversion 2.68 as an admin: a server's state, every server's state, the
//! server groups, a server's migrations, and `os-migrateLive` with `{host, block_migration:
//! "auto"}` (2.68: no `force`, so Nova's scheduler checks the destination).
//!
//! Authentication is Parasol's: the Keystone session of `[placement]`'s service user (Nova's,
//! by default; the compute endpoint from its catalog when `[rebalance] nova_url` is empty),
//! or a static token (`[rebalance] nova_auth = "token"`).

use crate::auth::{Catalog, KeystoneSession};
use crate::clock::SharedClock;
use crate::configuration::Settings;
use serde_json::{json, Value};
use std::time::Duration;

/// The microversion of every call: `os-migrateLive` without `force` (2.68), migrations
/// filtered by instance and type (2.59), server groups with `policy` (2.64).
pub const COMPUTE_MICROVERSION: &str = "2.68";

/// Why a call to Nova gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum NovaError {
    #[error("cannot reach Nova's compute API at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("authenticating to Nova's compute API: {0}")]
    Auth(String),
    /// Nova's API (its `authtoken` filter) refused the token: 401 to the static token, or to
    /// a Keystone token and then to a fresh one.
    #[error("Nova's compute API refused {whose} (401 Unauthorized) to {what} at {url}: {message}")]
    Unauthorized {
        whose: String,
        what: String,
        url: String,
        message: String,
    },
    #[error("Nova answered {status} to {what}: {message}")]
    Status {
        what: String,
        status: u16,
        message: String,
    },
}

/// A server as the apply reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerView {
    pub id: String,
    /// `ACTIVE`, `SHUTOFF`, `MIGRATING`, `ERROR`, …
    pub status: String,
    /// `OS-EXT-STS:task_state` (`None` when idle).
    pub task_state: Option<String>,
    /// `OS-EXT-SRV-ATTR:host`: the compute service host.
    pub host: Option<String>,
    /// The fault's message, when the server has one.
    pub fault: Option<String>,
}

impl ServerView {
    fn from_json(s: &Value) -> ServerView {
        let text = |k: &str| s[k].as_str().map(String::from);
        ServerView {
            id: text("id").unwrap_or_default(),
            status: text("status").unwrap_or_default(),
            task_state: text("OS-EXT-STS:task_state"),
            host: text("OS-EXT-SRV-ATTR:host"),
            fault: s["fault"]["message"].as_str().map(String::from),
        }
    }
}

/// A server group: its policy and members.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupView {
    pub id: String,
    /// `affinity`, `anti-affinity`, `soft-affinity`, `soft-anti-affinity`.
    pub policy: String,
    pub members: Vec<String>,
}

/// How the apply authenticates to Nova.
#[derive(Debug)]
enum Auth {
    /// `[placement]`'s service user, named in errors.
    Keystone(Box<KeystoneSession>, String),
    Token(String),
}

impl Auth {
    /// Whose token Nova refused, for the error.
    fn whose(&self) -> String {
        match self {
            Auth::Token(_) => "the static token ([rebalance] nova_token)".into(),
            Auth::Keystone(_, user) => format!(
                "the Keystone token of [placement]'s user {user}, and a fresh one from Keystone"
            ),
        }
    }
}

/// A client of Nova's compute API.
#[derive(Debug)]
pub struct ComputeApi {
    http: reqwest::Client,
    /// `…/v2.1` (empty: the catalog's).
    url: String,
    auth: Auth,
}

impl ComputeApi {
    /// The client `settings` describe (`[rebalance] nova_url`, `nova_auth`, `nova_token`;
    /// `[placement]`'s service user for Keystone).
    pub fn new(settings: &Settings, clock: SharedClock) -> Result<Self, NovaError> {
        let r = &settings.rebalance;
        let timeout = Duration::from_secs_f64(r.nova_timeout_s);
        let http = crate::auth::http_client(timeout, &settings.placement.keystone.cafile)
            .map_err(|e| NovaError::Auth(e.to_string()))?;
        let auth = if r.nova_auth == crate::configuration::NovaAuth::Token {
            Auth::Token(r.nova_token.clone())
        } else {
            let catalog = r.nova_url.is_empty().then(|| Catalog {
                service_type: "compute".into(),
                interface: settings.placement.interface.clone(),
            });
            let session =
                KeystoneSession::new(&settings.placement.keystone, timeout, catalog, clock)
                    .map_err(|e| NovaError::Auth(e.to_string()))?;
            Auth::Keystone(
                Box::new(session),
                settings.placement.keystone.username.clone(),
            )
        };
        Ok(ComputeApi {
            http,
            url: r.nova_url.clone(),
            auth,
        })
    }

    /// The token and the endpoint (renewing the token when `renew`).
    async fn session(&self, renew: bool) -> Result<(String, String), NovaError> {
        match &self.auth {
            Auth::Token(t) => Ok((t.clone(), self.url.clone())),
            Auth::Keystone(k, _) => {
                let token = k
                    .token(renew)
                    .await
                    .map_err(|e| NovaError::Auth(e.to_string()))?;
                let url = if self.url.is_empty() {
                    token.endpoint.clone().unwrap_or_default()
                } else {
                    self.url.clone()
                };
                Ok((token.token.clone(), url))
            }
        }
    }

    /// One call: the status and the JSON body (`null` when empty). A Keystone token Nova
    /// refuses (401) is renewed once; a 401 to the static token or to the renewed one is
    /// `Unauthorized`, whatever the call (`what` names it).
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<(u16, Value), NovaError> {
        let mut renew = false;
        loop {
            let (token, base) = self.session(renew).await?;
            let url = format!("{}{path}", base.trim_end_matches('/'));
            let mut request = self
                .http
                .request(method.clone(), &url)
                .header("X-Auth-Token", token)
                .header(
                    "OpenStack-API-Version",
                    format!("compute {COMPUTE_MICROVERSION}"),
                )
                .header("X-OpenStack-Nova-API-Version", COMPUTE_MICROVERSION)
                .header("Accept", "application/json");
            if let Some(body) = body {
                request = request.json(body);
            }
            let response = request.send().await.map_err(|e| NovaError::Unreachable {
                url: url.clone(),
                reason: e.to_string(),
            })?;
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            let answer = serde_json::from_str(&text).unwrap_or(Value::Null);
            if status != 401 {
                return Ok((status, answer));
            }
            if matches!(self.auth, Auth::Keystone(..)) && !renew {
                renew = true;
                continue;
            }
            return Err(NovaError::Unauthorized {
                whose: self.auth.whose(),
                what: what.to_string(),
                url,
                message: if answer.is_null() {
                    text
                } else {
                    nova_message(&answer)
                },
            });
        }
    }

    async fn get(&self, path: &str, what: &str) -> Result<Value, NovaError> {
        let (status, body) = self.call(reqwest::Method::GET, path, None, what).await?;
        if status >= 300 {
            return Err(NovaError::Status {
                what: what.to_string(),
                status,
                message: nova_message(&body),
            });
        }
        Ok(body)
    }

    /// One server.
    pub async fn server(&self, id: &str) -> Result<ServerView, NovaError> {
        let body = self
            .get(&format!("/servers/{id}"), &format!("GET server {id}"))
            .await?;
        Ok(ServerView::from_json(&body["server"]))
    }

    /// Every server of every project (`all_tenants`), page by page.
    pub async fn servers(&self) -> Result<Vec<ServerView>, NovaError> {
        let mut out: Vec<ServerView> = Vec::new();
        loop {
            let mut path = "/servers/detail?all_tenants=1&limit=1000".to_string();
            if let Some(last) = out.last() {
                path.push_str(&format!("&marker={}", last.id));
            }
            let body = self.get(&path, "GET servers").await?;
            let page: Vec<ServerView> = body["servers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(ServerView::from_json)
                .collect();
            let done = page.len() < 1000;
            out.extend(page);
            if done {
                return Ok(out);
            }
        }
    }

    /// Every server group of every project.
    pub async fn server_groups(&self) -> Result<Vec<GroupView>, NovaError> {
        let body = self
            .get("/os-server-groups?all_projects=True", "GET server groups")
            .await?;
        Ok(body["server_groups"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|g| GroupView {
                id: g["id"].as_str().unwrap_or_default().to_string(),
                policy: g["policy"].as_str().unwrap_or_default().to_string(),
                members: g["members"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|m| m.as_str().map(String::from))
                    .collect(),
            })
            .collect())
    }

    /// The newest live migration of `server`: its status and destination host.
    pub async fn last_live_migration(
        &self,
        server: &str,
    ) -> Result<Option<(String, Option<String>)>, NovaError> {
        let path = format!("/os-migrations?instance_uuid={server}&migration_type=live-migration");
        let body = self
            .get(&path, &format!("GET migrations of {server}"))
            .await?;
        let newest = body["migrations"]
            .as_array()
            .into_iter()
            .flatten()
            .max_by_key(|m| m["id"].as_i64().unwrap_or(0));
        Ok(newest.map(|m| {
            (
                m["status"].as_str().unwrap_or_default().to_string(),
                m["dest_compute"].as_str().map(String::from),
            )
        }))
    }

    /// Asks Nova to live-migrate `server` to `host` (`block_migration: "auto"`); `Err` with
    /// Nova's status and message when it refuses.
    pub async fn live_migrate(&self, server: &str, host: &str) -> Result<(), NovaError> {
        let body = json!({"os-migrateLive": {"host": host, "block_migration": "auto"}});
        let path = format!("/servers/{server}/action");
        let what = format!("os-migrateLive of {server} to {host}");
        let (status, answer) = self
            .call(reqwest::Method::POST, &path, Some(&body), &what)
            .await?;
        if status == 202 {
            return Ok(());
        }
        Err(NovaError::Status {
            what,
            status,
            message: nova_message(&answer),
        })
    }
}

/// The message of a Nova error body (`{"badRequest": {"message": …}}` and the like).
pub fn nova_message(body: &Value) -> String {
    body.as_object()
        .and_then(|o| o.values().find_map(|v| v["message"].as_str()))
        .map(String::from)
        .unwrap_or_else(|| body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nova_error_bodies_give_their_message() {
        let body = json!({"badRequest": {"code": 400, "message": "Compute service of host2 is unavailable at this time."}});
        assert_eq!(
            nova_message(&body),
            "Compute service of host2 is unavailable at this time."
        );
        assert_eq!(nova_message(&json!({"x": 1})), "{\"x\":1}");
    }

    #[test]
    fn a_server_reads_its_state_host_and_fault() {
        let s = ServerView::from_json(&json!({
            "id": "a", "status": "ERROR", "OS-EXT-STS:task_state": null,
            "OS-EXT-SRV-ATTR:host": "host1", "fault": {"message": "boom"}
        }));
        assert_eq!(s.task_state, None);
        assert_eq!(s.host.as_deref(), Some("host1"));
        assert_eq!(s.fault.as_deref(), Some("boom"));
    }
}
