//! A bounded history of controller decisions, oldest first, for stats and plots.

use std::collections::VecDeque;

/// How many decisions a controller keeps by default.
pub const DEFAULT_HISTORY_LEN: usize = 1_024;

/// The last `capacity` entries pushed, oldest first.
#[derive(Clone, Debug, PartialEq)]
pub struct History<T> {
    entries: VecDeque<T>,
    capacity: usize,
}

impl<T> History<T> {
    /// An empty history keeping at most `capacity` entries (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        History {
            entries: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// Appends an entry, dropping the oldest when full.
    pub fn push(&mut self, entry: T) {
        if self.entries.len() == self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
    }

    /// The entries, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.entries.iter()
    }

    /// The newest entry.
    pub fn last(&self) -> Option<&T> {
        self.entries.back()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<T> Default for History<T> {
    fn default() -> Self {
        History::with_capacity(DEFAULT_HISTORY_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_newest_entries_in_order() {
        let mut history = History::with_capacity(3);
        (1..=5).for_each(|i| history.push(i));
        assert_eq!(history.iter().copied().collect::<Vec<_>>(), vec![3, 4, 5]);
        assert_eq!(history.last(), Some(&5));
        assert_eq!(history.len(), 3);
    }
}
