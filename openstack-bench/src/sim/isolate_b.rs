//! Experiment B's isolating runs: each changes one choice of docs/architecture.md §10 B's model
//! (or the ASC paper's loop, §IV) and reruns the published points it bears on, so NOTES.md can say
//! which model difference a point that is not met comes from.

use super::stale_runs::{asc_group, fixed_setup, with_departures};
use super::staleness::{run_dynamic, run_fixed_refresh, CacheModel, DynamicSetup, RefreshMode};
use crate::datasets::DatasetKind;
use parasol::control::AscParams;
use parasol::policy::{Algorithm, TieBreak};

/// One isolating run: what differs from docs/architecture.md §10 B's model, and its decline ratio.
pub struct Isolated {
    pub policy: Algorithm,
    pub model: &'static str,
    pub decline_ratio: f64,
}

/// NFV at a 100 s interval, `random` and `dist_from_diag`, under the §10 B model and with one
/// of its choices changed at a time.
pub fn isolate(seed: u64) -> Vec<Isolated> {
    let (replicas, hosts) = fixed_setup(DatasetKind::Nfv);
    let as_read = CacheModel::default();
    let host_order = CacheModel {
        tie_break: TieBreak::HostOrder,
        ..as_read
    };
    let consume = CacheModel {
        consume_own: true,
        ..as_read
    };
    let dynamic = DynamicSetup::default_for(DatasetKind::Nfv);
    let mut out = Vec::new();
    for policy in [Algorithm::Random, Algorithm::DistFromDiag] {
        let fixed = |m| {
            run_fixed_refresh(
                DatasetKind::Nfv,
                replicas,
                hosts,
                policy,
                Some(100),
                m,
                seed,
            )
            .decline_ratio()
        };
        let dynamic_run = |mode| run_dynamic(&dynamic, policy, mode, as_read, seed).decline_ratio();
        out.extend([
            Isolated {
                policy,
                model: "the ASC paper's §III-C: infinite lifetimes, NFV ×10 on 279 hosts, snapshot as read, random ties",
                decline_ratio: fixed(as_read),
            },
            Isolated {
                policy,
                model: "… equal keys in host order instead of at random",
                decline_ratio: fixed(host_order),
            },
            Isolated {
                policy,
                model: "… own placements subtracted from the cache (Nova's consume_from_request)",
                decline_ratio: fixed(consume),
            },
            Isolated {
                policy,
                model: "with departures: Poisson arrivals 1/s, lifetimes L = 437 s, NFV ×10 on 28 hosts (the paper's OpenStack setup), 100 s interval",
                decline_ratio: dynamic_run(RefreshMode::Fixed(100_000)),
            },
            Isolated {
                policy,
                model: "… the same with fresh state (what is not staleness)",
                decline_ratio: dynamic_run(RefreshMode::Fresh),
            },
        ]);
    }
    out
}

/// The policies that rank by host state: on a never-refreshed cache every host of a shape
/// looks alike to them, so random ties spread their requests (the paper's "never" effect).
/// `random` reads no state, and `first_fit` / `ffr` rank by host id.
pub const STATE_RANKING: [Algorithm; 5] = [
    Algorithm::BestFit,
    Algorithm::WorstFit,
    Algorithm::Wfr,
    Algorithm::DistFromDiag,
    Algorithm::Adaptive,
];

/// Amazon's fixed-interval setups for the run-length run: (replicas, hosts, what it changes).
/// One replica (1,100 requests) on 126 hosts is the published setup, more than the fleet's
/// CPU holds (docs/architecture.md §10 A's note); 156 hosts hold about one replica's CPU, 504
/// = 4 × 126 is as overloaded as the published setup and 624 = 4 × 156 holds four.
pub const AMAZON_RUN_LENGTH: [(usize, usize, &str); 4] = [
    (
        1,
        126,
        "published: 1,100 requests, more than the fleet holds",
    ),
    (1, 156, "same run length, a fleet that holds it"),
    (4, 504, "4× the run, as overloaded as published"),
    (4, 624, "4× the run, a fleet that holds it"),
];

/// One Amazon run of "never" against the longest finite interval (1000 s).
pub struct RunLength {
    pub replicas: usize,
    pub hosts: usize,
    pub what: &'static str,
    pub policy: Algorithm,
    pub stale: f64,
    pub never: f64,
}

/// "never" against 1000 s on Amazon with the run length and the fleet size changed one at a
/// time (§10 B's model otherwise).
pub fn isolate_run_length(seed: u64) -> Vec<RunLength> {
    let mut out = Vec::new();
    for (replicas, hosts, what) in AMAZON_RUN_LENGTH {
        for policy in STATE_RANKING {
            let run = |i| {
                run_fixed_refresh(
                    DatasetKind::Amazon,
                    replicas,
                    hosts,
                    policy,
                    i,
                    CacheModel::default(),
                    seed,
                )
                .decline_ratio()
            };
            out.push(RunLength {
                replicas,
                hosts,
                what,
                policy,
                stale: run(Some(1000)),
                never: run(None),
            });
        }
    }
    out
}

/// ASC and a fixed interval of its mean with one change from §10 B's model.
pub struct AscVariant {
    pub dataset: DatasetKind,
    pub policy: Algorithm,
    pub mean_interval_s: f64,
    pub asc: f64,
    pub fixed: f64,
}

/// The dynamic runs of experiment B's ASC part with the cache model `model`, ASC run as
/// `asc_mode` and the arrival rate swinging by `rate_swing` (0: constant), against a fixed
/// interval of ASC's own mean in the same run.
pub fn asc_variant(
    seed: u64,
    policies: &[Algorithm],
    model: CacheModel,
    asc_mode: &RefreshMode,
    rate_swing: f64,
) -> Vec<AscVariant> {
    let mut out = Vec::new();
    for kind in DatasetKind::ALL {
        for policy in policies {
            let setup = DynamicSetup {
                rate_swing,
                ..DynamicSetup::default_for(kind)
            };
            let (rows, asc) = asc_group(&setup, *policy, asc_mode.clone(), model, seed);
            let fixed = rows.iter().find(|r| r.mode == "fixed_asc_mean");
            out.push(AscVariant {
                dataset: kind,
                policy: *policy,
                mean_interval_s: asc.mean_interval_s,
                asc: asc.decline_ratio(),
                fixed: fixed.map_or(f64::NAN, |r| r.decline_ratio),
            });
        }
    }
    out
}

/// The dynamic runs with own placements subtracted (Nova's `consume_from_request`).
pub fn isolate_asc_interval(seed: u64, policies: &[Algorithm]) -> Vec<AscVariant> {
    let model = CacheModel {
        consume_own: true,
        ..CacheModel::default()
    };
    asc_variant(
        seed,
        policies,
        model,
        &RefreshMode::Asc(AscParams::default()),
        0.0,
    )
}

/// The swing of [`isolate_asc_varying`]: the rate alternates between ½ and 1½ per second.
pub const RATE_SWING: f64 = 0.5;

/// The dynamic runs with the arrival rate alternating between ½ and 1½ times its mean every
/// mean lifetime (§10 B's model and the ASC paper's loop otherwise): a load that is not stationary.
pub fn isolate_asc_varying(seed: u64, policies: &[Algorithm]) -> Vec<AscVariant> {
    let mode = RefreshMode::Asc(AscParams::default());
    asc_variant(seed, policies, CacheModel::default(), &mode, RATE_SWING)
}

/// The fewest requests in which one decline does not breach ASC's SLA: ⌈1 / th_decline⌉ (20
/// for th_decline = 5 %). With fewer, r is 0 or above th_decline.
pub fn asc_min_sample(params: &AscParams) -> u64 {
    (1.0 / params.th_decline).ceil() as u64
}

/// The dynamic runs with ASC deciding only once its measurement holds
/// [`asc_min_sample`] requests (§10 B's model otherwise).
pub fn isolate_asc_sample(seed: u64, policies: &[Algorithm]) -> Vec<AscVariant> {
    let params = AscParams::default();
    let mode = RefreshMode::AscPooled {
        min_requests: asc_min_sample(&params),
        params,
    };
    asc_variant(seed, policies, CacheModel::default(), &mode, 0.0)
}

/// The ASC paper's three OpenStack setups (hosts, mean lifetime L in s; NFV ×10, 1 request
/// per second), which keep the fleet nearly full.
pub const NFV_OPENSTACK: [(usize, f64); 3] = [(28, 437.0), (56, 874.0), (84, 1311.0)];

/// "never" against 1000 s in one run with departures.
pub struct WithDepartures {
    pub dataset: DatasetKind,
    pub hosts: usize,
    pub lifetime_s: f64,
    pub policy: Algorithm,
    pub at_1000: f64,
    pub never: f64,
}

fn departures_run(setup: &DynamicSetup, policy: Algorithm, i: Option<u64>, seed: u64) -> f64 {
    run_dynamic(
        setup,
        policy,
        with_departures(i),
        CacheModel::default(),
        seed,
    )
    .decline_ratio()
}

/// Mean, lowest and highest of one measure over seeds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Self {
        Spread {
            mean: values.iter().sum::<f64>() / values.len().max(1) as f64,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// NFV at 100 s against fresh state and against "never", over seeds: the ceiling "never"
/// puts on `random` (on an empty-looking cache it picks among all hosts, full or not).
pub struct Ceiling {
    /// None: §10 B's unbounded lifetimes on 279 hosts; Some(L): departures with lifetime L.
    pub lifetime_s: Option<f64>,
    pub hosts: usize,
    pub policy: Algorithm,
    pub fresh: Spread,
    pub at_100: Spread,
    pub never: Spread,
}

/// [`Ceiling`] for `random` and `dist_from_diag` under §10 B's model and with departures on
/// the paper's three OpenStack setups, seeds `seed`, `seed + 1`, … (`runs` of them).
pub fn isolate_ceiling_100s(seed: u64, runs: usize) -> Vec<Ceiling> {
    let seeds: Vec<u64> = (seed..seed + runs.max(1) as u64).collect();
    let (replicas, hosts) = fixed_setup(DatasetKind::Nfv);
    let mut out = Vec::new();
    for policy in [Algorithm::Random, Algorithm::DistFromDiag] {
        let spread = |i: Option<u64>| {
            let v: Vec<f64> = seeds
                .iter()
                .map(|s| {
                    let m = CacheModel::default();
                    run_fixed_refresh(DatasetKind::Nfv, replicas, hosts, policy, i, m, *s)
                        .decline_ratio()
                })
                .collect();
            Spread::of(&v)
        };
        out.push(Ceiling {
            lifetime_s: None,
            hosts,
            policy,
            fresh: spread(Some(1)),
            at_100: spread(Some(100)),
            never: spread(None),
        });
    }
    for (hosts, lifetime_s) in NFV_OPENSTACK {
        let setup = DynamicSetup {
            hosts,
            lifetime_s,
            ..DynamicSetup::default_for(DatasetKind::Nfv)
        };
        for policy in [Algorithm::Random, Algorithm::DistFromDiag] {
            let spread = |i: Option<u64>| {
                let v: Vec<f64> = seeds
                    .iter()
                    .map(|s| departures_run(&setup, policy, i, *s))
                    .collect();
                Spread::of(&v)
            };
            out.push(Ceiling {
                lifetime_s: Some(lifetime_s),
                hosts,
                policy,
                fresh: spread(Some(1)),
                at_100: spread(Some(100)),
                never: spread(None),
            });
        }
    }
    out
}

/// "never" against 1000 s with departures, on every dataset's dynamic setup.
pub fn isolate_departures_never(seed: u64) -> Vec<WithDepartures> {
    let mut out = Vec::new();
    for kind in DatasetKind::ALL {
        let setup = DynamicSetup::default_for(kind);
        for policy in std::iter::once(Algorithm::Random).chain(STATE_RANKING) {
            out.push(WithDepartures {
                dataset: kind,
                hosts: setup.hosts,
                lifetime_s: setup.lifetime_s,
                policy,
                at_1000: departures_run(&setup, policy, Some(1000), seed),
                never: departures_run(&setup, policy, None, seed),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minimum_sample_is_the_fewest_requests_one_decline_keeps_within_the_sla() {
        let params = AscParams::default();
        let n = asc_min_sample(&params);
        assert_eq!(n, 20);
        assert!(1.0 / n as f64 <= params.th_decline);
        assert!(1.0 / (n - 1) as f64 > params.th_decline);
    }

    #[test]
    fn with_departures_one_second_is_fresh_and_none_is_never() {
        assert_eq!(with_departures(Some(1)), RefreshMode::Fresh);
        assert_eq!(with_departures(None), RefreshMode::Never);
        assert_eq!(with_departures(Some(100)), RefreshMode::Fixed(100_000));
    }
}
