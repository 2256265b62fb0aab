//! A small Placement client: Keystone v3 password auth through [`KeystoneSession`] (or a
//! static token, or noauth2), the microversion header, and the reads a sync needs.

use super::settings::{AuthKind, PlacementSettings};
use super::PlacementError;
use crate::auth::{Catalog, KeystoneSession};
use crate::clock::SharedClock;
use crate::domain::Inventory;
use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;
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

/// A provider as [`Listing::providers`] reads it: its strings borrowed from the listing's body
/// where they hold no escape, so that a sync allocates nothing for the providers it already
/// knows.
#[derive(Debug, Deserialize)]
pub struct Listed<'a> {
    #[serde(borrow)]
    pub uuid: Cow<'a, str>,
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    #[serde(default, borrow)]
    pub parent_provider_uuid: Option<Cow<'a, str>>,
    #[serde(default)]
    pub generation: Option<i64>,
}

impl Listed<'_> {
    pub fn to_provider(&self) -> Provider {
        Provider {
            uuid: self.uuid.to_string(),
            name: self.name.to_string(),
            parent_provider_uuid: self.parent_provider_uuid.as_deref().map(str::to_string),
            generation: self.generation,
        }
    }
}

/// The body of `GET /resource_providers`, received whole into one buffer of the length
/// Placement announced (at 100,000 providers 77.6 MB, most of it each provider's six links:
/// a buffer grown as the body came was copied and its fresh pages zeroed again at each
/// doubling, a quarter of a listing's CPU).
pub struct Listing {
    body: Vec<u8>,
}

/// Providers a listing is expected to hold per byte of its body, for the list's first
/// allocation (Placement's listing at microversion 1.28 spends about 776 bytes a provider; a
/// wrong guess costs a reallocation, nothing else).
const LISTING_BYTES_PER_PROVIDER: usize = 700;

impl Listing {
    /// The providers listed, in Placement's order.
    pub fn providers(&self) -> Result<Vec<Listed<'_>>, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_slice(&self.body);
        let listed = ListingSeed {
            capacity: self.body.len() / LISTING_BYTES_PER_PROVIDER,
        }
        .deserialize(&mut de)?;
        de.end()?;
        Ok(listed)
    }
}

/// `{"resource_providers": [...]}` into a list allocated once at `capacity`; other keys
/// ignored.
struct ListingSeed {
    capacity: usize,
}

impl<'de> DeserializeSeed<'de> for ListingSeed {
    type Value = Vec<Listed<'de>>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ListingSeed {
    type Value = Vec<Listed<'de>>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object with a resource_providers list")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut listed = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if key == "resource_providers" {
                listed = Some(map.next_value_seed(ListSeed(self.capacity))?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        listed.ok_or_else(|| serde::de::Error::missing_field("resource_providers"))
    }
}

/// The list itself, allocated once at its expected length.
struct ListSeed(usize);

impl<'de> DeserializeSeed<'de> for ListSeed {
    type Value = Vec<Listed<'de>>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ListSeed {
    type Value = Vec<Listed<'de>>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of resource providers")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut listed = Vec::with_capacity(self.0);
        while let Some(provider) = seq.next_element()? {
            listed.push(provider);
        }
        Ok(listed)
    }
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

    /// Every resource provider: `GET /resource_providers`, its body received whole (read it
    /// with [`Listing::providers`]).
    pub async fn listing(&self) -> Result<Listing, PlacementError> {
        let mut response = self.get_response("/resource_providers").await?;
        // Announced by Placement (WebOb sets it); believed up to a bound, so that a wrong
        // header cannot ask for more memory than a listing of millions of providers takes.
        let announced = response.content_length().unwrap_or(0).min(1 << 30);
        let mut body = Vec::with_capacity(usize::try_from(announced).unwrap_or(0));
        while let Some(chunk) = response.chunk().await.map_err(PlacementError::Http)? {
            body.extend_from_slice(&chunk);
        }
        Ok(Listing { body })
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

    /// A consumer's allocations, by provider uuid (`GET /allocations/{consumer}`: none when
    /// Placement holds nothing of it).
    pub async fn consumer_allocations(
        &self,
        consumer: &str,
    ) -> Result<BTreeMap<String, ConsumerAllocation>, PlacementError> {
        let path = format!("/allocations/{consumer}");
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
        let response = self.get_response(path).await?;
        response.json::<T>().await.map_err(PlacementError::Http)
    }

    /// The answer to a GET of `path` when it succeeded, authenticating again once if the token
    /// was refused.
    async fn get_response(&self, path: &str) -> Result<reqwest::Response, PlacementError> {
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
            return Ok(response);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn listing_of(body: &str) -> Listing {
        Listing {
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_listing_borrows_plain_strings_unescapes_the_others_and_skips_the_links() {
        let body = r#"{"resource_providers": [
            {"uuid": "28e8bd7b-b340-43a2-d09f-3a8b27f4149f", "name": "bench-1", "generation": 3,
             "links": [{"rel": "self", "href": "/resource_providers/28e8bd7b"}],
             "parent_provider_uuid": null, "root_provider_uuid": "28e8bd7b-b340-43a2-d09f-3a8b27f4149f"},
            {"uuid": "5b0c1a6e-0000-4000-8000-000000000002", "name": "n\u00e9ud \"2\"",
             "parent_provider_uuid": "28e8bd7b-b340-43a2-d09f-3a8b27f4149f"}
        ], "other": {"ignored": [1, 2]}}"#;
        let listing = listing_of(body);
        let listed = listing.providers().unwrap();
        assert_eq!(listed.len(), 2);
        assert!(matches!(listed[0].uuid, Cow::Borrowed(_)));
        assert!(matches!(listed[0].name, Cow::Borrowed("bench-1")));
        assert_eq!(listed[0].generation, Some(3));
        assert_eq!(listed[0].parent_provider_uuid, None);
        // An escape cannot be borrowed: the name is unescaped into its own string.
        assert!(matches!(&listed[1].name, Cow::Owned(n) if n == "néud \"2\""));
        let owned = listed[1].to_provider();
        assert_eq!(owned.name, "néud \"2\"");
        assert_eq!(owned.generation, None);
        assert_eq!(
            owned.parent_provider_uuid.as_deref(),
            Some("28e8bd7b-b340-43a2-d09f-3a8b27f4149f")
        );
        // An empty list, and the list's expected length from a body too short to hint one.
        assert!(listing_of(r#"{"resource_providers": []}"#)
            .providers()
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_listing_that_is_not_placement_s_is_refused_with_what_is_wrong() {
        for (body, says) in [
            (r#"{"providers": []}"#, "missing field `resource_providers`"),
            (
                r#"{"resource_providers": [{"name": "x"}]}"#,
                "missing field `uuid`",
            ),
            (
                r#"{"resource_providers": {}}"#,
                "a list of resource providers",
            ),
            (
                r#"{"resource_providers": []} trailing"#,
                "trailing characters",
            ),
            (r#"[1]"#, "an object with a resource_providers list"),
            ("", "EOF"),
        ] {
            let error = listing_of(body).providers().unwrap_err().to_string();
            assert!(error.contains(says), "{body}: {error}");
        }
    }
}
