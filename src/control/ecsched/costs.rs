//! The edge costs of §3.3 as integers: each resource amount is normalised to a fraction of the
//! largest capacity of its class in the cluster, the score computed in f64, and the cost is
//! −round(score × [`COST_SCALE`]).

use super::problem::{Cluster, CostModel};

/// Cost units per unit of score: a score of 1 (a request taking a whole largest host in one
/// class) costs −1,000,000. Scores are at most the number of classes, so costs stay far from
/// overflow for any batch size.
pub const COST_SCALE: f64 = 1_000_000.0;

/// The cluster normalised once per solve (§3.3: "fraction of the corresponding maximum
/// capacity independently").
pub(crate) struct Normalised {
    classes: usize,
    inv_max: Vec<f64>,
    capacity: Vec<f64>,
    free: Vec<f64>,
}

impl Normalised {
    pub(crate) fn new(cluster: &Cluster) -> Self {
        let classes = cluster.classes();
        let hosts = cluster.hosts();
        let mut max = vec![0u64; classes];
        for h in 0..hosts {
            for (m, c) in max.iter_mut().zip(cluster.capacity(h)) {
                *m = (*m).max(*c);
            }
        }
        let inv_max: Vec<f64> = max
            .iter()
            .map(|&m| if m == 0 { 0.0 } else { 1.0 / m as f64 })
            .collect();
        let mut capacity = Vec::with_capacity(hosts * classes);
        let mut free = Vec::with_capacity(hosts * classes);
        for h in 0..hosts {
            for ((c, f), inv) in cluster
                .capacity(h)
                .iter()
                .zip(cluster.free(h))
                .zip(&inv_max)
            {
                capacity.push(*c as f64 * inv);
                free.push(*f as f64 * inv);
            }
        }
        Normalised {
            classes,
            inv_max,
            capacity,
            free,
        }
    }

    /// A demand as fractions of each class's largest capacity.
    pub(crate) fn demand(&self, demand: &[u64]) -> Vec<f64> {
        demand
            .iter()
            .zip(&self.inv_max)
            .map(|(d, inv)| *d as f64 * inv)
            .collect()
    }

    /// The cost of the edge from a request of normalised demand `d` to host `h` (which the
    /// caller has found eligible: the demand fits its free amounts).
    pub(crate) fn cost(&self, model: CostModel, d: &[f64], h: usize) -> i64 {
        cost_of(model, d, self.vector(model, h))
    }

    /// Host `h`'s normalised amounts that `model` reads: its capacity or its free amounts.
    pub(crate) fn vector(&self, model: CostModel, h: usize) -> &[f64] {
        let at = h * self.classes;
        match model {
            CostModel::DotProduct | CostModel::MostLoaded => &self.capacity[at..at + self.classes],
            CostModel::DotProductFree | CostModel::MostLoadedFree => {
                &self.free[at..at + self.classes]
            }
        }
    }
}

/// The cost of an edge under `model`, `v` the host's amounts as [`Normalised::vector`] gives.
#[inline]
pub(crate) fn cost_of(model: CostModel, d: &[f64], v: &[f64]) -> i64 {
    cost_of_scaled(scaled_score(model, d, v))
}

/// The score of an edge times [`COST_SCALE`], before rounding.
#[inline]
pub(crate) fn scaled_score(model: CostModel, d: &[f64], v: &[f64]) -> f64 {
    let score = match model {
        CostModel::DotProduct | CostModel::DotProductFree => dot(d, v),
        CostModel::MostLoaded | CostModel::MostLoadedFree => ratio(d, v),
    };
    score * COST_SCALE
}

/// The cost of a [`scaled_score`]: −round(score × [`COST_SCALE`]).
#[inline]
pub(crate) fn cost_of_scaled(scaled: f64) -> i64 {
    -scaled.round() as i64
}

#[inline]
fn dot(d: &[f64], v: &[f64]) -> f64 {
    d.iter().zip(v).map(|(a, b)| a * b).sum()
}

/// Σ D/V over the classes the request uses (a class it does not use adds nothing, whatever V).
#[inline]
fn ratio(d: &[f64], v: &[f64]) -> f64 {
    d.iter()
        .zip(v)
        .filter(|(a, b)| **a > 0.0 && **b > 0.0)
        .map(|(a, b)| a / b)
        .sum()
}

/// Whether `demand` fits in `free` in every class (eq. 1 for one request).
#[inline]
pub(crate) fn fits(demand: &[u64], free: &[u64]) -> bool {
    demand.iter().zip(free).all(|(d, f)| d <= f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Cluster {
        // Fig. 2's shapes: capacities (0.25, 0.25), (0.5, 0.5), (1, 1) as 1/2/4 cores and
        // 3/6/12 GB; the small host half used.
        Cluster::new(2, vec![1, 3, 2, 6, 4, 12], vec![1, 1, 2, 6, 4, 12]).unwrap()
    }

    #[test]
    fn dot_product_is_demand_times_capacity_normalised_by_the_largest_host() {
        let n = Normalised::new(&cluster());
        let d = n.demand(&[1, 3]); // (0.25, 0.25)
        assert_eq!(n.cost(CostModel::DotProduct, &d, 0), -125_000); // 2 × 0.25 × 0.25
        assert_eq!(n.cost(CostModel::DotProduct, &d, 1), -250_000);
        assert_eq!(n.cost(CostModel::DotProduct, &d, 2), -500_000);
    }

    #[test]
    fn most_loaded_is_demand_over_capacity_and_prefers_the_smallest_host() {
        let n = Normalised::new(&cluster());
        let d = n.demand(&[1, 3]);
        assert_eq!(n.cost(CostModel::MostLoaded, &d, 0), -2_000_000);
        assert_eq!(n.cost(CostModel::MostLoaded, &d, 1), -1_000_000);
        assert_eq!(n.cost(CostModel::MostLoaded, &d, 2), -500_000);
    }

    #[test]
    fn free_variants_read_the_free_amounts_not_the_capacity() {
        let n = Normalised::new(&cluster());
        let d = n.demand(&[1, 1]); // (0.25, 1/12)
                                   // host 0 free (0.25, 1/12): dp = 1/16 + 1/144, ml = 1 + 1
        assert_eq!(
            n.cost(CostModel::DotProductFree, &d, 0),
            -((1.0 / 16.0 + 1.0 / 144.0) * COST_SCALE).round() as i64
        );
        assert_eq!(n.cost(CostModel::MostLoadedFree, &d, 0), -2_000_000);
        // On capacity the half-used host looks like an empty one of its size.
        assert_eq!(
            n.cost(CostModel::MostLoaded, &d, 0),
            -((1.0 + 1.0 / 3.0) * COST_SCALE).round() as i64
        );
    }

    #[test]
    fn a_class_no_request_uses_adds_nothing_to_most_loaded() {
        let c = Cluster::new(2, vec![4, 0], vec![4, 0]).unwrap();
        let n = Normalised::new(&c);
        let d = n.demand(&[2, 0]);
        assert_eq!(n.cost(CostModel::MostLoadedFree, &d, 0), -500_000);
        assert!(fits(&[2, 0], c.free(0)));
        assert!(!fits(&[2, 1], c.free(0)));
    }
}
