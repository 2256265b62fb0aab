//! Traits and aggregates: a provider's qualitative marks (Placement traits such as
//! `HW_CPU_X86_AVX2` or `CUSTOM_*`, and the uuids of the Placement aggregates it is a member
//! of), each name given a numeric id once per process, and kept per host as a sorted set of
//! ids so that a request's required and forbidden marks are checked without string compares.

use parking_lot::RwLock;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, LazyLock};

/// Names ↔ ids for one kind of mark.
#[doc(hidden)]
pub struct Interner {
    names: Vec<Arc<str>>,
    index: HashMap<Arc<str>, u32>,
}

impl Interner {
    /// An interner whose first ids are `preset`'s names, in order.
    fn new(preset: &[&str]) -> Self {
        let names: Vec<Arc<str>> = preset.iter().map(|n| Arc::from(*n)).collect();
        let index = names.iter().cloned().zip(0u32..).collect();
        Interner { names, index }
    }
}

/// A kind of mark with its process-wide interner.
pub trait Mark: Copy + Ord + std::fmt::Debug {
    #[doc(hidden)]
    fn interner() -> &'static RwLock<Interner>;
    #[doc(hidden)]
    fn from_raw(raw: u32) -> Self;
    #[doc(hidden)]
    fn raw(self) -> u32;

    /// The id of `name`, given one the first time it is seen.
    fn intern(name: &str) -> Self {
        if let Some(id) = Self::lookup(name) {
            return id;
        }
        let mut table = Self::interner().write();
        if let Some(raw) = table.index.get(name) {
            return Self::from_raw(*raw);
        }
        let raw = table.names.len() as u32;
        let name: Arc<str> = Arc::from(name);
        table.names.push(name.clone());
        table.index.insert(name, raw);
        Self::from_raw(raw)
    }

    /// The id of `name` when the process knows it.
    fn lookup(name: &str) -> Option<Self> {
        Self::interner()
            .read()
            .index
            .get(name)
            .map(|raw| Self::from_raw(*raw))
    }

    /// The name of this mark.
    fn name(self) -> Arc<str> {
        Self::interner().read().names[self.raw() as usize].clone()
    }
}

macro_rules! mark {
    ($(#[$doc:meta])* $name:ident, $table:ident, $preset:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u32);

        static $table: LazyLock<RwLock<Interner>> =
            LazyLock::new(|| RwLock::new(Interner::new($preset)));

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.name())
            }
        }

        impl Mark for $name {
            fn interner() -> &'static RwLock<Interner> {
                &$table
            }
            fn from_raw(raw: u32) -> Self {
                $name(raw)
            }
            fn raw(self) -> u32 {
                self.0
            }
        }
    };
}

mark!(
    /// A Placement trait (`HW_CPU_X86_AVX2`, `COMPUTE_STATUS_DISABLED`, `CUSTOM_*`).
    /// `COMPUTE_STATUS_DISABLED`, which every call of Nova's forbids, is id 0, so that a scan
    /// row's [`MarkSet::low_mask`] answers for it.
    TraitId,
    TRAITS,
    &[COMPUTE_STATUS_DISABLED]
);
mark!(
    /// A Placement aggregate, by its uuid.
    AggregateId,
    AGGREGATES,
    &[]
);

/// The trait nova-compute sets on its provider while its service is disabled, which Nova's
/// `compute_status_filter` forbids on every call.
pub const COMPUTE_STATUS_DISABLED: &str = "COMPUTE_STATUS_DISABLED";

/// Marks with ids below this are each a bit of [`MarkSet::low_mask`]; the top bit stands for
/// all the others.
pub const LOW_MARKS: u32 = 31;

/// A sorted set of marks, shared between copies of a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkSet<M: Mark>(Arc<[M]>, PhantomData<M>);

impl<M: Mark> Default for MarkSet<M> {
    fn default() -> Self {
        MarkSet(Arc::from(Vec::new()), PhantomData)
    }
}

impl<M: Mark> MarkSet<M> {
    /// The set of the given marks (any order, repeats dropped).
    pub fn new(marks: impl IntoIterator<Item = M>) -> Self {
        let mut v: Vec<M> = marks.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        MarkSet(Arc::from(v), PhantomData)
    }

    /// The set of the marks named (interned as needed).
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        Self::new(names.into_iter().map(M::intern))
    }

    pub fn contains(&self, mark: M) -> bool {
        self.0.binary_search(&mark).is_ok()
    }

    /// Bit `id` for each mark with an id below [`LOW_MARKS`], and bit [`LOW_MARKS`] when the
    /// set has any other: which of those marks the set has, without following its pointer.
    pub fn low_mask(&self) -> u32 {
        low_mask(&self.0)
    }

    /// True when every mark of `marks` is in the set.
    pub fn contains_all(&self, marks: &[M]) -> bool {
        marks.iter().all(|m| self.contains(*m))
    }

    /// True when some mark of `marks` is in the set.
    pub fn contains_any(&self, marks: &[M]) -> bool {
        marks.iter().any(|m| self.contains(*m))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = M> + '_ {
        self.0.iter().copied()
    }

    /// The names, sorted by name.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.iter().map(|m| m.name().to_string()).collect();
        names.sort();
        names
    }
}

impl<M: Mark> serde::Serialize for MarkSet<M> {
    /// As the sorted list of names.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.names().serialize(s)
    }
}

/// The [`MarkSet::low_mask`] of `marks`.
pub fn low_mask<M: Mark>(marks: &[M]) -> u32 {
    marks.iter().fold(0, |mask, m| mask | low_bit(*m))
}

/// A mark's bit in a [`MarkSet::low_mask`].
pub fn low_bit<M: Mark>(mark: M) -> u32 {
    1 << mark.raw().min(LOW_MARKS)
}

/// A host's traits.
pub type Traits = MarkSet<TraitId>;
/// The aggregates a host is a member of.
pub type Aggregates = MarkSet<AggregateId>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_answer_membership_by_id() {
        let traits = Traits::from_names(["CUSTOM_MARKS_A", "HW_CPU_X86_AVX2", "CUSTOM_MARKS_A"]);
        assert_eq!(traits.len(), 2);
        let avx = TraitId::intern("HW_CPU_X86_AVX2");
        let other = TraitId::intern("CUSTOM_MARKS_OTHER");
        assert!(traits.contains(avx));
        assert!(!traits.contains(other));
        assert!(traits.contains_all(&[avx]));
        assert!(!traits.contains_all(&[avx, other]));
        assert!(traits.contains_any(&[other, avx]));
        assert!(traits.contains_all(&[]), "nothing required is always met");
        assert_eq!(traits.names(), ["CUSTOM_MARKS_A", "HW_CPU_X86_AVX2"]);
    }

    #[test]
    fn traits_and_aggregates_are_separate_name_spaces() {
        let t = TraitId::intern("CUSTOM_SAME_NAME");
        let a = AggregateId::intern("CUSTOM_SAME_NAME");
        assert_eq!(&*t.name(), &*a.name());
        assert_eq!(TraitId::lookup("CUSTOM_SAME_NAME"), Some(t));
        assert_eq!(AggregateId::lookup("never-seen-aggregate"), None);
    }
}
