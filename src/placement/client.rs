//! A small Placement client: Keystone v3 password auth through [`KeystoneSession`] (or a
//! static token, or noauth2), the microversion header, and the reads a sync needs.

use super::settings::{AuthKind, PlacementSettings};
use super::PlacementError;
use crate::auth::{Catalog, KeystoneSession};
use crate::clock::SharedClock;
use crate::domain::Inventory;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
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
    /// With `auth = "keystone"`: the service user's session (the endpoint from the catalog
    /// when `url` is empty).
    keystone: Option<KeystoneSession>,
}

/// One resource provider as `GET /resource_providers` lists it.
#[derive(Clone, Debug, Deserialize)]
pub struct Provider {
    pub uuid: String,
    pub name: String,
    #[serde(default)]
    pub parent_provider_uuid: Option<String>,
    /// Raised by Placement when the provider's inventories, traits or aggregates (≥ 1.19) are
    /// set or allocations are written on it; not when an allocation leaves it.
    #[serde(default)]
    pub generation: Option<i64>,
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
    /// A client for `settings`; a Keystone token is renewed on `clock`.
    pub fn new(settings: PlacementSettings, clock: SharedClock) -> Result<Self, PlacementError> {
        let timeout = Duration::from_secs_f64(settings.timeout_s);
        let http = crate::auth::http_client(timeout, &settings.keystone.cafile)?;
        let keystone = match settings.auth {
            AuthKind::Keystone => {
                let catalog = settings.url.is_empty().then(|| Catalog {
                    service_type: "placement".into(),
                    interface: settings.interface.clone(),
                });
                let session = KeystoneSession::new(&settings.keystone, timeout, catalog, clock)?;
                Some(session)
            }
            AuthKind::Token | AuthKind::Noauth => None,
        };
        Ok(PlacementClient {
            http,
            settings,
            keystone,
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

    /// The token and endpoint to use, from the Keystone session (renewed when due, or when
    /// `renew` is set: Placement refused the token) or the settings.
    async fn session(&self, renew: bool) -> Result<Session, PlacementError> {
        let s = &self.settings;
        let fixed = |token: &str| Session {
            token: token.to_string(),
            endpoint: s.url.clone(),
        };
        match (&self.keystone, s.auth) {
            (_, AuthKind::Noauth) => Ok(fixed("admin")),
            (_, AuthKind::Token) => Ok(fixed(&s.token)),
            (Some(keystone), AuthKind::Keystone) => {
                let token = keystone.token(renew).await?;
                Ok(Session {
                    token: token.token.clone(),
                    endpoint: token.endpoint.clone().unwrap_or_else(|| s.url.clone()),
                })
            }
            (None, AuthKind::Keystone) => Err(PlacementError::Auth("no Keystone session".into())),
        }
    }
}
