//! The flavor's extra specs against the metadata of the host's aggregates: what Nova 34's
//! `AggregateInstanceExtraSpecsFilter` checks (`aggregate_instance_extra_specs.py`, with the
//! operators of `extra_specs_ops.py`), built once per request and read per host.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The scope of the keys this filter reads (besides unscoped keys).
pub const SCOPE: &str = "aggregate_instance_extra_specs";

/// What the filter checks for one request: the flavor's extra specs it reads (scope removed)
/// and, per service host, the metadata of its aggregates (each value split at commas and
/// trimmed, as Nova's `aggregate_metadata_get_by_host`). Built once per request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AggregateExtraSpecs {
    /// `(key, requirement)`: unscoped keys and `aggregate_instance_extra_specs:` keys.
    specs: Vec<(String, String)>,
    /// Service host → key → values.
    by_host: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

impl AggregateExtraSpecs {
    /// The check of `extra_specs` against `aggregates` (each aggregate's hosts and metadata);
    /// `None` when the flavor has no key
    /// the filter reads (every host passes then).
    pub fn new<'a>(
        extra_specs: &BTreeMap<String, String>,
        aggregates: impl IntoIterator<Item = (&'a [String], &'a BTreeMap<String, String>)>,
    ) -> Option<Self> {
        let specs: Vec<(String, String)> = extra_specs
            .iter()
            .filter_map(|(key, req)| match key.split_once(':') {
                None => Some((key.clone(), req.clone())),
                Some((scope, rest)) if scope == SCOPE => Some((rest.to_string(), req.clone())),
                Some(_) => None,
            })
            .collect();
        if specs.is_empty() {
            return None;
        }
        let mut by_host: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for (hosts, metadata) in aggregates {
            for host in hosts {
                let meta = by_host.entry(host.clone()).or_default();
                for (k, v) in metadata {
                    meta.entry(k.clone())
                        .or_default()
                        .extend(v.split(',').map(|x| x.trim().to_string()));
                }
            }
        }
        Some(AggregateExtraSpecs { specs, by_host })
    }

    /// True when every spec is matched by one of the host's aggregate values for its key.
    pub fn host_passes(&self, host: &str) -> bool {
        let empty = BTreeMap::new();
        let meta = self.by_host.get(host).unwrap_or(&empty);
        self.specs.iter().all(|(key, req)| match meta.get(key) {
            Some(values) if !values.is_empty() => values.iter().any(|v| matches(v, req)),
            _ => false,
        })
    }
}

/// Nova's `extra_specs_ops.match(value, req)`: `req` is `<op> operand` for the operators
/// `=` (numeric ≥), `==`, `!=`, `>=`, `<=` (numeric), `s==`, `s!=`, `s<`, `s<=`, `s>`, `s>=`
/// (strings), `<in>` (substring), `<all-in>` (every word a substring), `<or>` (one of the
/// words); any other first word makes it a plain string equality. Where Nova would raise (a
/// number that does not parse, a `<or>` without operands) the value does not match.
pub fn matches(value: &str, req: &str) -> bool {
    let mut words = req.split_whitespace();
    let Some(op) = words.next() else {
        return value == req;
    };
    let rest: Vec<&str> = words.collect();
    let num = |f: fn(f64, f64) -> bool| match (rest.first(), parse_float(value)) {
        (Some(operand), Some(x)) => parse_float(operand).is_some_and(|y| f(x, y)),
        _ => false,
    };
    let string = |f: fn(&str, &str) -> bool| rest.first().is_some_and(|y| f(value, y));
    match op {
        "=" | ">=" => num(|x, y| x >= y),
        "==" => num(|x, y| x == y),
        "!=" => num(|x, y| x != y),
        "<=" => num(|x, y| x <= y),
        "s==" => string(|x, y| x == y),
        "s!=" => string(|x, y| x != y),
        "s<" => string(|x, y| x < y),
        "s<=" => string(|x, y| x <= y),
        "s>" => string(|x, y| x > y),
        "s>=" => string(|x, y| x >= y),
        "<in>" => rest.first().is_some_and(|y| value.contains(y)),
        "<all-in>" => !rest.is_empty() && rest.iter().all(|y| value.contains(y)),
        // `<or> v1 <or> v2 …`: the operands are every other word.
        "<or>" => rest.iter().step_by(2).any(|w| *w == value),
        _ => value == req,
    }
}

/// Python's `float()` of a string: surrounding whitespace allowed, `inf`/`nan` spelt any case.
fn parse_float(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok()
}
