//! Flex's admission test and score for one host (seed 002, Alg. 3 lines 7–10, eq. 13), per
//! resource class. The host's load is judged as L̄ = P·L̂ (eq. 13): measured usage L̂
//! inflated by the penalty P. These are the pure halves of the `FlexFilter` and the Flex
//! weigher; Parasol's ledger and Placement still check used + r ≤ (total − reserved) × ratio
//! on top, so Flex only ever decides within each provider's allocation ratio.

/// One class on one host: measured usage L̂, the physical capacity C (total − reserved, no
/// allocation ratio) and the request r.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Load {
    /// Measured usage L̂, in the class's unit.
    pub usage: f64,
    /// Physical capacity C = total − reserved.
    pub capacity: f64,
    /// The instance's request r.
    pub request: f64,
}

/// Alg. 3 line 7 for one class: P·L̂ + r ≤ C.
pub fn fits(penalty: f64, load: Load) -> bool {
    penalty * load.usage + load.request <= load.capacity
}

/// Alg. 3 line 7 in every class.
pub fn fits_all(penalty: f64, loads: &[Load]) -> bool {
    loads.iter().all(|&load| fits(penalty, load))
}

/// Alg. 3 line 9's preference for low estimated load, as a Nova-style raw weight: the
/// smallest share of capacity left after placing, min over classes of 1 − (P·L̂ + r) / C
/// (the dominant class decides, §4.3). The paper gives no formula; higher is better. A class
/// with no capacity gives −1.
pub fn headroom(penalty: f64, loads: &[Load]) -> f64 {
    loads
        .iter()
        .map(|load| {
            if load.capacity > 0.0 {
                1.0 - (penalty * load.usage + load.request) / load.capacity
            } else {
                -1.0
            }
        })
        .fold(f64::INFINITY, f64::min)
        .min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(usage: f64, capacity: f64, request: f64) -> Load {
        Load {
            usage,
            capacity,
            request,
        }
    }

    #[test]
    fn fits_is_penalised_usage_plus_request_within_capacity() {
        // 64 cores, 20 used, P = 1.5: 30 + r ≤ 64.
        assert!(fits(1.5, load(20.0, 64.0, 34.0)));
        assert!(!fits(1.5, load(20.0, 64.0, 34.5)));
        // P = 1 admits on usage alone.
        assert!(fits(1.0, load(20.0, 64.0, 44.0)));
    }

    #[test]
    fn every_class_must_fit() {
        let loads = [load(10.0, 64.0, 8.0), load(100.0, 128.0, 16.0)];
        assert!(fits_all(1.0, &loads));
        assert!(!fits_all(1.2, &loads), "memory: 120 + 16 > 128");
    }

    #[test]
    fn headroom_prefers_the_less_loaded_host_by_its_dominant_class() {
        let idle = [load(8.0, 64.0, 4.0), load(16.0, 128.0, 8.0)];
        let busy = [load(8.0, 64.0, 4.0), load(96.0, 128.0, 8.0)];
        assert!(headroom(1.5, &idle) > headroom(1.5, &busy));
        assert!((headroom(1.0, &idle) - (1.0 - 12.0 / 64.0)).abs() < 1e-12);
        assert_eq!(headroom(1.0, &[load(0.0, 0.0, 1.0)]), -1.0);
    }
}
