//! The iteration order of CPython 3.11's `set` of small non-negative integers, for the
//! pinning of `_pack_instance_onto_cores`, which takes "the first" threads of each sibling
//! set in the order Python iterates it: slot order of an open-addressing table whose layout
//! depends on the table size and the order of insertion (`Objects/setobject.c`:
//! `set_add_entry`, `set_insert_clean`, `set_table_resize`, `set_merge`, `set_intersection`,
//! `set_difference`). An int hashes to itself.

const MIN_SIZE: usize = 8;
const LINEAR_PROBES: usize = 9;
const PERTURB_SHIFT: u32 = 5;

/// A CPython set of CPU ids: its table, `fill` (used + dummies) and `used`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PySet {
    table: Vec<Option<u32>>,
    fill: usize,
    used: usize,
}

impl Default for PySet {
    fn default() -> Self {
        PySet {
            table: vec![None; MIN_SIZE],
            fill: 0,
            used: 0,
        }
    }
}

/// `set_insert_clean`: the free slot a key lands in, in a table without dummies.
fn insert_clean(table: &mut [Option<u32>], key: u32) {
    let mask = table.len() - 1;
    let mut perturb = key as usize;
    let mut i = key as usize & mask;
    loop {
        if table[i].is_none() {
            table[i] = Some(key);
            return;
        }
        if i + LINEAR_PROBES <= mask {
            for j in 1..=LINEAR_PROBES {
                if table[i + j].is_none() {
                    table[i + j] = Some(key);
                    return;
                }
            }
        }
        perturb >>= PERTURB_SHIFT;
        i = (i * 5 + 1 + perturb) & mask;
    }
}

impl PySet {
    /// `set(items)`: each added in turn.
    pub fn from_list(items: impl IntoIterator<Item = u32>) -> Self {
        let mut s = PySet::default();
        for k in items {
            s.add(k);
        }
        s
    }

    /// A set field of a Nova object read from its primitive (a list): the set comprehension
    /// of `from_primitive`, copied key by key by `_coerce_iterable`, merged into the empty
    /// `CoercedSet` by `update`.
    pub fn from_primitive(items: &[u32]) -> Self {
        let first = PySet::from_list(items.iter().copied());
        let second = PySet::from_list(first.iter());
        PySet::default().merged(&second)
    }

    /// Keys in iteration order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.table.iter().filter_map(|k| *k)
    }

    pub fn len(&self) -> usize {
        self.used
    }

    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    pub fn contains(&self, key: u32) -> bool {
        self.table.contains(&Some(key))
    }

    /// `set_add_entry` (no dummies: Parasol's sets never lose a key).
    pub fn add(&mut self, key: u32) {
        let mask = self.table.len() - 1;
        let mut perturb = key as usize;
        let mut i = key as usize & mask;
        loop {
            let probes = if i + LINEAR_PROBES <= mask {
                LINEAR_PROBES
            } else {
                0
            };
            for j in 0..=probes {
                match self.table[i + j] {
                    None => {
                        self.table[i + j] = Some(key);
                        self.fill += 1;
                        self.used += 1;
                        if self.fill * 5 >= mask * 3 {
                            let minused = if self.used > 50_000 {
                                self.used * 2
                            } else {
                                self.used * 4
                            };
                            self.resize(minused);
                        }
                        return;
                    }
                    Some(k) if k == key => return,
                    Some(_) => {}
                }
            }
            perturb >>= PERTURB_SHIFT;
            i = (i * 5 + 1 + perturb) & mask;
        }
    }

    /// `set_table_resize`.
    fn resize(&mut self, minused: usize) {
        let mut size = MIN_SIZE;
        while size <= minused {
            size <<= 1;
        }
        let mut table = vec![None; size];
        for k in self.iter() {
            insert_clean(&mut table, k);
        }
        self.table = table;
        self.fill = self.used;
    }

    /// `set_merge` of `other` into this set when it is empty (a copy, an `update`).
    fn merged(mut self, other: &PySet) -> PySet {
        if other.used == 0 {
            return self;
        }
        let mask = self.table.len() - 1;
        if (self.fill + other.used) * 5 >= mask * 3 {
            self.resize((self.used + other.used) * 2);
        }
        if self.fill == 0 && self.table.len() == other.table.len() {
            self.table = other.table.clone();
        } else {
            for k in other.iter() {
                insert_clean(&mut self.table, k);
            }
        }
        self.fill = other.used;
        self.used = other.used;
        self
    }

    /// `self & other` (`set_intersection`: iterates the smaller, `other` on a tie).
    pub fn intersection(&self, other: &PySet) -> PySet {
        let (big, small) = if other.len() > self.len() {
            (other, self)
        } else {
            (self, other)
        };
        PySet::from_list(small.iter().filter(|k| big.contains(*k)))
    }

    /// `self - other` (`set_difference`); the copy-and-discard path keeps the copy's layout.
    pub fn difference(&self, other: &PySet) -> PySet {
        if (self.len() >> 2) > other.len() {
            let mut copy = PySet::default().merged(self);
            for k in other.iter() {
                if let Some(slot) = copy.table.iter_mut().find(|s| **s == Some(k)) {
                    // A dummy keeps its slot: later keys keep their places.
                    *slot = None;
                    copy.used -= 1;
                }
            }
            return copy;
        }
        PySet::from_list(self.iter().filter(|k| !other.contains(*k)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Orders printed by CPython 3.11 (`list({...})` built as Nova builds them).
    #[test]
    fn iteration_follows_cpython_s_table() {
        assert_eq!(
            PySet::from_list([7, 10]).iter().collect::<Vec<_>>(),
            [10, 7]
        );
        assert_eq!(PySet::from_list([6, 9]).iter().collect::<Vec<_>>(), [9, 6]);
        assert_eq!(PySet::from_list([0, 8]).iter().collect::<Vec<_>>(), [0, 8]);
        let big = PySet::from_list(0..40);
        assert_eq!(big.iter().collect::<Vec<_>>(), (0..40).collect::<Vec<_>>());
        let free = PySet::from_primitive(&[6, 9, 7, 10]).difference(&PySet::from_primitive(&[9]));
        let sib = PySet::from_primitive(&[7, 10]).intersection(&free);
        assert_eq!(sib.iter().collect::<Vec<_>>(), [10, 7]);
    }
}
