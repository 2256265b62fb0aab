//! oslo.messaging drops a message whose `_unique_id` it has seen recently; so does Parasol,
//! remembering the last `capacity` ids (oslo remembers 16; redeliveries come in bursts).

use std::collections::{HashSet, VecDeque};

/// A bounded set of recently seen ids: the oldest is forgotten first.
#[derive(Debug)]
pub struct Dedup {
    seen: HashSet<String>,
    order: VecDeque<String>,
    capacity: usize,
}

impl Dedup {
    pub fn new(capacity: usize) -> Self {
        Dedup {
            seen: HashSet::with_capacity(capacity),
            order: VecDeque::with_capacity(capacity),
            capacity: capacity.max(1),
        }
    }

    /// True the first time `id` is offered (and remembers it), false for a repeat.
    pub fn first_time(&mut self, id: &str) -> bool {
        if self.seen.contains(id) {
            return false;
        }
        if self.order.len() == self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        self.seen.insert(id.to_string());
        self.order.push_back(id.to_string());
        true
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_id_is_refused_until_it_is_forgotten() {
        let mut d = Dedup::new(2);
        assert!(d.first_time("a"));
        assert!(!d.first_time("a"));
        assert!(d.first_time("b"));
        assert!(d.first_time("c"));
        assert_eq!(d.len(), 2, "memory stays bounded");
        assert!(d.first_time("a"), "the oldest id was forgotten");
        assert!(!d.first_time("c"));
    }
}
