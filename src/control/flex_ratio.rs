//! Flex's allocation ratio (issue 45, `[flex] manage_allocation_ratio`): the ratio of a
//! class's Placement inventory at which the allocations would reach what Flex's filter admits.
//!
//! Flex admits while P·L̂ + r ≤ C (Alg. 3 line 7, eq. 13), but Placement's allocation ratio R
//! caps the allocations at C·R whatever the usage is. When each allocated unit uses u units
//! (u = ΣL̂ / ΣA over the hosts measured), Flex's filter binds at allocations A = C / (P·u),
//! that is at the ratio R* = 1 / (P·u). The paper has no allocation ratio (Flex decides alone
//! in §5's simulator); this ratio is how a Placement-backed cloud lets Flex admit what it
//! would, and no more: R* falls when P rises (QoS dropped) and rises as P decays.
//!
//! Each provider's ratio is R* clamped to the operator's bounds, never below what its
//! allocations already take (lowering Placement's ratio under the usage would leave the
//! provider over capacity), rounded to a hundredth, and written only when it moved by at least
//! `min_change` (so that noise in u does not rewrite every inventory every period).

/// The operator's bounds on one class's ratio.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RatioBounds {
    pub min: f64,
    pub max: f64,
}

/// The cluster's evidence for one class: the measured usage and the allocations of the hosts
/// with a fresh reading of it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UsageEvidence {
    /// ΣL̂ over the hosts measured.
    pub measured: f64,
    /// ΣA (allocated, in the class's unit) over the same hosts.
    pub allocated: f64,
    /// How many hosts.
    pub hosts: usize,
}

impl UsageEvidence {
    /// u = ΣL̂ / ΣA: what each allocated unit uses; `None` without allocations measured.
    pub fn usage_per_allocated(&self) -> Option<f64> {
        (self.hosts > 0 && self.allocated > 0.0 && self.measured.is_finite())
            .then(|| self.measured.max(0.0) / self.allocated)
    }
}

/// R* = 1 / (P·u) within `bounds` (u = 0: the upper bound); `None` when there is no evidence
/// (no host measured with allocations): the ratios are then left as they are.
pub fn cluster_ratio(penalty: f64, evidence: UsageEvidence, bounds: RatioBounds) -> Option<f64> {
    let u = evidence.usage_per_allocated()?;
    let wanted = if u > 0.0 && penalty > 0.0 {
        1.0 / (penalty * u)
    } else {
        f64::INFINITY
    };
    Some(wanted.clamp(bounds.min, bounds.max))
}

/// The smallest ratio, in hundredths, at which Placement's capacity
/// `floor((total − reserved) × ratio)` still holds `used` (0 when nothing is used).
pub fn floor_ratio(capacity: i64, used: i64) -> f64 {
    if used <= 0 {
        return 0.0;
    }
    if capacity <= 0 {
        return f64::INFINITY;
    }
    let holds =
        |hundredths: i64| ((capacity as f64) * (hundredths as f64 / 100.0)).floor() >= used as f64;
    // Exact in integers, then checked with Placement's own float formula, which may round
    // either way by one hundredth.
    let mut hundredths = (used.saturating_mul(100) + capacity - 1) / capacity;
    while hundredths > 1 && holds(hundredths - 1) {
        hundredths -= 1;
    }
    while !holds(hundredths) {
        hundredths += 1;
    }
    hundredths as f64 / 100.0
}

/// What one provider's class should hold: `target` (the cluster's ratio, rounded to a
/// hundredth), raised to what its allocations take (`floor`) but never above the ratio it
/// has now for that reason alone; `None` when the change is below `min_change` and the current
/// ratio is within the bounds (nothing to write).
pub fn provider_ratio(
    target: f64,
    current: f64,
    floor: f64,
    bounds: RatioBounds,
    min_change: f64,
) -> Option<f64> {
    let target = (target * 100.0).round() / 100.0;
    // Never below what is allocated; but a provider already above the bounds is kept where
    // its allocations need it, not raised further.
    let wanted = target.max(floor.min(current.max(target)));
    let outside = current < bounds.min || current > bounds.max;
    let moved = (wanted - current).abs() >= min_change - 1e-9;
    ((moved || outside) && (wanted - current).abs() > 1e-9).then_some(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: RatioBounds = RatioBounds { min: 1.0, max: 4.0 };

    fn evidence(measured: f64, allocated: f64) -> UsageEvidence {
        UsageEvidence {
            measured,
            allocated,
            hosts: 1,
        }
    }

    #[test]
    fn the_ratio_is_where_flexs_filter_binds() {
        // Each allocated VCPU uses 0.4: with P = 1.25 Flex admits to C / 0.5 = 2 C.
        let r = cluster_ratio(1.25, evidence(40.0, 100.0), BOUNDS).unwrap();
        assert!((r - 2.0).abs() < 1e-12, "{r}");
        // P doubling halves it.
        let r = cluster_ratio(2.5, evidence(40.0, 100.0), BOUNDS).unwrap();
        assert!((r - 1.0).abs() < 1e-12, "{r}");
    }

    #[test]
    fn the_ratio_stays_within_the_operators_bounds() {
        assert_eq!(cluster_ratio(1.1, evidence(1.0, 100.0), BOUNDS), Some(4.0));
        assert_eq!(cluster_ratio(1.1, evidence(0.0, 100.0), BOUNDS), Some(4.0));
        assert_eq!(cluster_ratio(4.0, evidence(90.0, 100.0), BOUNDS), Some(1.0));
    }

    #[test]
    fn without_allocations_measured_nothing_is_decided() {
        assert_eq!(cluster_ratio(1.5, UsageEvidence::default(), BOUNDS), None);
        assert_eq!(cluster_ratio(1.5, evidence(5.0, 0.0), BOUNDS), None);
        assert_eq!(cluster_ratio(1.5, evidence(f64::NAN, 10.0), BOUNDS), None);
    }

    #[test]
    fn the_floor_holds_the_allocations_under_placements_rounding() {
        assert_eq!(floor_ratio(16, 0), 0.0);
        assert_eq!(floor_ratio(16, 16), 1.0);
        assert_eq!(floor_ratio(16, 24), 1.5);
        // 7 of 3: 2.34 (2.33 × 3 = 6.99 would floor to 6).
        assert_eq!(floor_ratio(3, 7), 2.34);
        for capacity in 1..200 {
            for used in 0..(capacity * 5) {
                let r = floor_ratio(capacity, used);
                assert!(
                    ((capacity as f64) * r).floor() >= used as f64,
                    "{capacity} {used}"
                );
                let lower = ((r * 100.0).round() - 1.0) / 100.0;
                assert!(
                    used == 0 || ((capacity as f64) * lower).floor() < used as f64,
                    "{capacity} {used}: {r} is not the smallest"
                );
            }
        }
        assert_eq!(floor_ratio(0, 1), f64::INFINITY);
    }

    #[test]
    fn a_provider_is_never_lowered_under_its_allocations() {
        // The cluster wants 1.2, the provider's allocations take 1.75 of its 2.0.
        assert_eq!(provider_ratio(1.2, 2.0, 1.75, BOUNDS, 0.05), Some(1.75));
        // Already at what its allocations take: nothing to write.
        assert_eq!(provider_ratio(1.2, 1.75, 1.75, BOUNDS, 0.05), None);
        // Above the bounds because of earlier allocations: lowered to them, not below.
        assert_eq!(provider_ratio(3.0, 6.0, 5.0, BOUNDS, 0.05), Some(5.0));
        // ... and not raised above the current ratio for the floor's sake.
        assert_eq!(provider_ratio(3.0, 4.5, 5.0, BOUNDS, 0.05), None);
    }

    #[test]
    fn small_moves_are_not_written_unless_out_of_bounds() {
        assert_eq!(provider_ratio(2.03, 2.0, 0.0, BOUNDS, 0.05), None);
        assert_eq!(provider_ratio(2.05, 2.0, 0.0, BOUNDS, 0.05), Some(2.05));
        assert_eq!(provider_ratio(1.96, 2.0, 0.0, BOUNDS, 0.05), None);
        // Nova's initial 16.0 is outside [1, 4]: brought in whatever the step.
        assert_eq!(provider_ratio(4.0, 16.0, 0.5, BOUNDS, 0.05), Some(4.0));
        assert_eq!(provider_ratio(1.0, 0.98, 0.0, BOUNDS, 0.05), Some(1.0));
        // Rounded to a hundredth.
        assert_eq!(provider_ratio(2.5049, 2.0, 0.0, BOUNDS, 0.05), Some(2.5));
    }
}
