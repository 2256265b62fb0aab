//! The webhook transport: the request `POST`ed as JSON to the plugin's URL, a 2xx JSON answer
//! read back within `timeout_ms` (an empty body reads as `null`). Every other status, a body
//! that is not JSON or one larger than [`MAX_ANSWER_BYTES`] is an error. The caller's
//! Keystone project and user go along as `X-Project-Id` and `X-User-Id` (the headers Keystone's
//! `auth_token` middleware gives a service), the plugin's token as `Authorization: Bearer`.

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

/// Whose call a plugin is asked about: the Keystone project and user of the request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Caller<'a> {
    pub project_id: Option<&'a str>,
    pub user_id: Option<&'a str>,
}

/// One plugin's endpoint.
#[derive(Clone)]
pub struct HttpHook {
    client: reqwest::Client,
    url: reqwest::Url,
    timeout_ms: u64,
    /// Sent as `Authorization: Bearer …`; never printed.
    token: Option<String>,
}

impl std::fmt::Debug for HttpHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpHook")
            .field("url", &self.url.as_str())
            .field("timeout_ms", &self.timeout_ms)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

impl HttpHook {
    /// `client` is shared by every plugin with the same CA bundle (one connection pool).
    pub fn new(
        client: reqwest::Client,
        url: reqwest::Url,
        timeout_ms: u64,
        token: Option<String>,
    ) -> Self {
        HttpHook {
            client,
            url,
            timeout_ms,
            token,
        }
    }

    /// Whether a bearer token is sent.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// Where the plugin is reached.
    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// Sends `body` (JSON) and reads the JSON answer; the whole exchange within `timeout_ms`.
    pub async fn call(&self, body: &[u8], caller: Caller<'_>) -> Result<Value, CallError> {
        let timeout = Duration::from_millis(self.timeout_ms);
        let mut request = self
            .client
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        for (header, value) in [
            ("x-project-id", caller.project_id),
            ("x-user-id", caller.user_id),
        ] {
            if let Some(v) = value.filter(|v| reqwest::header::HeaderValue::from_str(v).is_ok()) {
                request = request.header(header, v);
            }
        }
        let exchange = async {
            let response = request
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
    match crate::redact::innermost_cause(e) {
        Some(detail) => format!("{kind}: {detail}"),
        None => kind.to_string(),
    }
}
