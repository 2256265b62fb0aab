//! oslo.messaging drops a message whose `_unique_id` it has seen recently; so does Parasol,
//! remembering the last `capacity` ids (oslo remembers 16, `_MsgIdCache.DUP_MSG_CHECK_SIZE`;
//! redeliveries after a broker fault come in bursts, so Parasol remembers more).
//!
//! The memory is taken whole when the set is made and stays the same size: each id is kept as
//! 128 bits (oslo's ids are `uuid4().hex`; any other text is hashed to 128 bits), in a ring
//! written through at construction and a hash set sized for the ring. Kept as two `String`s
//! per id, the set grew for its first `capacity` calls — at 50 calls/s a process's memory rose
//! for 22 minutes, and a soak comparing minute 30 with minute 5 read it as a leak (issue 40).

use std::collections::HashSet;
use std::hash::BuildHasher;

/// A bounded set of recently seen ids: the oldest is forgotten first.
#[derive(Debug)]
pub struct Dedup {
    seen: HashSet<u128>,
    /// The ids in the order they came, `len` of them valid from `next - len` (mod capacity).
    ring: Box<[u128]>,
    next: usize,
    len: usize,
    /// Keys for hashing ids that are not 32 hex digits (seeded per process; only equality of
    /// the same text within one process matters).
    keys: [std::hash::RandomState; 2],
}

impl Dedup {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Dedup {
            seen: HashSet::with_capacity(capacity),
            // Written through (not zeroed pages the kernel maps lazily), so its memory is
            // resident from the start rather than growing with the first `capacity` calls.
            ring: vec![u128::MAX; capacity].into_boxed_slice(),
            next: 0,
            len: 0,
            keys: [std::hash::RandomState::new(), std::hash::RandomState::new()],
        }
    }

    /// True the first time `id` is offered (and remembers it), false for a repeat.
    pub fn first_time(&mut self, id: &str) -> bool {
        let key = self.key(id);
        if self.seen.contains(&key) {
            return false;
        }
        let capacity = self.ring.len();
        if self.len == capacity {
            self.seen.remove(&self.ring[self.next]);
        } else {
            self.len += 1;
        }
        self.ring[self.next] = key;
        self.next = (self.next + 1) % capacity;
        self.seen.insert(key);
        true
    }

    /// The id as 128 bits: a 32-hex-digit id (oslo's `uuid4().hex`, any case) is its value;
    /// other text is two independent 64-bit hashes of it (a false match needs both to
    /// collide: about 2⁻¹²⁸ per pair).
    fn key(&self, id: &str) -> u128 {
        // (`from_str_radix` alone would also take a leading `+`.)
        if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
            if let Ok(v) = u128::from_str_radix(id, 16) {
                return v;
            }
        }
        let half = |state: &std::hash::RandomState| u128::from(state.hash_one(id));
        (half(&self.keys[0]) << 64) | half(&self.keys[1])
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
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

    #[test]
    fn oslo_ids_and_other_text_are_told_apart_and_repeats_found() {
        let mut d = Dedup::new(1_000);
        let ids: Vec<String> = (0..500)
            .map(|i| uuid::Uuid::from_u128(i * 7_919 + 1).simple().to_string())
            .collect();
        for id in &ids {
            assert!(d.first_time(id), "{id} is new");
        }
        // The same uuid in capitals is the same id; text that is not hex is its own.
        assert!(!d.first_time(&ids[3].to_uppercase()));
        assert!(d.first_time("not-a-uuid"));
        assert!(!d.first_time("not-a-uuid"));
        assert!(
            d.first_time("g".repeat(32).as_str()),
            "32 characters, not hex"
        );
        assert!(!d.first_time("g".repeat(32).as_str()));
        let plus = format!("+{}", &ids[0][1..]);
        assert!(
            d.first_time(&plus),
            "a sign is not a hex digit: {plus} is not {}",
            ids[0]
        );
        for id in &ids {
            assert!(!d.first_time(id), "{id} is a repeat");
        }
        assert_eq!(d.len(), 503);
    }

    #[test]
    fn after_many_wraps_exactly_the_last_capacity_ids_are_remembered() {
        let id = |n: u128| format!("{n:032x}");
        let mut d = Dedup::new(64);
        for n in 0..(64 * 10 + 17) {
            assert!(d.first_time(&id(n)));
            assert!(
                d.len() <= 64 && d.seen.len() == d.len(),
                "the set holds the ring's ids"
            );
        }
        let last = 64 * 10 + 17;
        for n in (last - 64)..last {
            assert!(!d.first_time(&id(n)), "{n} is among the last 64");
        }
        assert!(
            d.first_time(&id(last - 65)),
            "the one before them was forgotten"
        );
    }
}
