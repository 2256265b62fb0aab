//! Claims in Placement, as Nova 34's scheduler makes them: `SchedulerReportClient
//! .claim_resources` (`GET /allocations/{consumer}` at 1.28, then `PUT` the allocation request
//! at 1.36 with `project_id`, `user_id` and the consumer generation, the current allocations
//! merged in for an evacuation) and `_cleanup_allocations` (`DELETE /allocations/{consumer}`).

use super::client::PlacementClient;
use super::settings::PlacementSettings;
use super::PlacementError;
use crate::clock::SharedClock;
use reqwest::Method;
use serde_json::{json, Map, Value};

/// Nova's `CONSUMER_GENERATION_VERSION`: the microversion of the `GET` and the `DELETE`.
pub const CONSUMER_GENERATION_VERSION: &str = "1.28";

/// Nova's `SAME_SUBTREE_VERSION`: the microversion of `GET /allocation_candidates`.
pub const SAME_SUBTREE_VERSION: &str = "1.36";

/// Tries of one claim when Placement reports a provider generation race (Nova's `@retries`:
/// four tries; the race is Placement-internal, so the request is simply made again).
const TRIES: usize = 4;

/// The answer of Placement to one claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlacementClaim {
    /// `204`: the allocation is Placement's.
    Claimed,
    /// `409`: no room in Placement's view, or the consumer changed meanwhile; Placement's
    /// detail.
    Conflict(String),
}

/// The claims of one Parasol process in Placement.
/// The first microversion with forbidden traits (`required=!TRAIT`).
const FORBIDDEN_TRAITS_VERSION: &str = "1.22";

#[derive(Debug)]
pub struct PlacementClaims {
    client: PlacementClient,
}

impl PlacementClaims {
    pub fn new(settings: PlacementSettings, clock: SharedClock) -> Result<Self, PlacementError> {
        Ok(PlacementClaims {
            client: PlacementClient::new(settings, clock)?,
        })
    }

    /// The uuids of the providers with every trait of `required` and none of `forbidden`
    /// (`GET /resource_providers?required=A,!B`, microversion 1.22). Nova's scheduler asks
    /// Placement the same on every call, as part of its allocation candidates.
    pub async fn providers_with_traits(
        &self,
        required: &[impl AsRef<str>],
        forbidden: &[impl AsRef<str>],
    ) -> Result<std::collections::HashSet<String>, PlacementError> {
        let terms: Vec<String> = required
            .iter()
            .map(|t| t.as_ref().to_string())
            .chain(forbidden.iter().map(|t| format!("!{}", t.as_ref())))
            .collect();
        let path = format!("/resource_providers?required={}", terms.join(","));
        let (status, body) = self
            .client
            .send(Method::GET, &path, FORBIDDEN_TRAITS_VERSION, None)
            .await?;
        let providers = body["resource_providers"]
            .as_array()
            .filter(|_| status == 200);
        let Some(providers) = providers else {
            return Err(PlacementError::Status {
                url: path,
                status,
                body: body.to_string(),
            });
        };
        Ok(providers
            .iter()
            .filter_map(|p| p["uuid"].as_str().map(str::to_string))
            .collect())
    }

    /// Nova's `get_allocation_candidates`: `GET /allocation_candidates?<query>` at
    /// microversion 1.36 (`SAME_SUBTREE_VERSION`), `query` being the resource request's
    /// `to_querystring`; Placement's answer (`allocation_requests`, `provider_summaries`).
    /// Any status but 200 is an error with Placement's body.
    pub async fn allocation_candidates(&self, query: &str) -> Result<Value, PlacementError> {
        let path = format!("/allocation_candidates?{query}");
        let (status, body) = self
            .client
            .send(Method::GET, &path, SAME_SUBTREE_VERSION, None)
            .await?;
        if status != 200 {
            return Err(PlacementError::status(path, status, &body));
        }
        Ok(body)
    }

    /// A provider's traits now.
    pub async fn traits(&self, provider: &str) -> Result<Vec<String>, PlacementError> {
        self.client.traits(provider).await
    }

    /// Claims `allocation_request` (an allocation candidate's body, [`crate::nova::
    /// allocation_request_body`]) for `consumer` at microversion `version`, as Nova's
    /// `claim_resources` does with `consumer_generation=None`: when the consumer already holds
    /// allocations (an evacuation), they are kept and the request's new providers added, under
    /// the consumer's current generation.
    pub async fn claim(
        &self,
        consumer: &str,
        allocation_request: &Value,
        version: &str,
        project_id: &str,
        user_id: &str,
    ) -> Result<PlacementClaim, PlacementError> {
        let path = format!("/allocations/{consumer}");
        let mut last = String::new();
        for _ in 0..TRIES {
            let (status, current) = self
                .client
                .send(Method::GET, &path, CONSUMER_GENERATION_VERSION, None)
                .await?;
            let mut payload = allocation_request.clone();
            let mut generation = Value::Null;
            if status == 200 {
                if let Some(existing) = current["allocations"].as_object().filter(|a| !a.is_empty())
                {
                    generation = current["consumer_generation"].clone();
                    payload = move_operation_request(existing, allocation_request);
                }
            }
            payload["project_id"] = json!(project_id);
            payload["user_id"] = json!(user_id);
            payload["consumer_generation"] = generation;
            let (status, body) = self
                .client
                .send(Method::PUT, &path, version, Some(&payload))
                .await?;
            match status {
                200..=299 => return Ok(PlacementClaim::Claimed),
                409 => {
                    let error = &body["errors"][0];
                    let detail = error["detail"].as_str().unwrap_or_default().trim();
                    let detail = detail
                        .strip_prefix("There was a conflict when trying to complete your request.")
                        .unwrap_or(detail)
                        .trim()
                        .to_string();
                    let provider_race = error["code"] == "placement.concurrent_update"
                        && !detail.contains("consumer generation conflict");
                    if !provider_race {
                        return Ok(PlacementClaim::Conflict(detail));
                    }
                    last = detail;
                }
                _ => return Err(PlacementError::status(path, status, &body)),
            }
        }
        Ok(PlacementClaim::Conflict(format!(
            "resource provider generation conflict {TRIES} times: {last}"
        )))
    }

    /// Removes every allocation of `consumer` (Nova's `delete_allocation_for_instance(force=
    /// True)`); one that is already gone is not an error.
    pub async fn remove(&self, consumer: &str) -> Result<(), PlacementError> {
        let path = format!("/allocations/{consumer}");
        let (status, body) = self
            .client
            .send(Method::DELETE, &path, CONSUMER_GENERATION_VERSION, None)
            .await?;
        match status {
            200..=299 | 404 => Ok(()),
            _ => Err(PlacementError::status(path, status, &body)),
        }
    }
}

/// Nova's `_move_operation_alloc_request`: the consumer's current allocations, plus the
/// request's allocations on providers it does not hold yet (no `mappings`).
fn move_operation_request(current: &Map<String, Value>, request: &Value) -> Value {
    let mut allocations: Map<String, Value> = current
        .iter()
        .map(|(rp, a)| (rp.clone(), json!({"resources": a["resources"]})))
        .collect();
    if let Some(new) = request["allocations"].as_object() {
        for (rp, a) in new {
            if !current.contains_key(rp) {
                allocations.insert(rp.clone(), a.clone());
            }
        }
    }
    json!({ "allocations": allocations })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_evacuation_keeps_the_source_and_adds_only_new_providers() {
        let current = json!({
            "src": {"resources": {"VCPU": 1}, "generation": 4},
            "shared": {"resources": {"DISK_GB": 10}, "generation": 2},
        });
        let request = json!({
            "allocations": {"dst": {"resources": {"VCPU": 1}},
                            "shared": {"resources": {"DISK_GB": 10}}},
            "mappings": {"": ["dst"]},
        });
        let merged = move_operation_request(current.as_object().unwrap(), &request);
        assert_eq!(
            merged,
            json!({"allocations": {
                "src": {"resources": {"VCPU": 1}},
                "shared": {"resources": {"DISK_GB": 10}},
                "dst": {"resources": {"VCPU": 1}},
            }})
        );
    }
}
