//! Issue 44's acceptance (b) predicted before the service runs it: single calls of mixed
//! flavors arriving in concurrent groups fill a small cluster to ~90 %, placed one at a time
//! (`[batch] mode = "off"`) or each group solved together (`"window"`); how many NoValidHost
//! each answers. The service test (`tests/placement_claims.rs`,
//! `a_window_of_mixed_flavors_near_full_refuses_fewer_than_one_at_a_time`) replays the same
//! workload (written by `sim ecsched window --write`) against the real Placement and asserts
//! at least the margin printed here.
//!
//! The model mirrors the service with the library's own code: the ranking is
//! `Policy::rank` with Nova's weighers (the default policy) over the hosts' states, and a
//! window round is `backend/window.rs`'s (each call's passing hosts as its machine affinity,
//! the union of their classes, `SolveOptions::service()`, the calls the solver leaves out
//! placed one at a time after the round, in order). It leaves out what the service test does
//! not exercise (other filters, claims racing with other callers).

use parasol::control::ecsched::{solve, BatchRequest, Cluster, CostModel, SolveOptions};
use parasol::domain::{ClassId, HostState, RequestContext, Resources};
use parasol::policy::{FilterEnv, Policy, PolicyConfig, RankArgs};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// The workload: hosts (VCPU, MEMORY_MB, DISK_GB), flavors, and the calls in groups that
/// arrive together (one window each).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub seed: u64,
    pub hosts: Vec<[i64; 3]>,
    pub flavors: Vec<[i64; 3]>,
    /// Per group, the flavor index of each call, in the order the calls are sent.
    pub groups: Vec<Vec<usize>>,
}

/// The shape of a workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// Calls per group (one window's worth).
    pub group: usize,
    /// Hosts of each of the two sizes.
    pub hosts_per_size: usize,
    /// The calls ask for this share of the cluster's VCPU in all.
    pub asked: f64,
}

impl Shape {
    /// The service test's: 6 calls per window, 4 + 4 hosts, the calls asking for 100 % of
    /// the VCPU (the cluster ends near 90 % and the last groups meet a full cluster).
    pub const TEST: Shape = Shape {
        group: 6,
        hosts_per_size: 4,
        asked: 1.0,
    };
}

/// The workload of `seed`: hosts of 16 VCPU / 32 GiB and of 8 VCPU / 16 GiB; six flavors of
/// 1 to 8 VCPU (two of them memory- or CPU-heavy), drawn uniformly; groups of calls until
/// they ask for `shape.asked` of the VCPU.
pub fn workload(seed: u64, shape: Shape) -> Workload {
    let mut hosts = vec![[16, 32_768, 400]; shape.hosts_per_size];
    hosts.extend(vec![[8, 16_384, 200]; shape.hosts_per_size]);
    let flavors = vec![
        [1, 2_048, 10],
        [2, 4_096, 20],
        [4, 8_192, 40],
        [8, 16_384, 80],
        [2, 8_192, 20],
        [4, 2_048, 20],
    ];
    let capacity: i64 = hosts.iter().map(|h| h[0]).sum();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut asked, mut groups) = (0, Vec::new());
    while (asked as f64) < capacity as f64 * shape.asked {
        let group: Vec<usize> = (0..shape.group)
            .map(|_| rng.gen_range(0..flavors.len()))
            .collect();
        asked += group.iter().map(|&f| flavors[f][0]).sum::<i64>();
        groups.push(group);
    }
    Workload {
        seed,
        hosts,
        flavors,
        groups,
    }
}

/// What one mode answered.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Outcome {
    pub calls: usize,
    pub placed: usize,
    pub no_valid_host: usize,
    /// Calls a window round left to the one-at-a-time path.
    pub fallbacks: usize,
    /// Used / capacity at the end: VCPU, MEMORY_MB, DISK_GB.
    pub utilisation: [f64; 3],
}

/// The service's default policy (Nova's filters reduced to the capacity filter: the test's
/// hosts pass every other, and Nova's weighers).
fn policy() -> Policy {
    let config = PolicyConfig {
        enabled_filters: vec!["CapacityFilter".into()],
        ..PolicyConfig::default()
    };
    Policy::from_config(&config).expect("the default policy is valid")
}

struct Cloud {
    policy: Policy,
    cost: CostModel,
    env: FilterEnv,
    hosts: Vec<HostState>,
    rng: ChaCha8Rng,
}

impl Cloud {
    fn new(w: &Workload, cost: CostModel) -> Cloud {
        let hosts = w
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                HostState::synthetic(
                    i as i64 + 1,
                    Resources::new(h[0], h[1], h[2]),
                    Resources::ZERO,
                )
            })
            .collect();
        Cloud {
            policy: policy(),
            cost,
            env: FilterEnv::new(0, &PolicyConfig::default()),
            hosts,
            rng: ChaCha8Rng::seed_from_u64(7),
        }
    }

    /// The hosts passing for `req`, in the weighers' order (empty: no valid host).
    fn ranked(&mut self, req: &RequestContext) -> Vec<usize> {
        let mut out = Vec::new();
        let args = RankArgs {
            req,
            env: &self.env,
            max: usize::MAX,
        };
        match self.policy.rank(&self.hosts, args, &mut self.rng, &mut out) {
            Ok(()) => out,
            Err(_) => Vec::new(),
        }
    }

    /// One at a time: the first ranked host, or no valid host.
    fn place_one(&mut self, req: &RequestContext, o: &mut Outcome) {
        match self.ranked(req).first() {
            Some(&h) => {
                self.hosts[h].used = self.hosts[h].used + req.demand;
                o.placed += 1;
            }
            None => o.no_valid_host += 1,
        }
    }

    /// One window round, as `backend/window.rs` decides it.
    fn round(&mut self, reqs: &[RequestContext], o: &mut Outcome) {
        let mut later = Vec::new();
        self.solve_once(reqs, o, &mut later);
        o.fallbacks += later.len();
        for req in later {
            self.place_one(req, o);
        }
    }

    /// Solves `reqs` together and places what the solver placed; the rest into `later`.
    fn solve_once<'r>(
        &mut self,
        reqs: &'r [RequestContext],
        o: &mut Outcome,
        later: &mut Vec<&'r RequestContext>,
    ) {
        let mut union: Vec<usize> = Vec::new();
        let mut batch: Vec<(&RequestContext, Vec<usize>)> = Vec::new();
        for req in reqs {
            let ranked = self.ranked(req);
            if ranked.is_empty() {
                later.push(req);
                continue;
            }
            for &h in &ranked {
                if !union.contains(&h) {
                    union.push(h);
                }
            }
            batch.push((req, ranked));
        }
        let classes = [ClassId::VCPU, ClassId::MEMORY_MB, ClassId::DISK_GB];
        let (mut capacity, mut free) = (Vec::new(), Vec::new());
        for &h in &union {
            for c in classes {
                let cap = self.hosts[h].usable().get(c);
                capacity.push(cap as u64);
                free.push((cap - self.hosts[h].used.get(c)).max(0) as u64);
            }
        }
        let requests: Vec<BatchRequest> = batch
            .iter()
            .map(|(req, ranked)| BatchRequest {
                demand: classes.iter().map(|&c| req.demand.get(c) as u64).collect(),
                hosts: Some(
                    ranked
                        .iter()
                        .map(|h| union.iter().position(|u| u == h).unwrap() as u32)
                        .collect(),
                ),
                group: None,
            })
            .collect();
        if !requests.is_empty() {
            let cluster = Cluster::new(classes.len(), capacity, free).expect("a valid cluster");
            let opts = SolveOptions {
                cost: self.cost,
                ..SolveOptions::service()
            };
            let answer = solve(&cluster, &requests, &opts).expect("solved");
            for ((req, _), h) in batch.iter().zip(&answer.hosts) {
                match h {
                    Some(h) => {
                        let host = &mut self.hosts[union[*h as usize]];
                        host.used = host.used + req.demand;
                        o.placed += 1;
                    }
                    None => later.push(req),
                }
            }
        }
    }
}

fn requests(w: &Workload, group: &[usize], first: usize) -> Vec<RequestContext> {
    group
        .iter()
        .enumerate()
        .map(|(i, &f)| {
            let [v, m, d] = w.flavors[f];
            RequestContext::with_demand(
                format!("call-{}", first + i),
                format!("f{f}"),
                Resources::new(v, m, d),
            )
        })
        .collect()
}

/// Runs the workload one at a time (`window = None`) or a group per window round solved
/// with the service's rules and the cost model given (the service's: `DotProductFree`).
pub fn run(w: &Workload, window: Option<CostModel>) -> Outcome {
    let mut cloud = Cloud::new(w, window.unwrap_or(CostModel::DotProductFree));
    let mut o = Outcome::default();
    let mut first = 0;
    for group in &w.groups {
        let reqs = requests(w, group, first);
        first += reqs.len();
        o.calls += reqs.len();
        if window.is_some() {
            cloud.round(&reqs, &mut o);
        } else {
            for req in &reqs {
                cloud.place_one(req, &mut o);
            }
        }
    }
    let classes = [ClassId::VCPU, ClassId::MEMORY_MB, ClassId::DISK_GB];
    o.utilisation = classes.map(|c| {
        let used: i64 = cloud.hosts.iter().map(|h| h.used.get(c)).sum();
        let cap: i64 = cloud.hosts.iter().map(|h| h.usable().get(c)).sum();
        used as f64 / cap as f64
    });
    o
}

/// The table printed by `sim ecsched window`.
pub fn markdown(w: &Workload, off: &Outcome, window: &Outcome) -> String {
    let mut out = format!(
        "# ECSched in the service, acceptance (b): seed {}, {} hosts, {} calls in groups of {}\n\n| mode | placed | NoValidHost | window fallbacks | VCPU % | MEMORY_MB % | DISK_GB % |\n|---|---|---|---|---|---|---|\n",
        w.seed,
        w.hosts.len(),
        off.calls,
        w.groups.first().map_or(0, Vec::len)
    );
    for (name, o) in [("off", off), ("window", window)] {
        out += &format!(
            "| {name} | {} | {} | {} | {:.1} | {:.1} | {:.1} |\n",
            o.placed,
            o.no_valid_host,
            o.fallbacks,
            o.utilisation[0] * 100.0,
            o.utilisation[1] * 100.0,
            o.utilisation[2] * 100.0
        );
    }
    out += &format!(
        "\nPredicted margin (NoValidHost of off − of window): {}\n",
        off.no_valid_host as i64 - window.no_valid_host as i64
    );
    out
}

/// Margins (NoValidHost of off − of window) over `seeds` workloads of `shape`: how many
/// seeds window wins, ties, loses, and the mean margin.
pub fn spread(shape: Shape, seeds: u64, cost: CostModel) -> String {
    let margins: Vec<i64> = (1..=seeds)
        .map(|seed| {
            let w = workload(seed, shape);
            run(&w, None).no_valid_host as i64 - run(&w, Some(cost)).no_valid_host as i64
        })
        .collect();
    let count = |keep: fn(i64) -> bool| margins.iter().filter(|&&m| keep(m)).count();
    format!(
        "{seeds} seeds, {shape:?}, {cost:?}: window fewer NoValidHost on {}, as many on {}, more on {}; mean margin {:.2}\n",
        count(|m| m > 0),
        count(|m| m == 0),
        count(|m| m < 0),
        margins.iter().sum::<i64>() as f64 / seeds as f64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_placement_tests_workload_is_seed_one_and_its_prediction_is_the_one_it_cites() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/ecsched_window.json"
        );
        let fixture: Workload =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let w = workload(1, Shape::TEST);
        assert_eq!(fixture, w);
        let (off, window) = (run(&w, None), run(&w, Some(CostModel::DotProductFree)));
        // tests/placement_claims.rs PREDICTED_MARGIN and its comment.
        assert_eq!((off.no_valid_host, window.no_valid_host), (6, 6));
        assert_eq!(off.calls, 36);
    }
}
