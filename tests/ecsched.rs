//! ECSched's solver (`parasol::control::ecsched`, docs/architecture.md §12) against an
//! independent one: on seeded random batches the optimum's cost equals networkx's
//! `min_cost_flow` (network simplex, in a cached virtualenv) on the same unpruned network,
//! and the pruned network reaches the same cost; every answer is a feasible placement.

#[path = "support/venv.rs"]
mod venv;

use parasol::control::ecsched::{
    build, solve, unscheduled_cost, BatchError, BatchRequest, Cluster, CostModel, Group,
    GroupPolicy, Placement, SlotRule, SolveOptions, Unscheduled,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

const INSTANCES: u64 = 1_200;
const MODELS: [CostModel; 4] = [
    CostModel::DotProduct,
    CostModel::MostLoaded,
    CostModel::DotProductFree,
    CostModel::MostLoadedFree,
];

struct Instance {
    cluster: Cluster,
    requests: Vec<BatchRequest>,
    opts: SolveOptions,
}

/// A batch of up to 30 requests on up to 200 hosts; some empty, some where little fits.
fn instance(seed: u64) -> Instance {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let classes = rng.gen_range(1..=3);
    let hosts = match seed % 50 {
        0 => 0,
        _ => rng.gen_range(1..=200),
    };
    let n = match seed % 37 {
        0 => 0,
        _ => rng.gen_range(1..=30),
    };
    let tight = rng.gen_bool(0.3);
    let (mut capacity, mut free) = (Vec::new(), Vec::new());
    for _ in 0..hosts {
        let size = [4u64, 8, 16, 32][rng.gen_range(0..4)];
        for _ in 0..classes {
            let load = if tight {
                rng.gen_range(0.6..1.0)
            } else {
                rng.gen_range(0.0..0.8)
            };
            capacity.push(size);
            free.push(size - (size as f64 * load) as u64);
        }
    }
    let groups = [
        Group {
            id: 1,
            policy: GroupPolicy::Affinity,
        },
        Group {
            id: 2,
            policy: GroupPolicy::AntiAffinity,
        },
        Group {
            id: 3,
            policy: GroupPolicy::AntiAffinity,
        },
    ];
    let requests = (0..n)
        .map(|_| BatchRequest {
            demand: (0..classes).map(|_| rng.gen_range(0..=6)).collect(),
            hosts: (hosts > 0 && rng.gen_bool(0.06)).then(|| {
                (0..rng.gen_range(1..=3))
                    .map(|_| rng.gen_range(0..hosts) as u32)
                    .collect()
            }),
            group: rng
                .gen_bool(0.25)
                .then(|| groups[rng.gen_range(0..groups.len())]),
        })
        .collect();
    let opts = SolveOptions {
        cost: MODELS[rng.gen_range(0..MODELS.len())],
        slots: if rng.gen_bool(0.5) {
            SlotRule::OnePerHost
        } else {
            SlotRule::AsManyAsFit
        },
        unscheduled: if rng.gen_bool(0.5) {
            Unscheduled::Zero
        } else {
            Unscheduled::Penalty
        },
        prune: false,
    };
    Instance {
        cluster: Cluster::new(classes, capacity, free).expect("valid cluster"),
        requests,
        opts,
    }
}

/// The placement keeps every request's resources within its host's free amounts, its machine
/// affinity, and its group's policy.
fn assert_feasible(inst: &Instance, p: &Placement, seed: u64) {
    let c = &inst.cluster;
    let mut used = vec![0u64; c.hosts() * c.classes()];
    for (r, h) in inst.requests.iter().zip(&p.hosts) {
        let Some(h) = *h else { continue };
        if let Some(allowed) = &r.hosts {
            assert!(allowed.contains(&h), "seed {seed}: machine affinity broken");
        }
        for (k, d) in r.demand.iter().enumerate() {
            used[h as usize * c.classes() + k] += d;
        }
    }
    if inst.opts.slots == SlotRule::OnePerHost {
        // One unit per host: an affinity group (id 1) counts once.
        let mut units_on = vec![0usize; c.hosts()];
        let mut group_counted = false;
        for (r, h) in inst.requests.iter().zip(&p.hosts) {
            let Some(h) = *h else { continue };
            if r.group.map(|g| g.id) == Some(1) {
                if group_counted {
                    continue;
                }
                group_counted = true;
            }
            units_on[h as usize] += 1;
        }
        assert!(
            units_on.iter().all(|&u| u <= 1),
            "seed {seed}: two units on one host under one slot per host"
        );
    }
    for h in 0..c.hosts() {
        for k in 0..c.classes() {
            assert!(
                used[h * c.classes() + k] <= c.free(h)[k],
                "seed {seed}: host {h} over"
            );
        }
    }
    for g in [1, 2, 3] {
        let on: Vec<_> = inst
            .requests
            .iter()
            .zip(&p.hosts)
            .filter(|(r, _)| r.group.map(|x| x.id) == Some(g))
            .map(|(_, h)| *h)
            .collect();
        if g == 1 {
            assert!(
                on.windows(2).all(|w| w[0] == w[1]),
                "seed {seed}: affinity split"
            );
        } else {
            let mut placed: Vec<_> = on.iter().flatten().collect();
            let all = placed.len();
            placed.sort();
            placed.dedup();
            assert_eq!(
                placed.len(),
                all,
                "seed {seed}: anti-affinity shares a host"
            );
        }
    }
}

#[test]
fn optimal_cost_equals_networkx_min_cost_flow_pruned_and_unpruned() {
    let requirements = include_str!("ecsched/requirements.txt");
    let venv = venv::cached_venv("networkx-venv", requirements, &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/ecsched/networkx_mcf.py");
    let mut py = Command::new(venv.join("bin/python"))
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python");
    let mut stdin = py.stdin.take().expect("stdin");
    let mut answers = BufReader::new(py.stdout.take().expect("stdout")).lines();
    let (mut placed_somewhere, mut left_out) = (0, 0);
    for seed in 0..INSTANCES {
        let inst = instance(seed);
        let graph = build(&inst.cluster, &inst.requests, &inst.opts).expect("graph");
        let penalty = unscheduled_cost(&graph, inst.opts.unscheduled);
        let units: Vec<_> = graph
            .units
            .iter()
            .zip(&graph.edges)
            .map(|(u, e)| json!({"edges": e, "apart": u.apart}))
            .collect();
        let line = json!({
            "units": units,
            "slots": graph.slots,
            "unscheduled": penalty,
            "gated": inst.opts.slots == SlotRule::AsManyAsFit,
        });
        writeln!(stdin, "{line}").expect("write");
        let theirs: i64 = answers
            .next()
            .expect("answer")
            .expect("line")
            .trim()
            .parse()
            .expect("int");

        let full = solve(&inst.cluster, &inst.requests, &inst.opts).expect("solve");
        let pruned_opts = SolveOptions {
            prune: true,
            ..inst.opts
        };
        let pruned = solve(&inst.cluster, &inst.requests, &pruned_opts).expect("solve pruned");
        let unscheduled_units = graph
            .units
            .iter()
            .filter(|u| full.hosts[u.members[0]].is_none())
            .count() as i64;
        assert_eq!(
            full.cost + unscheduled_units * penalty,
            theirs,
            "seed {seed}: unpruned optimum differs from networkx ({:?})",
            inst.opts
        );
        let pruned_left = graph
            .units
            .iter()
            .filter(|u| pruned.hosts[u.members[0]].is_none())
            .count() as i64;
        assert_eq!(
            pruned.cost + pruned_left * penalty,
            theirs,
            "seed {seed}: pruning changed the optimum ({:?})",
            inst.opts
        );
        // The reported cost is the cost of the reported placement.
        let recomputed: i64 = graph
            .units
            .iter()
            .zip(&graph.edges)
            .filter_map(|(u, e)| {
                let h = pruned.hosts[u.members[0]]?;
                Some(
                    e.iter()
                        .find(|(x, _)| *x == h)
                        .expect("placed on an edge")
                        .1,
                )
            })
            .sum();
        assert_eq!(recomputed, pruned.cost, "seed {seed}");
        assert_feasible(&inst, &full, seed);
        assert_feasible(&inst, &pruned, seed);
        placed_somewhere += usize::from(full.hosts.iter().any(Option::is_some));
        left_out += usize::from(full.unscheduled() > 0);
    }
    drop(stdin);
    assert!(py.wait().expect("python exit").success());
    // The instances cover both outcomes, not only easy ones.
    assert!(
        placed_somewhere > 500 && left_out > 100,
        "{placed_somewhere} / {left_out}"
    );
}

#[test]
fn empty_and_impossible_batches_answer_cleanly() {
    let none = Cluster::new(2, vec![], vec![]).expect("no hosts");
    let one = BatchRequest {
        demand: vec![1, 1],
        ..Default::default()
    };
    let p = solve(&none, &[one.clone(), one.clone()], &SolveOptions::service()).expect("solve");
    assert_eq!(p.hosts, vec![None, None]);
    let full = Cluster::new(2, vec![8, 8], vec![0, 8]).expect("full host");
    let p = solve(
        &full,
        std::slice::from_ref(&one),
        &SolveOptions::paper(CostModel::DotProduct),
    )
    .expect("solve");
    assert_eq!((p.hosts, p.cost), (vec![None], 0));
    let p = solve(&full, &[], &SolveOptions::service()).expect("solve");
    assert!(p.hosts.is_empty());
    assert_eq!(
        Cluster::new(2, vec![8, 8, 8], vec![8, 8, 8]).err(),
        Some(BatchError::ClusterShape {
            classes: 2,
            capacity: 3,
            free: 3
        })
    );
    let bad = BatchRequest {
        demand: vec![1],
        ..Default::default()
    };
    let err = solve(&full, &[one, bad], &SolveOptions::service()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "request 1 has 1 demand amounts, the cluster 2 classes"
    );
}
