//! Resource classes: Placement's standard classes and the operator's `CUSTOM_*` ones, each
//! given a small dense index the first time the process meets it, so that every amount vector
//! ([`super::Resources`]) is a fixed array indexed by class rather than a map of names.

use parking_lot::RwLock;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

/// Most distinct resource classes one process tracks (a cloud's standard classes in use plus
/// its custom ones); a further class is refused with [`ClassError::TooMany`].
pub const MAX_CLASSES: usize = 32;

/// The dense index of a resource class in this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClassId(u8);

/// Placement's standard resource classes (os-resource-classes 1.1.0, Nova 34's pin), the
/// names a provider's inventory or a flavor's `resources:` extra spec may use besides
/// `CUSTOM_*`.
pub const STANDARD_CLASSES: [&str; 21] = [
    "VCPU",
    "MEMORY_MB",
    "DISK_GB",
    "PCI_DEVICE",
    "SRIOV_NET_VF",
    "NUMA_SOCKET",
    "NUMA_CORE",
    "NUMA_THREAD",
    "NUMA_MEMORY_MB",
    "IPV4_ADDRESS",
    "VGPU",
    "VGPU_DISPLAY_HEAD",
    "NET_BW_EGR_KILOBIT_PER_SEC",
    "NET_BW_IGR_KILOBIT_PER_SEC",
    "PCPU",
    "MEM_ENCRYPTION_CONTEXT",
    "FPGA",
    "PGPU",
    "NET_PACKET_RATE_KILOPACKET_PER_SEC",
    "NET_PACKET_RATE_EGR_KILOPACKET_PER_SEC",
    "NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC",
];

/// Why a class name was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClassError {
    #[error(
        "{0:?} is not a resource class: use a standard class or CUSTOM_ followed by A-Z, 0-9 and _"
    )]
    Invalid(String),
    #[error(
        "resource class {0:?} is one more than the {MAX_CLASSES} distinct classes Parasol tracks"
    )]
    TooMany(String),
}

/// The classes every deployment has, at fixed indices (the code names them as constants:
/// [`ClassId::VCPU`] is index 0, and so on).
const FIXED: [&str; 4] = ["VCPU", "MEMORY_MB", "DISK_GB", "PCPU"];

/// Names by index and back.
struct Table {
    names: Vec<Arc<str>>,
    index: HashMap<Arc<str>, ClassId, foldhash::fast::RandomState>,
}

impl Table {
    /// The [`FIXED`] classes, at their indices.
    fn new() -> Table {
        let mut table = Table {
            names: Vec::new(),
            index: HashMap::default(),
        };
        for name in FIXED {
            let _ = table.insert(name);
        }
        table
    }

    /// Adds a valid name not in the table yet.
    fn insert(&mut self, name: &str) -> Result<ClassId, ClassError> {
        if let Some(id) = self.index.get(name) {
            return Ok(*id);
        }
        if self.names.len() >= MAX_CLASSES {
            return Err(ClassError::TooMany(name.to_string()));
        }
        let id = ClassId(self.names.len() as u8);
        let name: Arc<str> = Arc::from(name);
        self.names.push(name.clone());
        self.index.insert(name, id);
        Ok(id)
    }
}

/// This process' classes.
static TABLE: LazyLock<RwLock<Table>> = LazyLock::new(|| RwLock::new(Table::new()));

/// The number of classes known so far: vector loops that only read need go no further.
static COUNT: AtomicUsize = AtomicUsize::new(4);

/// True for a name Placement accepts as a resource class.
pub fn is_valid_class_name(name: &str) -> bool {
    if STANDARD_CLASSES.contains(&name) {
        return true;
    }
    match name.strip_prefix("CUSTOM_") {
        Some(rest) => {
            !rest.is_empty()
                && name.len() <= 255
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        }
        None => false,
    }
}

impl ClassId {
    pub const VCPU: ClassId = ClassId(0);
    pub const MEMORY_MB: ClassId = ClassId(1);
    pub const DISK_GB: ClassId = ClassId(2);
    pub const PCPU: ClassId = ClassId(3);

    /// The class of `name`, given an index the first time it is seen.
    pub fn intern(name: &str) -> Result<ClassId, ClassError> {
        if let Some(id) = Self::lookup(name) {
            return Ok(id);
        }
        if !is_valid_class_name(name) {
            return Err(ClassError::Invalid(name.to_string()));
        }
        let mut table = TABLE.write();
        let id = table.insert(name)?;
        COUNT.store(table.names.len(), Ordering::Release);
        Ok(id)
    }

    /// The class of `name` when the process knows it already. The [`FIXED`] classes are
    /// told by their names alone, without the table's lock and hash: they are most of what
    /// a host reports and a flavor asks for.
    pub fn lookup(name: &str) -> Option<ClassId> {
        match FIXED.iter().position(|fixed| *fixed == name) {
            Some(index) => Some(ClassId(index as u8)),
            None => TABLE.read().index.get(name).copied(),
        }
    }

    /// Placement's name of the class.
    pub fn name(self) -> Arc<str> {
        TABLE.read().names[self.index()].clone()
    }

    /// Placement's name of a class every process has at the same index ([`FIXED`]: VCPU,
    /// MEMORY_MB, DISK_GB, PCPU), without the table's lock; `None` for the others.
    pub fn fixed_name(self) -> Option<&'static str> {
        FIXED.get(self.index()).copied()
    }

    /// Position in every [`super::Resources`] vector.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// The class at `index` (below [`ClassId::count`]).
    pub fn from_index(index: usize) -> ClassId {
        debug_assert!(index < MAX_CLASSES);
        ClassId(index as u8)
    }

    /// How many classes the process knows: indices `0..count()` are in use.
    pub fn count() -> usize {
        COUNT.load(Ordering::Acquire)
    }

    /// Every class known so far, in index order.
    pub fn all() -> impl Iterator<Item = ClassId> {
        (0..Self::count()).map(Self::from_index)
    }
}

impl serde::Serialize for ClassId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl fmt::Display for ClassId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_classes_have_fixed_indices() {
        assert_eq!(ClassId::lookup("VCPU"), Some(ClassId::VCPU));
        assert_eq!(ClassId::lookup("MEMORY_MB"), Some(ClassId::MEMORY_MB));
        assert_eq!(ClassId::lookup("DISK_GB"), Some(ClassId::DISK_GB));
        assert_eq!(ClassId::lookup("PCPU"), Some(ClassId::PCPU));
        assert_eq!(&*ClassId::VCPU.name(), "VCPU");
        // The names told without the table are the table's own.
        for name in FIXED {
            let id = ClassId::lookup(name).unwrap();
            assert_eq!(TABLE.read().index.get(name).copied(), Some(id));
            assert_eq!(&*id.name(), name);
        }
    }

    #[test]
    fn interning_is_idempotent_and_names_round_trip() {
        let a = ClassId::intern("CUSTOM_DOMAIN_TEST_GPU").unwrap();
        let b = ClassId::intern("CUSTOM_DOMAIN_TEST_GPU").unwrap();
        assert_eq!(a, b);
        assert_eq!(&*a.name(), "CUSTOM_DOMAIN_TEST_GPU");
        assert!(a.index() < ClassId::count());
        assert_eq!(ClassId::intern("VGPU").unwrap().name().as_ref(), "VGPU");
    }

    #[test]
    fn a_class_beyond_the_limit_is_refused_by_name() {
        let mut table = Table::new();
        for i in table.names.len()..MAX_CLASSES {
            table.insert(&format!("CUSTOM_C{i}")).unwrap();
        }
        assert_eq!(
            table.insert("CUSTOM_ONE_MORE"),
            Err(ClassError::TooMany("CUSTOM_ONE_MORE".into()))
        );
        assert_eq!(
            table.insert("CUSTOM_C10"),
            Ok(ClassId(10)),
            "known names still resolve"
        );
    }

    #[test]
    fn names_placement_refuses_are_refused() {
        for bad in ["", "vcpu", "CUSTOM_", "CUSTOM_lower", "GPU", "CUSTOM_A-B"] {
            assert_eq!(
                ClassId::intern(bad),
                Err(ClassError::Invalid(bad.to_string())),
                "{bad:?}"
            );
        }
    }
}
