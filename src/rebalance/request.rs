//! A plan request (`POST /v1/rebalance/plan`'s body, every field optional) and why one is
//! refused.

use crate::configuration::{RebalanceSettings, RebalanceSolver, MAX_REBALANCE_MOVES};
use crate::stats::RebalanceRefusal;
use serde_json::{Map, Value};

/// The plan's output form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanFormat {
    /// Parasol's own: steps of moves with ΔU, ΔF, ΔC, before and after.
    Parasol,
    /// Watcher's action list: `migrate` actions with `migration_type: live`.
    Watcher,
}

/// A server group the caller knows of (the ledger does not hold Nova's groups).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupSpec {
    pub anti_affinity: bool,
    pub members: Vec<String>,
}

/// What to plan, with the defaults of `[rebalance]` filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanRequest {
    /// The hosts to balance among (service host, node name or compute node uuid); `None`:
    /// every host with fresh usage.
    pub hosts: Option<Vec<String>>,
    pub solver: RebalanceSolver,
    pub seed: u64,
    pub max_moves: usize,
    pub max_concurrent_per_source: usize,
    pub parallel: usize,
    pub migration_resistance: f64,
    /// The revision a previous plan was made on: refused (or re-planned, with `replan`) when
    /// the ledger's state has changed since.
    pub base_revision: Option<String>,
    pub replan: bool,
    pub server_groups: Vec<GroupSpec>,
    /// Instances the caller knows cannot be live-migrated now (`parasol rebalance apply`
    /// names Nova's servers that are not ACTIVE or have a task), each with its reason: left
    /// out of the moves, where they are, as the ledger's own unmovable ones are.
    pub not_movable: Vec<(String, String)>,
    pub format: PlanFormat,
}

/// Why a request was refused, naming what is wrong.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("invalid {field}: {message}")]
    Invalid { field: String, message: String },
    #[error("unknown hosts: {}", .0.join(", "))]
    UnknownHosts(Vec<String>),
    #[error("no fresh measured usage (VCPU) for hosts: {}; nothing to plan on ([usage] max_age_s)", .0.join(", "))]
    NoUsage(Vec<String>),
    #[error("the plan's base revision {plan} is not the ledger's state {current} any more: instances or hosts changed since; ask again (or with \"replan\": true)")]
    Stale { plan: String, current: String },
    /// A move a `move` plugin decided that the rules refuse (the planner keeps the instance
    /// where it is instead; never answered to a caller).
    #[error("moving {instance} to {destination} is refused: {reason}")]
    MoveRefused {
        instance: String,
        destination: String,
        reason: String,
    },
    /// A `move` plugin that is not ignorable failed: no plan without its word.
    #[error("{0}")]
    Plugin(String),
}

impl PlanError {
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        PlanError::Invalid {
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// The counter's reason.
    pub fn refusal(&self) -> RebalanceRefusal {
        match self {
            PlanError::Invalid { .. } => RebalanceRefusal::InvalidRequest,
            PlanError::UnknownHosts(_) => RebalanceRefusal::UnknownHosts,
            PlanError::NoUsage(_) => RebalanceRefusal::NoUsage,
            PlanError::Stale { .. } => RebalanceRefusal::StalePlan,
            PlanError::MoveRefused { .. } => RebalanceRefusal::InvalidRequest,
            PlanError::Plugin(_) => RebalanceRefusal::Plugin,
        }
    }
}

const FIELDS: &[&str] = &[
    "hosts",
    "solver",
    "seed",
    "max_moves",
    "max_concurrent_per_source",
    "parallel",
    "migration_resistance",
    "base_revision",
    "replan",
    "server_groups",
    "not_movable",
    "format",
];

impl PlanRequest {
    /// The request of `body` (a JSON object; `Null` for an empty body), with `[rebalance]`'s
    /// values where it gives none; `format` from the query string wins over the body's.
    pub fn parse(
        body: &Value,
        query_format: Option<&str>,
        settings: &RebalanceSettings,
    ) -> Result<PlanRequest, PlanError> {
        let empty = Map::new();
        let object = match body {
            Value::Null => &empty,
            Value::Object(o) => o,
            _ => return Err(PlanError::invalid("body", "must be a JSON object")),
        };
        if let Some(unknown) = object.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(PlanError::invalid(
                unknown,
                format!("not a field; the fields are {}", FIELDS.join(", ")),
            ));
        }
        let uint = |field: &str, default: usize, max: usize| -> Result<usize, PlanError> {
            match object.get(field) {
                None | Some(Value::Null) => Ok(default),
                Some(v) => v
                    .as_u64()
                    .filter(|n| (1..=max as u64).contains(n))
                    .map(|n| n as usize)
                    .ok_or_else(|| PlanError::invalid(field, format!("must be from 1 to {max}"))),
            }
        };
        let request = PlanRequest {
            hosts: hosts(object.get("hosts"))?,
            solver: solver(object.get("solver"), settings.solver)?,
            seed: match object.get("seed") {
                None | Some(Value::Null) => settings.seed,
                Some(v) => v.as_u64().ok_or_else(|| {
                    PlanError::invalid("seed", "must be an integer from 0 to 2^64 − 1")
                })?,
            },
            max_moves: uint("max_moves", settings.max_moves, MAX_REBALANCE_MOVES)?,
            max_concurrent_per_source: uint(
                "max_concurrent_per_source",
                settings.max_concurrent_per_source,
                64,
            )?,
            parallel: uint("parallel", settings.parallel, 1024)?,
            migration_resistance: resistance(
                object.get("migration_resistance"),
                settings.migration_resistance,
            )?,
            base_revision: match object.get("base_revision") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
                Some(_) => return Err(PlanError::invalid("base_revision", "must be a string")),
            },
            replan: match object.get("replan") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(PlanError::invalid("replan", "must be true or false")),
            },
            server_groups: groups(object.get("server_groups"))?,
            not_movable: not_movable(object.get("not_movable"))?,
            format: format(
                query_format
                    .map(Value::from)
                    .as_ref()
                    .or(object.get("format")),
            )?,
        };
        Ok(request)
    }
}

fn hosts(value: Option<&Value>) -> Result<Option<Vec<String>>, PlanError> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let list = value
        .as_array()
        .filter(|a| !a.is_empty())
        .ok_or_else(|| PlanError::invalid("hosts", "must be a non-empty list of host names"))?;
    list.iter()
        .map(|h| match h.as_str() {
            Some(s) if !s.trim().is_empty() => Ok(s.to_string()),
            _ => Err(PlanError::invalid(
                "hosts",
                format!("{h} is not a host name (a non-empty string)"),
            )),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn solver(value: Option<&Value>, default: RebalanceSolver) -> Result<RebalanceSolver, PlanError> {
    match value {
        None | Some(Value::Null) => Ok(default),
        Some(Value::String(name)) => crate::choice::parse_choice(name)
            .map_err(|e: crate::choice::UnknownChoice| PlanError::invalid("solver", e.to_string())),
        Some(_) => Err(PlanError::invalid(
            "solver",
            "must be one of gbm, bcpu, bcpu2, sa",
        )),
    }
}

fn resistance(value: Option<&Value>, default: f64) -> Result<f64, PlanError> {
    match value {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_f64()
            .filter(|r| (0.0..1.0).contains(r))
            .ok_or_else(|| PlanError::invalid("migration_resistance", "must be in [0, 1)")),
    }
}

fn format(value: Option<&Value>) -> Result<PlanFormat, PlanError> {
    match value {
        None | Some(Value::Null) => Ok(PlanFormat::Parasol),
        Some(Value::String(s)) if s == "parasol" => Ok(PlanFormat::Parasol),
        Some(Value::String(s)) if s == "watcher" => Ok(PlanFormat::Watcher),
        _ => Err(PlanError::invalid(
            "format",
            "must be \"parasol\" or \"watcher\"",
        )),
    }
}

fn groups(value: Option<&Value>) -> Result<Vec<GroupSpec>, PlanError> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let bad =
        |i: usize, what: &str| PlanError::invalid(&format!("server_groups[{i}]"), what.to_string());
    let list = value
        .as_array()
        .ok_or_else(|| PlanError::invalid("server_groups", "must be a list"))?;
    let mut out = Vec::with_capacity(list.len());
    for (i, g) in list.iter().enumerate() {
        let anti_affinity = match g.get("policy").and_then(Value::as_str) {
            Some("anti-affinity") => true,
            Some("affinity") => false,
            _ => return Err(bad(i, "policy must be \"affinity\" or \"anti-affinity\"")),
        };
        let members = g
            .get("members")
            .and_then(Value::as_array)
            .and_then(|m| m.iter().map(|u| u.as_str().map(String::from)).collect())
            .ok_or_else(|| bad(i, "members must be a list of instance uuids"))?;
        out.push(GroupSpec {
            anti_affinity,
            members,
        });
    }
    Ok(out)
}

fn not_movable(value: Option<&Value>) -> Result<Vec<(String, String)>, PlanError> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let list = value
        .as_array()
        .ok_or_else(|| PlanError::invalid("not_movable", "must be a list"))?;
    list.iter()
        .enumerate()
        .map(|(i, item)| {
            let text = |k: &str| {
                item.get(k)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
            };
            match (text("instance"), text("reason")) {
                (Some(instance), Some(reason)) => Ok((instance.to_string(), reason.to_string())),
                _ => Err(PlanError::invalid(
                    &format!("not_movable[{i}]"),
                    "needs \"instance\" (a uuid) and \"reason\" (why it cannot move)",
                )),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(body: Value) -> Result<PlanRequest, PlanError> {
        PlanRequest::parse(&body, None, &RebalanceSettings::default())
    }

    #[test]
    fn an_empty_body_takes_the_configured_defaults() {
        let r = parse(Value::Null).unwrap();
        assert_eq!(r.solver, RebalanceSolver::Gbm);
        assert_eq!((r.max_moves, r.max_concurrent_per_source), (50, 1));
        assert_eq!(r.migration_resistance, 0.05);
        assert_eq!(r.hosts, None);
        assert_eq!(r.format, PlanFormat::Parasol);
    }

    #[test]
    fn fields_are_read_and_the_query_format_wins() {
        let body = json!({"solver": "sa", "seed": 9, "hosts": ["a", "b"], "format": "parasol",
            "server_groups": [{"policy": "anti-affinity", "members": ["u1", "u2"]}]});
        let r = PlanRequest::parse(&body, Some("watcher"), &RebalanceSettings::default()).unwrap();
        assert_eq!(r.solver, RebalanceSolver::Sa);
        assert_eq!(r.seed, 9);
        assert_eq!(
            r.hosts.as_deref(),
            Some(&["a".to_string(), "b".to_string()][..])
        );
        assert_eq!(r.format, PlanFormat::Watcher);
        assert!(r.server_groups[0].anti_affinity);
        let body = json!({"not_movable": [{"instance": "u1", "reason": "SHUTOFF, not ACTIVE"}]});
        let r = parse(body).unwrap();
        assert_eq!(
            r.not_movable,
            vec![("u1".into(), "SHUTOFF, not ACTIVE".into())]
        );
    }

    #[test]
    fn bad_fields_are_refused_naming_the_field() {
        for (body, field) in [
            (json!([]), "body"),
            (json!({"solver": "dbp"}), "solver"),
            (json!({"hosts": []}), "hosts"),
            (json!({"hosts": [""]}), "hosts"),
            (json!({"max_moves": 0}), "max_moves"),
            (json!({"max_moves": 1001}), "max_moves"),
            (json!({"parallel": -1}), "parallel"),
            (json!({"migration_resistance": 1.5}), "migration_resistance"),
            (json!({"seed": "x"}), "seed"),
            (json!({"replan": "yes"}), "replan"),
            (json!({"format": "xml"}), "format"),
            (
                json!({"server_groups": [{"policy": "soft"}]}),
                "server_groups[0]",
            ),
            (json!({"host": ["a"]}), "host"),
            (json!({"not_movable": {}}), "not_movable"),
            (
                json!({"not_movable": [{"instance": "u1"}]}),
                "not_movable[0]",
            ),
        ] {
            let err = parse(body.clone()).unwrap_err();
            assert!(
                matches!(&err, PlanError::Invalid { field: f, .. } if f == field),
                "{body}: {err}"
            );
            assert_eq!(err.refusal(), RebalanceRefusal::InvalidRequest);
        }
    }
}
