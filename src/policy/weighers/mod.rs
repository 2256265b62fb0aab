//! Weighers: each returns a raw value per host; the handler normalises, multiplies and sums
//! (Nova's `BaseWeigher` and `BaseWeightHandler`).
//!
//! Nova's thirteen weighers: three weighers driven by tables — `resource` (RAM, CPU, disk,
//! I/O operations, instances; one row each), `soft_affinity` (the two soft server-group
//! policies, one row each with its sign) and `node_record` (build failures, hypervisor
//! version, PCI devices, from Nova's records) — plus `cross_cell`, `metrics` (the hosts'
//! monitor metrics) and `idle` (image properties, which weighs every host alike under the
//! settings Parasol accepts). A row
//! is a name, what it reads, Nova's option for its multiplier and that option's default; each
//! row has its own unit test.

mod cross_cell;
mod flex;
mod host_name;
mod idle;
mod metrics;
mod node_record;
mod resource;
mod soft_affinity;

pub use cross_cell::CrossCellWeigher;
pub use flex::FlexWeigher;
pub use host_name::HostNameWeigher;
pub use idle::IdleWeigher;
pub use metrics::MetricsWeigher;
pub use node_record::{NodeRecordWeigher, NodeRecordWeigherSpec, NODE_RECORD_WEIGHERS};
pub use resource::{HostValue, ResourceWeigher, ResourceWeigherSpec, RESOURCE_WEIGHERS};
pub use soft_affinity::{GroupWeigherSpec, SoftGroupWeigher, GROUP_WEIGHERS};

use crate::domain::{HostState, RequestContext};

/// Gives a host a raw value; larger raw values rank higher once multiplied by a positive
/// multiplier.
pub trait Weigher: Send + Sync {
    /// The weigher's name in `weight_classes` (Nova's class name).
    fn name(&self) -> &'static str;
    /// The configured multiplier (Nova's `*_weight_multiplier`).
    fn multiplier(&self) -> f64;
    /// The raw, unnormalised value for `host`.
    fn weigh(&self, host: &HostState, req: &RequestContext) -> f64;
    /// False when every host gets the same raw value for `req` (e.g. no server group), so
    /// the weigher adds nothing once normalised: the pipeline then skips it for that request.
    fn varies(&self, _req: &RequestContext) -> bool {
        true
    }
    /// What this weigher reads, when a host's [`crate::domain::HostScan`] row may hold it (the
    /// resource weighers): a full scan then reads the dense row instead of calling
    /// [`Weigher::weigh`] (or the host, for a row that does not hold it:
    /// [`HostValue::of_row`]). `None` (the default) always calls `weigh`.
    fn scan_value(&self) -> Option<HostValue> {
        None
    }
    /// Nova's `minval` of the weigher (`None`: the least raw value among the hosts is the low
    /// end of the normalisation); raw values are already at least this much.
    fn minval(&self) -> Option<f64> {
        None
    }
}

/// Nova's handler for one weigher: normalises `raw` to [0, 1] between `minval` (when the
/// weigher sets one, else the least raw value) and the greatest raw value (all equal → 0),
/// multiplies by `multiplier` and adds the result to `scores`, element by element.
pub fn add_normalised(raw: &[f64], multiplier: f64, minval: Option<f64>, scores: &mut [f64]) {
    let (min, max) = raw
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    let min = minval.unwrap_or(min);
    let range = max - min;
    if range.is_nan() || range <= 0.0 || range.is_infinite() {
        return;
    }
    for (score, &v) in scores.iter_mut().zip(raw) {
        *score += multiplier * ((v - min) / range);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_maps_to_unit_range_and_scales() {
        type Case<'a> = (&'a str, &'a [f64], f64, &'a [f64]);
        let cases: [Case; 5] = [
            ("spread", &[0.0, 5.0, 10.0], 1.0, &[0.0, 0.5, 1.0]),
            (
                "all equal gives zero",
                &[7.0, 7.0, 7.0],
                1.0,
                &[0.0, 0.0, 0.0],
            ),
            (
                "negative multiplier inverts",
                &[0.0, 5.0, 10.0],
                -1.0,
                &[0.0, -0.5, -1.0],
            ),
            ("multiplier scales", &[2.0, 4.0], 3.0, &[0.0, 3.0]),
            ("negative raw values", &[-4.0, -2.0], 1.0, &[0.0, 1.0]),
        ];
        for (name, raw, multiplier, want) in cases {
            let mut scores = vec![0.0; raw.len()];
            add_normalised(raw, multiplier, None, &mut scores);
            assert_eq!(scores, want, "{name}");
        }
    }

    #[test]
    fn normalisation_adds_to_existing_scores() {
        let mut scores = vec![1.0, 1.0];
        add_normalised(&[0.0, 1.0], 2.0, None, &mut scores);
        assert_eq!(scores, [1.0, 3.0]);
    }
}
