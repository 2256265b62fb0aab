//! The clusters of ECSched's evaluation (seed 004, §4): the 30 ExoGENI VMs of §4.1 and the
//! large clusters of §4.2 drawn from EC2's general-purpose instance types, half loaded.
//! Amounts are integers: CPU in millicores, memory in MiB.

use parasol::control::ecsched::Cluster;
use rand::Rng;

/// CPU and memory classes.
pub const CLASSES: usize = 2;

/// §4.1: 10 × XOMedium (1 core, 3 GB), 10 × XOLarge (2, 6), 10 × XOXLarge (4, 12); normalised
/// (0.25, 0.25), (0.5, 0.5), (1, 1).
pub fn exogeni() -> Vec<[u64; CLASSES]> {
    let mut hosts = Vec::with_capacity(30);
    for shape in [[1_000, 3_072], [2_000, 6_144], [4_000, 12_288]] {
        hosts.extend(std::iter::repeat_n(shape, 10));
    }
    hosts
}

/// EC2's general-purpose types of the paper's time (2018: T2, M4, M5), 19 as §4.2 counts:
/// (vCPU, GiB).
pub const EC2_GENERAL_PURPOSE: [(u64, u64); 19] = [
    (1, 1), // t2.nano has 0.5 GiB; rounded up so every amount is whole MiB below
    (1, 1),
    (1, 2),
    (2, 4),
    (2, 8),
    (4, 16),
    (8, 32),
    (2, 8),
    (4, 16),
    (8, 32),
    (16, 64),
    (40, 160),
    (64, 256),
    (2, 8),
    (4, 16),
    (8, 32),
    (16, 64),
    (48, 192),
    (96, 384),
];

/// §4.2: `hosts` machines of a type drawn uniformly from [`EC2_GENERAL_PURPOSE`], each half
/// loaded.
pub fn ec2_half_loaded(hosts: usize, rng: &mut impl Rng) -> Cluster {
    ec2_loaded(hosts, Load::Half, rng)
}

/// How loaded the machines of [`ec2_loaded`] are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Load {
    /// Every machine half used (§4.2): machines of one type are alike.
    Half,
    /// Each machine's used share of each class drawn uniformly from [0, 1): no two alike, the
    /// solver's worst case (nothing to merge).
    Uniform,
}

/// `hosts` machines of a type drawn uniformly from [`EC2_GENERAL_PURPOSE`], loaded as `load`.
pub fn ec2_loaded(hosts: usize, load: Load, rng: &mut impl Rng) -> Cluster {
    let (mut capacity, mut free) = (Vec::new(), Vec::new());
    for _ in 0..hosts {
        let (cpu, gib) = EC2_GENERAL_PURPOSE[rng.gen_range(0..EC2_GENERAL_PURPOSE.len())];
        let shape = [cpu * 1_000, gib * 1_024];
        capacity.extend(shape);
        match load {
            Load::Half => free.extend(shape.map(|x| x / 2)),
            Load::Uniform => {
                for x in shape {
                    free.push(x - (x as f64 * rng.gen::<f64>()) as u64);
                }
            }
        }
    }
    Cluster::new(CLASSES, capacity, free).expect("whole shapes")
}
