//! Why a policy could not be built, and why a request found no host.

use thiserror::Error;

/// A configuration the policy refuses, naming the offending name or key.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PolicyError {
    /// A filter or weigher name no registry entry has.
    #[error("unknown {kind} {name:?}; known {kind}s: {known}")]
    Unknown {
        kind: &'static str,
        name: String,
        known: String,
    },
    /// A filter or weigher named twice (in a list or when registering).
    #[error("{kind} {name:?} is named more than once")]
    Duplicate { kind: &'static str, name: String },
    /// A setting out of its range.
    #[error("invalid policy setting `{key}`: {message}")]
    Invalid { key: &'static str, message: String },
}

/// Filtering left no host: how many hosts each filter removed, in the order they ran (what
/// Nova logs before raising NoValidHost).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{}", self.reason())]
pub struct Rejection {
    /// Hosts given to the filters.
    pub hosts: usize,
    /// Every enabled filter, in order, with the hosts it removed (a host counts against the
    /// first filter that refused it).
    pub removed: Vec<(&'static str, usize)>,
}

/// The reason when there were no hosts to filter.
const NO_HOSTS: &str = "There are not enough hosts available. No hosts to schedule on.";

/// How the reason begins when a request on provider trees finds no allocation candidate in
/// Placement's own answer (`scheduling::trees`).
pub const NO_TREE_CANDIDATE: &str = "Placement has no allocation candidate";

/// Whether a NoValidHost reason says Placement would have listed no allocation candidate:
/// there was no host at all, Placement's candidate test (`CapacityFilter`, which always runs
/// first) left none, or Placement's own answer had none. nova-scheduler raises
/// `NoValidHost(reason="")` then, before any filter runs and before its
/// `scheduler.select_destinations` notifications (`nova/scheduler/manager.py`).
pub fn no_allocation_candidate(reason: &str) -> bool {
    let capacity = super::filters::CapacityFilter::NAME;
    reason == NO_HOSTS
        || reason.starts_with(NO_TREE_CANDIDATE)
        || reason
            .strip_prefix("There are not enough hosts available. Filter ")
            .and_then(|r| r.strip_prefix(capacity))
            .is_some_and(|r| r.starts_with(" returned 0 hosts."))
}

impl Rejection {
    /// The filter that returned 0 hosts (`None` when there were no hosts to filter).
    pub fn filter(&self) -> Option<&'static str> {
        self.removed
            .iter()
            .rev()
            .find(|(_, n)| *n > 0)
            .map(|(name, _)| *name)
    }

    /// The NoValidHost reason: Nova's message, the filter that returned 0 hosts and Nova's
    /// per-filter `(start, end)` results up to it.
    pub fn reason(&self) -> String {
        let Some(last) = self.filter() else {
            return NO_HOSTS.to_string();
        };
        let mut left = self.hosts;
        let mut results = Vec::new();
        for (name, n) in &self.removed {
            results.push(format!("'{name}: (start: {left}, end: {})'", left - n));
            left -= n;
            if *name == last {
                break;
            }
        }
        format!(
            "There are not enough hosts available. Filter {last} returned 0 hosts. Filter results: [{}]",
            results.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_names_the_filter_that_returned_no_host() {
        let r = Rejection {
            hosts: 10,
            removed: vec![
                ("ComputeFilter", 3),
                ("CapacityFilter", 7),
                ("ServerGroupAffinityFilter", 0),
            ],
        };
        assert_eq!(r.filter(), Some("CapacityFilter"));
        assert_eq!(
            r.reason(),
            "There are not enough hosts available. Filter CapacityFilter returned 0 hosts. \
             Filter results: ['ComputeFilter: (start: 10, end: 7)', 'CapacityFilter: (start: 7, end: 0)']"
        );
        assert_eq!(r.to_string(), r.reason());
    }

    #[test]
    fn only_a_host_list_capacity_emptied_is_no_allocation_candidate() {
        let capacity_only = Rejection {
            hosts: 3,
            removed: vec![("CapacityFilter", 3), ("ComputeFilter", 0)],
        };
        assert!(no_allocation_candidate(&capacity_only.reason()));
        let none = Rejection {
            hosts: 0,
            removed: vec![("CapacityFilter", 0)],
        };
        assert!(no_allocation_candidate(&none.reason()));
        let later = Rejection {
            hosts: 3,
            removed: vec![("CapacityFilter", 1), ("ComputeFilter", 2)],
        };
        assert!(!no_allocation_candidate(&later.reason()));
        assert!(!no_allocation_candidate(
            "unsupported request: a NUMA topology"
        ));
    }

    #[test]
    fn reason_without_hosts_says_so() {
        let r = Rejection {
            hosts: 0,
            removed: vec![("ComputeFilter", 0)],
        };
        assert_eq!(r.filter(), None);
        assert!(r.reason().contains("No hosts"), "{}", r.reason());
    }
}
