//! `AggregateMultiTenancyIsolation`: a host in an aggregate whose metadata has keys starting
//! with `filter_tenant_id` only takes instances of the projects listed there (Nova 34's
//! `aggregate_multitenancy_isolation.py`). Hosts in no such aggregate take every project.
//!
//! Not the request filter `limit_tenants_to_placement_aggregate` (which restricts a project
//! to its aggregates through Placement): this one keeps other projects out of an aggregate.

use super::{Filter, FilterEnv};
use crate::domain::{HostState, RequestContext};

/// The aggregate metadata key prefix naming a project (`filter_tenant_id`,
/// `filter_tenant_id2`, …: every key with the prefix counts, values split at commas).
pub const TENANT_KEY_PREFIX: &str = "filter_tenant_id";

/// Nova's `AggregateMultiTenancyIsolation`. Not run for a rebuild (`RUN_ON_REBUILD = False`).
#[derive(Clone, Copy, Debug, Default)]
pub struct AggregateMultiTenancyIsolation;

impl AggregateMultiTenancyIsolation {
    /// The name in `enabled_filters`.
    pub const NAME: &'static str = "AggregateMultiTenancyIsolation";
}

impl Filter for AggregateMultiTenancyIsolation {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn restricts(&self, req: &RequestContext) -> bool {
        req.aggregate_metadata.is_some()
    }

    fn passes(&self, host: &HostState, req: &RequestContext, _env: &FilterEnv) -> bool {
        let Some(metadata) = req
            .aggregate_metadata
            .as_ref()
            .and_then(|m| m.of(host.host()))
        else {
            return true;
        };
        let mut restricted = false;
        for (key, projects) in metadata {
            if !key.starts_with(TENANT_KEY_PREFIX) || projects.is_empty() {
                continue;
            }
            restricted = true;
            // A request without a project is no listed project (Nova: `None not in set`).
            if let Some(project) = req.project_id.as_deref() {
                if projects.contains(project) {
                    return true;
                }
            }
        }
        !restricted
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{host, request};
    use super::*;
    use crate::domain::HostAggregateMetadata;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    /// Aggregates as (hosts, metadata) pairs.
    type Aggs<'a> = &'a [(&'a [&'a str], &'a [(&'a str, &'a str)])];

    fn aggregates(list: Aggs<'_>) -> Option<Arc<HostAggregateMetadata>> {
        let owned: Vec<(Vec<String>, BTreeMap<String, String>)> = list
            .iter()
            .map(|(hosts, meta)| {
                (
                    hosts.iter().map(|h| h.to_string()).collect(),
                    meta.iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                )
            })
            .collect();
        Some(Arc::new(HostAggregateMetadata::new(
            owned.iter().map(|(h, m)| (h.as_slice(), m)),
        )))
    }

    #[test]
    fn keeps_other_projects_out_of_tenant_aggregates() {
        let env = FilterEnv::without_heartbeats();
        let meta = aggregates(&[
            (&["host1"], &[("filter_tenant_id", "p1, p2")]),
            (&["host2"], &[("filter_tenant_id_x", "p3"), ("ssd", "true")]),
            (&["host3"], &[("ssd", "true")]),
            (&["host2"], &[("filter_tenant_id2", "p4")]),
        ]);
        type Case<'a> = (&'a str, Option<&'a str>, i64, bool);
        let cases: [Case; 10] = [
            ("listed project", Some("p1"), 1, true),
            ("second listed, trimmed", Some("p2"), 1, true),
            ("unlisted project", Some("p3"), 1, false),
            ("no project on a restricted host", None, 1, false),
            ("prefixed key", Some("p3"), 2, true),
            ("another aggregate's prefixed key", Some("p4"), 2, true),
            ("neither of host2's", Some("p1"), 2, false),
            ("aggregate without tenant keys", Some("p9"), 3, true),
            ("no project, unrestricted host", None, 3, true),
            ("in no aggregate", Some("p9"), 4, true),
        ];
        for (name, project, id, want) in cases {
            let mut req = request();
            req.aggregate_metadata = meta.clone();
            req.project_id = project.map(str::to_string);
            assert!(AggregateMultiTenancyIsolation.restricts(&req), "{name}");
            assert_eq!(
                AggregateMultiTenancyIsolation.passes(&host(id), &req, &env),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn skipped_without_aggregate_metadata_and_for_a_rebuild() {
        let env = FilterEnv::without_heartbeats();
        let mut req = request();
        req.project_id = Some("p9".into());
        assert!(!AggregateMultiTenancyIsolation.restricts(&req));
        assert!(AggregateMultiTenancyIsolation.passes(&host(1), &req, &env));
        req.aggregate_metadata = aggregates(&[(&["host1"], &[("filter_tenant_id", "p1")])]);
        assert!(!AggregateMultiTenancyIsolation.passes(&host(1), &req, &env));
        req.rebuild = true;
        assert!(
            !super::super::applies(&AggregateMultiTenancyIsolation, &req),
            "Nova's RUN_ON_REBUILD is false"
        );
    }
}
