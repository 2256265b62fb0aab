//! `AggregateInstanceExtraSpecsFilter`: the flavor's extra specs must match the metadata of
//! the host's aggregates (Nova 34's `aggregate_instance_extra_specs.py`, with the operators
//! of `extra_specs_ops.py`).

use super::{Filter, FilterEnv};
pub use crate::domain::extra_specs::{matches, AggregateExtraSpecs};
use crate::domain::{HostState, RequestContext};

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

    use std::collections::BTreeMap;

    type Agg = (Vec<String>, BTreeMap<String, String>);

    fn agg(hosts: &[&str], metadata: &[(&str, &str)]) -> Agg {
        (
            hosts.iter().map(|h| h.to_string()).collect(),
            metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    fn of(aggs: &[Agg]) -> impl Iterator<Item = (&[String], &BTreeMap<String, String>)> {
        aggs.iter().map(|(h, m)| (h.as_slice(), m))
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
            let check = AggregateExtraSpecs::new(&specs(&pairs), of(&aggs)).expect(name);
            assert_eq!(check.host_passes("host1"), want, "{name}");
        }
        assert_eq!(
            AggregateExtraSpecs::new(&specs(&[("hw:cpu_policy", "dedicated")]), of(&aggs)),
            None,
            "only other scopes: nothing to check"
        );
        assert_eq!(AggregateExtraSpecs::new(&BTreeMap::new(), of(&aggs)), None);
    }

    #[test]
    fn values_of_every_aggregate_of_the_host_count_split_at_commas() {
        let aggs = [
            agg(&["host1", "host2"], &[("ssd", "true")]),
            agg(&["host1"], &[("tier", " gold , silver")]),
        ];
        let check = AggregateExtraSpecs::new(&specs(&[("tier", "silver")]), of(&aggs)).unwrap();
        assert!(check.host_passes("host1"));
        assert!(!check.host_passes("host2"), "host2 has no tier");
        assert!(!check.host_passes("host3"), "in no aggregate");
        let both =
            AggregateExtraSpecs::new(&specs(&[("tier", "gold"), ("ssd", "true")]), of(&aggs))
                .unwrap();
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
            AggregateExtraSpecs::new(&specs(&[("foo", "bar")]), of(&aggs)).map(Arc::new);
        assert!(AggregateInstanceExtraSpecsFilter.restricts(&req));
        assert!(AggregateInstanceExtraSpecsFilter.passes(&host(1), &req, &env));
        assert!(!AggregateInstanceExtraSpecsFilter.passes(&host(2), &req, &env));
    }
}
