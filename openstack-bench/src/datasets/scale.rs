//! The exact mapping of the papers' normalised sizes (1.0 = one host's worth) to integer
//! amounts of Parasol's resource classes, so that no rounding ever changes a fit.

use parasol::domain::ClassId;
use thiserror::Error;

/// Units of a class that make up a normalised size of 1.0.
pub fn units_per_host(class: ClassId) -> i64 {
    match class {
        ClassId::MEMORY_MB => 1_000_000,
        ClassId::DISK_GB => 100_000,
        _ => 1_000,
    }
}

/// The resource class a dataset's resource name stands for.
pub fn class_of(resource: &str) -> Option<ClassId> {
    match resource {
        "cpu" => Some(ClassId::VCPU),
        "memory" => Some(ClassId::MEMORY_MB),
        "storage" => Some(ClassId::DISK_GB),
        _ => None,
    }
}

/// A normalised size that has no exact integer image in its class.
#[derive(Debug, Error, PartialEq)]
#[error("{value} is not a whole number of {class} units at {per_host} units per host")]
pub struct InexactSize {
    pub value: f64,
    pub class: ClassId,
    pub per_host: i64,
}

/// Maps `value` exactly: reads its shortest decimal form (the one the JSON held) digit by
/// digit and fails if the scaled amount would need a fraction of a unit.
pub fn to_units(value: f64, class: ClassId) -> Result<i64, InexactSize> {
    let per_host = units_per_host(class);
    let err = || InexactSize {
        value,
        class,
        per_host,
    };
    if !value.is_finite() || value < 0.0 {
        return Err(err());
    }
    let text = format!("{value}");
    let (whole, frac) = text.split_once('.').unwrap_or((&text, ""));
    let scale_digits = per_host.ilog10() as usize;
    if frac.len() > scale_digits {
        return Err(err());
    }
    let whole: i64 = whole.parse().map_err(|_| err())?;
    let frac_units: i64 = if frac.is_empty() {
        0
    } else {
        let padded = format!("{frac:0<scale_digits$}");
        padded.parse().map_err(|_| err())?
    };
    whole
        .checked_mul(per_host)
        .and_then(|w| w.checked_add(frac_units))
        .ok_or_else(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_sizes_map_to_exact_units() {
        let cases = [
            (0.035, ClassId::VCPU, 35),
            (0.333, ClassId::VCPU, 333),
            (2.0, ClassId::VCPU, 2_000),
            (0.008, ClassId::MEMORY_MB, 8_000),
            (0.001, ClassId::MEMORY_MB, 1_000),
            (0.54, ClassId::DISK_GB, 54_000),
            (0.01, ClassId::DISK_GB, 1_000),
            (1.0, ClassId::DISK_GB, 100_000),
            (0.0, ClassId::VCPU, 0),
        ];
        for (value, class, want) in cases {
            assert_eq!(to_units(value, class), Ok(want), "{value} {class}");
        }
    }

    #[test]
    fn sizes_finer_than_one_unit_are_refused() {
        assert!(to_units(0.0355, ClassId::VCPU).is_err());
        assert!(to_units(0.000001, ClassId::DISK_GB).is_err());
        assert!(to_units(-0.5, ClassId::VCPU).is_err());
    }
}
