//! The webhook transport: the request `POST`ed as JSON to the plugin's URL, a 2xx JSON answer
//! read back within `timeout_ms` (an empty body reads as `null`). Every other status, a body
//! that is not JSON or one larger than [`MAX_ANSWER_BYTES`] is an error.

use serde_json::Value;
use std::time::Duration;

/// The largest answer read from a plugin.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;

/// Why a call brought no answer.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum CallError {
    #[error("did not answer within {0} ms")]
    Timeout(u64),
    #[error("{0}")]
    Failed(String),
}

/// One plugin's endpoint.
#[derive(Debug, Clone)]
pub struct HttpHook {
    client: reqwest::Client,
    url: reqwest::Url,
    timeout_ms: u64,
}

impl HttpHook {
    /// `client` is shared by every plugin (one connection pool).
    pub fn new(client: reqwest::Client, url: reqwest::Url, timeout_ms: u64) -> Self {
        HttpHook {
            client,
            url,
            timeout_ms,
        }
    }

    /// Where the plugin is reached.
    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// Sends `body` and reads the JSON answer; the whole exchange within `timeout_ms`.
    pub async fn call(&self, body: &Value) -> Result<Value, CallError> {
        let timeout = Duration::from_millis(self.timeout_ms);
        let exchange = async {
            let response = self
                .client
                .post(self.url.clone())
                .json(body)
                .send()
                .await
                .map_err(|e| CallError::Failed(describe(&e)))?;
            let status = response.status();
            let bytes = response
                .bytes()
                .await
                .map_err(|e| CallError::Failed(describe(&e)))?;
            if !status.is_success() {
                let text = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
                return Err(CallError::Failed(format!("answered {status}: {text}")));
            }
            if bytes.len() > MAX_ANSWER_BYTES {
                return Err(CallError::Failed(format!(
                    "answered {} bytes, more than {MAX_ANSWER_BYTES}",
                    bytes.len()
                )));
            }
            if bytes.iter().all(u8::is_ascii_whitespace) {
                return Ok(Value::Null);
            }
            serde_json::from_slice(&bytes)
                .map_err(|e| CallError::Failed(format!("answered a body that is not JSON: {e}")))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(answer) => answer,
            Err(_) => Err(CallError::Timeout(self.timeout_ms)),
        }
    }
}

/// A transport error without reqwest's URL (the URL may carry a token).
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_connect() {
        "cannot connect"
    } else if e.is_request() {
        "the request failed"
    } else if e.is_body() || e.is_decode() {
        "its answer could not be read"
    } else {
        "the exchange failed"
    };
    let mut source = std::error::Error::source(e);
    let mut detail = String::new();
    while let Some(s) = source {
        detail = s.to_string();
        source = s.source();
    }
    if detail.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}: {detail}")
    }
}
