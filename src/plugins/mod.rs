//! Operator plugins (issue 47; docs/plugins.md): ordered chains per event, as Usher's (thesis
//! ch. 2, §2.4.4 and Fig. 2.3) and Kubernetes' scheduler extenders, reached as HTTP/JSON
//! webhooks. A `select` chain sees each call before its decision and approves it, adds
//! constraints (traits, aggregates, hosts to ignore) or denies it; `filter` and `weigh`
//! chains see each instance's top-ranked candidates and remove hosts or add weights; a
//! `claimed` chain is told each call's claims afterwards, through a bounded queue; a `move`
//! chain sees each move of a rebalancing plan and approves it, changes its destination or
//! denies it. Hooked in by `scheduling` (select, claimed), `backend` (filter, weigh) and
//! `rebalance` (move), around the policy pipeline, not inside it.
//!
//! # Layout
//! - `settings`: `[plugins]` and its `[[plugins.chain]]` entries, with their checks.
//! - `wire`: what a plugin is sent and answers, and the checks on an answer.
//! - `http`: the webhook transport (bearer token, CA bundle, the caller's project and user).
//! - `wasm`: the in-process transport, a WebAssembly module run by wasmi (cargo feature
//!   `wasm-plugins`); `wasm_reset`: whether its instance can be kept and put back between calls.
//! - `breaker`: each plugin's circuit breaker, on the injected clock.
//! - `plugin`: one plugin of a chain, and how each of its calls is counted.
//! - `chain`: [`Chains`], the chains of one configuration, and how a call walks them.

mod breaker;
mod chain;
mod http;
mod plugin;
mod settings;
#[cfg(feature = "wasm-plugins")]
mod wasm;
#[cfg(feature = "wasm-plugins")]
mod wasm_reset;
mod wire;

pub use breaker::{Admit, Breaker};
pub use chain::{reorder, Chains, MoveReview, PluginError, Stopped};
pub use http::{CallError, Caller, HttpHook, MAX_ANSWER_BYTES};
pub use settings::{
    read_ca, read_token, PluginEvent, PluginSettings, PluginSpec, Transport,
    DEFAULT_BREAKER_FAILURES, DEFAULT_BREAKER_OPEN_S, DEFAULT_CLAIMED_QUEUE, DEFAULT_FUEL,
    DEFAULT_MEMORY_PAGES, DEFAULT_TIMEOUT_MS, MAX_BREAKER_OPEN_S, MAX_CANDIDATES,
    MAX_CLAIMED_QUEUE, MAX_FUEL, MAX_MEMORY_PAGES, MAX_TIMEOUT_MS, MAX_TOKEN_BYTES, WASM_BUILT,
};
#[cfg(feature = "wasm-plugins")]
pub use wasm::WasmHook;
pub use wire::{
    additions, additive_view, candidate_view, instance_view, offer_body, read_filter, read_move,
    read_select, read_weigh, Additions, AnswerError, SelectRequest, Verdict, ADDITIVE_KEYS,
    API_VERSION,
};
