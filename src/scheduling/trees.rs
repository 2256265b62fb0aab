//! Requests only provider trees answer (suffixed request groups, `same_subtree`, the groups of
//! ports, accelerators and PCI devices): asked of Placement as Nova asks them
//! (`GET /allocation_candidates?<to_querystring>`, 1.36), then decided by Parasol's filters and
//! weighers on the hosts Placement offered (docs/placement-claims.md, "Requests on provider
//! trees"). Without Placement's claims such a request is refused, naming each group.

use super::{Scheduler, SelectError};
use crate::domain::{Mark, PlacementQuery, Resources, TraitId, TreeCandidates};
use crate::nova::ResourceRequest;
use crate::placement::PlacementError;
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

/// What a request on trees is decided with: the demand the filters check, the root's terms and
/// Placement's candidates.
pub(super) type TreeTerms = (Resources, PlacementQuery, Option<Arc<TreeCandidates>>);

impl Scheduler {
    /// Placement's candidates for `rr`, whose `shape` (what it needs trees for, each group
    /// named) the in-memory decision cannot answer. NoValidHost when Placement offers none on
    /// a compute node Parasol knows, or answers an error status (as Nova's scheduler, whose
    /// `get_allocation_candidates` then returns nothing); unavailable when Placement cannot
    /// be reached; refused naming the groups when Parasol does not claim in Placement.
    pub(super) async fn tree_terms(
        &self,
        rr: &ResourceRequest,
        shape: &str,
    ) -> Result<TreeTerms, SelectError> {
        let counted = |kind: &str| self.stats().metrics().placement_candidates(kind).inc();
        let Some(placement) = self.placement_claims() else {
            counted("unsupported");
            return Err(SelectError::NoValidHost {
                reason: format!(
                    "unsupported request: {shape}: Parasol decides such a request only on \
                     Placement's allocation candidates ([placement] enabled and claims = true)"
                ),
            });
        };
        let query = rr.to_querystring();
        let answer = match placement.allocation_candidates(&query).await {
            Ok(answer) => answer,
            Err(PlacementError::Status { status, body, .. }) => {
                tracing::info!(%query, status, %body, "Placement refused the allocation candidates query");
                counted("refused");
                return Err(SelectError::NoValidHost {
                    reason: format!(
                        "Placement answered {status} to GET /allocation_candidates?{query}: {body}"
                    ),
                });
            }
            Err(e) => {
                counted("unreachable");
                return Err(SelectError::Unavailable(e.to_string()));
            }
        };
        let trees = self.ledger().table().with_hosts(|hosts| {
            let known: HashSet<&str> = hosts.iter().map(|h| &**h.uuid()).collect();
            TreeCandidates::from_placement(&answer, |rp| known.contains(rp))
        });
        let trees = trees.map_err(|e| {
            counted("refused");
            SelectError::Unavailable(format!("Placement: {e}"))
        })?;
        tracing::info!(%shape, hosts = trees.hosts(), "a request on provider trees: deciding on Placement's allocation candidates");
        if trees.hosts() == 0 {
            counted("none");
            return Err(SelectError::NoValidHost {
                reason: format!(
                    "{} on a known compute node for GET /allocation_candidates?{query}",
                    crate::policy::NO_TREE_CANDIDATE
                ),
            });
        }
        // Placement judged every group's traits and aggregates; the filters keep the root's
        // (the host's) own, which the table holds.
        let query = PlacementQuery {
            required_traits: trait_ids(&rr.root_required),
            forbidden_traits: trait_ids(&rr.root_forbidden),
            in_tree: rr.in_tree.clone(),
            ..PlacementQuery::default()
        };
        counted("found");
        Ok((trees.demand(), query, Some(Arc::new(trees))))
    }
}

/// The outcomes [`Scheduler::tree_terms`] counts, in the order `/v1/stats` shows them.
pub const CANDIDATE_OUTCOMES: [&str; 5] =
    ["found", "none", "refused", "unreachable", "unsupported"];

fn trait_ids(names: &BTreeSet<String>) -> Vec<TraitId> {
    let mut ids: Vec<TraitId> = names.iter().map(|n| TraitId::intern(n)).collect();
    ids.sort();
    ids.dedup();
    ids
}
