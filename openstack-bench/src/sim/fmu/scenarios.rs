//! The thesis' experiments (seed 003 chapter 4): hot-spot alleviation (§4.2, Tables 4.1–4.2)
//! and general-purpose cluster workloads at three levels of dynamism (§4.3, Tables 4.3–4.5),
//! with the published migration counts.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::testbed::Workload;
use crate::sim::random::exponential;

/// One core of the X3210 (§4.1).
pub const MHZ: f64 = 2133.0;

/// The experiments, by the thesis' names.
pub const SCENARIOS: [&str; 7] = [
    "HSA-18:3_5-20",
    "HSA-18:3_5-35",
    "HSA-18:3_6-35",
    "HSA-120:20_40-35",
    "GPCW-LD",
    "GPCW-MD",
    "GPCW-HD",
];

/// Published total migrations per solver (BCPU, BCPU2, SA, GBM); `None` where not run.
pub fn published(scenario: &str) -> [Option<usize>; 4] {
    match scenario {
        "HSA-18:3_5-20" => [Some(33), Some(7), Some(9), Some(4)],
        "HSA-18:3_5-35" => [Some(49), Some(15), Some(9), Some(10)],
        "HSA-18:3_6-35" => [Some(33), Some(16), Some(10), Some(5)],
        "HSA-120:20_40-35" => [Some(307), Some(282), Some(110), Some(27)],
        "GPCW-LD" => [None, Some(1231), Some(869), Some(73)],
        "GPCW-MD" => [None, Some(1469), Some(851), Some(88)],
        "GPCW-HD" => [None, Some(1410), Some(1358), Some(162)],
        _ => [None; 4],
    }
}

/// §4.2: every VM at 10 % from 20 s, the hot ones (packed on the first hosts) at `hot_mhz`
/// from 140 s; 600 s, scheduler from 260 s.
pub struct HotSpot {
    hot: Vec<bool>,
    hot_mhz: f64,
}

impl Workload for HotSpot {
    fn desire(&self, vm: usize, t: u64) -> f64 {
        match t {
            0..=19 => 0.0,
            _ if t >= 140 && self.hot[vm] => self.hot_mhz,
            _ => 0.1 * MHZ,
        }
    }
}

/// §4.3: jobs on whole virtual clusters, desires per cluster per second.
pub struct General {
    cluster_of: Vec<usize>,
    per_second: Vec<Vec<f64>>,
}

impl Workload for General {
    fn desire(&self, vm: usize, t: u64) -> f64 {
        self.per_second[self.cluster_of[vm]]
            .get(t as usize)
            .copied()
            .unwrap_or(0.0)
    }
}

/// A built scenario: hosts, round-robin placement, workload, duration, scheduler start.
pub struct Built {
    pub hosts: usize,
    pub placement: Vec<usize>,
    pub workload: Box<dyn Workload>,
    pub duration_s: u64,
    pub scheduler_start_s: u64,
}

/// Builds `name` for `seed` (the GPCW job stream depends on it).
pub fn build(name: &str, rng: &mut ChaCha8Rng) -> anyhow::Result<Built> {
    let hot = |hosts: usize, vms: usize, hot: usize, pct: f64| {
        // Round robin; the hot VMs are those of host 0, then host 1, … ("packed onto the
        // fewest number of nodes possible").
        let placement: Vec<usize> = (0..vms).map(|vm| vm % hosts).collect();
        let mut order: Vec<usize> = (0..vms).collect();
        order.sort_by_key(|vm| (placement[*vm], *vm));
        let mut flags = vec![false; vms];
        for vm in order.into_iter().take(hot) {
            flags[vm] = true;
        }
        Built {
            hosts,
            placement,
            workload: Box::new(HotSpot {
                hot: flags,
                hot_mhz: pct * MHZ,
            }),
            duration_s: 600,
            scheduler_start_s: 260,
        }
    };
    Ok(match name {
        "HSA-18:3_5-20" => hot(3, 18, 5, 0.20),
        "HSA-18:3_5-35" => hot(3, 18, 5, 0.35),
        "HSA-18:3_6-35" => hot(3, 18, 6, 0.35),
        "HSA-120:20_40-35" => hot(20, 120, 40, 0.35),
        "GPCW-LD" => general(rng, 120.0, 240.0),
        "GPCW-MD" => general(rng, 60.0, 121.7),
        "GPCW-HD" => general(rng, 25.0, 60.0),
        other => anyhow::bail!("unknown scenario `{other}` (expected one of {SCENARIOS:?})"),
    })
}

/// A Weibull draw by inversion.
fn weibull(rng: &mut ChaCha8Rng, scale: f64, shape: f64) -> f64 {
    let u: f64 = rng.gen();
    scale * (-(1.0 - u).ln()).powf(1.0 / shape)
}

/// §4.3: 120 VMs on 20 hosts for an hour; clusters of the printed sizes plus one of 8
/// (docs/fmu.md §6 reading 2); Poisson arrivals of mean `interarrival_s`, Weibull(scale, 0.46)
/// durations, Weibull(21, 0.53) desires in % of a core clamped to [8, 100]; a job runs on every
/// VM of a random cluster; a VM's desire is the sum of its cluster's jobs, at most one core.
fn general(rng: &mut ChaCha8Rng, interarrival_s: f64, duration_scale: f64) -> Built {
    const SIZES: [usize; 12] = [9, 18, 17, 15, 12, 1, 8, 8, 3, 8, 13, 8];
    const HOUR: u64 = 3600;
    let mut vms: Vec<usize> = (0..120).collect();
    for i in (1..vms.len()).rev() {
        vms.swap(i, rng.gen_range(0..=i));
    }
    let mut cluster_of = vec![0; 120];
    let mut placement = vec![0; 120];
    let mut k = 0;
    for (c, size) in SIZES.iter().enumerate() {
        for _ in 0..*size {
            cluster_of[vms[k]] = c;
            placement[vms[k]] = k % 20;
            k += 1;
        }
    }
    let mut per_second = vec![vec![0.0; HOUR as usize]; SIZES.len()];
    let mut t = exponential(rng, interarrival_s);
    while t < HOUR as f64 {
        let cluster = rng.gen_range(0..SIZES.len());
        let duration = weibull(rng, duration_scale, 0.46);
        let pct = weibull(rng, 21.0, 0.53).clamp(8.0, 100.0);
        let (start, end) = (t as usize, ((t + duration) as usize).min(HOUR as usize));
        for s in per_second[cluster][start..end].iter_mut() {
            *s = (*s + pct / 100.0 * MHZ).min(MHZ);
        }
        t += exponential(rng, interarrival_s);
    }
    Built {
        hosts: 20,
        placement,
        workload: Box::new(General {
            cluster_of,
            per_second,
        }),
        duration_s: HOUR,
        scheduler_start_s: 60,
    }
}
