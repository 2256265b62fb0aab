//! The papers' datasets mapped exactly to integer resource classes (1.0 = 1000 VCPU =
//! 1,000,000 MEMORY_MB = 100,000 DISK_GB) and the seeded workload the driver replays: flavor,
//! Poisson arrival time and exponential lifetime per request, in unscaled seconds.
//!
//! A small copy of what `parasol::datasets` will provide once the simulator branch lands.

use anyhow::{bail, Context};
use parasol::domain::Resources;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

/// Units per normalised 1.0 for VCPU, MEMORY_MB, DISK_GB.
pub const UNITS: [i64; 3] = [1_000, 1_000_000, 100_000];

/// A dataset: its flavors (integer demands) and how many of each one replica holds.
#[derive(Clone, Debug)]
pub struct Dataset {
    pub name: String,
    pub flavors: Vec<Resources>,
    /// Requests of one replica, as flavor indices (before shuffling).
    pub replica: Vec<usize>,
    /// Flavor ranges drawn uniformly by the `usize::MAX - 1` (small) and `usize::MAX` (large)
    /// markers of `replica` (Amazon's generator).
    pub small: std::ops::Range<usize>,
    pub large: std::ops::Range<usize>,
    /// Host capacity (first host shape), in integer units; classes the dataset does not use
    /// get one host's worth that no flavor asks for.
    pub host: Resources,
}

#[derive(Deserialize)]
struct Raw {
    name: String,
    resources: Vec<String>,
    host_shapes: Vec<Shape>,
    #[serde(default)]
    flavors: Vec<RawFlavor>,
    #[serde(default)]
    small_flavors: Vec<Vec<f64>>,
    #[serde(default)]
    large_flavors: Vec<Vec<f64>>,
    #[serde(default)]
    small_count: usize,
    #[serde(default)]
    large_count: usize,
}

#[derive(Deserialize)]
struct Shape {
    capacity: Vec<f64>,
}

#[derive(Deserialize)]
struct RawFlavor {
    demand: Vec<f64>,
    count: usize,
}

/// Maps a normalised size exactly (through its shortest decimal form, so no float rounding).
pub fn to_units(value: f64, class: usize) -> anyhow::Result<i64> {
    let per = UNITS[class];
    let digits = per.ilog10() as usize;
    let text = format!("{value}");
    let (whole, frac) = text.split_once('.').unwrap_or((&text, ""));
    if value < 0.0 || frac.len() > digits {
        bail!("{value} has no exact image at {per} units per host");
    }
    let whole: i64 = whole.parse()?;
    let frac: i64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<digits$}").parse()?
    };
    Ok(whole * per + frac)
}

fn class_index(resource: &str) -> anyhow::Result<usize> {
    Ok(match resource {
        "cpu" => 0,
        "memory" => 1,
        "storage" => 2,
        other => bail!("unknown resource `{other}`"),
    })
}

impl Dataset {
    /// `nfv` or `amazon` (shipped with the crate).
    pub fn named(name: &str) -> anyhow::Result<Dataset> {
        let text = match name {
            "nfv" => include_str!("../datasets/nfv.json"),
            "amazon" => include_str!("../datasets/amazon.json"),
            other => bail!("unknown dataset `{other}` (expected nfv or amazon)"),
        };
        Dataset::parse(text).with_context(|| format!("dataset {name}"))
    }

    pub fn parse(text: &str) -> anyhow::Result<Dataset> {
        let raw: Raw = serde_json::from_str(text)?;
        let classes = raw
            .resources
            .iter()
            .map(|r| class_index(r))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let vector = |values: &[f64]| -> anyhow::Result<Resources> {
            let mut r = [0i64; 3];
            for (c, v) in classes.iter().zip(values) {
                r[*c] = to_units(*v, *c)?;
            }
            Ok(Resources::new(r[0], r[1], r[2]))
        };
        let shape = raw.host_shapes.first().context("no host shape")?;
        let mut host = vector(&shape.capacity)?;
        for (c, units) in UNITS.iter().enumerate() {
            if !classes.contains(&c) {
                host.0[c] = *units;
            }
        }
        let mut flavors = Vec::new();
        let mut replica = Vec::new();
        for f in &raw.flavors {
            replica.extend(std::iter::repeat_n(flavors.len(), f.count));
            flavors.push(vector(&f.demand)?);
        }
        // Amazon: the per-replica draw is fixed by the workload seed, see `workload`.
        let small = flavors.len();
        for f in raw.small_flavors.iter().chain(&raw.large_flavors) {
            flavors.push(vector(f)?);
        }
        let large = small + raw.small_flavors.len();
        replica.extend(std::iter::repeat_n(usize::MAX - 1, raw.small_count));
        replica.extend(std::iter::repeat_n(usize::MAX, raw.large_count));
        Ok(Dataset {
            name: raw.name,
            small: small..large,
            large: large..flavors.len(),
            flavors,
            replica,
            host,
        })
    }

    fn draw(&self, marker: usize, rng: &mut impl Rng) -> usize {
        match marker {
            m if m == usize::MAX - 1 => rng.gen_range(self.small.clone()),
            m if m == usize::MAX => rng.gen_range(self.large.clone()),
            m => m,
        }
    }
}

/// One request of the replayed workload.
#[derive(Clone, Debug)]
pub struct Request {
    pub flavor: usize,
    pub uuid: uuid::Uuid,
    /// Arrival, unscaled seconds from the start.
    pub arrival_s: f64,
    /// Lifetime, unscaled seconds; `None` = never deleted.
    pub lifetime_s: Option<f64>,
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct WorkloadSpec {
    pub requests: usize,
    /// λ_a in requests per unscaled second; `None` = all arrive at once (closed loop).
    pub arrival_rate: Option<f64>,
    /// Mean lifetime in unscaled seconds; `None` = unbounded.
    pub mean_lifetime_s: Option<f64>,
    pub seed: u64,
}

/// The first `spec.requests` of enough shuffled replicas, with seeded times and uuids.
pub fn generate(ds: &Dataset, spec: &WorkloadSpec) -> Vec<Request> {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let mut flavors = Vec::with_capacity(spec.requests + ds.replica.len());
    while flavors.len() < spec.requests {
        let mut replica: Vec<usize> = ds.replica.iter().map(|&m| ds.draw(m, &mut rng)).collect();
        replica.shuffle(&mut rng);
        flavors.extend(replica);
    }
    flavors.truncate(spec.requests);
    let mut t = 0.0;
    flavors
        .into_iter()
        .map(|flavor| {
            if let Some(rate) = spec.arrival_rate {
                t += exponential(&mut rng, 1.0 / rate);
            }
            let lifetime_s = spec.mean_lifetime_s.map(|m| exponential(&mut rng, m));
            let uuid = uuid::Builder::from_random_bytes(rng.gen()).into_uuid();
            Request {
                flavor,
                uuid,
                arrival_s: t,
                lifetime_s,
            }
        })
        .collect()
}

fn exponential(rng: &mut impl Rng, mean: f64) -> f64 {
    let u: f64 = rng.gen_range(f64::EPSILON..1.0);
    -mean * u.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nfv_sizes_map_exactly_and_one_replica_holds_437_requests() {
        let ds = Dataset::named("nfv").unwrap();
        assert_eq!(ds.replica.len(), 437);
        assert_eq!(ds.flavors[0], Resources::new(0, 1_000, 1_000));
        assert_eq!(ds.host, Resources::new(1_000, 1_000_000, 100_000));
        assert_eq!(to_units(0.54, 2).unwrap(), 54_000);
    }

    #[test]
    fn the_same_seed_gives_the_same_workload() {
        let ds = Dataset::named("amazon").unwrap();
        let spec = WorkloadSpec {
            requests: 1500,
            arrival_rate: Some(1.0),
            mean_lifetime_s: Some(100.0),
            seed: 3,
        };
        let a = generate(&ds, &spec);
        let b = generate(&ds, &spec);
        assert_eq!(a.len(), 1500);
        assert!(a
            .iter()
            .zip(&b)
            .all(|(x, y)| x.flavor == y.flavor && x.uuid == y.uuid));
        assert!(a.iter().all(|r| r.flavor < ds.flavors.len()));
    }
}
