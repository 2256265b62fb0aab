//! Golden test: Parasol's selections and alternates against Nova 34's own `SchedulerManager`
//! (`_schedule`, `_consume_selected_host`, `_get_alternate_hosts`, run in the cached Nova
//! virtualenv by `tests/nova_manager/run.py`) on seeded multi-cell, multi-create,
//! server-group cases. Parasol decides each case through `Scheduler::select` on a SQLite
//! ledger holding the same hosts, usage, instances and cells, with the `filter`, `caching`
//! and `asc` backends (`apsr` samples at random and `[batch]` solves an assignment: neither
//! is Nova's order). Weights are made distinct by construction (distinct free memory and
//! irregular multipliers) and `host_subset_size` is 1, so neither side draws at random.
//!
//! Placement's two answers in Nova's run — the allocation candidates when the call starts and
//! each claim — are computed by `run.py` from the case's inventories and usage (room in every
//! class), as Placement computes them, rather than by a running Placement.

#[path = "support/venv.rs"]
mod venv;

use parasol::clock::{ManualClock, SharedClock};
use parasol::configuration::{BackendKind, Settings};
use parasol::domain::{ComputeFacts, Resources};
use parasol::ledger::{HostRegistration, Ledger};
use parasol::nova::SelectDestinationsArgs;
use parasol::scheduling::{Scheduler, SelectError};
use parasol::stats::Stats;
use parasol::table::{NodeRecord, NodeRecords};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

const NOW_MS: i64 = 1_000_000;
const CASES: usize = 120;
const CELLS: [&str; 3] = [
    "c0000000-0000-4000-8000-00000000000a",
    "c0000000-0000-4000-8000-00000000000b",
    "c0000000-0000-4000-8000-00000000000c",
];
const FILTERS: [&str; 3] = [
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
    "NumInstancesFilter",
];
/// Parasol's weigher names and Nova's classes.
const WEIGHERS: [(&str, &str); 7] = [
    ("RAMWeigher", "nova.scheduler.weights.ram.RAMWeigher"),
    ("CPUWeigher", "nova.scheduler.weights.cpu.CPUWeigher"),
    ("DiskWeigher", "nova.scheduler.weights.disk.DiskWeigher"),
    ("IoOpsWeigher", "nova.scheduler.weights.io_ops.IoOpsWeigher"),
    (
        "NumInstancesWeigher",
        "nova.scheduler.weights.num_instances.NumInstancesWeigher",
    ),
    (
        "ServerGroupSoftAffinityWeigher",
        "nova.scheduler.weights.affinity.ServerGroupSoftAffinityWeigher",
    ),
    (
        "ServerGroupSoftAntiAffinityWeigher",
        "nova.scheduler.weights.affinity.ServerGroupSoftAntiAffinityWeigher",
    ),
];

fn uuid(kind: u32, n: usize) -> String {
    format!("{kind:08x}-0000-4000-8000-{n:012}")
}

/// One host of a case: capacity, cell, and the instances already on it (uuid, demand).
struct Host {
    name: String,
    uuid: String,
    cell: &'static str,
    total: (i64, i64, i64),
    /// Placement's `reserved` of VCPU, MEMORY_MB, DISK_GB (Nova's `reserved_host_cpus`,
    /// `reserved_host_memory_mb`, `reserved_host_disk_mb` / 1024).
    reserved: (i64, i64, i64),
    /// The allocation ratios of VCPU, MEMORY_MB, DISK_GB.
    ratio: (f64, f64, f64),
    instances: Vec<(String, (i64, i64, i64))>,
}

impl Host {
    fn used(&self) -> (i64, i64, i64) {
        self.instances
            .iter()
            .fold((0, 0, 0), |a, (_, d)| (a.0 + d.0, a.1 + d.1, a.2 + d.2))
    }
}

/// One case: the configuration both sides run with, the hosts and the call.
struct Case {
    filters_max_instances: i64,
    multipliers: [f64; 7],
    max_attempts: usize,
    flavor: (i64, i64, i64),
    hosts: Vec<Host>,
    instances: Vec<String>,
    /// (policy, members, hosts of the members already placed).
    group: Option<(&'static str, Vec<String>, Vec<String>)>,
}

fn case(rng: &mut impl Rng, n: usize) -> Case {
    let flavor = (
        rng.gen_range(1..=2),
        *[512, 1024, 2048].choose(rng).unwrap(),
        rng.gen_range(1..=10),
    );
    let count = rng.gen_range(3..=8);
    let cells = rng.gen_range(1..=3);
    // Distinct memory totals: no two hosts weigh the same.
    let mut memory: Vec<i64> = (4..=24).map(|k| k * 384).collect();
    memory.shuffle(rng);
    let mut next_instance = 0;
    // Reserved memory alike on every host (free memory stays distinct); allocation ratios
    // and reserved VCPU and disk per host, where Nova's weighers' free amounts (no ratio for
    // memory and disk, reserved counted as used) part from the capacity Placement tests.
    let reserved_memory = *[0, 0, 512].choose(rng).unwrap();
    let mut hosts: Vec<Host> = (0..count)
        .map(|h| {
            let total = (rng.gen_range(2..=8), memory[h], rng.gen_range(10..=60));
            let reserved = (
                if total.0 >= 4 {
                    rng.gen_range(0..=1)
                } else {
                    0
                },
                reserved_memory,
                *[0, 0, 2].choose(rng).unwrap(),
            );
            let ratio = (
                *[1.0, 1.0, 1.5, 4.0].choose(rng).unwrap(),
                *[1.0, 1.0, 1.5, 0.9].choose(rng).unwrap(),
                *[1.0, 1.0, 2.0, 0.8].choose(rng).unwrap(),
            );
            let mut instances = Vec::new();
            for _ in 0..rng.gen_range(0..=2) {
                next_instance += 1;
                let d = (1, 256, 1);
                instances.push((uuid(0xe0 + n as u32, next_instance), d));
            }
            Host {
                name: format!("host{}", h + 1),
                uuid: uuid(0x10 + n as u32, h + 1),
                cell: CELLS[rng.gen_range(0..cells)],
                total,
                reserved,
                ratio,
                instances,
            }
        })
        .collect();
    hosts.shuffle(rng);
    let call = rng.gen_range(1..=4);
    let instances: Vec<String> = (0..call).map(|i| uuid(0xa0 + n as u32, i + 1)).collect();
    let group = match rng.gen_range(0..6) {
        0 | 1 => None,
        k => {
            let policy = [
                "affinity",
                "anti-affinity",
                "soft-affinity",
                "soft-anti-affinity",
            ][k - 2];
            // Some instances already on the hosts are members.
            let mut members = Vec::new();
            let mut on = Vec::new();
            for h in &hosts {
                for (u, _) in &h.instances {
                    if rng.gen_bool(0.3) {
                        members.push(u.clone());
                        if !on.contains(&h.name) {
                            on.push(h.name.clone());
                        }
                    }
                }
            }
            // An affinity group's members all on one host, as Nova keeps them.
            if policy == "affinity" && on.len() > 1 {
                let keep = on[0].clone();
                let of_keep: Vec<String> = hosts
                    .iter()
                    .filter(|h| h.name == keep)
                    .flat_map(|h| h.instances.iter().map(|(u, _)| u.clone()))
                    .collect();
                members.retain(|m| of_keep.contains(m));
                on = vec![keep];
            }
            members.extend(instances.iter().cloned());
            Some((policy, members, on))
        }
    };
    let m = |rng: &mut dyn rand::RngCore, opts: &[f64]| opts[rng.gen_range(0..opts.len())];
    Case {
        filters_max_instances: rng.gen_range(2..=5),
        multipliers: [
            m(rng, &[1.0, 1.37]),
            m(rng, &[0.0, 0.61, 1.0]),
            m(rng, &[0.0, 0.29]),
            m(rng, &[0.0, -1.0]),
            m(rng, &[0.0, -0.43]),
            m(rng, &[1.0, 2.3]),
            m(rng, &[1.0, 1.9]),
        ],
        max_attempts: rng.gen_range(2..=5),
        flavor,
        hosts,
        instances,
        group,
    }
}

/// The case as `run.py` reads it.
fn nova_input(c: &Case) -> Value {
    let hosts: Vec<Value> = c
        .hosts
        .iter()
        .map(|h| {
            let used = h.used();
            json!({"host": h.name, "uuid": h.uuid, "cell": h.cell, "vcpus": h.total.0,
                "memory_mb": h.total.1, "disk_gb": h.total.2, "used": [used.0, used.1, used.2],
                "reserved": [h.reserved.0, h.reserved.1, h.reserved.2],
                "ratio": [h.ratio.0, h.ratio.1, h.ratio.2],
                "instances": h.instances.iter().map(|(u, _)| u).collect::<Vec<_>>()})
        })
        .collect();
    let weighers: Vec<&str> = WEIGHERS.iter().map(|w| w.1).collect();
    let [ram, cpu, disk, io, num, soft, anti] = c.multipliers;
    json!({
        "config": {"enabled_filters": FILTERS, "weight_classes": weighers, "host_subset_size": 1,
            "max_instances_per_host": c.filters_max_instances,
            "ram_weight_multiplier": ram, "cpu_weight_multiplier": cpu,
            "disk_weight_multiplier": disk, "io_ops_weight_multiplier": io,
            "num_instances_weight_multiplier": num, "soft_affinity_weight_multiplier": soft,
            "soft_anti_affinity_weight_multiplier": anti},
        "max_attempts": c.max_attempts,
        "flavor": [c.flavor.0, c.flavor.1, c.flavor.2],
        "instances": c.instances,
        "group": c.group.as_ref().map(|(p, m, on)| json!({"policy": p, "members": m, "hosts": on})),
        "hosts": hosts,
    })
}

fn object(name: &str, version: &str, data: Value) -> Value {
    json!({"nova_object.name": name, "nova_object.namespace": "nova",
           "nova_object.version": version, "nova_object.data": data})
}

/// The call as nova-conductor sends it for the case (a build: objects with alternates).
fn call(c: &Case) -> SelectDestinationsArgs {
    call_reading(c, true)
}

/// The call, its caller reading alternates or not (a move's `return_alternates` false).
fn call_reading(c: &Case, alternates: bool) -> SelectDestinationsArgs {
    let (vcpus, memory_mb, root_gb) = c.flavor;
    let flavor = object(
        "Flavor",
        "1.2",
        json!({"name": "golden", "flavorid": "golden", "vcpus": vcpus, "memory_mb": memory_mb,
            "root_gb": root_gb, "ephemeral_gb": 0, "swap": 0, "extra_specs": {}}),
    );
    let mut data = json!({"flavor": flavor, "instance_uuid": c.instances[0],
        "num_instances": c.instances.len(), "project_id": "p", "user_id": "u"});
    if let Some((policy, members, hosts)) = &c.group {
        data["instance_group"] = object(
            "InstanceGroup",
            "1.11",
            json!({"uuid": "11111111-2222-4333-8444-555555555555", "policy": policy,
                "members": members, "hosts": hosts, "_rules": {}}),
        );
        data["scheduler_hints"] = json!({"group": ["11111111-2222-4333-8444-555555555555"]});
    }
    let body = json!({"spec_obj": object("RequestSpec", "1.14", data),
        "instance_uuids": c.instances, "return_objects": true, "return_alternates": alternates});
    SelectDestinationsArgs::from_http_body(body.to_string().as_bytes()).unwrap()
}

/// Parasol's answer for the case on `backend`: service hosts per instance, or NoValidHost.
async fn parasol(c: &Case, backend: BackendKind) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let scheduler = scheduler_for(c, backend, &dir).await;
    let answer = match scheduler.select(call(c)).await {
        Ok(answer) => answer,
        Err(SelectError::NoValidHost { .. }) => return json!("NoValidHost"),
        Err(e) => panic!("{e}"),
    };
    scheduler.backend().stop();
    let hosts: Vec<Vec<String>> = answer
        .selections
        .iter()
        .map(|s| s.iter().map(|s| s.service_host.clone()).collect())
        .collect();
    json!(hosts)
}

/// A scheduler on `backend` over a SQLite ledger in `dir` holding the case's hosts, usage,
/// instances and cells, configured as the case says.
async fn scheduler_for(c: &Case, backend: BackendKind, dir: &tempfile::TempDir) -> Scheduler {
    let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let ledger = Ledger::open(&url, 2).await.unwrap();
    let mut records = HashMap::new();
    for h in &c.hosts {
        let mut reg = HostRegistration::simple(&h.name, &h.uuid, h.total.0, h.total.1, h.total.2);
        let reserved = [h.reserved.0, h.reserved.1, h.reserved.2];
        let ratio = [h.ratio.0, h.ratio.1, h.ratio.2];
        for (k, (_, inv)) in reg.inventories.iter_mut().enumerate() {
            *inv = inv.with(reserved[k], ratio[k]);
        }
        let id = ledger.register_host(&reg, NOW_MS).await.unwrap();
        for (u, d) in &h.instances {
            let demand = Resources::new(d.0, d.1, d.2);
            ledger.claim(id, u, &demand, NOW_MS).await.unwrap();
        }
        let facts = ComputeFacts {
            cell_uuid: Some(h.cell.to_string()),
            ..ComputeFacts::default()
        };
        let record = NodeRecord {
            service_host: h.name.as_str().into(),
            facts: Arc::new(facts),
            up: true,
            disabled: false,
            forced_down: false,
        };
        records.insert(h.uuid.clone(), record);
    }
    ledger.table().set_records(Arc::new(NodeRecords {
        by_uuid: records,
        read: true,
        began_ms: NOW_MS,
    }));
    let clock: SharedClock = Arc::new(ManualClock::new(NOW_MS));
    let mut settings = Settings::default();
    settings.scheduler.seed = Some(7);
    settings.scheduler.backend = backend;
    settings.scheduler.max_attempts = c.max_attempts;
    let p = &mut settings.policy;
    p.enabled_filters = FILTERS.iter().map(|s| s.to_string()).collect();
    p.weight_classes = WEIGHERS.iter().map(|w| w.0.to_string()).collect();
    p.host_subset_size = 1;
    p.max_instances_per_host = c.filters_max_instances;
    [
        p.ram_weight_multiplier,
        p.cpu_weight_multiplier,
        p.disk_weight_multiplier,
        p.io_ops_weight_multiplier,
        p.num_instances_weight_multiplier,
        p.soft_affinity_weight_multiplier,
        p.soft_anti_affinity_weight_multiplier,
    ] = c.multipliers;
    let stats = Arc::new(Stats::new(clock.clone(), 60));
    Scheduler::start(Arc::new(settings), ledger, stats, clock)
        .await
        .unwrap()
}

/// The alternates pass reads the hosts once more, and only when the caller reads alternates:
/// a multi-create of 3 on 5 hosts reads 3 × 5 host states without it, 4 × 5 with it.
#[tokio::test]
async fn a_multi_create_pays_for_the_alternates_pass_only_when_its_caller_reads_them() {
    let hosts = (1..=5)
        .map(|h| Host {
            name: format!("host{h}"),
            uuid: uuid(0x77, h),
            cell: CELLS[0],
            total: (8, 2048 * h as i64, 80),
            reserved: (0, 0, 0),
            ratio: (1.0, 1.0, 1.0),
            instances: Vec::new(),
        })
        .collect();
    let c = Case {
        filters_max_instances: 50,
        multipliers: [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0],
        max_attempts: 3,
        flavor: (1, 512, 1),
        hosts,
        instances: (1..=3).map(|i| uuid(0x78, i)).collect(),
        group: None,
    };
    for (alternates, queries, lengths) in [(true, 20, 3), (false, 15, 1)] {
        let dir = tempfile::tempdir().unwrap();
        let scheduler = scheduler_for(&c, BackendKind::Filter, &dir).await;
        let answer = scheduler
            .select(call_reading(&c, alternates))
            .await
            .unwrap();
        let got: Vec<usize> = answer.selections.iter().map(Vec::len).collect();
        assert_eq!(got, vec![lengths; 3], "alternates read: {alternates}");
        let totals = scheduler.stats().backend("filter").totals();
        assert_eq!(totals.queries, queries, "alternates read: {alternates}");
        scheduler.backend().stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parasol_selections_and_alternates_equal_nova_schedulermanagers() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4242);
    let cases: Vec<Case> = (0..CASES).map(|n| case(&mut rng, n)).collect();
    let input = Value::Array(cases.iter().map(nova_input).collect()).to_string();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nova_manager/run.py");
    let nova: Vec<Value> =
        serde_json::from_slice(&venv::run_in_nova(&script, &[], input.as_bytes())).unwrap();
    assert_eq!(nova.len(), CASES);
    let mut shape = Shape::default();
    let mut failures = Vec::new();
    for (i, (c, want)) in cases.iter().zip(&nova).enumerate() {
        shape.count(c, want);
        for backend in [BackendKind::Filter, BackendKind::Caching, BackendKind::Asc] {
            let got = parasol(c, backend).await;
            if &got != want {
                failures.push(format!(
                    "case {i} ({}): nova {want}, parasol {got}\n  {}",
                    backend.as_str(),
                    nova_input(c)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} answers differ:\n{}",
        failures.len(),
        3 * CASES,
        failures.join("\n")
    );
    println!("{} cases, 3 backends: {shape:?}", CASES);
    shape.assert_covers();
}

/// What the cases reach, so that the test cannot pass on cases that miss the point.
#[derive(Default, Debug)]
struct Shape {
    multi_cell_multi_create: usize,
    affinity_multi: usize,
    anti_affinity_multi: usize,
    with_alternates: usize,
    cross_cell_alternate_avoided: usize,
    no_valid_host: usize,
}

impl Shape {
    fn count(&mut self, c: &Case, want: &Value) {
        let cells: std::collections::HashSet<_> = c.hosts.iter().map(|h| h.cell).collect();
        let multi = c.instances.len() > 1;
        self.multi_cell_multi_create += usize::from(multi && cells.len() > 1);
        let policy = c.group.as_ref().map(|g| g.0);
        self.affinity_multi += usize::from(multi && policy == Some("affinity"));
        self.anti_affinity_multi += usize::from(multi && policy == Some("anti-affinity"));
        let Some(per_instance) = want.as_array() else {
            self.no_valid_host += 1;
            return;
        };
        let alternates = per_instance
            .iter()
            .any(|s| s.as_array().is_some_and(|s| s.len() > 1));
        self.with_alternates += usize::from(alternates);
        self.cross_cell_alternate_avoided += usize::from(multi && cells.len() > 1 && alternates);
    }

    fn assert_covers(&self) {
        assert!(self.multi_cell_multi_create >= 30, "{self:?}");
        assert!(self.affinity_multi >= 5, "{self:?}");
        assert!(self.anti_affinity_multi >= 5, "{self:?}");
        assert!(self.with_alternates >= 50, "{self:?}");
        assert!(self.cross_cell_alternate_avoided >= 10, "{self:?}");
        assert!(self.no_valid_host >= 1, "{self:?}");
    }
}
