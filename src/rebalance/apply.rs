//! `parasol rebalance apply` (docs/fmu.md §8.6): a plan carried out through Nova's compute
//! API, one live migration at a time. Before the plan is asked for, Nova's servers that are
//! not ACTIVE (or have a task) are named to the planner as not movable, and Nova's hard server
//! groups are handed to it. Each move then: the server must still be ACTIVE, idle and on the
//! plan's source; `os-migrateLive` to the plan's destination (`block_migration: "auto"`,
//! microversion 2.68); the server watched until it is idle again, on the destination, its
//! live migration `completed`; then Placement and Parasol's ledger must agree on the two hosts
//! (each class's usage, and the instance's allocation on the destination only). The first
//! move that fails any of these stops the apply, naming the server and why; the moves before
//! it stay done.

use super::nova_api::{ComputeApi, NovaError, ServerView};
use crate::clock::SharedClock;
use crate::placement::PlacementClient;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The classes Placement and Parasol's ledger are compared on.
const CLASSES: [&str; 3] = ["VCPU", "MEMORY_MB", "DISK_GB"];

/// Why the apply stopped.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    Nova(#[from] NovaError),
    #[error("reading Parasol at {url}: {reason}")]
    Parasol { url: String, reason: String },
    #[error("reading Placement: {0}")]
    Placement(String),
    #[error("the plan is not one of Parasol's plans: {0}")]
    BadPlan(String),
    #[error("stopped before moving server {instance}: {why}")]
    NotReady { instance: String, why: String },
    #[error(
        "Nova refused to live-migrate server {instance} to {destination} ({status}): {message}"
    )]
    Refused {
        instance: String,
        destination: String,
        status: u16,
        message: String,
    },
    #[error("the live migration of server {instance} to {destination} failed: {reason}")]
    Failed {
        instance: String,
        destination: String,
        reason: String,
    },
    #[error("the live migration of server {instance} to {destination} was not done after {seconds} s ({state})")]
    TimedOut {
        instance: String,
        destination: String,
        seconds: i64,
        state: String,
    },
    #[error("after moving server {instance}, Placement and Parasol's ledger still disagree after {seconds} s: {detail}")]
    Disagree {
        instance: String,
        seconds: f64,
        detail: String,
    },
}

/// Where an apply stopped: the moves done before, and why.
#[derive(Debug, thiserror::Error)]
#[error("stopped after {done} of {of} moves: {error}")]
pub struct Stopped {
    pub done: usize,
    pub of: usize,
    #[source]
    pub error: ApplyError,
}

/// One move of a plan.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanMove {
    pub instance: String,
    pub source: String,
    pub destination: String,
}

/// The moves of a plan in Parasol's form (`steps`), in order.
pub fn plan_moves(plan: &Value) -> Result<Vec<PlanMove>, ApplyError> {
    let steps = plan["steps"]
        .as_array()
        .ok_or_else(|| ApplyError::BadPlan("no \"steps\" list".into()))?;
    let mut out = Vec::new();
    for (s, step) in steps.iter().enumerate() {
        for (i, m) in step.as_array().into_iter().flatten().enumerate() {
            let text = |k: &str| {
                m[k].as_str()
                    .map(String::from)
                    .ok_or_else(|| ApplyError::BadPlan(format!("steps[{s}][{i}] has no {k}")))
            };
            out.push(PlanMove {
                instance: text("instance")?,
                source: text("source")?,
                destination: text("destination")?,
            });
        }
    }
    Ok(out)
}

/// A plan saved by `parasol rebalance apply --dry-run --json` (or `plan --json`): the plan
/// (its moves readable) and the ledger revision it was made on.
pub fn saved_plan(text: &str) -> Result<(Value, String), ApplyError> {
    let plan: Value =
        serde_json::from_str(text).map_err(|e| ApplyError::BadPlan(format!("not JSON ({e})")))?;
    if plan["actions"].is_array() {
        return Err(ApplyError::BadPlan(
            "it is Watcher's action list (--watcher); save Parasol's (--json)".into(),
        ));
    }
    plan_moves(&plan)?;
    let revision = plan["base_revision"]
        .as_str()
        .filter(|r| !r.is_empty())
        .ok_or_else(|| ApplyError::BadPlan("no \"base_revision\"".into()))?
        .to_string();
    Ok((plan, revision))
}

/// Why Nova could not live-migrate `server` now, or `None` when it can (ACTIVE, no task).
pub fn not_movable_reason(server: &ServerView) -> Option<String> {
    if server.status != "ACTIVE" {
        return Some(format!("Nova's status is {}, not ACTIVE", server.status));
    }
    server
        .task_state
        .as_ref()
        .map(|t| format!("Nova's task state is {t}"))
}

/// Adds to a plan request what Nova knows and the ledger does not: the servers that cannot
/// be live-migrated now (`not_movable`) and the hard server groups (`server_groups`; Nova's
/// soft policies are preferences its scheduler may break, not rules).
pub async fn from_nova(nova: &ComputeApi, body: &mut Value) -> Result<(), ApplyError> {
    let servers = nova.servers().await?;
    let groups = nova.server_groups().await?;
    let object = body
        .as_object_mut()
        .ok_or_else(|| ApplyError::BadPlan("the plan request is not an object".into()))?;
    let pinned: Vec<Value> = servers
        .iter()
        .filter_map(|s| not_movable_reason(s).map(|why| json!({"instance": s.id, "reason": why})))
        .collect();
    let hard: Vec<Value> = groups
        .iter()
        .filter(|g| matches!(g.policy.as_str(), "affinity" | "anti-affinity"))
        .filter(|g| g.members.len() > 1)
        .map(|g| json!({"policy": g.policy, "members": g.members}))
        .collect();
    object.insert("not_movable".into(), Value::Array(pinned));
    object.insert("server_groups".into(), Value::Array(hard));
    Ok(())
}

/// Parasol's service, for its ledger's view of the hosts.
#[derive(Clone, Debug)]
pub struct ParasolEndpoint {
    pub url: String,
    pub token: Option<String>,
}

impl ParasolEndpoint {
    async fn hosts(&self) -> Result<Vec<Value>, ApplyError> {
        let url = format!("{}/v1/hosts", self.url.trim_end_matches('/'));
        let fail = |reason: String| ApplyError::Parasol {
            url: url.clone(),
            reason,
        };
        let mut request = reqwest::Client::new().get(&url);
        if let Some(token) = &self.token {
            request = request.header("X-Auth-Token", token);
        }
        let response = request.send().await.map_err(|e| fail(e.to_string()))?;
        let body: Value = response.json().await.map_err(|e| fail(e.to_string()))?;
        Ok(body["hosts"].as_array().cloned().unwrap_or_default())
    }
}

/// What the apply talks to and how long it waits.
pub struct Apply<'a> {
    pub nova: &'a ComputeApi,
    pub placement: &'a PlacementClient,
    pub parasol: ParasolEndpoint,
    pub clock: SharedClock,
    pub poll_ms: u64,
    pub move_timeout_ms: i64,
    pub agree_timeout_ms: i64,
}

impl Apply<'_> {
    /// Carries out `moves` in order, writing a line per move to `out`; the number of moves
    /// done, or where and why it stopped (the moves before stay done).
    pub async fn run(
        &self,
        moves: &[PlanMove],
        out: &mut (dyn std::io::Write + Send),
    ) -> Result<usize, Stopped> {
        for (n, m) in moves.iter().enumerate() {
            let stopped = |error| Stopped {
                done: n,
                of: moves.len(),
                error,
            };
            self.one(m).await.map_err(stopped)?;
            let _ = writeln!(
                out,
                "moved {} {} -> {} ({}/{}); Placement and Parasol agree",
                m.instance,
                m.source,
                m.destination,
                n + 1,
                moves.len()
            );
        }
        Ok(moves.len())
    }

    async fn one(&self, m: &PlanMove) -> Result<(), ApplyError> {
        self.ready(m).await?;
        if let Err(e) = self.nova.live_migrate(&m.instance, &m.destination).await {
            return Err(match e {
                NovaError::Status {
                    status, message, ..
                } => ApplyError::Refused {
                    instance: m.instance.clone(),
                    destination: m.destination.clone(),
                    status,
                    message,
                },
                other => other.into(),
            });
        }
        match self.wait_moved(m).await {
            Ok(()) => self.wait_agreement(m, &m.destination).await,
            Err(ApplyError::Failed {
                instance,
                destination,
                reason,
            }) => Err(ApplyError::Failed {
                reason: format!("{reason}; {}", self.settled(m).await),
                instance,
                destination,
            }),
            Err(e) => Err(e),
        }
    }

    /// After a move that failed: waits (at most `move_timeout_ms`) until Nova has settled the
    /// server (rolled back, or left it elsewhere), then waits for Placement and the ledger to
    /// agree with the server where it is; says where that is and whether they agree.
    async fn settled(&self, m: &PlanMove) -> String {
        let deadline = self.clock.now_ms() + self.move_timeout_ms;
        let server = loop {
            match self.nova.server(&m.instance).await {
                Ok(s) if s.task_state.is_none() && s.status != "MIGRATING" => break s,
                Ok(s) if self.clock.now_ms() >= deadline => {
                    return format!(
                        "the server is still {} (task {:?}) after {} s",
                        s.status,
                        s.task_state,
                        self.move_timeout_ms / 1000
                    )
                }
                Ok(_) => self.clock.sleep_ms(self.poll_ms).await,
                Err(e) => return format!("then reading the server: {e}"),
            }
        };
        let Some(host) = server.host.clone() else {
            return format!("the server is now {} on no host", server.status);
        };
        let role = if host == m.source {
            " (the move's source)"
        } else if host == m.destination {
            " (the move's destination)"
        } else {
            ""
        };
        let agreement = match self.wait_agreement(m, &host).await {
            Ok(()) => "Placement and Parasol's ledger agree".to_string(),
            Err(ApplyError::Disagree {
                seconds, detail, ..
            }) => {
                format!("Placement and Parasol's ledger disagree after {seconds} s: {detail}")
            }
            Err(e) => format!("checking Placement against Parasol's ledger: {e}"),
        };
        format!(
            "the server is now {} on {host}{role}, and {agreement}",
            server.status
        )
    }

    /// The server is ACTIVE, idle and on the move's source.
    async fn ready(&self, m: &PlanMove) -> Result<(), ApplyError> {
        let server = self.nova.server(&m.instance).await?;
        let why = not_movable_reason(&server).or_else(|| {
            (server.host.as_deref() != Some(m.source.as_str())).then(|| {
                format!(
                    "it is on {}, not on the plan's source {} (the cloud changed since the plan)",
                    server.host.as_deref().unwrap_or("no host"),
                    m.source
                )
            })
        });
        match why {
            Some(why) => Err(ApplyError::NotReady {
                instance: m.instance.clone(),
                why,
            }),
            None => Ok(()),
        }
    }

    /// Waits until the server is idle on the destination with its live migration completed;
    /// a server idle elsewhere, or a migration in `error`/`failed`/`cancelled`, is a failure.
    async fn wait_moved(&self, m: &PlanMove) -> Result<(), ApplyError> {
        let deadline = self.clock.now_ms() + self.move_timeout_ms;
        let failed = |reason: String| ApplyError::Failed {
            instance: m.instance.clone(),
            destination: m.destination.clone(),
            reason,
        };
        loop {
            let server = self.nova.server(&m.instance).await?;
            let migration = self.nova.last_live_migration(&m.instance).await?;
            let status = migration.as_ref().map(|(s, _)| s.as_str()).unwrap_or("");
            if matches!(status, "error" | "failed" | "cancelled") {
                let fault = server.fault.unwrap_or_default();
                return Err(failed(
                    format!("its migration is {status} {fault}")
                        .trim_end()
                        .to_string(),
                ));
            }
            if server.task_state.is_none() && server.status != "MIGRATING" {
                let on = server.host.as_deref().unwrap_or("no host");
                if on != m.destination {
                    let fault = server.fault.map(|f| format!(": {f}")).unwrap_or_default();
                    return Err(failed(format!(
                        "the server is {} on {on}{fault}",
                        server.status
                    )));
                }
                if status == "completed" {
                    return Ok(());
                }
            }
            if self.clock.now_ms() >= deadline {
                return Err(ApplyError::TimedOut {
                    instance: m.instance.clone(),
                    destination: m.destination.clone(),
                    seconds: self.move_timeout_ms / 1000,
                    state: format!(
                        "status {}, task {:?}, migration {status:?}",
                        server.status, server.task_state
                    ),
                });
            }
            self.clock.sleep_ms(self.poll_ms).await;
        }
    }

    /// Waits until Placement and Parasol's ledger agree on the move's two hosts, with the
    /// instance held on `on` alone.
    async fn wait_agreement(&self, m: &PlanMove, on: &str) -> Result<(), ApplyError> {
        let started = self.clock.now_ms();
        loop {
            let problems = self.disagreement(m, on).await?;
            if problems.is_empty() {
                return Ok(());
            }
            let waited = self.clock.now_ms() - started;
            if waited >= self.agree_timeout_ms {
                return Err(ApplyError::Disagree {
                    instance: m.instance.clone(),
                    seconds: waited as f64 / 1000.0,
                    detail: problems.join("; "),
                });
            }
            self.clock.sleep_ms(self.poll_ms).await;
        }
    }

    /// What Placement and the ledger disagree on for the move's hosts and instance, which
    /// should be on `on` alone (empty: they agree).
    async fn disagreement(&self, m: &PlanMove, on: &str) -> Result<Vec<String>, ApplyError> {
        let hosts = self.parasol.hosts().await?;
        let mut problems = Vec::new();
        let mut held_uuid = None;
        let mut names = vec![m.source.as_str(), m.destination.as_str()];
        if !names.contains(&on) {
            names.push(on);
        }
        for name in names {
            let Some(host) = hosts.iter().find(|h| h["host"] == name) else {
                problems.push(format!("Parasol's ledger has no host {name}"));
                continue;
            };
            let uuid = host["compute_node_uuid"].as_str().unwrap_or_default();
            if name == on {
                held_uuid = Some(uuid.to_string());
            }
            let usages = self
                .placement_get(&format!("/resource_providers/{uuid}/usages"))
                .await?;
            for class in CLASSES {
                let placement = usages["usages"][class].as_f64().unwrap_or(0.0);
                let ledger = host["used"][class].as_f64().unwrap_or(0.0);
                if placement != ledger {
                    problems.push(format!(
                        "{name} {class}: Placement {placement}, Parasol {ledger}"
                    ));
                }
            }
        }
        let allocations = self
            .placement_get(&format!("/allocations/{}", m.instance))
            .await?;
        let held: BTreeMap<String, Value> = allocations["allocations"]
            .as_object()
            .map(|o| o.clone().into_iter().collect())
            .unwrap_or_default();
        if let Some(uuid) = held_uuid {
            if held.len() != 1 || !held.contains_key(&uuid) {
                let keys: Vec<&String> = held.keys().collect();
                problems.push(format!(
                    "Placement holds {} on {keys:?}, not on {on} ({uuid}) alone",
                    m.instance
                ));
            }
        }
        Ok(problems)
    }

    async fn placement_get(&self, path: &str) -> Result<Value, ApplyError> {
        let (status, body) = self
            .placement
            .send(reqwest::Method::GET, path, "1.9", None)
            .await
            .map_err(|e| ApplyError::Placement(e.to_string()))?;
        if status >= 300 {
            return Err(ApplyError::Placement(format!("{path}: {status} {body}")));
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plans_moves_are_read_in_step_order() {
        let plan = json!({"steps": [
            [{"instance": "a", "source": "h1", "destination": "h2"},
             {"instance": "b", "source": "h3", "destination": "h2"}],
            [{"instance": "c", "source": "h1", "destination": "h3"}]
        ]});
        let moves = plan_moves(&plan).unwrap();
        let order: Vec<&str> = moves.iter().map(|m| m.instance.as_str()).collect();
        assert_eq!(order, ["a", "b", "c"]);
        let err = plan_moves(&json!({"steps": [[{"instance": "a"}]]})).unwrap_err();
        assert!(
            err.to_string().contains("steps[0][0] has no source"),
            "{err}"
        );
        assert!(plan_moves(&json!({"error": {}})).is_err());
    }

    #[test]
    fn a_saved_plan_needs_its_moves_and_revision() {
        let text = r#"{"steps": [[{"instance": "a", "source": "h1", "destination": "h2"}]],
                       "base_revision": "r1"}"#;
        let (plan, revision) = saved_plan(text).unwrap();
        assert_eq!(revision, "r1");
        assert_eq!(plan_moves(&plan).unwrap().len(), 1);
        for (text, why) in [
            ("{", "not JSON"),
            (
                r#"{"actions": [], "base_revision": "r1"}"#,
                "Watcher's action list",
            ),
            (
                r#"{"steps": [], "base_revision": ""}"#,
                "no \"base_revision\"",
            ),
            (r#"{"steps": []}"#, "no \"base_revision\""),
            (r#"{"base_revision": "r1"}"#, "no \"steps\" list"),
        ] {
            let err = saved_plan(text).unwrap_err().to_string();
            assert!(err.contains(why), "{text}: {err}");
        }
    }

    #[test]
    fn only_an_active_idle_server_is_movable() {
        let server = |status: &str, task: Option<&str>| ServerView {
            id: "s".into(),
            status: status.into(),
            task_state: task.map(String::from),
            host: Some("h1".into()),
            fault: None,
        };
        assert_eq!(not_movable_reason(&server("ACTIVE", None)), None);
        assert_eq!(
            not_movable_reason(&server("SHUTOFF", None)).unwrap(),
            "Nova's status is SHUTOFF, not ACTIVE"
        );
        assert_eq!(
            not_movable_reason(&server("ACTIVE", Some("migrating"))).unwrap(),
            "Nova's task state is migrating"
        );
    }
}
