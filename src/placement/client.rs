//! A small Placement client: Keystone v3 password auth (or a static token, or noauth2),
//! the microversion header, and the reads a sync needs.

use super::settings::{AuthKind, PlacementSettings};
use super::PlacementError;
use crate::domain::Inventory;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// A token and the Placement endpoint it is used on.
#[derive(Clone, Debug)]
struct Session {
    token: String,
    endpoint: String,
}

/// Talks to Placement; re-authenticates when a token is refused.
#[derive(Debug)]
pub struct PlacementClient {
    http: reqwest::Client,
    settings: PlacementSettings,
    session: tokio::sync::Mutex<Option<Session>>,
}

/// One resource provider as `GET /resource_providers` lists it.
#[derive(Clone, Debug, Deserialize)]
pub struct Provider {
    pub uuid: String,
    pub name: String,
    #[serde(default)]
    pub parent_provider_uuid: Option<String>,
}

/// One consumer's allocation on a provider.
#[derive(Clone, Debug, Deserialize)]
pub struct ConsumerAllocation {
    pub resources: BTreeMap<String, i64>,
}

#[derive(Deserialize)]
struct Providers {
    resource_providers: Vec<Provider>,
}

#[derive(Deserialize)]
struct Inventories {
    inventories: BTreeMap<String, Inventory>,
}

#[derive(Deserialize)]
struct Allocations {
    allocations: BTreeMap<String, ConsumerAllocation>,
}

#[derive(Deserialize)]
struct TraitList {
    traits: Vec<String>,
}

#[derive(Deserialize)]
struct AggregateList {
    aggregates: Vec<String>,
}

impl PlacementClient {
    pub fn new(settings: PlacementSettings) -> Result<Self, PlacementError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs_f64(settings.timeout_s))
            .build()
            .map_err(PlacementError::Http)?;
        Ok(PlacementClient {
            http,
            settings,
            session: tokio::sync::Mutex::new(None),
        })
    }

    /// Every resource provider.
    pub async fn providers(&self) -> Result<Vec<Provider>, PlacementError> {
        Ok(self
            .get::<Providers>("/resource_providers")
            .await?
            .resource_providers)
    }

    /// A provider's inventories by resource class.
    pub async fn inventories(
        &self,
        provider: &str,
    ) -> Result<BTreeMap<String, Inventory>, PlacementError> {
        let path = format!("/resource_providers/{provider}/inventories");
        Ok(self.get::<Inventories>(&path).await?.inventories)
    }

    /// A provider's traits.
    pub async fn traits(&self, provider: &str) -> Result<Vec<String>, PlacementError> {
        let path = format!("/resource_providers/{provider}/traits");
        Ok(self.get::<TraitList>(&path).await?.traits)
    }

    /// The uuids of the aggregates a provider is a member of.
    pub async fn aggregates(&self, provider: &str) -> Result<Vec<String>, PlacementError> {
        let path = format!("/resource_providers/{provider}/aggregates");
        Ok(self.get::<AggregateList>(&path).await?.aggregates)
    }

    /// The allocations on a provider, by consumer uuid.
    pub async fn allocations(
        &self,
        provider: &str,
    ) -> Result<BTreeMap<String, ConsumerAllocation>, PlacementError> {
        let path = format!("/resource_providers/{provider}/allocations");
        Ok(self.get::<Allocations>(&path).await?.allocations)
    }

    /// One request at microversion `version` with an optional JSON body, authenticating again
    /// once if the token was refused: the status and the body (`null` when empty or not
    /// JSON). Only a transport failure or a refused authentication is an error; the caller
    /// judges the status.
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        version: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), PlacementError> {
        for retry in [false, true] {
            let session = self.session(retry).await?;
            let url = format!("{}{}", session.endpoint.trim_end_matches('/'), path);
            let mut request = self
                .http
                .request(method.clone(), &url)
                .header("X-Auth-Token", &session.token)
                .header("OpenStack-API-Version", format!("placement {version}"))
                .header("Accept", "application/json");
            if let Some(body) = body {
                request = request.json(body);
            }
            let response = request.send().await.map_err(PlacementError::Http)?;
            let status = response.status();
            if status == reqwest::StatusCode::UNAUTHORIZED && !retry {
                continue;
            }
            let text = response.text().await.map_err(PlacementError::Http)?;
            let value = serde_json::from_str(&text).unwrap_or(Value::Null);
            return Ok((status.as_u16(), value));
        }
        Err(PlacementError::Auth("token refused twice".into()))
    }

    /// GETs `path` on Placement, authenticating again once if the token was refused.
    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, PlacementError> {
        for retry in [false, true] {
            let session = self.session(retry).await?;
            let url = format!("{}{}", session.endpoint.trim_end_matches('/'), path);
            let response = self
                .http
                .get(&url)
                .header("X-Auth-Token", &session.token)
                .header(
                    "OpenStack-API-Version",
                    format!("placement {}", self.settings.microversion),
                )
                .header("Accept", "application/json")
                .send()
                .await
                .map_err(PlacementError::Http)?;
            let status = response.status();
            if status == reqwest::StatusCode::UNAUTHORIZED && !retry {
                continue;
            }
            if !status.is_success() {
                let body = response.text().await.unwrap_or_default();
                return Err(PlacementError::Status {
                    url,
                    status: status.as_u16(),
                    body: body.chars().take(300).collect(),
                });
            }
            return response.json::<T>().await.map_err(PlacementError::Http);
        }
        Err(PlacementError::Auth("token refused twice".into()))
    }

    /// The current session, authenticating when there is none or `renew` is set.
    async fn session(&self, renew: bool) -> Result<Session, PlacementError> {
        let mut guard = self.session.lock().await;
        if renew || guard.is_none() {
            *guard = Some(self.authenticate().await?);
        }
        guard
            .clone()
            .ok_or_else(|| PlacementError::Auth("no session".into()))
    }

    async fn authenticate(&self) -> Result<Session, PlacementError> {
        let s = &self.settings;
        match s.auth {
            AuthKind::Noauth => Ok(Session {
                token: "admin".into(),
                endpoint: s.url.clone(),
            }),
            AuthKind::Token => Ok(Session {
                token: s.token.clone(),
                endpoint: s.url.clone(),
            }),
            AuthKind::Keystone => self.keystone().await,
        }
    }

    /// `POST /v3/auth/tokens` with a password scoped to the project; the token is in the
    /// `X-Subject-Token` header, Placement's endpoint in the catalog (type `placement`).
    async fn keystone(&self) -> Result<Session, PlacementError> {
        let s = &self.settings;
        let base = s.keystone_url.trim_end_matches('/');
        let url = if base.ends_with("/v3") {
            format!("{base}/auth/tokens")
        } else {
            format!("{base}/v3/auth/tokens")
        };
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": s.username, "password": s.password,
                "domain": {"name": s.user_domain_name}}}},
            "scope": {"project": {"name": s.project_name,
                                  "domain": {"name": s.project_domain_name}}}}});
        let response = self
            .http
            .post(&url)
            .json(&body)
            .send()
            .await
            .map_err(PlacementError::Http)?;
        if !response.status().is_success() {
            return Err(PlacementError::Auth(format!(
                "Keystone {url} answered {}",
                response.status()
            )));
        }
        let token = response
            .headers()
            .get("X-Subject-Token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| {
                PlacementError::Auth("no X-Subject-Token in Keystone's answer".into())
            })?;
        let catalog: Value = response.json().await.map_err(PlacementError::Http)?;
        let endpoint = if s.url.is_empty() {
            catalog_endpoint(&catalog, "placement", &s.interface).ok_or_else(|| {
                PlacementError::Auth(format!(
                    "no {} placement endpoint in the catalog; set [placement] url",
                    s.interface
                ))
            })?
        } else {
            s.url.clone()
        };
        Ok(Session { token, endpoint })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_endpoint_picks_the_placement_service_on_the_asked_interface() {
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
}
