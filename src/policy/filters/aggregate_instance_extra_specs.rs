//! `AggregateInstanceExtraSpecsFilter`: the flavor's extra specs must match the metadata of
//! the host's aggregates (Nova 34's `aggregate_instance_extra_specs.py`, with the operators
//! of `extra_specs_ops.py`).

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};
use crate::nova::Aggregate;
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
    /// The check of `extra_specs` against `aggregates`; `None` when the flavor has no key
    /// the filter reads (every host passes then).
    pub fn new(extra_specs: &BTreeMap<String, String>, aggregates: &[Aggregate]) -> Option<Self> {
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
        for agg in aggregates {
            for host in &agg.hosts {
                let meta = by_host.entry(host.clone()).or_default();
                for (k, v) in &agg.metadata {
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

/// Nova's `AggregateInstanceExtraSpecsFilter`. Not run for a rebuild (`RUN_ON_REBUILD =
/// False`: the request then carries no check).
#[derive(Clone, Copy, Debug, Default)]
pub struct AggregateInstanceExtraSpecsFilter;

impl AggregateInstanceExtraSpecsFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "AggregateInstanceExtraSpecsFilter";
}

impl Filter for AggregateInstanceExtraSpecsFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        req.aggregate_extra_specs.is_some()
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        match &req.aggregate_extra_specs {
            Some(check) => check.host_passes(host.host()),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;
    use std::sync::Arc;

    fn agg(hosts: &[&str], metadata: &[(&str, &str)]) -> Aggregate {
        Aggregate {
            uuid: format!("agg-{}", hosts.join("-")),
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
        }
    }

    fn specs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn operators_match_as_extra_specs_ops() {
        let cases = [
            ("plain equality", "bar", "bar", true),
            ("plain inequality", "bar", "baz", false),
            (
                "unknown first word: whole string equality",
                "a b",
                "a b",
                true,
            ),
            ("= is numeric at least", "4", "= 2", true),
            ("= is numeric at least, below", "1", "= 2", false),
            ("= with a float", "2.5", "= 2.5", true),
            ("== numeric", "2.0", "== 2", true),
            ("!= numeric", "3", "!= 2", true),
            (">= numeric", "2", ">= 3", false),
            ("<= numeric", "2", "<= 3", true),
            ("a number that does not parse", "abc", "= 1", false),
            ("s== strings", "abc", "s== abc", true),
            ("s!= strings", "abc", "s!= abc", false),
            ("s< strings", "abc", "s< abd", true),
            ("s<= strings", "abc", "s<= abc", true),
            ("s> strings", "b", "s> a", true),
            ("s>= strings", "10", "s>= 9", false),
            ("<in> substring", "ssd-fast", "<in> ssd", true),
            ("<in> missing", "hdd", "<in> ssd", false),
            ("<all-in> every word", "sse avx", "<all-in> sse avx", true),
            ("<all-in> one missing", "sse", "<all-in> sse avx", false),
            ("<or> first", "v1", "<or> v1 <or> v2", true),
            ("<or> last", "v2", "<or> v1 <or> v2", true),
            ("<or> none", "v3", "<or> v1 <or> v2", false),
            ("<or> without operand", "v1", "<or>", false),
            ("operator without operand", "1", ">=", false),
            ("empty requirement", "", "", true),
        ];
        for (name, value, req, want) in cases {
            assert_eq!(matches(value, req), want, "{name}: {value:?} vs {req:?}");
        }
    }

    #[test]
    fn unscoped_and_scoped_keys_are_read_other_scopes_are_not() {
        let aggs = [agg(&["host1"], &[("foo", "bar")])];
        let cases = [
            ("unscoped match", vec![("foo", "bar")], true),
            ("unscoped mismatch", vec![("foo", "baz")], false),
            (
                "scoped match",
                vec![("aggregate_instance_extra_specs:foo", "bar")],
                true,
            ),
            (
                "scoped mismatch",
                vec![("aggregate_instance_extra_specs:foo", "baz")],
                false,
            ),
            (
                "key absent from the aggregates",
                vec![("other", "x")],
                false,
            ),
            (
                "other scopes are ignored",
                vec![("hw:cpu_policy", "dedicated"), ("foo", "bar")],
                true,
            ),
        ];
        for (name, pairs, want) in cases {
            let check = AggregateExtraSpecs::new(&specs(&pairs), &aggs).expect(name);
            assert_eq!(check.host_passes("host1"), want, "{name}");
        }
        assert_eq!(
            AggregateExtraSpecs::new(&specs(&[("hw:cpu_policy", "dedicated")]), &aggs),
            None,
            "only other scopes: nothing to check"
        );
        assert_eq!(AggregateExtraSpecs::new(&BTreeMap::new(), &aggs), None);
    }

    #[test]
    fn values_of_every_aggregate_of_the_host_count_split_at_commas() {
        let aggs = [
            agg(&["host1", "host2"], &[("ssd", "true")]),
            agg(&["host1"], &[("tier", " gold , silver")]),
        ];
        let check = AggregateExtraSpecs::new(&specs(&[("tier", "silver")]), &aggs).unwrap();
        assert!(check.host_passes("host1"));
        assert!(!check.host_passes("host2"), "host2 has no tier");
        assert!(!check.host_passes("host3"), "in no aggregate");
        let both =
            AggregateExtraSpecs::new(&specs(&[("tier", "gold"), ("ssd", "true")]), &aggs).unwrap();
        assert!(both.host_passes("host1"));
    }

    #[test]
    fn filter_reads_the_requests_check_by_service_host() {
        let env = FilterEnv::without_heartbeats();
        let mut req = request();
        assert!(!AggregateInstanceExtraSpecsFilter.restricts(&req));
        assert!(AggregateInstanceExtraSpecsFilter.passes(&host(1), &req, &env));
        let aggs = [agg(&["host1"], &[("foo", "bar")])];
        req.aggregate_extra_specs =
            AggregateExtraSpecs::new(&specs(&[("foo", "bar")]), &aggs).map(Arc::new);
        assert!(AggregateInstanceExtraSpecsFilter.restricts(&req));
        assert!(AggregateInstanceExtraSpecsFilter.passes(&host(1), &req, &env));
        assert!(!AggregateInstanceExtraSpecsFilter.passes(&host(2), &req, &env));
    }
}
