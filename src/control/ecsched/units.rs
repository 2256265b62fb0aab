//! Requests grouped into flow units: a request is a unit of its own, except that the members
//! of an affinity group share one (Fig. 3b's aggregator node, with their summed demand and
//! the intersection of their machine affinities).

use super::problem::{BatchError, BatchRequest, Cluster, GroupPolicy};
use std::collections::HashMap;

/// One unit of flow from its node to the sink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    /// The requests it stands for, by input index.
    pub members: Vec<usize>,
    /// Their summed demand.
    pub demand: Vec<u64>,
    /// Hosts allowed by machine affinity (sorted, deduplicated), or any.
    pub hosts: Option<Vec<u32>>,
    /// The anti-affinity group it belongs to, if any.
    pub apart: Option<u32>,
}

/// Checks every request against the cluster and groups them into units, in input order of
/// each unit's first member.
pub fn units(cluster: &Cluster, requests: &[BatchRequest]) -> Result<Vec<Unit>, BatchError> {
    let classes = cluster.classes();
    let mut policies: HashMap<u32, GroupPolicy> = HashMap::new();
    let mut aggregator: HashMap<u32, usize> = HashMap::new();
    let mut out: Vec<Unit> = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        if r.demand.len() != classes {
            return Err(BatchError::DemandShape {
                request: i,
                got: r.demand.len(),
                classes,
            });
        }
        let hosts = match &r.hosts {
            None => None,
            Some(list) => {
                if let Some(&h) = list.iter().find(|&&h| h as usize >= cluster.hosts()) {
                    return Err(BatchError::UnknownHost {
                        request: i,
                        host: h,
                        hosts: cluster.hosts(),
                    });
                }
                let mut list = list.clone();
                list.sort_unstable();
                list.dedup();
                Some(list)
            }
        };
        if let Some(g) = r.group {
            if *policies.entry(g.id).or_insert(g.policy) != g.policy {
                return Err(BatchError::GroupPolicyConflict {
                    group: g.id,
                    request: i,
                });
            }
            if g.policy == GroupPolicy::Affinity {
                if let Some(&u) = aggregator.get(&g.id) {
                    let unit = &mut out[u];
                    unit.members.push(i);
                    for (a, b) in unit.demand.iter_mut().zip(&r.demand) {
                        *a = a.saturating_add(*b);
                    }
                    unit.hosts = intersect(unit.hosts.take(), hosts);
                    continue;
                }
                aggregator.insert(g.id, out.len());
            }
        }
        let apart = r
            .group
            .filter(|g| g.policy == GroupPolicy::AntiAffinity)
            .map(|g| g.id);
        out.push(Unit {
            members: vec![i],
            demand: r.demand.clone(),
            hosts,
            apart,
        });
    }
    Ok(out)
}

fn intersect(a: Option<Vec<u32>>, b: Option<Vec<u32>>) -> Option<Vec<u32>> {
    match (a, b) {
        (None, b) => b,
        (a, None) => a,
        (Some(a), Some(b)) => Some(
            a.into_iter()
                .filter(|h| b.binary_search(h).is_ok())
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::ecsched::problem::Group;

    fn req(
        demand: u64,
        hosts: Option<Vec<u32>>,
        group: Option<(u32, GroupPolicy)>,
    ) -> BatchRequest {
        BatchRequest {
            demand: vec![demand],
            hosts,
            group: group.map(|(id, policy)| Group { id, policy }),
        }
    }

    #[test]
    fn affinity_members_share_one_unit_with_summed_demand_and_common_hosts() {
        let c = Cluster::new(1, vec![8; 4], vec![8; 4]).unwrap();
        let a = Some((7, GroupPolicy::Affinity));
        let got = units(
            &c,
            &[
                req(1, Some(vec![0, 1, 2]), a),
                req(2, None, None),
                req(3, Some(vec![2, 1]), a),
            ],
        )
        .unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].members, vec![0, 2]);
        assert_eq!(got[0].demand, vec![4]);
        assert_eq!(got[0].hosts, Some(vec![1, 2]));
        assert_eq!(got[1].members, vec![1]);
    }

    #[test]
    fn bad_requests_are_named() {
        let c = Cluster::new(1, vec![8; 2], vec![8; 2]).unwrap();
        let wrong_shape = BatchRequest {
            demand: vec![1, 1],
            ..Default::default()
        };
        assert_eq!(
            units(&c, &[req(1, None, None), wrong_shape]),
            Err(BatchError::DemandShape {
                request: 1,
                got: 2,
                classes: 1
            })
        );
        assert_eq!(
            units(&c, &[req(1, Some(vec![2]), None)]),
            Err(BatchError::UnknownHost {
                request: 0,
                host: 2,
                hosts: 2
            })
        );
        let conflict = [
            req(1, None, Some((3, GroupPolicy::Affinity))),
            req(1, None, Some((3, GroupPolicy::AntiAffinity))),
        ];
        assert_eq!(
            units(&c, &conflict),
            Err(BatchError::GroupPolicyConflict {
                group: 3,
                request: 1
            })
        );
    }
}
