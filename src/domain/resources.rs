//! Resource classes, demand/usage vectors and Placement-style inventories.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, Sub};

/// The resource classes Parasol schedules on, in the order of every [`Resources`] vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ResourceClass {
    #[serde(rename = "VCPU")]
    Vcpu,
    #[serde(rename = "MEMORY_MB")]
    MemoryMb,
    #[serde(rename = "DISK_GB")]
    DiskGb,
}

/// Every class, in vector order.
pub const CLASSES: [ResourceClass; 3] = [
    ResourceClass::Vcpu,
    ResourceClass::MemoryMb,
    ResourceClass::DiskGb,
];

impl ResourceClass {
    /// Placement's name of the class (`VCPU`, `MEMORY_MB`, `DISK_GB`).
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceClass::Vcpu => "VCPU",
            ResourceClass::MemoryMb => "MEMORY_MB",
            ResourceClass::DiskGb => "DISK_GB",
        }
    }

    /// Position of the class in a [`Resources`] vector.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Parses Placement's name of a class.
    pub fn parse(name: &str) -> Option<Self> {
        CLASSES.into_iter().find(|c| c.as_str() == name)
    }
}

impl fmt::Display for ResourceClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An amount of every resource class: a demand, a usage or a capacity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Resources(pub [i64; 3]);

impl Resources {
    pub const ZERO: Resources = Resources([0; 3]);

    pub fn new(vcpu: i64, memory_mb: i64, disk_gb: i64) -> Self {
        Resources([vcpu, memory_mb, disk_gb])
    }

    pub fn get(&self, class: ResourceClass) -> i64 {
        self.0[class.index()]
    }

    pub fn vcpu(&self) -> i64 {
        self.0[0]
    }

    pub fn memory_mb(&self) -> i64 {
        self.0[1]
    }

    pub fn disk_gb(&self) -> i64 {
        self.0[2]
    }

    /// True when every class of `self` is at most the same class of `other`.
    pub fn fits_within(&self, other: &Resources) -> bool {
        self.0.iter().zip(other.0.iter()).all(|(a, b)| a <= b)
    }

    pub fn is_non_negative(&self) -> bool {
        self.0.iter().all(|v| *v >= 0)
    }
}

impl Add for Resources {
    type Output = Resources;
    fn add(self, o: Resources) -> Resources {
        Resources([self.0[0] + o.0[0], self.0[1] + o.0[1], self.0[2] + o.0[2]])
    }
}

impl Sub for Resources {
    type Output = Resources;
    fn sub(self, o: Resources) -> Resources {
        Resources([self.0[0] - o.0[0], self.0[1] - o.0[1], self.0[2] - o.0[2]])
    }
}

/// One resource class of a host as Placement describes it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    pub total: i64,
    #[serde(default)]
    pub reserved: i64,
    #[serde(default = "default_ratio")]
    pub allocation_ratio: f64,
}

fn default_ratio() -> f64 {
    1.0
}

impl Inventory {
    /// Placement's capacity: `int((total − reserved) × allocation_ratio)`, never negative.
    pub fn usable(&self) -> i64 {
        let base = (self.total - self.reserved).max(0) as f64;
        (base * self.allocation_ratio).floor() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_applies_reserved_then_ratio_and_truncates() {
        let cases = [
            (64, 0, 4.0, 256),
            (262144, 512, 1.0, 261632),
            (10, 3, 1.5, 10),
            (3, 5, 2.0, 0),
            (7, 0, 0.5, 3),
        ];
        for (total, reserved, allocation_ratio, want) in cases {
            let inv = Inventory {
                total,
                reserved,
                allocation_ratio,
            };
            assert_eq!(inv.usable(), want, "{inv:?}");
        }
    }

    #[test]
    fn fits_within_requires_every_class() {
        let cap = Resources::new(4, 4096, 40);
        assert!(Resources::new(4, 4096, 40).fits_within(&cap));
        assert!(!Resources::new(5, 1, 1).fits_within(&cap));
        assert!(!Resources::new(1, 1, 41).fits_within(&cap));
    }
}
