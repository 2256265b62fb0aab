//! Amount vectors over the resource classes ([`Resources`]) and Placement-style inventories.

use super::classes::{ClassId, MAX_CLASSES};
use serde::{Deserialize, Serialize};
use std::ops::{Add, Sub};

/// An amount of every resource class, indexed by [`ClassId`]: a demand, a usage or a capacity.
/// Classes the process has not met are 0. Arithmetic saturates: sizes are bounded where they
/// come in, so saturation only ever turns an absurd sum into "does not fit".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Resources(pub [i64; MAX_CLASSES]);

impl Default for Resources {
    fn default() -> Self {
        Resources::ZERO
    }
}

impl Resources {
    pub const ZERO: Resources = Resources([0; MAX_CLASSES]);

    /// VCPU, MEMORY_MB and DISK_GB, the rest 0.
    pub fn new(vcpu: i64, memory_mb: i64, disk_gb: i64) -> Self {
        let mut r = Resources::ZERO;
        r.0[ClassId::VCPU.index()] = vcpu;
        r.0[ClassId::MEMORY_MB.index()] = memory_mb;
        r.0[ClassId::DISK_GB.index()] = disk_gb;
        r
    }

    /// The vector of the given (class, amount) pairs; a class given twice adds up.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (ClassId, i64)>) -> Self {
        let mut r = Resources::ZERO;
        for (class, amount) in pairs {
            let slot = &mut r.0[class.index()];
            *slot = slot.saturating_add(amount);
        }
        r
    }

    pub fn get(&self, class: ClassId) -> i64 {
        self.0[class.index()]
    }

    pub fn set(&mut self, class: ClassId, amount: i64) {
        self.0[class.index()] = amount;
    }

    pub fn vcpu(&self) -> i64 {
        self.get(ClassId::VCPU)
    }

    pub fn memory_mb(&self) -> i64 {
        self.get(ClassId::MEMORY_MB)
    }

    pub fn disk_gb(&self) -> i64 {
        self.get(ClassId::DISK_GB)
    }

    /// The classes with a non-zero amount, with the amount.
    pub fn nonzero(&self) -> impl Iterator<Item = (ClassId, i64)> + '_ {
        self.0[..ClassId::count()]
            .iter()
            .enumerate()
            .filter(|(_, v)| **v != 0)
            .map(|(i, v)| (ClassId::from_index(i), *v))
    }

    /// True when every class of `self` is at most the same class of `other`.
    pub fn fits_within(&self, other: &Resources) -> bool {
        self.0.iter().zip(other.0.iter()).all(|(a, b)| a <= b)
    }

    pub fn is_non_negative(&self) -> bool {
        self.0.iter().all(|v| *v >= 0)
    }

    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|v| *v == 0)
    }

    /// `self + other`, or `None` when a class would overflow.
    pub fn checked_add(&self, other: &Resources) -> Option<Resources> {
        let mut out = Resources::ZERO;
        for i in 0..MAX_CLASSES {
            out.0[i] = self.0[i].checked_add(other.0[i])?;
        }
        Some(out)
    }

    /// Each class times `factor`, saturating.
    pub fn times(&self, factor: i64) -> Resources {
        let mut out = *self;
        for v in &mut out.0 {
            *v = v.saturating_mul(factor);
        }
        out
    }

    /// The amounts by class name (non-zero classes only), for JSON.
    pub fn to_map(&self) -> std::collections::BTreeMap<String, i64> {
        self.nonzero()
            .map(|(c, v)| (c.name().to_string(), v))
            .collect()
    }
}

impl Add for Resources {
    type Output = Resources;
    fn add(self, o: Resources) -> Resources {
        let mut out = self;
        for (a, b) in out.0.iter_mut().zip(o.0.iter()) {
            *a = a.saturating_add(*b);
        }
        out
    }
}

impl Sub for Resources {
    type Output = Resources;
    fn sub(self, o: Resources) -> Resources {
        let mut out = self;
        for (a, b) in out.0.iter_mut().zip(o.0.iter()) {
            *a = a.saturating_sub(*b);
        }
        out
    }
}

impl Serialize for Resources {
    /// As Placement writes amounts: `{"VCPU": 2, "MEMORY_MB": 512}` (zero classes left out).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(s)
    }
}

/// One resource class of a provider as Placement describes it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    pub total: i64,
    #[serde(default)]
    pub reserved: i64,
    #[serde(default = "one")]
    pub min_unit: i64,
    /// Placement's default is the total.
    #[serde(default = "unbounded")]
    pub max_unit: i64,
    #[serde(default = "one")]
    pub step_size: i64,
    #[serde(default = "default_ratio")]
    pub allocation_ratio: f64,
}

fn one() -> i64 {
    1
}

fn unbounded() -> i64 {
    i64::MAX
}

fn default_ratio() -> f64 {
    1.0
}

impl Inventory {
    /// An inventory of `total` with nothing reserved, unit 1 and ratio 1.
    pub fn of(total: i64) -> Self {
        Inventory {
            total,
            reserved: 0,
            min_unit: 1,
            max_unit: i64::MAX,
            step_size: 1,
            allocation_ratio: 1.0,
        }
    }

    /// The same with another reserved amount and allocation ratio.
    pub fn with(self, reserved: i64, allocation_ratio: f64) -> Self {
        Inventory {
            reserved,
            allocation_ratio,
            ..self
        }
    }

    /// Placement's capacity: `int((total − reserved) × allocation_ratio)`, never negative,
    /// at most `i64::MAX`.
    pub fn usable(&self) -> i64 {
        let base = self.total.saturating_sub(self.reserved).max(0) as f64;
        let capacity = (base * self.allocation_ratio).floor();
        if capacity >= i64::MAX as f64 {
            i64::MAX
        } else {
            capacity.max(0.0) as i64
        }
    }

    /// True when one allocation of `amount` respects the unit rules (min, max, step).
    pub fn admits(&self, amount: i64) -> bool {
        amount >= self.min_unit
            && amount <= self.max_unit
            && (self.step_size <= 1 || amount % self.step_size == 0)
    }

    /// Refuses what Placement refuses: negative amounts, reserved above total, a unit range
    /// that admits nothing, a non-finite or non-positive ratio. `Err` names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.total < 0 || self.reserved < 0 {
            return Err("total and reserved must not be negative".into());
        }
        if self.min_unit < 1 || self.step_size < 1 || self.max_unit < self.min_unit {
            return Err(
                "min_unit and step_size must be at least 1, max_unit at least min_unit".into(),
            );
        }
        if !self.allocation_ratio.is_finite() || self.allocation_ratio < 0.0 {
            return Err("allocation_ratio must be a non-negative number".into());
        }
        Ok(())
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
            (i64::MAX, 0, 16.0, i64::MAX),
        ];
        for (total, reserved, ratio, want) in cases {
            let inv = Inventory::of(total).with(reserved, ratio);
            assert_eq!(inv.usable(), want, "{inv:?}");
        }
    }

    #[test]
    fn units_admit_only_multiples_of_the_step_within_min_and_max() {
        let inv = Inventory {
            min_unit: 2,
            max_unit: 8,
            step_size: 2,
            ..Inventory::of(16)
        };
        for (amount, want) in [(1, false), (2, true), (3, false), (8, true), (10, false)] {
            assert_eq!(inv.admits(amount), want, "{amount}");
        }
        assert!(
            Inventory::of(4).admits(1_000),
            "the default max is unbounded"
        );
    }

    #[test]
    fn fits_within_requires_every_class_and_sums_saturate() {
        let cap = Resources::new(4, 4096, 40);
        assert!(Resources::new(4, 4096, 40).fits_within(&cap));
        assert!(!Resources::new(5, 1, 1).fits_within(&cap));
        assert!(!Resources::new(1, 1, 41).fits_within(&cap));
        let huge = Resources::new(i64::MAX, 0, 0);
        assert!(!(huge + Resources::new(1, 0, 0)).fits_within(&cap));
        assert_eq!(huge.checked_add(&Resources::new(1, 0, 0)), None);
    }

    #[test]
    fn serialises_as_placement_amounts() {
        let r = Resources::new(2, 512, 0);
        assert_eq!(
            serde_json::to_value(r).unwrap(),
            serde_json::json!({"VCPU": 2, "MEMORY_MB": 512})
        );
    }
}
