//! Parasol's port of Nova's NUMA fitting and PCI support against Nova 34's own functions: a
//! seeded generator makes host topologies (cells, SMT siblings, dedicated and shared CPUs,
//! pinned CPUs, memory in use, small and huge pages, sockets, physnets), PCI pools (vendors,
//! NUMA nodes, PFs, VFs, VDPA, remote-managed, live-migratable), instance topologies (shared,
//! dedicated and mixed cells, thread policies, page sizes, isolated emulator threads) and PCI
//! requests (NUMA policies); `tests/numa_pci/nova_fit.py` runs
//! `hardware.numa_fit_instance_to_host` and `PciDeviceStats.support_requests` in the venv on
//! the same primitives, and every answer — the cells chosen, page sizes, pinning and
//! reserved CPUs, or no fit — must be Parasol's.

#[path = "support/venv.rs"]
mod venv;

use parasol::domain::numa::fit::{fit_instance, PciFit};
use parasol::domain::numa::pci::ProviderMapping;
use parasol::domain::numa::{InstanceNuma, NumaLimits};
use parasol::nova::numa as codec;
use parasol::nova::Fields;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;

fn obj(name: &str, version: &str, data: Value) -> Value {
    json!({"nova_object.name": name, "nova_object.namespace": "nova",
           "nova_object.version": version, "nova_object.data": data})
}

/// A host cell with `cores` cores of `threads` threads from CPU `first`, some dedicated.
fn host_cell(rng: &mut ChaCha8Rng, id: i64, first: u32, cores: u32, threads: u32) -> Value {
    let cpus: Vec<u32> = (first..first + cores * threads).collect();
    let siblings: Vec<Vec<u32>> = (0..cores)
        .map(|c| (0..threads).map(|t| first + c + t * cores).collect())
        .collect();
    // Dedicated: whole cores from the start, or every CPU (legacy `vcpu_pin_set`).
    let split = rng.gen_range(0..=cores);
    let legacy = rng.gen_bool(0.2);
    let (mut pcpus, mut shared): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
    for (c, sib) in siblings.iter().enumerate() {
        if legacy || (c as u32) < split {
            pcpus.extend(sib);
        }
        if legacy || (c as u32) >= split {
            shared.extend(sib);
        }
    }
    let pinned: Vec<u32> = pcpus
        .iter()
        .copied()
        .filter(|_| rng.gen_bool(0.25))
        .collect();
    let memory = *[1024, 2048, 4096, 8192].choose(rng).unwrap();
    let memory_usage = rng.gen_range(0..=memory / 1024) * 512;
    let mut mempages = vec![obj(
        "NUMAPagesTopology",
        "1.1",
        json!({
        "size_kb": 4, "total": memory * 256, "used": memory_usage * 256, "reserved": 0}),
    )];
    if rng.gen_bool(0.6) {
        let total = rng.gen_range(0..=4) * 256;
        let used = rng.gen_range(0..=total / 256) * 256;
        mempages.push(obj(
            "NUMAPagesTopology",
            "1.1",
            json!({
            "size_kb": 2048, "total": total, "used": used, "reserved": 0}),
        ));
    }
    if rng.gen_bool(0.15) {
        mempages.clear();
    }
    let mut data = json!({
        "id": id, "cpuset": shared, "pcpuset": pcpus, "memory": memory,
        "cpu_usage": rng.gen_range(0..=cpus.len() as i64 * 2), "memory_usage": memory_usage,
        "pinned_cpus": pinned, "siblings": siblings, "mempages": mempages,
        "socket": if rng.gen_bool(0.9) { json!(id / 2) } else { Value::Null },
    });
    if rng.gen_bool(0.3) {
        let physnets: Vec<&str> = ["foo", "bar"]
            .into_iter()
            .filter(|_| rng.gen_bool(0.5))
            .collect();
        data["network_metadata"] = obj(
            "NetworkMetadata",
            "1.0",
            json!({"physnets": physnets, "tunneled": rng.gen_bool(0.3)}),
        );
    }
    obj("NUMACell", "1.5", data)
}

fn host_numa(rng: &mut ChaCha8Rng) -> Value {
    let cells = rng.gen_range(1..=4);
    let (cores, threads) = (rng.gen_range(1..=4), *[1, 2].choose(rng).unwrap());
    let cells: Vec<Value> = (0..cells)
        .map(|i| host_cell(rng, i, i as u32 * cores * threads, cores, threads))
        .collect();
    obj("NUMATopology", "1.2", json!({"cells": cells}))
}

fn pools(rng: &mut ChaCha8Rng, cells: i64) -> Value {
    let pools: Vec<Value> = (0..rng.gen_range(0..=4))
        .map(|_| {
            let mut tags = json!({"dev_type": *["type-PCI", "type-VF", "type-PF", "vdpa"].choose(rng).unwrap()});
            if rng.gen_bool(0.2) {
                tags["remote_managed"] = json!(*["true", "false"].choose(rng).unwrap());
            }
            if rng.gen_bool(0.2) {
                tags["live_migratable"] = json!(*["true", "false"].choose(rng).unwrap());
            }
            if rng.gen_bool(0.3) {
                tags["physical_network"] = json!("physnet1");
            }
            let node = if rng.gen_bool(0.15) { Value::Null } else { json!(rng.gen_range(0..cells)) };
            obj("PciDevicePool", "1.1", json!({
                "product_id": *["1520", "1528"].choose(rng).unwrap(), "vendor_id": "8086",
                "numa_node": node, "tags": tags, "count": rng.gen_range(0..=3)}))
        })
        .collect();
    obj("PciDevicePoolList", "1.1", json!({"objects": pools}))
}

fn instance_cell(rng: &mut ChaCha8Rng, id: i64, first: u32, policy: &str) -> Value {
    let n = rng.gen_range(1..=3);
    let cpus: Vec<u32> = (first..first + n).collect();
    let (shared, dedicated): (Vec<u32>, Vec<u32>) = match policy {
        "dedicated" => (vec![], cpus),
        "mixed" => (cpus[..1].to_vec(), cpus[1..].to_vec()),
        _ => (cpus, vec![]),
    };
    let pagesize = [
        Value::Null,
        json!(-1),
        json!(-2),
        json!(-3),
        json!(2048),
        json!(4),
    ]
    .choose(rng)
    .unwrap()
    .clone();
    let thread = if policy == "shared" {
        Value::Null
    } else {
        json!(*["prefer", "isolate", "require"].choose(rng).unwrap())
    };
    obj(
        "InstanceNUMACell",
        "1.6",
        json!({
        "id": id, "cpuset": shared, "pcpuset": dedicated,
        "memory": *[256, 512, 1024, 2048].choose(rng).unwrap(), "pagesize": pagesize,
        "cpu_policy": if policy == "none" { Value::Null } else { json!(policy) },
        "cpu_thread_policy": thread, "cpuset_reserved": null, "cpu_pinning_raw": null}),
    )
}

fn instance_numa(rng: &mut ChaCha8Rng) -> Value {
    let policy = *["none", "shared", "dedicated", "mixed"]
        .choose(rng)
        .unwrap();
    let cells: Vec<Value> = (0..rng.gen_range(1..=2))
        .map(|i| instance_cell(rng, i, i as u32 * 3, policy))
        .collect();
    let emulator = if policy == "dedicated" && rng.gen_bool(0.3) {
        json!("isolate")
    } else {
        Value::Null
    };
    obj(
        "InstanceNUMATopology",
        "1.3",
        json!({"cells": cells, "emulator_threads_policy": emulator}),
    )
}

fn pci_requests(rng: &mut ChaCha8Rng) -> Value {
    let requests: Vec<Value> = (0..rng.gen_range(0..=2))
        .map(|i| {
            let mut spec =
                json!({"vendor_id": "8086", "product_id": *["1520", "1528"].choose(rng).unwrap()});
            if rng.gen_bool(0.3) {
                spec["dev_type"] = json!(*["type-PF", "type-VF", "vdpa"].choose(rng).unwrap());
            }
            if rng.gen_bool(0.15) {
                spec["remote_managed"] = json!("true");
            }
            if rng.gen_bool(0.15) {
                spec["live_migratable"] = json!("true");
            }
            let neutron = rng.gen_bool(0.3);
            let policies = [
                Value::Null,
                json!("required"),
                json!("legacy"),
                json!("preferred"),
                json!("socket"),
            ];
            let policy = policies.choose(rng).unwrap().clone();
            obj(
                "InstancePCIRequest",
                "1.4",
                json!({
                "count": rng.gen_range(1..=2), "spec": [spec],
                "alias_name": if neutron { Value::Null } else { json!("a1") },
                "request_id": format!("00000000-0000-0000-0000-00000000000{i}"),
                "numa_policy": policy}),
            )
        })
        .collect();
    obj("InstancePCIRequests", "1.1", json!({"requests": requests}))
}

fn case(rng: &mut ChaCha8Rng) -> Value {
    let host = host_numa(rng);
    let cells = host["nova_object.data"]["cells"].as_array().unwrap().len() as i64;
    let mut c = json!({
        "host_numa": host.to_string(), "pci_stats": pools(rng, cells).to_string(),
        "numa_topology": instance_numa(rng), "pci_requests": pci_requests(rng),
        "cpu_ratio": *[1.0, 2.0, 16.0].choose(rng).unwrap(),
        "ram_ratio": *[1.0, 1.5].choose(rng).unwrap(),
        "mapping": {"": ["00000000-0000-0000-0000-0000000000aa"]},
        "pack": rng.gen_bool(0.3),
    });
    if rng.gen_bool(0.2) {
        let physnets: Vec<&str> = ["foo", "bar"]
            .into_iter()
            .filter(|_| rng.gen_bool(0.5))
            .collect();
        c["network_metadata"] = obj(
            "NetworkMetadata",
            "1.0",
            json!({"physnets": physnets, "tunneled": rng.gen_bool(0.5)}),
        );
    }
    c
}

/// Parasol's answer to one case, in the script's shape.
fn parasol(c: &Value) -> Value {
    let host = codec::host_numa(c["host_numa"].as_str()).unwrap().unwrap();
    let pools = codec::pci_pools(c["pci_stats"].as_str()).unwrap();
    let wrap = json!({"numa_topology": c["numa_topology"], "pci_requests": c["pci_requests"],
                      "network_metadata": c.get("network_metadata").cloned().unwrap_or(Value::Null)});
    let f = Fields::new(&wrap, "spec").unwrap();
    let inst: InstanceNuma = codec::instance_numa(&f, "numa_topology").unwrap().unwrap();
    let requests = codec::pci_requests(&f, "pci_requests").unwrap();
    let limits = NumaLimits {
        cpu_allocation_ratio: c["cpu_ratio"].as_f64().unwrap(),
        ram_allocation_ratio: c["ram_ratio"].as_f64().unwrap(),
        network_metadata: codec::network_metadata(&f, "network_metadata").unwrap(),
    };
    let mapping: ProviderMapping = serde_json::from_value(c["mapping"].clone()).unwrap();
    let pci = PciFit {
        requests: &requests,
        pools: Some(&pools),
        mapping: Some(&mapping),
    };
    let fitted = fit_instance(
        &host,
        &inst,
        Some(&limits),
        pci,
        c["pack"].as_bool().unwrap(),
    );
    let fit = fitted.map(|t| {
        t.cells
            .iter()
            .map(|c| {
                let pinning: serde_json::Map<String, Value> =
                    c.cpu_pinning.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
                json!({"id": c.id, "pagesize": c.pagesize, "cpu_pinning": pinning,
                       "cpuset_reserved": c.cpuset_reserved.as_ref().map(|r| r.iter().collect::<Vec<_>>())})
            })
            .collect::<Vec<_>>()
    });
    let support =
        requests.is_empty() || pools.supports(&requests, Some(&mapping), &[], Some(&host));
    json!({"fit": fit, "pci": support})
}

#[test]
fn numa_fitting_and_pci_support_answer_as_nova_s_own_functions() {
    let mut rng = ChaCha8Rng::seed_from_u64(48);
    let cases: Vec<Value> = (0..1500).map(|_| case(&mut rng)).collect();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/numa_pci/nova_fit.py");
    let out = venv::run_in_nova(
        &script,
        &[],
        Value::from(cases.clone()).to_string().as_bytes(),
    );
    let nova: Vec<Value> = serde_json::from_slice(&out).expect("the script prints JSON");
    assert_eq!(nova.len(), cases.len());
    let (mut fits, mut pci_fails, mut mismatches) = (0, 0, Vec::new());
    for (i, (c, want)) in cases.iter().zip(&nova).enumerate() {
        let got = parasol(c);
        fits += usize::from(!want["fit"].is_null());
        pci_fails += usize::from(want["pci"] == json!(false));
        if got != *want {
            mismatches.push(format!("case {i}: Nova {want}, Parasol {got}\n  {c}"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} differ:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches[..mismatches.len().min(5)].join("\n")
    );
    // The generator reaches both answers of each question.
    let n = cases.len();
    assert!(fits > n / 20 && fits < n * 9 / 10, "{fits} of {n} fit");
    assert!(pci_fails > n / 20, "{pci_fails} PCI refusals of {n}");
    let policies: BTreeSet<String> = cases
        .iter()
        .map(|c| {
            c["numa_topology"]["nova_object.data"]["cells"][0]["nova_object.data"]["cpu_policy"]
                .to_string()
        })
        .collect();
    assert_eq!(policies.len(), 4, "{policies:?}");
}
