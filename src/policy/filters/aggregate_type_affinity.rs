//! `AggregateTypeAffinityFilter`: a host in an aggregate with `instance_type` metadata only
//! takes the flavors named there (comma-separated; Nova 34's `type_filter.py`). Hosts in no
//! such aggregate take every flavor.

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// Nova's `AggregateTypeAffinityFilter`. Not run for a rebuild (`RUN_ON_REBUILD = False`).
#[derive(Clone, Copy, Debug, Default)]
pub struct AggregateTypeAffinityFilter;

impl AggregateTypeAffinityFilter {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "AggregateTypeAffinityFilter";
    /// The aggregate metadata key.
    pub const KEY: &'static str = "instance_type";
}

impl Filter for AggregateTypeAffinityFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        req.aggregate_metadata.is_some()
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        // The merged metadata holds every aggregate's values split at commas and trimmed:
        // Nova's "some value, split and stripped, names the flavor".
        let Some(types) = req
            .aggregate_metadata
            .as_ref()
            .and_then(|m| m.of(host.host()))
            .and_then(|m| m.get(Self::KEY))
        else {
            return true;
        };
        // A spec without a flavor name: Nova compares None, which no value equals.
        req.flavor_name
            .as_deref()
            .is_some_and(|name| types.contains(name))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{self, aggregates, host, request};
    use super::*;

    /// Nova's `TestTypeFilter`: no metadata; one type; one type in each of two aggregates;
    /// a comma list in one aggregate.
    #[test]
    fn keeps_flavors_out_of_aggregates_that_do_not_name_them() {
        type Case<'a> = (&'a str, &'a [&'a str], Option<&'a str>, bool);
        let cases: [Case; 11] = [
            ("nova: no instance_type", &[], Some("fake1"), true),
            ("nova: single type allowed", &["fake1"], Some("fake1"), true),
            (
                "nova: single type refused",
                &["fake1"],
                Some("fake2"),
                false,
            ),
            (
                "nova: first aggregate",
                &["fake1", "fake2"],
                Some("fake1"),
                true,
            ),
            (
                "nova: second aggregate",
                &["fake1", "fake2"],
                Some("fake2"),
                true,
            ),
            (
                "nova: neither aggregate",
                &["fake1", "fake2"],
                Some("fake3"),
                false,
            ),
            ("nova: list, first", &["fake1,fake2"], Some("fake1"), true),
            ("nova: list, second", &["fake1,fake2"], Some("fake2"), true),
            (
                "nova: list, neither",
                &["fake1,fake2"],
                Some("fake3"),
                false,
            ),
            (
                "spaces are stripped",
                &[" fake1 , fake2"],
                Some("fake2"),
                true,
            ),
            ("no flavor name", &["fake1"], None, false),
        ];
        for (name, values, flavor, want) in cases {
            let mut req = request();
            let meta: Vec<testing::Agg<'_>> = values
                .iter()
                .map(|v| (&["host1"][..], vec![("instance_type", *v)]))
                .chain(std::iter::once((&["host1"][..], vec![("other", "x")])))
                .collect();
            req.aggregate_metadata = aggregates(&meta);
            req.flavor_name = flavor.map(str::to_string);
            let env = FilterEnv::without_heartbeats();
            assert_eq!(
                AggregateTypeAffinityFilter.passes(&host(1), &req, &env),
                want,
                "{name}"
            );
        }
    }
}
