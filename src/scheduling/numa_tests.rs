//! `Scheduler::select` with NUMA topologies and PCI requests (docs/numa-pci.md), on a real
//! SQLite ledger with Nova's records laid over it: refused without `[nova_db]`, decided by
//! `NUMATopologyFilter` and `PciPassthroughFilter` with it, counted either way.

use super::*;
use crate::clock::{ManualClock, SharedClock};
use crate::configuration::Settings;
use crate::domain::numa::{HostNuma, PciPools};
use crate::ledger::{HostRegistration, Ledger};
use crate::nova::SelectDestinationsArgs;
use crate::stats::Stats;
use serde_json::{json, Value};
use std::sync::Arc;

const NOW_MS: i64 = 1_000_000;

fn object(name: &str, data: Value) -> Value {
    json!({"nova_object.name": name, "nova_object.namespace": "nova",
           "nova_object.version": "1.0", "nova_object.data": data})
}

fn uuid(n: u32) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

/// A host NUMA topology of one cell with `pcpus` dedicated CPUs, no SMT, 4 GiB.
fn host_numa(pcpus: u32) -> HostNuma {
    let cpus: Vec<u32> = (0..pcpus).collect();
    let cell = object(
        "NUMACell",
        json!({"id": 0, "cpuset": [], "pcpuset": cpus, "memory": 4096,
        "siblings": cpus.iter().map(|c| vec![*c]).collect::<Vec<_>>(), "pinned_cpus": [],
        "mempages": [object("NUMAPagesTopology", json!({"size_kb": 4, "total": 1048576}))]}),
    );
    let text = object("NUMATopology", json!({"cells": [cell]})).to_string();
    crate::nova::numa::host_numa(Some(&text)).unwrap().unwrap()
}

/// Two hosts of 8 VCPU and 8 PCPU; `facts` gives each its NUMA topology and PCI pools.
async fn scheduler(
    dir: &tempfile::TempDir,
    nova_db: bool,
    facts: [(HostNuma, PciPools); 2],
) -> Scheduler {
    let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let ledger = Ledger::open(&url, 2).await.unwrap();
    for n in 1..=2 {
        let mut reg = HostRegistration::simple(&format!("host{n}"), &uuid(100 + n), 8, 8192, 100);
        reg.inventories
            .push(("PCPU".into(), crate::domain::Inventory::of(8)));
        // Nova's NUMATopologyLimits carry the VCPU ratio (shared CPUs; these are pinned).
        reg.inventories[0].1.allocation_ratio = 4.0;
        ledger.register_host(&reg, NOW_MS).await.unwrap();
    }
    let clock: SharedClock = Arc::new(ManualClock::new(NOW_MS));
    let mut settings = Settings::default();
    settings.scheduler.seed = Some(7);
    settings.nova_db.enabled = nova_db;
    let stats = Arc::new(Stats::new(clock.clone(), 60));
    let s = Scheduler::start(Arc::new(settings), ledger, stats, clock)
        .await
        .unwrap();
    let mut records = crate::table::NodeRecords {
        read: true,
        ..Default::default()
    };
    for (n, (numa, pci)) in facts.into_iter().enumerate() {
        records.by_uuid.insert(
            uuid(101 + n as u32),
            crate::table::NodeRecord {
                service_host: Arc::from(format!("host{}", n + 1).as_str()),
                facts: Arc::new(crate::domain::ComputeFacts {
                    numa: Some(Arc::new(numa)),
                    pci: Arc::new(pci),
                    ..Default::default()
                }),
                up: true,
                disabled: false,
                forced_down: false,
            },
        );
    }
    s.ledger().table().set_records(Arc::new(records));
    s
}

/// A boot of `instance` with `vcpus` dedicated CPUs in one NUMA cell and `pci` requests.
fn call(instance: &str, vcpus: u32, pci: Value) -> SelectDestinationsArgs {
    let flavor = object(
        "Flavor",
        json!({"name": "pinned", "vcpus": vcpus, "memory_mb": 512,
        "root_gb": 1, "extra_specs": {"hw:cpu_policy": "dedicated"}}),
    );
    let cell = object(
        "InstanceNUMACell",
        json!({"id": 0, "cpuset": [], "memory": 512,
        "pcpuset": (0..vcpus).collect::<Vec<_>>(), "cpu_policy": "dedicated"}),
    );
    let data = json!({"flavor": flavor, "instance_uuid": instance, "num_instances": 1,
        "project_id": "p", "user_id": "u",
        "numa_topology": object("InstanceNUMATopology", json!({"cells": [cell]})),
        "pci_requests": object("InstancePCIRequests", json!({"requests": pci}))});
    let body = json!({"spec_obj": object("RequestSpec", data), "instance_uuids": [instance],
        "return_objects": true, "return_alternates": true});
    SelectDestinationsArgs::from_http_body(body.to_string().as_bytes()).unwrap()
}

fn pool(vendor: &str, count: i64) -> PciPools {
    let list = object(
        "PciDevicePoolList",
        json!({"objects": [object("PciDevicePool", json!({
        "vendor_id": vendor, "product_id": "1520", "numa_node": 0, "count": count, "tags": {}}))]}),
    );
    crate::nova::numa::pci_pools(Some(&list.to_string())).unwrap()
}

fn counted(s: &Scheduler, kind: &str) -> u64 {
    s.stats().metrics().numa_pci_requests(kind).get()
}

#[tokio::test]
async fn a_numa_request_without_nova_s_records_is_refused_naming_what_is_unsupported() {
    let dir = tempfile::tempdir().unwrap();
    let s = scheduler(
        &dir,
        false,
        [
            (host_numa(8), PciPools::default()),
            (host_numa(8), PciPools::default()),
        ],
    )
    .await;
    let err = s.select(call(&uuid(1), 2, json!([]))).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, SelectError::NoValidHost { .. }), "{text}");
    assert!(
        text.contains("a NUMA topology of 1 cell(s)") && text.contains("[nova_db] is not enabled"),
        "{text}"
    );
    assert_eq!((counted(&s, "refused"), counted(&s, "decided")), (1, 0));
}

#[tokio::test]
async fn pinned_cpus_and_pci_devices_go_only_where_they_fit() {
    let dir = tempfile::tempdir().unwrap();
    // host1: 2 dedicated CPUs, a device of vendor 8086; host2: 8 CPUs, a device of 15b3.
    let s = scheduler(
        &dir,
        true,
        [
            (host_numa(2), pool("8086", 1)),
            (host_numa(8), pool("15b3", 1)),
        ],
    )
    .await;
    let hosts = |a: &Answer| {
        a.selections[0]
            .iter()
            .map(|x| x.service_host.clone())
            .collect::<Vec<_>>()
    };
    // 4 pinned CPUs: only host2's cell has them; no alternate on host1.
    let four = s.select(call(&uuid(1), 4, json!([]))).await.unwrap();
    assert_eq!(hosts(&four), ["host2"]);
    // 2 pinned CPUs and a device of 8086: only host1.
    let req = object(
        "InstancePCIRequest",
        json!({"count": 1, "spec": [{"vendor_id": "8086"}],
        "alias_name": "a1", "request_id": uuid(9)}),
    );
    let two = s.select(call(&uuid(2), 2, json!([req]))).await.unwrap();
    assert_eq!(hosts(&two), ["host1"]);
    // 4 pinned CPUs and that device: nowhere, and the reason names the filters.
    let err = s
        .select(call(&uuid(3), 4, json!([req])))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("NUMATopologyFilter") || err.contains("PciPassthroughFilter"),
        "{err}"
    );
    assert_eq!((counted(&s, "decided"), counted(&s, "refused")), (3, 0));
}

/// `[batch] mode = "call"`: a multi-create of pinned instances is not solved as one
/// assignment (the solver knows resources, not NUMA cells). host2 has PCPU for two instances
/// of 4; with a cell of 8 dedicated CPUs it takes both, with a cell of 6 the second no longer
/// fits there once the first is counted, nor on host1's 2 — NoValidHost, as Nova answers,
/// where the solver would have put both on host2.
#[tokio::test]
async fn a_numa_multi_create_goes_one_instance_at_a_time_with_the_earlier_ones_counted() {
    for (cpus, placed) in [(8, true), (6, false)] {
        let dir = tempfile::tempdir().unwrap();
        let facts = [
            (host_numa(2), PciPools::default()),
            (host_numa(cpus), PciPools::default()),
        ];
        let s = scheduler(&dir, true, facts).await;
        let mut settings = (*s.settings()).clone();
        settings.batch.mode = crate::configuration::BatchMode::Call;
        s.reconfigure(Arc::new(settings)).await.unwrap();
        let mut two = call(&uuid(1), 4, json!([]));
        two.instance_uuids = vec![uuid(1), uuid(2)];
        two.spec.num_instances = 2;
        match s.select(two).await {
            Ok(answer) => {
                assert!(placed, "{cpus} CPUs take one instance of 4 only");
                let hosts: Vec<&str> = answer
                    .selections
                    .iter()
                    .map(|x| x[0].service_host.as_str())
                    .collect();
                assert_eq!(hosts, ["host2", "host2"]);
            }
            Err(e) => assert!(
                !placed && matches!(e, SelectError::NoValidHost { .. }),
                "{cpus}: {e}"
            ),
        }
    }
}

/// The Selection carries the NUMATopologyLimits Nova's `NUMATopologyFilter` sets on a host it
/// passes (`host_state.limits['numa_topology']`, which `Selection.from_host_state` copies and
/// the compute's claim fits the instance under): the host's VCPU and MEMORY_MB allocation
/// ratios, on the chosen host and each alternate; a request without a NUMA topology carries
/// none, as before.
#[tokio::test]
async fn the_selection_carries_the_numa_limits_nova_s_filter_sets() {
    let dir = tempfile::tempdir().unwrap();
    let s = scheduler(
        &dir,
        true,
        [
            (host_numa(8), PciPools::default()),
            (host_numa(8), PciPools::default()),
        ],
    )
    .await;
    let answer = s.select(call(&uuid(1), 2, json!([]))).await.unwrap();
    let list = &answer.selections[0];
    assert_eq!(list.len(), 2, "the pick and an alternate");
    for selection in list {
        let numa = selection
            .limits
            .as_ref()
            .and_then(|l| l.numa_topology.as_ref())
            .unwrap_or_else(|| panic!("{} has no NUMA limits", selection.service_host));
        assert_eq!(
            (numa.cpu_allocation_ratio, numa.ram_allocation_ratio),
            (4.0, 1.0)
        );
        let primitive = selection.to_primitive(crate::nova::SelectionVersion::V1_1);
        let limits = &primitive["nova_object.data"]["limits"]["nova_object.data"];
        assert_eq!(
            limits["numa_topology"]["nova_object.data"]["cpu_allocation_ratio"],
            json!(4.0)
        );
    }
    // A flat request (no NUMA topology, no PCI request) carries no limits.
    let mut flat = call(&uuid(2), 1, json!([]));
    flat.spec.numa_pci = crate::domain::numa::NumaPciRequest::default();
    flat.spec.flavor.extra_specs.clear();
    let answer = s.select(flat).await.unwrap();
    assert!(
        answer.selections[0].iter().all(|x| x.limits.is_none()),
        "{answer:?}"
    );
}
