//! `JsonFilter`: the `query` hint, a JSON expression over the host's attributes, decides
//! (Nova 34's `json_filter.py`): `["and", [">=", "$free_ram_mb", 1024], ["not",
//! "$service.disabled"]]`.
//!
//! Commands `=`, `<`, `>`, `in`, `<=`, `>=` compare the first argument with every other (at
//! least two arguments), `not` negates each argument (a list), `or`/`and` fold them; a string
//! `$name.key` is the host's attribute `name` (then its `key`), an unknown one or an empty
//! string is dropped from the arguments, as Nova drops `None`. A list result passes when any
//! element is true. Values follow Python's rules: `True == 1`, numbers compare across int and
//! float, strings by code point, lists element by element.
//!
//! Where Nova raises (an unknown command, comparing a string with a number, a query that is
//! not JSON) the request fails in Nova; in Parasol the host fails, so such a query passes no
//! host. Attributes Parasol holds: `host`, `nodename`, `hypervisor_hostname`, `uuid`,
//! `free_ram_mb`, `free_disk_mb`, `disk_mb_used`, `total_usable_ram_mb`,
//! `total_usable_disk_gb`, `vcpus_total`, `vcpus_used`, `num_instances`, `num_io_ops`,
//! `failed_builds`, `cpu_allocation_ratio`, `ram_allocation_ratio`, `disk_allocation_ratio`,
//! and with Nova's records (`[nova_db]`) `host_ip`, `hypervisor_type`, `hypervisor_version`,
//! `cell_uuid`; `service` with `disabled`, `forced_down`, `host`. Others are unknown (dropped).

use super::{Filter, FilterEnv};
use crate::domain::{ClassId, HostState, RequestContext};
use serde_json::Value;
use std::cmp::Ordering;

/// Nova's `JsonFilter`. Not run for a rebuild (`RUN_ON_REBUILD = False`).
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonFilter;

impl JsonFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "JsonFilter";
}

impl Filter for JsonFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        req.hints.as_ref().is_some_and(|h| h.query.is_some())
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        match req.hints.as_ref().and_then(|h| h.query.as_ref()) {
            None => true,
            Some(Err(_)) => false,
            Some(Ok(query)) => evaluate(query, host).unwrap_or(false),
        }
    }
}

/// Nova's verdict on `query` for `host`; `Err` where Nova raises.
pub fn evaluate(query: &Value, host: &HostState) -> Result<bool, String> {
    let result = process(query, host)?;
    Ok(match result {
        Py::List(items) => items.iter().any(Py::truthy),
        other => other.truthy(),
    })
}

/// A Python value as the filter handles it.
#[derive(Clone, Debug, PartialEq)]
enum Py {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Py>),
    /// A JSON object (a dict): equal only to an equal dict, never ordered.
    Dict(serde_json::Map<String, Value>),
}

impl Py {
    fn from_json(v: &Value) -> Option<Py> {
        Some(match v {
            Value::Null => return None,
            Value::Bool(b) => Py::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Py::Int(i),
                None => Py::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => Py::Str(s.clone()),
            Value::Array(a) => Py::List(a.iter().filter_map(Py::from_json).collect()),
            Value::Object(o) => Py::Dict(o.clone()),
        })
    }

    fn truthy(&self) -> bool {
        match self {
            Py::Bool(b) => *b,
            Py::Int(i) => *i != 0,
            Py::Float(f) => *f != 0.0,
            Py::Str(s) => !s.is_empty(),
            Py::List(l) => !l.is_empty(),
            Py::Dict(d) => !d.is_empty(),
        }
    }

    fn number(&self) -> Option<f64> {
        match self {
            Py::Bool(b) => Some(f64::from(u8::from(*b))),
            Py::Int(i) => Some(*i as f64),
            Py::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// Python's `==`.
    fn eq(&self, other: &Py) -> bool {
        match (self, other) {
            (Py::Str(a), Py::Str(b)) => a == b,
            (Py::List(a), Py::List(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.eq(y))
            }
            (Py::Dict(a), Py::Dict(b)) => a == b,
            (Py::Int(a), Py::Int(b)) => a == b,
            _ => match (self.number(), other.number()) {
                (Some(a), Some(b)) => a == b,
                _ => false,
            },
        }
    }

    /// Python's ordering; `Err` for a `TypeError` (e.g. a string against a number).
    fn cmp(&self, other: &Py) -> Result<Option<Ordering>, String> {
        match (self, other) {
            (Py::Str(a), Py::Str(b)) => Ok(Some(a.cmp(b))),
            (Py::Int(a), Py::Int(b)) => Ok(Some(a.cmp(b))),
            (Py::List(a), Py::List(b)) => {
                for (x, y) in a.iter().zip(b) {
                    if !x.eq(y) {
                        return x.cmp(y);
                    }
                }
                Ok(Some(a.len().cmp(&b.len())))
            }
            _ => match (self.number(), other.number()) {
                (Some(a), Some(b)) => Ok(a.partial_cmp(&b)),
                _ => Err(format!("'<' not supported between {self:?} and {other:?}")),
            },
        }
    }
}

/// Nova's `_process_filter`.
fn process(query: &Value, host: &HostState) -> Result<Py, String> {
    let items: &[Value] = match query {
        Value::Array(a) => a,
        // `if not query: return True` for every falsy query; anything else indexes [0].
        Value::Object(o) if o.is_empty() => return Ok(Py::Bool(true)),
        Value::String(s) if s.is_empty() => return Ok(Py::Bool(true)),
        Value::Null | Value::Bool(false) => return Ok(Py::Bool(true)),
        Value::Number(n) if n.as_f64() == Some(0.0) => return Ok(Py::Bool(true)),
        other => return Err(format!("query {other} is not a list")),
    };
    let Some(cmd) = items.first() else {
        return Ok(Py::Bool(true));
    };
    let cmd = match cmd {
        Value::String(s) => s.as_str(),
        other => return Err(format!("unknown command {other}")),
    };
    let mut args = Vec::with_capacity(items.len() - 1);
    for arg in &items[1..] {
        let cooked = match arg {
            Value::Array(_) => Some(process(arg, host)?),
            Value::String(s) => parse_string(s, host),
            other => Py::from_json(other),
        };
        args.extend(cooked);
    }
    let compare = |test: fn(Ordering) -> bool| -> Result<Py, String> {
        if args.len() < 2 {
            return Ok(Py::Bool(false));
        }
        for other in &args[1..] {
            if !args[0].cmp(other)?.is_some_and(test) {
                return Ok(Py::Bool(false));
            }
        }
        Ok(Py::Bool(true))
    };
    match cmd {
        "=" => Ok(Py::Bool(
            args.len() >= 2 && args[1..].iter().all(|a| args[0].eq(a)),
        )),
        "<" => compare(|o| o == Ordering::Less),
        ">" => compare(|o| o == Ordering::Greater),
        "<=" => compare(|o| o != Ordering::Greater),
        ">=" => compare(|o| o != Ordering::Less),
        "in" => Ok(Py::Bool(
            args.len() >= 2 && args[1..].iter().any(|a| args[0].eq(a)),
        )),
        "not" => Ok(Py::List(
            args.iter().map(|a| Py::Bool(!a.truthy())).collect(),
        )),
        "or" => Ok(Py::Bool(args.iter().any(Py::truthy))),
        "and" => Ok(Py::Bool(args.iter().all(Py::truthy))),
        other => Err(format!("unknown command {other:?}")),
    }
}

/// Nova's `_parse_string`: `$attr.key` looks the host up; other strings are themselves;
/// `None` (dropped) for an empty string or an unknown attribute.
fn parse_string(s: &str, host: &HostState) -> Option<Py> {
    if s.is_empty() {
        return None;
    }
    let Some(path) = s.strip_prefix('$') else {
        return Some(Py::Str(s.to_string()));
    };
    let mut parts = path.split('.');
    let attr = parts.next().unwrap_or("");
    let rest: Vec<&str> = parts.collect();
    if attr == "service" {
        let [key] = rest.as_slice() else {
            // `$service` alone is a dict; deeper keys of a bool fail in Nova (`.get`).
            return None;
        };
        return match *key {
            "disabled" => Some(Py::Bool(host.disabled)),
            "forced_down" => Some(Py::Bool(host.forced_down)),
            "host" => Some(Py::Str(host.host().to_string())),
            _ => None,
        };
    }
    if !rest.is_empty() {
        // Parasol's attributes are scalars: Nova's `.get` on them would raise.
        return None;
    }
    attribute(attr, host)
}

/// The host's attribute `name` as Nova's `HostState` holds it.
fn attribute(name: &str, host: &HostState) -> Option<Py> {
    let inv = |class: ClassId| host.profile.inventory(class);
    let used = |class: ClassId| host.used.get(class);
    let total = |class: ClassId| inv(class).map_or(0, |i| i.total);
    let reserved = |class: ClassId| inv(class).map_or(0, |i| i.reserved);
    let ratio = |class: ClassId| Py::Float(inv(class).map_or(0.0, |i| i.allocation_ratio));
    let facts = host.profile.facts.as_deref();
    let (mem, disk, cpu) = (ClassId::MEMORY_MB, ClassId::DISK_GB, ClassId::VCPU);
    Some(match name {
        "host" => Py::Str(host.host().to_string()),
        "nodename" | "hypervisor_hostname" => Py::Str(host.node().to_string()),
        "uuid" => Py::Str(host.uuid().to_string()),
        "free_ram_mb" => Py::Int(total(mem) - reserved(mem) - used(mem)),
        "free_disk_mb" => Py::Int((total(disk) - reserved(disk) - used(disk)) * 1024),
        "disk_mb_used" => Py::Int((reserved(disk) + used(disk)) * 1024),
        "total_usable_ram_mb" => Py::Int(total(mem)),
        "total_usable_disk_gb" => Py::Int(total(disk)),
        "vcpus_total" => Py::Int(total(cpu)),
        "vcpus_used" => Py::Int(used(cpu)),
        "num_instances" => Py::Int(host.num_instances),
        "num_io_ops" => Py::Int(host.num_io_ops),
        "failed_builds" => Py::Int(facts.map_or(0, |f| f.failed_builds)),
        "cpu_allocation_ratio" => ratio(cpu),
        "ram_allocation_ratio" => ratio(mem),
        "disk_allocation_ratio" => ratio(disk),
        "host_ip" => Py::Str(facts?.host_ip?.to_string()),
        "hypervisor_type" => Py::Str(facts?.hypervisor_type.clone()),
        "hypervisor_version" => Py::Int(facts?.hypervisor_version),
        "cell_uuid" => Py::Str(facts?.cell_uuid.clone()?),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request, with_hints};
    use super::*;
    use serde_json::json;

    fn passes(query: Value, h: &HostState) -> bool {
        let req = with_hints(request(), |hints| hints.query = Some(Ok(query)));
        JsonFilter.passes(h, &req, &FilterEnv::without_heartbeats())
    }

    /// A host with `free_ram_mb` and `free_disk_mb` as given (nothing reserved).
    fn free(ram: i64, disk_mb: i64) -> HostState {
        let mut h = host(1);
        h.used = crate::domain::Resources::new(0, 32768 - ram, 400 - disk_mb / 1024);
        h
    }

    /// Nova's `test_json_filter_passes` / `_fails_on_memory` / `_fails_on_disk`.
    #[test]
    fn nova_memory_and_disk_query() {
        let q = json!([
            "and",
            [">=", "$free_ram_mb", 1024],
            [">=", "$free_disk_mb", 200 * 1024]
        ]);
        assert!(passes(q.clone(), &free(1024, 200 * 1024)));
        assert!(!passes(q.clone(), &free(1023, 200 * 1024)));
        assert!(!passes(q, &free(1024, 199 * 1024)));
    }

    /// Nova's `_fails_on_service_disabled` fails because its fake host has no `service`
    /// (the `not` of nothing is an empty list, falsy). A real host has one, and `not` makes
    /// a list, which `and` takes as true whatever it holds: only a `not` at the top decides.
    #[test]
    fn service_disabled_as_nova_reads_it() {
        let q = json!([
            "and",
            [">=", "$free_ram_mb", 1024],
            ["not", "$service.disabled"]
        ]);
        let mut h = free(1024, 200 * 1024);
        h.disabled = true;
        assert!(passes(q, &h), "a list inside `and` is truthy");
        assert!(!passes(json!(["not", "$service.disabled"]), &h));
        assert!(!passes(json!(["and", ["not", "$service.nothing"]]), &h));
        h.disabled = false;
        assert!(passes(json!(["not", "$service.disabled"]), &h));
    }

    /// Nova's `test_json_filter_passes_with_no_query`.
    #[test]
    fn no_query_passes() {
        let env = FilterEnv::without_heartbeats();
        assert!(JsonFilter.passes(&free(0, 0), &request(), &env));
        assert!(!JsonFilter.restricts(&request()));
    }

    /// Nova's `test_json_filter_basic_operators`, every row.
    #[test]
    fn nova_basic_operators() {
        let rows = json!([
            ["=", [1, 1], true],
            ["=", [1, 2], false],
            ["<", [1, 2], true],
            ["<", [1, 1], false],
            ["<", [2, 1], false],
            [">", [2, 1], true],
            [">", [2, 2], false],
            [">", [2, 3], false],
            ["<=", [1, 2], true],
            ["<=", [1, 1], true],
            ["<=", [2, 1], false],
            [">=", [2, 1], true],
            [">=", [2, 2], true],
            [">=", [2, 3], false],
            ["in", [1, 1], true],
            ["in", [1, 1, 2, 3], true],
            ["in", [4, 1, 2, 3], false],
            ["not", [true], false],
            ["not", [false], true],
            ["or", [true, false], true],
            ["or", [false, false], false],
            ["and", [true, true], true],
            ["and", [false, false], false],
            ["and", [true, false], false],
            ["and", [["or", true, false], [">", 2, 1]], true]
        ]);
        for row in rows.as_array().unwrap() {
            let mut raw = vec![row[0].clone()];
            raw.extend(row[1].as_array().unwrap().iter().cloned());
            let want = row[2].as_bool().unwrap();
            assert_eq!(passes(Value::Array(raw.clone()), &host(1)), want, "{raw:?}");
        }
        assert!(passes(json!(["not", true, false, true, false]), &host(1)));
        assert!(!passes(json!(["not", true, true, true]), &host(1)));
    }

    /// Nova's `_unknown_operator_raises` (here: no host passes), `_empty_filters_pass`,
    /// `_invalid_num_arguments_fails`, `_unknown_variable_ignored`.
    #[test]
    fn nova_edge_cases() {
        let h = host(1);
        assert!(!passes(json!(["!=", 1, 2]), &h));
        assert!(passes(json!([]), &h));
        assert!(passes(json!({}), &h));
        assert!(!passes(
            json!([">", ["and", ["or", ["not", ["<", [">=", ["<=", ["in"]]]]]]]]),
            &h
        ));
        assert!(!passes(json!([">", 1]), &h));
        assert!(passes(json!(["=", "$........", 1, 1]), &h));
        assert!(passes(json!(["=", "$foo", 2, 2]), &h));
    }

    /// Python's typing: `True == 1`, int against float, a string against a number raises.
    #[test]
    fn python_comparisons() {
        let h = host(1);
        assert!(passes(json!(["=", true, 1]), &h));
        assert!(passes(json!(["<", 1, 1.5]), &h));
        assert!(passes(json!(["<", "a", "b"]), &h));
        assert!(!passes(json!(["<", "a", 1]), &h), "Nova raises TypeError");
        assert!(passes(json!(["=", "$host", "host1"]), &h));
        assert!(passes(json!(["in", "$host", "x", "host1"]), &h));
        assert!(passes(json!(["=", "$num_instances", 0]), &h));
        let req = with_hints(request(), |q| q.query = Some(Err("not json".into())));
        assert!(!JsonFilter.passes(&h, &req, &FilterEnv::without_heartbeats()));
    }
}
