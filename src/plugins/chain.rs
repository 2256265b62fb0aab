//! The chains of one configuration: per event, its plugins in `order`, each called in turn
//! with what the previous one passed on (thesis Fig. 2.3), each approving, changing or
//! denying; a failing plugin skipped when `ignorable`, else the call's end, and not called at
//! all while its circuit breaker is open. The `claimed` chain is told after the fact, by a task
//! of its own fed through a bounded queue.

use super::breaker::Breaker;
use super::http::{Caller, HttpHook};
use super::plugin::{Clients, Failure, Hook, Plugin};
use super::settings::{read_token, PluginEvent, PluginSettings, PluginSpec, Transport};
use super::wire::{self, AnswerError, SelectRequest, Verdict};
use super::Additions;
use crate::clock::SharedClock;
use crate::domain::{HostState, RequestContext};
use crate::stats::{PluginOutcome, Stats};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

/// Why plugins could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("plugin {name}: {message}")]
    Build { name: String, message: String },
}

/// How a call ends when a chain stops it: Nova's NoValidHost, with the plugin named.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Stopped {
    #[error("denied by plugin {plugin} ({event}): {reason}")]
    Denied {
        plugin: String,
        event: &'static str,
        reason: String,
    },
    #[error("plugin {plugin} ({event}) failed and is not ignorable: {detail}")]
    Failed {
        plugin: String,
        event: &'static str,
        detail: String,
    },
}

/// Every event's chain, built from `[plugins]` at start and on each reload.
pub struct Chains {
    select: Vec<Plugin>,
    filter: Vec<Plugin>,
    weigh: Vec<Plugin>,
    moves: Vec<Plugin>,
    claimed: Option<ClaimedQueue>,
    candidates: usize,
}

/// What a `move` chain made of one move of a rebalancing plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MoveReview {
    /// Every plugin approved it as planned (or was skipped).
    Approved,
    /// A plugin changed its destination to this service host (later plugins saw the change
    /// and approved it).
    Changed { destination: String, plugin: String },
    /// A plugin denied it: the instance stays where it is.
    Denied { plugin: String, reason: String },
}

/// The `claimed` chain and the queue its task reads. When the chains are replaced the queue's
/// sender goes with them: the task tells what is queued to the old plugins, then ends.
struct ClaimedQueue {
    plugins: Arc<Vec<Plugin>>,
    queue: tokio::sync::mpsc::Sender<Value>,
}

impl std::fmt::Debug for Chains {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chains")
            .field("chains", &self.describe())
            .finish()
    }
}

impl Chains {
    /// No plugin at all.
    pub fn none() -> Chains {
        Chains {
            select: Vec::new(),
            filter: Vec::new(),
            weigh: Vec::new(),
            moves: Vec::new(),
            claimed: None,
            candidates: 0,
        }
    }

    /// The chains of `settings`, filter and weigh plugins seeing `candidates` hosts, their
    /// figures kept in `stats`, their breakers timed by `clock`. Reads each plugin's token and
    /// CA files. With `claimed` plugins, starts their task (on the current Tokio runtime).
    pub fn build(
        settings: &PluginSettings,
        candidates: usize,
        stats: &Stats,
        clock: &SharedClock,
    ) -> Result<Chains, PluginError> {
        let mut chains = Chains {
            candidates,
            ..Chains::none()
        };
        if settings.chain.is_empty() {
            return Ok(chains);
        }
        let mut clients = Clients::default();
        let mut specs: Vec<&PluginSpec> = settings.chain.iter().collect();
        // Stable: equal orders keep the file's order, as Usher's registration order.
        specs.sort_by_key(|s| s.order);
        let mut claimed = Vec::new();
        for spec in specs {
            let built = |message: String| PluginError::Build {
                name: spec.name.clone(),
                message,
            };
            let hook = match spec.transport {
                Transport::Http => {
                    let url =
                        reqwest::Url::parse(&spec.url).map_err(|e| built(format!("url: {e}")))?;
                    let token = match &spec.token_file {
                        Some(path) => Some(read_token(path).map_err(built)?),
                        None => None,
                    };
                    let client = clients.get(spec).map_err(built)?;
                    Hook::Http(HttpHook::new(client, url, spec.timeout_ms, token))
                }
                Transport::Wasm => wasm_hook(spec).map_err(built)?,
            };
            let plugin_stats = stats.plugin(spec.event.as_str(), &spec.name);
            let plugin = Plugin {
                hook,
                breaker: Breaker::new(
                    settings.breaker_failures,
                    settings.breaker_open_s,
                    clock.clone(),
                    plugin_stats.clone(),
                ),
                stats: plugin_stats,
                spec: spec.clone(),
            };
            match spec.event {
                PluginEvent::Select => chains.select.push(plugin),
                PluginEvent::Filter => chains.filter.push(plugin),
                PluginEvent::Weigh => chains.weigh.push(plugin),
                PluginEvent::Claimed => claimed.push(plugin),
                PluginEvent::Move => chains.moves.push(plugin),
            }
        }
        if !claimed.is_empty() {
            let (queue, receiver) = tokio::sync::mpsc::channel(settings.claimed_queue.max(1));
            let plugins = Arc::new(claimed);
            tokio::spawn(tell_claimed(receiver, plugins.clone()));
            chains.claimed = Some(ClaimedQueue { plugins, queue });
        }
        Ok(chains)
    }

    pub fn has_select(&self) -> bool {
        !self.select.is_empty()
    }

    /// Whether some plugin sees the candidates of each instance.
    pub fn has_candidate_plugins(&self) -> bool {
        !(self.filter.is_empty() && self.weigh.is_empty())
    }

    /// How many ranked candidates the filter and weigh plugins see (at least).
    pub fn candidates(&self) -> usize {
        self.candidates
    }

    /// `{"select": [{"name", "order", "url", "timeout_ms", "ignorable", "bearer_token",
    /// "ca_file", "cert_file"}, …], "filter": …,
    /// "weigh": …, "candidates": K}`, for `/v1/stats` (the URL without its credentials).
    pub fn describe(&self) -> Value {
        let list = |chain: &[Plugin]| -> Vec<Value> {
            chain
                .iter()
                .map(|p| {
                    let mut v = json!({
                        "name": p.spec.name, "order": p.spec.order,
                        "transport": crate::choice::Choice::as_str(p.spec.transport),
                        "timeout_ms": p.spec.timeout_ms, "ignorable": p.spec.ignorable,
                        "ca_file": p.spec.ca_file, "cert_file": p.spec.cert_file,
                    });
                    v.as_object_mut()
                        .expect("an object")
                        .extend(p.hook.describe());
                    if p.spec.event == PluginEvent::Weigh {
                        v["weight_multiplier"] = json!(p.spec.weight_multiplier);
                    }
                    v
                })
                .collect()
        };
        let claimed = self.claimed.as_ref().map(|c| c.plugins.as_slice());
        json!({
            "select": list(&self.select),
            "filter": list(&self.filter),
            "weigh": list(&self.weigh),
            "claimed": list(claimed.unwrap_or_default()),
            "move": list(&self.moves),
            "candidates": self.candidates,
        })
    }

    /// Whether rebalancing plans' moves pass a `move` chain.
    pub fn has_move(&self) -> bool {
        !self.moves.is_empty()
    }

    /// Walks the `move` chain over one move of a plan (`movement`: `instance_uuid`, `source`,
    /// `destination`, …; `plan`: what the plan is), each plugin seeing the move as the previous
    /// one left it. A change must name one of `hosts`; whether the instance fits there the
    /// planner decides. A plugin that fails stops the plan unless it is ignorable.
    pub async fn review_move(
        &self,
        movement: &Value,
        plan: &Value,
        hosts: &[String],
    ) -> Result<MoveReview, Stopped> {
        let mut current = movement.clone();
        let mut changed_by: Option<String> = None;
        let caller = Caller {
            project_id: None,
            user_id: None,
        };
        for plugin in &self.moves {
            let body = json!({
                "api_version": wire::API_VERSION,
                "event": "move",
                "plugin": plugin.spec.name,
                "move": current,
                "plan": plan,
            });
            let started = Instant::now();
            let verdict = plugin
                .call(&encode(&body), caller)
                .await
                .and_then(|answer| {
                    wire::read_move(&current, hosts, answer).map_err(Failure::Answer)
                });
            match verdict {
                Ok(Verdict::Approved) => plugin.record(PluginOutcome::Approved, started),
                Ok(Verdict::Modified(destination)) => {
                    plugin.record(PluginOutcome::Modified, started);
                    tracing::info!(plugin = %plugin.spec.name, instance = %current["instance_uuid"], from = %current["destination"], to = %destination, "a plugin changed a planned move's destination");
                    current["destination"] = json!(destination);
                    current["destination_node"] = Value::Null;
                    changed_by = Some(plugin.spec.name.clone());
                }
                Ok(Verdict::Denied(reason)) => {
                    plugin.record(PluginOutcome::Denied, started);
                    tracing::info!(plugin = %plugin.spec.name, event = "move", instance = %current["instance_uuid"], %reason, "a plugin denied a planned move");
                    return Ok(MoveReview::Denied {
                        plugin: plugin.spec.name.clone(),
                        reason,
                    });
                }
                Err(failure) => plugin.failed(failure, started, false)?,
            }
        }
        Ok(match changed_by {
            None => MoveReview::Approved,
            Some(plugin) => MoveReview::Changed {
                destination: current["destination"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                plugin,
            },
        })
    }

    pub fn has_claimed(&self) -> bool {
        self.claimed.is_some()
    }

    /// Queues a call's claims for the `claimed` plugins, without waiting: when the queue is
    /// full the notification is dropped and counted for each of them.
    pub fn claimed(&self, request: Value, claims: Value) {
        let Some(claimed) = &self.claimed else {
            return;
        };
        let body = json!({
            "api_version": wire::API_VERSION,
            "event": "claimed",
            "request": request,
            "claims": claims,
        });
        if claimed.queue.try_send(body).is_err() {
            for plugin in claimed.plugins.iter() {
                plugin.stats.record_drop();
            }
            tracing::warn!(
                plugins = claimed.plugins.len(),
                "the claimed plugins' queue is full: a call's claims were not told"
            );
        }
    }

    /// Walks the `select` chain: each plugin sees the request as the previous one left it.
    /// The constraints the chain added, or why the call stops.
    pub async fn select(&self, request: SelectRequest) -> Result<Additions, Stopped> {
        let mut current = request.clone();
        for plugin in &self.select {
            let project = current.0.get("project_id").and_then(Value::as_str);
            let user = current.0.get("user_id").and_then(Value::as_str);
            let caller = Caller {
                project_id: project,
                user_id: user,
            };
            let body = json!({
                "api_version": wire::API_VERSION,
                "event": "select",
                "plugin": plugin.spec.name,
                "request": Value::Object(current.0.clone()),
            });
            let started = Instant::now();
            let verdict = plugin
                .call(&encode(&body), caller)
                .await
                .and_then(|answer| wire::read_select(&current, answer).map_err(Failure::Answer));
            match verdict {
                Ok(Verdict::Approved) => plugin.record(PluginOutcome::Approved, started),
                Ok(Verdict::Modified(next)) => {
                    plugin.record(PluginOutcome::Modified, started);
                    current = next;
                }
                Ok(Verdict::Denied(reason)) => {
                    plugin.record(PluginOutcome::Denied, started);
                    tracing::info!(plugin = %plugin.spec.name, event = "select", %reason, "a plugin denied the call");
                    return Err(Stopped::Denied {
                        plugin: plugin.spec.name.clone(),
                        event: "select",
                        reason,
                    });
                }
                Err(failure) => plugin.failed(failure, started, false)?,
            }
        }
        Ok(wire::additions(&request, &current))
    }

    /// Runs the `filter` chain, then the `weigh` chain, over the ranked `candidates` of one
    /// instance: what is left, in the new order (see [`reorder`]).
    pub async fn review(
        &self,
        req: &RequestContext,
        mut candidates: Vec<HostState>,
    ) -> Result<Vec<HostState>, Stopped> {
        let instance = wire::instance_view(req);
        let caller = Caller {
            project_id: req
                .owner
                .as_ref()
                .map(|o| o.project_id.as_str())
                .or(req.project_id.as_deref()),
            user_id: req.owner.as_ref().map(|o| o.user_id.as_str()),
        };
        for plugin in &self.filter {
            if candidates.is_empty() {
                break;
            }
            let started = Instant::now();
            let verdict = ask(plugin, caller, &instance, &candidates, wire::read_filter).await;
            match verdict {
                Ok(Verdict::Approved) => plugin.record(PluginOutcome::Approved, started),
                Ok(Verdict::Modified(removed)) => {
                    plugin.record(PluginOutcome::Modified, started);
                    for (uuid, reason) in &removed {
                        tracing::debug!(plugin = %plugin.spec.name, host = %uuid, %reason, instance = %req.instance_uuid, "a plugin removed a candidate");
                    }
                    candidates.retain(|h| !removed.contains_key(&*h.profile.uuid));
                }
                Ok(Verdict::Denied(reason)) => {
                    plugin.record(PluginOutcome::Denied, started);
                    tracing::info!(plugin = %plugin.spec.name, event = "filter", %reason, instance = %req.instance_uuid, "a plugin removed every candidate");
                    return Err(Stopped::Denied {
                        plugin: plugin.spec.name.clone(),
                        event: "filter",
                        reason,
                    });
                }
                Err(failure) => plugin.failed(failure, started, false)?,
            }
        }
        let mut added: Vec<f64> = vec![0.0; candidates.len()];
        let mut weighed = false;
        for plugin in &self.weigh {
            if candidates.is_empty() {
                break;
            }
            let started = Instant::now();
            let verdict = ask(plugin, caller, &instance, &candidates, wire::read_weigh).await;
            match verdict {
                Ok(Verdict::Modified(weights)) => {
                    plugin.record(PluginOutcome::Modified, started);
                    for (sum, w) in added.iter_mut().zip(normalise(&weights)) {
                        *sum += plugin.spec.weight_multiplier * w;
                    }
                    weighed = true;
                }
                Ok(Verdict::Approved | Verdict::Denied(_)) => {
                    plugin.record(PluginOutcome::Approved, started)
                }
                Err(failure) => plugin.failed(failure, started, false)?,
            }
        }
        if weighed {
            candidates = reorder(candidates, &added);
        }
        Ok(candidates)
    }
}

/// The `wasm` plugin of `spec`, its module compiled (or why this build has none).
fn wasm_hook(spec: &PluginSpec) -> Result<Hook, String> {
    #[cfg(feature = "wasm-plugins")]
    {
        let module = spec.module.as_deref().ok_or("no module")?;
        let fuel = spec.fuel.unwrap_or(super::settings::DEFAULT_FUEL);
        let pages = spec
            .memory_pages
            .unwrap_or(super::settings::DEFAULT_MEMORY_PAGES);
        super::wasm::WasmHook::load(module, spec.event.as_str(), fuel, pages).map(Hook::Wasm)
    }
    #[cfg(not(feature = "wasm-plugins"))]
    {
        let _ = spec;
        Err("transport \"wasm\" needs the cargo feature `wasm-plugins`".into())
    }
}

/// Tells each queued notification to every `claimed` plugin in order; their answers change
/// nothing, their failures are counted (as skipped: no call waits for them), and a plugin whose
/// breaker is open is not told (counted as short-circuited).
async fn tell_claimed(mut queue: tokio::sync::mpsc::Receiver<Value>, plugins: Arc<Vec<Plugin>>) {
    while let Some(mut body) = queue.recv().await {
        let request = body["request"].clone();
        let caller = Caller {
            project_id: request["project_id"].as_str(),
            user_id: request["user_id"].as_str(),
        };
        for plugin in plugins.iter() {
            body["plugin"] = json!(plugin.spec.name);
            let started = Instant::now();
            match plugin.call(&encode(&body), caller).await {
                Ok(_) => plugin.record(PluginOutcome::Approved, started),
                Err(failure) => {
                    // Never stops anything: a claimed plugin's failure is skipped.
                    let _ = plugin.failed(failure, started, true);
                }
            }
        }
    }
}

/// Offers `candidates` to a filter or weigh `plugin` and reads its answer with `read`.
async fn ask<T>(
    plugin: &Plugin,
    caller: Caller<'_>,
    instance: &Value,
    candidates: &[HostState],
    read: fn(&[HostState], Value) -> Result<T, AnswerError>,
) -> Result<T, Failure> {
    let answer = plugin
        .call(&offer(plugin, instance, candidates), caller)
        .await?;
    read(candidates, answer).map_err(Failure::Answer)
}

fn offer(plugin: &Plugin, instance: &Value, candidates: &[HostState]) -> Vec<u8> {
    wire::offer_body(
        plugin.spec.event.as_str(),
        &plugin.spec.name,
        instance,
        candidates,
    )
}

/// A request's body as sent.
fn encode(body: &Value) -> Vec<u8> {
    serde_json::to_vec(body).unwrap_or_default()
}

/// Nova's normalisation of one weigher's values to [0, 1] (all equal: all 0).
fn normalise(values: &[f64]) -> Vec<f64> {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if hi <= lo {
        return vec![0.0; values.len()];
    }
    values.iter().map(|v| (v - lo) / (hi - lo)).collect()
}

/// The candidates by Parasol's rank score plus the plugins' weights, best first. Parasol's
/// own scores stay inside the policy pipeline; its order enters as a rank score from 1 (its
/// first) down to 0 (its last), with a multiplier of 1, so a plugin with a multiplier of 1
/// weighs as much as Parasol's whole ranking. Equal totals keep Parasol's order.
pub fn reorder(candidates: Vec<HostState>, added: &[f64]) -> Vec<HostState> {
    let n = candidates.len();
    let mut scored: Vec<(f64, HostState)> = candidates
        .into_iter()
        .enumerate()
        .map(|(i, h)| {
            let rank = if n > 1 {
                1.0 - i as f64 / (n - 1) as f64
            } else {
                1.0
            };
            (rank + added.get(i).copied().unwrap_or(0.0), h)
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.into_iter().map(|(_, h)| h).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Resources;

    fn hosts(n: i64) -> Vec<HostState> {
        (1..=n)
            .map(|i| HostState::synthetic(i, Resources::new(8, 8192, 80), Resources::ZERO))
            .collect()
    }

    fn names(hosts: &[HostState]) -> Vec<String> {
        hosts.iter().map(|h| h.host().to_string()).collect()
    }

    #[test]
    fn weights_reorder_the_ranking_and_ties_keep_parasol_s_order() {
        // No weights: Parasol's order.
        assert_eq!(
            names(&reorder(hosts(3), &[0.0; 3])),
            ["host1", "host2", "host3"]
        );
        // A weight of 1 on the last host ties it with the first (1 + 0 vs 1 + 0 … ): the
        // first keeps its place; 1.5 takes it.
        assert_eq!(
            names(&reorder(hosts(3), &[0.0, 0.0, 1.0])),
            ["host1", "host3", "host2"]
        );
        assert_eq!(
            names(&reorder(hosts(3), &[0.0, 0.0, 1.5])),
            ["host3", "host1", "host2"]
        );
    }

    #[test]
    fn normalisation_is_nova_s_and_equal_values_weigh_nothing() {
        assert_eq!(normalise(&[2.0, 4.0, 3.0]), [0.0, 1.0, 0.5]);
        assert_eq!(normalise(&[5.0, 5.0]), [0.0, 0.0]);
        assert_eq!(normalise(&[-1.0, 1.0]), [0.0, 1.0]);
    }
}
