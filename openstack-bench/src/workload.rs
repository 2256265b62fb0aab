//! The seeded workload the driver replays, on this crate's datasets (`openstack_bench::datasets`,
//! read from `openstack-bench/datasets/*.json`): flavor, Poisson arrival time and exponential
//! lifetime per request, in unscaled seconds.

use openstack_bench::datasets::scale::units_per_host;
use openstack_bench::datasets::DatasetKind;
use parasol::domain::{ClassId, Resources};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A dataset as the benchmark uses it: its flavors and the one shape of every emulated host.
#[derive(Clone, Debug)]
pub struct Dataset {
    pub name: String,
    /// The library's definition: flavors, per-replica counts and random draws.
    pub definition: openstack_bench::datasets::Dataset,
    /// Flavor demands, by flavor index.
    pub flavors: Vec<Resources>,
    /// Host capacity: the dataset's first host shape; classes the dataset does not use get
    /// one host's worth that no flavor asks for.
    pub host: Resources,
}

impl Dataset {
    /// `nfv`, `amazon` or `google`.
    pub fn named(name: &str) -> anyhow::Result<Dataset> {
        let kind: DatasetKind = name.parse().map_err(anyhow::Error::msg)?;
        let definition = kind.load();
        let mut host = definition
            .host_shapes
            .first()
            .map(|s| s.capacity)
            .ok_or_else(|| anyhow::anyhow!("dataset {name} has no host shape"))?;
        for class in [ClassId::VCPU, ClassId::MEMORY_MB, ClassId::DISK_GB] {
            if !definition.classes.contains(&class) {
                host.0[class.index()] = units_per_host(class);
            }
        }
        Ok(Dataset {
            name: definition.name.clone(),
            flavors: definition.flavors.iter().map(|f| f.demand).collect(),
            definition,
            host,
        })
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

/// The first `spec.requests` of enough replicas, each shuffled on its own, with seeded times
/// and uuids.
pub fn generate(ds: &Dataset, spec: &WorkloadSpec) -> Vec<Request> {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let per_replica = ds.definition.requests_per_replica();
    let mut flavors: Vec<usize> = Vec::with_capacity(spec.requests + per_replica);
    while flavors.len() < spec.requests && per_replica > 0 {
        let replica = ds.definition.workload(1, &mut rng);
        flavors.extend(replica.requests.iter().map(|&f| usize::from(f)));
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
    fn nfv_hosts_get_one_host_of_the_class_it_does_not_use_and_437_requests_a_replica() {
        let ds = Dataset::named("nfv").unwrap();
        assert_eq!(ds.definition.requests_per_replica(), 437);
        assert_eq!(ds.flavors[0], Resources::new(0, 1_000, 1_000));
        assert_eq!(ds.host, Resources::new(1_000, 1_000_000, 100_000));
    }

    #[test]
    fn amazon_hosts_have_its_first_shape_and_any_disk() {
        let ds = Dataset::named("amazon").unwrap();
        assert_eq!(ds.host, Resources::new(1_000, 2_000_000, 100_000));
        assert!(Dataset::named("azure").is_err());
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
