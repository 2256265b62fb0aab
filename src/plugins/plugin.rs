//! One plugin of a chain: its spec, webhook, figures and breaker, and how a call of it is
//! counted — an answer that counts closes the breaker; a failure feeds it and is skipped
//! (ignorable) or ends the call; a call its open breaker spares fails or is skipped at once.

use super::breaker::{Admit, Breaker};
use super::chain::Stopped;
use super::http::{CallError, Caller, HttpHook};
use super::settings::{read_ca, read_identity, PluginSpec};
use super::wire::AnswerError;
use crate::stats::{PluginOutcome, PluginStats};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

/// One plugin registered for one event.
pub(super) struct Plugin {
    pub(super) spec: PluginSpec,
    pub(super) hook: Hook,
    pub(super) stats: Arc<PluginStats>,
    pub(super) breaker: Breaker,
}

/// How a plugin is reached: both take and answer the same JSON (docs/plugins.md §5).
pub(super) enum Hook {
    Http(HttpHook),
    #[cfg(feature = "wasm-plugins")]
    Wasm(super::wasm::WasmHook),
}

impl Hook {
    async fn call(&self, body: &[u8], caller: Caller<'_>) -> Result<Value, CallError> {
        match self {
            Hook::Http(hook) => hook.call(body, caller).await,
            // In process and bounded by its fuel: run on the caller's thread.
            #[cfg(feature = "wasm-plugins")]
            Hook::Wasm(hook) => hook.call(body),
        }
    }

    /// Where the plugin is, for `/v1/stats`: `url` (without credentials), `bearer_token`,
    /// or `module`, `fuel`, `memory_pages`, `instances`.
    pub(super) fn describe(&self) -> serde_json::Map<String, Value> {
        let mut out = serde_json::Map::new();
        match self {
            Hook::Http(hook) => {
                let mut url = hook.url().clone();
                let _ = url.set_password(None);
                let _ = url.set_username("");
                out.insert("url".into(), url.as_str().into());
                out.insert("bearer_token".into(), hook.has_token().into());
            }
            #[cfg(feature = "wasm-plugins")]
            Hook::Wasm(hook) => {
                out.insert("module".into(), hook.path().into());
                out.insert("fuel".into(), hook.fuel().into());
                out.insert("memory_pages".into(), hook.memory_pages().into());
                out.insert("instances".into(), hook.instances().into());
            }
        }
        out
    }
}

/// Why a plugin's call did not count.
pub(super) enum Failure {
    /// Not called: its breaker is open.
    Open,
    Call(CallError),
    Answer(AnswerError),
}

/// One client per CA bundle (the default roots when none) and client certificate, shared by the
/// plugins that name the same: one connection pool each.
#[derive(Default)]
pub(super) struct Clients(std::collections::HashMap<ClientKey, reqwest::Client>);

/// `ca_file`, `cert_file`, `key_file`.
type ClientKey = (Option<String>, Option<String>, Option<String>);

impl Clients {
    pub(super) fn get(&mut self, spec: &PluginSpec) -> Result<reqwest::Client, String> {
        let key = (
            spec.ca_file.clone(),
            spec.cert_file.clone(),
            spec.key_file.clone(),
        );
        if let Some(client) = self.0.get(&key) {
            return Ok(client.clone());
        }
        let client = build_client(spec)?;
        self.0.insert(key, client.clone());
        Ok(client)
    }
}

/// The HTTP client of an `http` plugin: its CA file instead of the default roots, its client
/// certificate if it has one.
pub(super) fn build_client(spec: &PluginSpec) -> Result<reqwest::Client, String> {
    let mut builder =
        reqwest::Client::builder().user_agent(concat!("parasol/", env!("CARGO_PKG_VERSION")));
    if let Some(path) = &spec.ca_file {
        builder = builder.tls_built_in_root_certs(false);
        for cert in read_ca(path)? {
            builder = builder.add_root_certificate(cert);
        }
    }
    if let (Some(cert), Some(key)) = (&spec.cert_file, &spec.key_file) {
        builder = builder.identity(read_identity(cert, key).map_err(|(_, m)| m)?);
    }
    builder
        .build()
        .map_err(|e| match (&spec.cert_file, &spec.key_file) {
            (Some(cert), Some(key)) => format!(
                "cannot build the HTTP client with the certificate {cert:?} and key {key:?}: {e}"
            ),
            _ => format!("cannot build the HTTP client: {e}"),
        })
}

impl Plugin {
    /// Calls the plugin unless its breaker spares it.
    pub(super) async fn call(&self, body: &[u8], caller: Caller<'_>) -> Result<Value, Failure> {
        if self.breaker.admit() == Admit::Spare {
            return Err(Failure::Open);
        }
        self.hook.call(body, caller).await.map_err(Failure::Call)
    }

    /// Counts an answer that counts: the breaker closes.
    pub(super) fn record(&self, outcome: PluginOutcome, started: Instant) {
        self.breaker.success();
        self.stats
            .record(outcome, false, started.elapsed().as_micros() as u64);
    }

    /// Counts a failure (feeding the breaker); `Ok` when the chain goes on without the plugin
    /// (it is ignorable, or `skip` says so).
    pub(super) fn failed(
        &self,
        failure: Failure,
        started: Instant,
        skip: bool,
    ) -> Result<(), Stopped> {
        let event = self.spec.event.as_str();
        let skip = skip || self.spec.ignorable;
        let (outcome, detail) = match failure {
            Failure::Open => return self.spared(skip),
            Failure::Call(e @ CallError::Timeout(_)) => (PluginOutcome::Timeout, e.to_string()),
            Failure::Call(e) => (PluginOutcome::Error, e.to_string()),
            Failure::Answer(e @ AnswerError::Refused(_)) => (PluginOutcome::Refused, e.to_string()),
            Failure::Answer(e) => (PluginOutcome::Error, e.to_string()),
        };
        let us = started.elapsed().as_micros() as u64;
        self.stats.record(outcome, skip, us);
        if self.breaker.failure() {
            tracing::warn!(plugin = %self.spec.name, event, %detail, open_s = self.breaker.open_s(),
                "a plugin failed too often in a row: its circuit breaker opened");
        }
        if skip {
            tracing::warn!(plugin = %self.spec.name, event, %detail, "a plugin failed: skipped");
            return Ok(());
        }
        tracing::warn!(plugin = %self.spec.name, event, %detail, "a plugin failed: the call fails");
        Err(Stopped::Failed {
            plugin: self.spec.name.clone(),
            event,
            detail,
        })
    }

    /// A call its open breaker spared: skipped when `skip`, else the call fails at once.
    fn spared(&self, skip: bool) -> Result<(), Stopped> {
        self.stats.record_short_circuit(skip);
        if skip {
            return Ok(());
        }
        Err(Stopped::Failed {
            plugin: self.spec.name.clone(),
            event: self.spec.event.as_str(),
            detail: format!(
                "its circuit breaker is open (it failed too often in a row; next tried within \
                 {} s)",
                self.breaker.open_s()
            ),
        })
    }
}
