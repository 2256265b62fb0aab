//! Placement's allocation candidates for a request only provider trees can answer (suffixed
//! request groups, `same_subtree`, ports', accelerators' and PCI devices' groups): per compute
//! node, the allocation requests Placement offered, in its order, and what each takes from the
//! node's own (root) provider — the part Parasol's ledger holds (docs/placement-claims.md,
//! "Requests on provider trees").

use super::classes::{ClassError, ClassId};
use super::resources::Resources;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// One allocation request Placement offered for a host.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// Placement's `allocation_requests[i]` as it came (`allocations` and `mappings`): the
    /// body Parasol claims and the Selection's `allocation_request`.
    pub body: Arc<Value>,
    /// What it takes from the host's own provider (the tree's root): what the ledger claims.
    /// The classes of child providers are Placement's alone.
    pub on_host: Resources,
}

/// The candidates of one request, by compute node (root provider) uuid.
#[derive(Debug, Default)]
pub struct TreeCandidates {
    by_host: HashMap<Arc<str>, Vec<Candidate>>,
    /// Per class, the least any host's first candidate takes from the host: the demand the
    /// filters check (the ledger's claim takes the chosen candidate's own part).
    demand: Resources,
    /// The candidate each instance of the call claims or is answered with on a host, where
    /// it is not the host's first: `(instance uuid, host uuid, index)`. Written by the
    /// placement loop (a request with a NUMA topology or PCI requests is claimed with the
    /// first candidate its filters pass, as Nova's `CandidateFilterMixin` leaves it), read by
    /// the claim and the Selection. One call's, as the candidates are.
    picks: Mutex<Vec<(String, Arc<str>, usize)>>,
}

impl Clone for TreeCandidates {
    fn clone(&self) -> Self {
        TreeCandidates {
            by_host: self.by_host.clone(),
            demand: self.demand,
            picks: Mutex::new(self.picks_now().clone()),
        }
    }
}

/// Equal when Placement offered the same: the picks are the call's, not the answer's.
impl PartialEq for TreeCandidates {
    fn eq(&self, other: &Self) -> bool {
        self.by_host == other.by_host && self.demand == other.demand
    }
}

impl TreeCandidates {
    /// The candidates of Placement's answer (`GET /allocation_candidates`): each allocation
    /// request is kept for every provider of its `allocations` that `is_host` names (Nova's
    /// `alloc_reqs_by_rp_uuid`, looked up by compute node uuid), in Placement's order. An
    /// answer without `allocation_requests` is an error naming it.
    pub fn from_placement(answer: &Value, is_host: impl Fn(&str) -> bool) -> Result<Self, String> {
        let requests = answer["allocation_requests"]
            .as_array()
            .ok_or("Placement's allocation candidates have no allocation_requests list")?;
        let mut by_host: HashMap<Arc<str>, Vec<Candidate>> = HashMap::new();
        for (i, request) in requests.iter().enumerate() {
            let allocations = request["allocations"].as_object().ok_or_else(|| {
                format!("Placement's allocation_requests[{i}] has no allocations object")
            })?;
            let body = Arc::new(request.clone());
            for (provider, allocation) in allocations.iter().filter(|(rp, _)| is_host(rp)) {
                let on_host = resources_of(&allocation["resources"])
                    .map_err(|e| format!("allocation_requests[{i}] on {provider}: {e}"))?;
                by_host
                    .entry(Arc::from(provider.as_str()))
                    .or_default()
                    .push(Candidate {
                        body: body.clone(),
                        on_host,
                    });
            }
        }
        let mut firsts = by_host.values().filter_map(|c| c.first());
        let mut demand = firsts.next().map_or(Resources::ZERO, |c| c.on_host);
        for c in firsts {
            for (class, amount) in demand.nonzero().collect::<Vec<_>>() {
                demand.set(class, amount.min(c.on_host.get(class)));
            }
        }
        Ok(TreeCandidates {
            by_host,
            demand,
            picks: Mutex::new(Vec::new()),
        })
    }

    /// Whether Placement offered `host` (a compute node uuid) anything.
    pub fn has(&self, host: &str) -> bool {
        self.by_host.contains_key(host)
    }

    /// The candidate Nova claims on `host`: Placement's first for it.
    pub fn first(&self, host: &str) -> Option<&Candidate> {
        self.by_host.get(host).and_then(|c| c.first())
    }

    /// Every candidate Placement offered on `host`, in its order.
    pub fn of_host(&self, host: &str) -> &[Candidate] {
        self.by_host.get(host).map_or(&[], Vec::as_slice)
    }

    /// Records that `instance` goes to (or is answered with) `host`'s candidate `index`.
    pub fn pick(&self, instance: &str, host: &str, index: usize) {
        let mut picks = self.picks_now();
        picks.retain(|(i, h, _)| !(i == instance && &**h == host));
        if index > 0 {
            picks.push((instance.to_string(), Arc::from(host), index));
        }
    }

    /// The candidate `instance` is claimed or answered with on `host`: the one picked for
    /// it, else Placement's first for the host (what Nova claims).
    pub fn chosen(&self, instance: &str, host: &str) -> Option<&Candidate> {
        let index = self
            .picks_now()
            .iter()
            .find(|(i, h, _)| i == instance && &**h == host)
            .map_or(0, |(_, _, index)| *index);
        self.by_host.get(host).and_then(|c| c.get(index))
    }

    fn picks_now(&self) -> MutexGuard<'_, Vec<(String, Arc<str>, usize)>> {
        // A poisoned lock holds a whole list: each write is one retain and one push.
        self.picks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many hosts Placement offered.
    pub fn hosts(&self) -> usize {
        self.by_host.len()
    }

    /// What the filters check on every candidate host (see the field).
    pub fn demand(&self) -> Resources {
        self.demand
    }
}

/// `{"VCPU": 1, …}` as amounts of this process' classes.
fn resources_of(resources: &Value) -> Result<Resources, String> {
    let map = resources.as_object().ok_or("resources is not an object")?;
    let mut out = Resources::ZERO;
    for (class, amount) in map {
        let amount = amount
            .as_i64()
            .filter(|n| *n >= 0)
            .ok_or_else(|| format!("{class}: {amount} is not an amount"))?;
        let id = ClassId::intern(class).map_err(|e: ClassError| e.to_string())?;
        out.set(id, amount);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ROOT_A: &str = "a0000000-0000-4000-8000-000000000001";
    const CHILD_A: &str = "a0000000-0000-4000-8000-0000000000c1";
    const ROOT_B: &str = "b0000000-0000-4000-8000-000000000001";

    fn answer() -> Value {
        json!({"allocation_requests": [
            {"allocations": {ROOT_A: {"resources": {"VCPU": 2, "MEMORY_MB": 512}},
                             CHILD_A: {"resources": {"CUSTOM_CANDIDATES_TEST": 1}}},
             "mappings": {"": [ROOT_A], "1": [CHILD_A]}},
            {"allocations": {ROOT_B: {"resources": {"VCPU": 1, "MEMORY_MB": 1024}}},
             "mappings": {"": [ROOT_B], "1": [ROOT_B]}},
            {"allocations": {ROOT_B: {"resources": {"VCPU": 4, "MEMORY_MB": 1024}}},
             "mappings": {"": [ROOT_B], "1": [ROOT_B]}},
        ], "provider_summaries": {}})
    }

    #[test]
    fn candidates_are_kept_per_host_in_placement_s_order_with_the_host_s_part() {
        let roots = [ROOT_A, ROOT_B];
        let c = TreeCandidates::from_placement(&answer(), |rp| roots.contains(&rp)).unwrap();
        assert_eq!(c.hosts(), 2);
        assert!(!c.has(CHILD_A), "a child provider is no host");
        let a = c.first(ROOT_A).unwrap();
        assert_eq!(a.on_host, Resources::new(2, 512, 0));
        assert_eq!(a.body["mappings"]["1"], json!([CHILD_A]));
        assert_eq!(c.first(ROOT_B).unwrap().on_host, Resources::new(1, 1024, 0));
        // The least of each host's first candidate, class by class.
        assert_eq!(c.demand(), Resources::new(1, 512, 0));
    }

    #[test]
    fn an_answer_that_is_not_placement_s_is_an_error_naming_what_is_missing() {
        let err = TreeCandidates::from_placement(&json!({}), |_| true).unwrap_err();
        assert!(err.contains("allocation_requests"), "{err}");
        let bad = json!({"allocation_requests": [{"allocations": {ROOT_A: {"resources": {"VCPU": -1}}}}]});
        let err = TreeCandidates::from_placement(&bad, |_| true).unwrap_err();
        assert!(err.contains("VCPU") && err.contains(ROOT_A), "{err}");
    }
}
