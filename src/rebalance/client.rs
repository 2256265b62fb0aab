//! `parasol rebalance plan`: asks the running service (`POST /v1/rebalance/plan`). Measured
//! usage is soft state, held only in the service's memory (never in the ledger), so a plan
//! computed from the ledger alone would plan on allocations, not on what the hosts use.

use serde_json::Value;

/// Why the call did not give a plan.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach Parasol at {url}: {source}")]
    Unreachable {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("Parasol refused the plan ({status}): {message}")]
    Refused { status: u16, message: String },
    #[error("Parasol's answer is not JSON: {0}")]
    NotJson(String),
}

/// One call of the route.
#[derive(Clone, Debug)]
pub struct PlanCall<'a> {
    /// `http://host:port` of the service.
    pub base_url: &'a str,
    /// `X-Auth-Token`, when the service wants one.
    pub token: Option<&'a str>,
    /// The request body.
    pub body: &'a Value,
    /// `watcher` for Watcher's form.
    pub format: Option<&'a str>,
    pub timeout: std::time::Duration,
}

/// The plan the service answers, or why not (the error body's message on a refusal).
pub async fn request_plan(call: &PlanCall<'_>) -> Result<Value, ClientError> {
    let mut url = format!("{}/v1/rebalance/plan", call.base_url.trim_end_matches('/'));
    if let Some(f) = call.format {
        url.push_str("?format=");
        url.push_str(f);
    }
    let unreachable = |source| ClientError::Unreachable {
        url: url.clone(),
        source,
    };
    let client = reqwest::Client::builder()
        .timeout(call.timeout)
        .build()
        .map_err(unreachable)?;
    let mut request = client.post(&url).json(call.body);
    if let Some(token) = call.token {
        request = request.header("X-Auth-Token", token);
    }
    let response = request.send().await.map_err(unreachable)?;
    let status = response.status().as_u16();
    let text = response.text().await.map_err(unreachable)?;
    let body: Value =
        serde_json::from_str(&text).map_err(|_| ClientError::NotJson(text.clone()))?;
    if status >= 400 {
        let message = body["error"]["message"]
            .as_str()
            .map_or_else(|| text.clone(), String::from);
        return Err(ClientError::Refused { status, message });
    }
    Ok(body)
}
