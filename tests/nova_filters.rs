//! Differential test: Parasol's filters against Nova 34's own classes (in the cached Nova
//! virtualenv) on seeded random hosts and requests — I/O and instance limits with aggregate
//! overrides, type affinity, isolated hosts, JSON queries, different/same host hints. Each
//! host's verdict must be equal; where Nova raises, Parasol passes no host.

#[path = "support/venv.rs"]
mod venv;

use parasol::domain::{
    HostAggregateMetadata, HostScan, HostState, RequestContext, Resources, SchedulerHints,
};
use parasol::policy::registry::builtin_filters;
use parasol::policy::{FilterEnv, PolicyConfig};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

const FILTERS: [&str; 9] = [
    "IoOpsFilter",
    "AggregateIoOpsFilter",
    "NumInstancesFilter",
    "AggregateNumInstancesFilter",
    "AggregateTypeAffinityFilter",
    "IsolatedHostsFilter",
    "JsonFilter",
    "DifferentHostFilter",
    "SameHostFilter",
];

fn pick<'a, T>(rng: &mut impl Rng, items: &'a [T]) -> &'a T {
    &items[rng.gen_range(0..items.len())]
}

/// A random JSON query over a few attributes, operators and literals (some ill-typed).
fn query(rng: &mut impl Rng, depth: u32) -> Value {
    let ops = ["=", "<", ">", "<=", ">=", "in", "not", "or", "and"];
    let op = *pick(rng, &ops);
    let n = rng.gen_range(0..4);
    let mut items = vec![json!(op)];
    for _ in 0..n {
        let arg = match rng.gen_range(0..8) {
            0 if depth < 3 => query(rng, depth + 1),
            1 => json!(*pick(
                rng,
                &[
                    "$free_ram_mb",
                    "$free_disk_mb",
                    "$num_instances",
                    "$num_io_ops"
                ]
            )),
            2 => json!(*pick(rng, &["$host", "$nosuch", "", "host1"])),
            3 => json!(rng.gen_range(0..4096)),
            4 => json!(rng.gen_bool(0.5)),
            5 => json!(rng.gen_range(0..6) as f64 + 0.5),
            _ => json!(*pick(rng, &["$num_io_ops", "$free_ram_mb"])),
        };
        items.push(arg);
    }
    Value::Array(items)
}

#[test]
fn parasol_filters_equal_novas_on_seeded_random_cases() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
    let mut cases = Vec::new();
    let mut parasol = Vec::new();
    let names: Vec<String> = FILTERS.iter().map(|s| s.to_string()).collect();
    let limits = ["3", "5", "x", " 4 ", "1_0", "-1"];
    for case in 0..150 {
        let cfg = PolicyConfig {
            max_io_ops_per_host: rng.gen_range(0..6),
            max_instances_per_host: rng.gen_range(1..6),
            isolated_hosts: if rng.gen_bool(0.5) {
                vec!["host1".into()]
            } else {
                vec![]
            },
            isolated_images: if rng.gen_bool(0.5) {
                vec!["img-iso".into()]
            } else {
                vec![]
            },
            restrict_isolated_hosts_to_isolated_images: rng.gen_bool(0.5),
            ..PolicyConfig::default()
        };
        let filters = builtin_filters().build(&names, &cfg).unwrap();
        let flavor = pick(&mut rng, &["m1.small", "m1.big"]).to_string();
        let image = match rng.gen_range(0..3) {
            0 => None,
            1 => Some("img-iso".to_string()),
            _ => Some("img-free".to_string()),
        };
        // Hosts: usage, instances (uuids) and aggregates.
        let mut hosts = Vec::new();
        let mut host_json = Vec::new();
        let mut aggregates: Vec<(Vec<String>, BTreeMap<String, String>)> = Vec::new();
        let mut instances_of: Vec<(String, String)> = Vec::new();
        for id in 1..=4 {
            let name = format!("host{id}");
            let used = Resources::new(0, rng.gen_range(0..4096), rng.gen_range(0..40));
            let mut h = HostState::synthetic(id, Resources::new(8, 4096, 40), used);
            h.num_io_ops = rng.gen_range(0..6);
            h.num_instances = rng.gen_range(0..6);
            let mut aggs = Vec::new();
            for _ in 0..rng.gen_range(0..3) {
                let mut m = BTreeMap::new();
                if rng.gen_bool(0.5) {
                    m.insert(
                        "max_io_ops_per_host".to_string(),
                        pick(&mut rng, &limits).to_string(),
                    );
                }
                if rng.gen_bool(0.5) {
                    m.insert(
                        "max_instances_per_host".to_string(),
                        pick(&mut rng, &limits).to_string(),
                    );
                }
                if rng.gen_bool(0.5) {
                    let t = *pick(&mut rng, &["m1.small", "m1.big", "m1.small, m1.big", "x"]);
                    m.insert("instance_type".to_string(), t.to_string());
                }
                aggs.push(m.clone());
                aggregates.push((vec![name.clone()], m));
            }
            let insts: Vec<String> = (0..rng.gen_range(0..3))
                .map(|k| format!("i-{id}-{k}"))
                .collect();
            for u in &insts {
                instances_of.push((u.clone(), name.clone()));
            }
            host_json.push(json!({
                "host": name, "num_io_ops": h.num_io_ops, "num_instances": h.num_instances,
                "free_ram_mb": 4096 - used.memory_mb(), "free_disk_mb": (40 - used.disk_gb()) * 1024,
                "aggregates": aggs, "instances": insts,
            }));
            hosts.push(h);
        }
        // Hints as Nova receives them (lists of strings).
        let mut hints: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let uuid_pool = ["i-1-0", "i-2-1", "i-3-0", "unknown"];
        if rng.gen_bool(0.5) {
            hints.insert(
                "different_host".into(),
                (0..rng.gen_range(0..3))
                    .map(|_| pick(&mut rng, &uuid_pool).to_string())
                    .collect(),
            );
        }
        if rng.gen_bool(0.5) {
            hints.insert(
                "same_host".into(),
                (0..rng.gen_range(0..3))
                    .map(|_| pick(&mut rng, &uuid_pool).to_string())
                    .collect(),
            );
        }
        if rng.gen_bool(0.7) {
            hints.insert("query".into(), vec![query(&mut rng, 0).to_string()]);
        }
        let (resolved, different, same) = SchedulerHints::read(&hints);
        let resolved = resolved.map(|mut r| {
            for (uuid, host) in &instances_of {
                if different.contains(uuid) {
                    r.different_host.as_mut().unwrap().insert(host.clone());
                }
                if same.contains(uuid) {
                    r.same_host.as_mut().unwrap().insert(host.clone());
                }
            }
            Arc::new(r)
        });
        let mut req = RequestContext::with_demand(
            format!("inst-{case}"),
            flavor.clone(),
            Resources::new(1, 1, 1),
        );
        req.flavor_name = Some(flavor.clone());
        req.image_id = image.clone();
        req.hints = resolved;
        let meta = HostAggregateMetadata::new(aggregates.iter().map(|(h, m)| (h.as_slice(), m)));
        req.aggregate_metadata = (!meta.is_empty()).then(|| Arc::new(meta));
        let env = FilterEnv::without_heartbeats();
        let verdicts: Vec<BTreeMap<String, bool>> = hosts
            .iter()
            .map(|h| {
                filters
                    .iter()
                    .map(|f| (f.name().to_string(), f.passes(h, &req, &env)))
                    .collect()
            })
            .collect();
        parasol.push(verdicts);
        cases.push(json!({
            "config": {
                "max_io_ops_per_host": cfg.max_io_ops_per_host,
                "max_instances_per_host": cfg.max_instances_per_host,
                "isolated_hosts": cfg.isolated_hosts,
                "isolated_images": cfg.isolated_images,
                "restrict_isolated_hosts_to_isolated_images": cfg.restrict_isolated_hosts_to_isolated_images,
            },
            "hints": hints, "flavor_name": flavor, "image_id": image, "hosts": host_json,
        }));
    }
    let nova: Vec<Vec<BTreeMap<String, Value>>> =
        serde_json::from_slice(&through_nova("run.py", &cases)).unwrap();
    assert_eq!(nova.len(), parasol.len());
    let (mut compared, mut raised) = (0, 0);
    for (i, (n_case, p_case)) in nova.iter().zip(&parasol).enumerate() {
        for (j, (n_host, p_host)) in n_case.iter().zip(p_case).enumerate() {
            for name in FILTERS {
                let want = match &n_host[name] {
                    Value::Bool(b) => *b,
                    _ => {
                        raised += 1;
                        false
                    }
                };
                assert_eq!(
                    p_host[name],
                    want,
                    "case {i} host{} {name}: {}",
                    j + 1,
                    cases[i]
                );
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 150 * 4 * FILTERS.len());
    assert!(raised > 0, "the cases reach queries Nova raises on");
}

const WEIGHERS: [&str; 11] = [
    "RAMWeigher",
    "CPUWeigher",
    "DiskWeigher",
    "IoOpsWeigher",
    "BuildFailureWeigher",
    "CrossCellWeigher",
    "HypervisorVersionWeigher",
    "ImagePropertiesWeigher",
    "MetricsWeigher",
    "NumInstancesWeigher",
    "PCIWeigher",
];

/// A host with seeded random VCPU, MEMORY_MB and DISK_GB inventories (allocation ratios
/// above, at and below 1, fractional ones among them; reserved amounts) and usage, up to past
/// its capacity (an allocation ratio lowered after the fact); with the same host as Nova's
/// compute node describes it (`weigh.py` turns that into Nova's `HostState`): total, the
/// `reserved_host_*` options Placement's `reserved` comes from, the instances' usage and the
/// ratios. DISK_GB's reserved is whole GB: Placement's is the option's MB rounded up, the
/// resource tracker's rounded down (docs/weighers.md).
fn resource_host(rng: &mut impl Rng, id: i64) -> (HostState, Value) {
    use parasol::domain::{ClassId, HostProfile, Inventory};
    let total = [
        *pick(rng, &[4, 7, 8, 16, 48]),
        *pick(rng, &[2048, 4096, 8192, 12_000]),
        *pick(rng, &[20, 40, 80, 101]),
    ];
    let reserved = [
        *pick(rng, &[0, 0, 1, 2]),
        *pick(rng, &[0, 0, 512, 1000]),
        *pick(rng, &[0, 0, 1, 5]),
    ];
    let ratio = [
        *pick(rng, &[1.0, 4.0, 16.0, 1.5, 1.3, 0.5, 0.9]),
        *pick(rng, &[1.0, 1.0, 1.5, 0.9, 1.25]),
        *pick(rng, &[1.0, 1.0, 2.0, 0.75, 1.1]),
    ];
    let classes = [ClassId::VCPU, ClassId::MEMORY_MB, ClassId::DISK_GB];
    let inventories: Vec<_> = (0..3)
        .map(|c| {
            let inv = Inventory::of(total[c]).with(reserved[c], ratio[c]);
            (classes[c], inv)
        })
        .collect();
    // Up to a few past the capacity, in whole 256 MB for memory.
    let usable: Vec<i64> = inventories.iter().map(|(_, inv)| inv.usable()).collect();
    let used = Resources::new(
        rng.gen_range(0..=usable[0] + 2),
        rng.gen_range(0..=usable[1] / 256 + 4) * 256,
        rng.gen_range(0..=usable[2] + 5),
    );
    let name = format!("host{id}");
    let uuid = format!("00000000-0000-4000-8000-{id:012}");
    let profile = HostProfile::new(&name, &name, &uuid, "nova", inventories);
    let mut h = HostState::new(parasol::domain::HostId(id), Arc::new(profile));
    h.used = used;
    let fields = json!({
        "vcpus": total[0], "memory_mb": total[1], "local_gb": total[2],
        "reserved_host_cpus": reserved[0], "reserved_host_memory_mb": reserved[1],
        "reserved_host_disk_mb": reserved[2] * 1024,
        "cpu_allocation_ratio": ratio[0], "ram_allocation_ratio": ratio[1],
        "disk_allocation_ratio": ratio[2],
        "used_vcpus": used.vcpu(), "used_memory_mb": used.memory_mb(),
        "used_disk_gb": used.disk_gb(),
    });
    (h, fields)
}

/// Nova's weight handler (normalise each weigher, multiply, sum) with Nova's own weighers
/// against Parasol's on seeded random hosts (VCPU, memory and disk with random allocation
/// ratios and reserved amounts, used up to past capacity — where Nova's `minval = 0` counts —
/// Nova's `HostState` built from its compute node; I/O operations, failed builds, hypervisor
/// versions, free PCI devices, instances, cells) and requests (cross-cell moves), random
/// multipliers: the final weight of every host equal, through `weigh` and through the scan
/// row.
#[test]
fn parasol_weighers_equal_novas_on_seeded_random_cases() {
    use parasol::domain::{ComputeFacts, Destination};
    use parasol::policy::registry::builtin_weighers;
    use parasol::policy::weighers::add_normalised;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(43);
    let (mut cases, mut parasol) = (Vec::new(), Vec::new());
    for case in 0..120 {
        let m = |rng: &mut rand_chacha::ChaCha8Rng| *pick(rng, &[0.0, 1.0, 2.5, 1_000_000.0, -1.0]);
        let cfg = PolicyConfig {
            build_failure_weight_multiplier: m(&mut rng),
            cross_cell_move_weight_multiplier: m(&mut rng),
            hypervisor_version_weight_multiplier: m(&mut rng),
            num_instances_weight_multiplier: m(&mut rng),
            pci_weight_multiplier: m(&mut rng).abs(),
            ram_weight_multiplier: m(&mut rng),
            cpu_weight_multiplier: m(&mut rng),
            disk_weight_multiplier: m(&mut rng),
            io_ops_weight_multiplier: m(&mut rng),
            ..PolicyConfig::default()
        };
        let n = rng.gen_range(1..6);
        let names: Vec<String> =
            (0..n)
                .map(|_| pick(&mut rng, &WEIGHERS).to_string())
                .fold(Vec::new(), |mut v, w| {
                    if !v.contains(&w) {
                        v.push(w);
                    }
                    v
                });
        let weighers = builtin_weighers().build(&names, &cfg).unwrap();
        let dest_cell = pick(&mut rng, &[None, Some("cell-a"), Some("cell-b")]).map(str::to_string);
        let cross = rng.gen_bool(0.6);
        let mut req = RequestContext::with_demand(format!("i{case}"), "f", Resources::new(1, 1, 1));
        req.requested_destination = Some(Destination {
            cell: dest_cell.clone(),
            ..Destination::default()
        });
        req.cross_cell_move = cross;
        let mut hosts = Vec::new();
        let mut host_json = Vec::new();
        for id in 1..=rng.gen_range(2..6) {
            let facts = ComputeFacts {
                failed_builds: rng.gen_range(0..3),
                hypervisor_version: *pick(&mut rng, &[0, 1_000_000, 2_011_000, 6_002_000]),
                pci_free: *pick(&mut rng, &[0, 0, 2, 150]),
                cell_uuid: Some(pick(&mut rng, &["cell-a", "cell-b"]).to_string()),
                ..ComputeFacts::default()
            };
            let (mut h, resources) = resource_host(&mut rng, id);
            h.num_instances = rng.gen_range(0..5);
            h.num_io_ops = rng.gen_range(0..4);
            let mut fields = json!({
                "host": format!("host{id}"), "failed_builds": facts.failed_builds,
                "hypervisor_version": facts.hypervisor_version, "pci_free": facts.pci_free,
                "cell_uuid": facts.cell_uuid, "num_instances": h.num_instances,
                "num_io_ops": h.num_io_ops,
            });
            fields
                .as_object_mut()
                .unwrap()
                .extend(resources.as_object().unwrap().clone());
            host_json.push(fields);
            h.profile_mut().facts = Some(Arc::new(facts));
            hosts.push(h);
        }
        // Parasol's handler (`Policy::weigh`): weighers whose multiplier is 0 or that do not
        // vary add nothing; the rest are normalised and summed.
        let mut scores = vec![0.0; hosts.len()];
        if hosts.len() > 1 {
            for w in &weighers {
                if w.multiplier() == 0.0 || !w.varies(&req) {
                    continue;
                }
                let raw: Vec<f64> = hosts.iter().map(|h| w.weigh(h, &req)).collect();
                // The scan's fused weighing reads the same value from the host's row (or,
                // where the row cannot say it, from the host).
                if let Some(value) = w.scan_value() {
                    let rows: Vec<f64> = hosts
                        .iter()
                        .map(|h| value.of_row(&HostScan::of(h), h))
                        .collect();
                    assert_eq!(raw, rows, "case {case}: {} on rows", w.name());
                }
                add_normalised(&raw, w.multiplier(), w.minval(), &mut scores);
            }
        }
        parasol.push(scores);
        cases.push(json!({
            "config": {
                "build_failure_weight_multiplier": cfg.build_failure_weight_multiplier,
                "cross_cell_move_weight_multiplier": cfg.cross_cell_move_weight_multiplier,
                "hypervisor_version_weight_multiplier": cfg.hypervisor_version_weight_multiplier,
                "num_instances_weight_multiplier": cfg.num_instances_weight_multiplier,
                "pci_weight_multiplier": cfg.pci_weight_multiplier,
                "ram_weight_multiplier": cfg.ram_weight_multiplier,
                "cpu_weight_multiplier": cfg.cpu_weight_multiplier,
                "disk_weight_multiplier": cfg.disk_weight_multiplier,
                "io_ops_weight_multiplier": cfg.io_ops_weight_multiplier,
            },
            "weighers": names, "dest_cell": dest_cell, "cross_cell": cross, "hosts": host_json,
        }));
    }
    let nova: Vec<BTreeMap<String, f64>> =
        serde_json::from_slice(&through_nova("weigh.py", &cases)).unwrap();
    let mut compared = 0;
    for (i, (n_case, p_case)) in nova.iter().zip(&parasol).enumerate() {
        for (j, p) in p_case.iter().enumerate() {
            let n = n_case[&format!("host{}", j + 1)];
            let tolerance = 1e-9 * n.abs().max(1.0);
            assert!(
                (n - p).abs() <= tolerance,
                "case {i} host{}: nova {n}, parasol {p}: {}",
                j + 1,
                cases[i]
            );
            compared += 1;
        }
    }
    assert!(compared > 300, "{compared}");
}

/// Runs `tests/nova_filters/<script>` in Nova's virtualenv with `cases` as JSON on its stdin;
/// returns what it printed.
fn through_nova(script: &str, cases: &[Value]) -> Vec<u8> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/nova_filters")
        .join(script);
    let input = Value::Array(cases.to_vec()).to_string();
    venv::run_in_nova(&script, &[], input.as_bytes())
}

/// Nova's monitor metric names (`MonitorMetricType`) the cases draw from.
const METRIC_NAMES: [&str; 6] = [
    "cpu.percent",
    "cpu.user.time",
    "cpu.idle.time",
    "cpu.frequency",
    "cpu.kernel.percent",
    "cpu.iowait.time",
];

/// `MetricsFilter` and `MetricsWeigher` against Nova's own classes on seeded random settings
/// (`[metrics] weight_setting`, `required`, `weight_of_unavailable`, `weight_multiplier`)
/// and hosts whose monitor metrics are reported, missing or expired (older than `[usage]
/// max_age_s`: Nova's host holds only the fresh ones, as an expired metric is unavailable):
/// every host's verdict equal and every final weight equal; where Nova raises
/// (`required` and the weigher meets a host lacking a metric), Parasol refuses the
/// configuration.
#[test]
fn metrics_filter_and_weigher_equal_novas_on_seeded_random_cases() {
    use parasol::domain::{
        MeasuredUsage, MonitorMetric, MonitorMetrics, ReadingClock, UsageSource,
    };
    use parasol::policy::registry::builtin_weighers;
    use parasol::policy::weighers::add_normalised;
    use parasol::policy::Policy;
    const NOW: i64 = 100_000;
    let clock = ReadingClock {
        now_ms: NOW,
        max_age_ms: 60_000,
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(45);
    let (mut cases, mut parasol) = (Vec::new(), Vec::new());
    for case in 0..200 {
        let setting: Vec<String> = (0..rng.gen_range(0..4))
            .map(|_| {
                let ratio = *pick(&mut rng, &["1", "-1", "0", "0.5", "0.0001", "-2.5", "3"]);
                format!("{}={ratio}", pick(&mut rng, &METRIC_NAMES))
            })
            .collect();
        let with_filter = rng.gen_bool(0.5);
        let cfg = PolicyConfig {
            metrics_weight_setting: setting.clone(),
            metrics_required: rng.gen_bool(0.4),
            metrics_weight_of_unavailable: *pick(&mut rng, &[-10_000.0, 0.0, -1.0, 50.0]),
            metrics_weight_multiplier: *pick(&mut rng, &[1.0, 0.0, -1.0, 2.5]),
            enabled_filters: if with_filter {
                vec!["MetricsFilter".into()]
            } else {
                vec!["ComputeFilter".into()]
            },
            weight_classes: vec!["MetricsWeigher".into()],
            ..PolicyConfig::default()
        };
        let accepted = Policy::from_config(&cfg).is_ok();
        let filter = builtin_filters()
            .build(&["MetricsFilter".to_string()], &cfg)
            .unwrap();
        let weigher = builtin_weighers()
            .build(&["MetricsWeigher".to_string()], &cfg)
            .unwrap();
        let mut req = RequestContext::with_demand(format!("m{case}"), "f", Resources::new(1, 1, 1));
        req.readings = Some(clock);
        let (mut hosts, mut host_json) = (Vec::new(), Vec::new());
        for id in 1..=rng.gen_range(1..6) {
            let mut h = HostState::synthetic(id, Resources::new(8, 4096, 40), Resources::ZERO);
            let (mut metrics, mut fresh) = (Vec::new(), Vec::new());
            if rng.gen_bool(0.85) {
                for name in METRIC_NAMES {
                    if rng.gen_bool(0.3) {
                        continue; // not reported
                    }
                    let value = match name {
                        "cpu.user.time" | "cpu.idle.time" | "cpu.iowait.time" => {
                            rng.gen_range(0..2_000_000_000_000_000i64)
                        }
                        "cpu.frequency" => *pick(&mut rng, &[800, 2_400, 3_100]),
                        _ => rng.gen_range(0..=100),
                    };
                    let at_ms = if rng.gen_bool(0.2) { 10_000 } else { 90_000 };
                    if clock.fresh(at_ms, at_ms) {
                        fresh.push(json!([name, value]));
                    }
                    metrics.push(MonitorMetric {
                        name: name.into(),
                        value: value as f64,
                        at_ms,
                    });
                }
                h.measured = Some(Arc::new(MeasuredUsage {
                    metrics: Some(MonitorMetrics {
                        at_ms: 90_000,
                        received_ms: 90_000,
                        source: UsageSource::NovaMetrics,
                        metrics,
                    }),
                    ..MeasuredUsage::default()
                }));
            }
            host_json.push(json!({"host": format!("host{id}"), "metrics": fresh}));
            hosts.push(h);
        }
        let env = FilterEnv::without_heartbeats();
        let verdicts: BTreeMap<String, bool> = if with_filter {
            hosts
                .iter()
                .map(|h| (h.host().to_string(), filter[0].passes(h, &req, &env)))
                .collect()
        } else {
            BTreeMap::new()
        };
        let kept: Vec<&HostState> = hosts
            .iter()
            .filter(|h| verdicts.get(&h.host().to_string()) != Some(&false))
            .collect();
        // Parasol's handler (`Policy::weigh`) over the hosts that pass.
        let w = &weigher[0];
        let mut scores = vec![0.0; kept.len()];
        if kept.len() > 1 && w.multiplier() != 0.0 && w.varies(&req) {
            let raw: Vec<f64> = kept.iter().map(|h| w.weigh(h, &req)).collect();
            add_normalised(&raw, w.multiplier(), w.minval(), &mut scores);
        }
        let weights: BTreeMap<String, f64> = kept
            .iter()
            .zip(&scores)
            .map(|(h, s)| (h.host().to_string(), *s))
            .collect();
        parasol.push((accepted, verdicts, weights));
        cases.push(json!({
            "config": {
                "weight_setting": setting,
                "required": cfg.metrics_required,
                "weight_of_unavailable": cfg.metrics_weight_of_unavailable,
                "weight_multiplier": cfg.metrics_weight_multiplier,
            },
            "filter": with_filter, "hosts": host_json,
        }));
    }
    let nova: Vec<Value> = serde_json::from_slice(&through_nova("metrics.py", &cases)).unwrap();
    assert_eq!(nova.len(), parasol.len());
    let (mut compared, mut raised, mut unavailable) = (0, 0, 0);
    for (i, (n, (accepted, verdicts, weights))) in nova.iter().zip(&parasol).enumerate() {
        let n_verdicts: BTreeMap<String, bool> =
            serde_json::from_value(n["verdicts"].clone()).unwrap();
        assert_eq!(&n_verdicts, verdicts, "case {i}: {}", cases[i]);
        if n["weights"] == "raise" {
            raised += 1;
            assert!(
                !accepted,
                "case {i}: Nova raises, Parasol must refuse: {}",
                cases[i]
            );
            continue;
        }
        let n_weights: BTreeMap<String, f64> =
            serde_json::from_value(n["weights"].clone()).unwrap();
        assert_eq!(
            n_weights.keys().collect::<Vec<_>>(),
            weights.keys().collect::<Vec<_>>(),
            "case {i}"
        );
        for (host, p) in weights {
            let want = n_weights[host];
            let tolerance = 1e-9 * want.abs().max(1.0);
            assert!(
                (want - p).abs() <= tolerance,
                "case {i} {host}: nova {want}, parasol {p}: {}",
                cases[i]
            );
            compared += 1;
        }
        let off = cases[i]["config"]["weight_of_unavailable"]
            .as_f64()
            .unwrap();
        if !cases[i]["config"]["required"].as_bool().unwrap() && off != 0.0 {
            unavailable += 1;
        }
    }
    assert!(compared > 300, "{compared}");
    assert!(
        raised > 5,
        "the cases reach Nova's ComputeHostMetricNotFound: {raised}"
    );
    assert!(unavailable > 20, "{unavailable}");
}
