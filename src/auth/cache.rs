//! What Keystone said about each recent token, yes or no, remembered until a deadline and
//! bounded in number. Tokens are kept as their SHA-256, never as they are.

use super::keystone::Identity;
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;

/// Keystone's answer about one token.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Valid(Arc<Identity>),
    /// Keystone does not know the token (malformed, expired or revoked).
    Refused,
}

/// At most `capacity` verdicts, each until its own deadline (ms of the service's clock).
#[derive(Debug)]
pub struct TokenCache {
    capacity: usize,
    entries: Mutex<HashMap<[u8; 32], (i64, Verdict)>>,
}

/// The key a token is remembered under.
pub fn key(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl TokenCache {
    pub fn new(capacity: usize) -> Self {
        TokenCache {
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The verdict on `key` if its deadline is still ahead of `now_ms`.
    pub fn get(&self, key: &[u8; 32], now_ms: i64) -> Option<Verdict> {
        let mut entries = self.entries.lock();
        match entries.get(key) {
            Some((until, verdict)) if *until > now_ms => Some(verdict.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Remembers `verdict` until `until_ms`. When full, expired entries go first, then
    /// whichever entries the map yields first: the cache never grows past its capacity.
    pub fn insert(&self, key: [u8; 32], until_ms: i64, verdict: Verdict, now_ms: i64) {
        if until_ms <= now_ms {
            return;
        }
        let mut entries = self.entries.lock();
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, (until, _)| *until > now_ms);
            while entries.len() >= self.capacity {
                let Some(victim) = entries.keys().next().copied() else {
                    break;
                };
                entries.remove(&victim);
            }
        }
        entries.insert(key, (until_ms, verdict));
    }

    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_is_kept_until_its_deadline_and_not_after() {
        let cache = TokenCache::new(4);
        cache.insert(key("a"), 1_000, Verdict::Refused, 0);
        assert_eq!(cache.get(&key("a"), 999), Some(Verdict::Refused));
        assert_eq!(cache.get(&key("a"), 1_000), None);
        assert!(cache.is_empty(), "an expired entry is dropped when read");
    }

    #[test]
    fn the_cache_never_holds_more_than_its_capacity() {
        let cache = TokenCache::new(3);
        for i in 0..100 {
            cache.insert(key(&i.to_string()), 10_000, Verdict::Refused, 0);
            assert!(cache.len() <= 3, "{} entries after {i}", cache.len());
        }
        assert_eq!(cache.get(&key("99"), 0), Some(Verdict::Refused));
    }

    #[test]
    fn expired_entries_are_evicted_before_live_ones() {
        let cache = TokenCache::new(2);
        cache.insert(key("old"), 100, Verdict::Refused, 0);
        cache.insert(key("live"), 10_000, Verdict::Refused, 0);
        cache.insert(key("new"), 10_000, Verdict::Refused, 500);
        assert_eq!(cache.get(&key("live"), 500), Some(Verdict::Refused));
        assert_eq!(cache.get(&key("new"), 500), Some(Verdict::Refused));
    }

    #[test]
    fn a_deadline_already_past_is_not_stored() {
        let cache = TokenCache::new(2);
        cache.insert(key("a"), 5, Verdict::Refused, 5);
        assert!(cache.is_empty());
    }
}
