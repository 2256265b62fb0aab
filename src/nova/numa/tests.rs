use super::*;
use serde_json::json;

fn obj(name: &str, data: Value) -> Value {
    json!({"nova_object.name": name, "nova_object.namespace": "nova",
           "nova_object.version": "1.0", "nova_object.data": data})
}

fn cell(data: Value) -> Value {
    obj("InstanceNUMACell", data)
}

fn spec(numa: Value, pci: Value) -> Value {
    json!({"numa_topology": numa, "pci_requests": pci})
}

fn read(v: &Value) -> Result<(Option<InstanceNuma>, Vec<PciRequest>)> {
    let f = Fields::new(v, "spec_obj")?;
    Ok((
        instance_numa(&f, "numa_topology")?,
        pci_requests(&f, "pci_requests")?,
    ))
}

#[test]
fn a_request_s_topology_and_pci_requests_are_read_whole() {
    let numa = obj(
        "InstanceNUMATopology",
        json!({"cells": [cell(json!({
        "id": 0, "cpuset": [], "pcpuset": [0, 1], "memory": 1024, "pagesize": -2,
        "cpu_policy": "dedicated", "cpu_thread_policy": "isolate", "cpuset_reserved": null,
        "cpu_pinning_raw": {"0": 4, "1": 5}}))], "emulator_threads_policy": "isolate"}),
    );
    let pci = obj(
        "InstancePCIRequests",
        json!({"requests": [obj("InstancePCIRequest", json!({
        "count": 2, "spec": [{"vendor_id": "8086", "product_id": "1520", "physical_network": null}],
        "alias_name": "a1", "request_id": "7b5f1e6e-3b8f-4f0c-9a53-7a4f0b8f3c11",
        "numa_policy": "socket"}))]}),
    );
    let (numa, pci) = read(&spec(numa, pci)).unwrap();
    let numa = numa.unwrap();
    assert!(numa.emulator_threads_isolated());
    let c = &numa.cells[0];
    assert_eq!(
        (c.memory, c.pagesize, c.cpu_policy, c.cpu_thread_policy),
        (
            1024,
            Some(-2),
            Some(CpuAllocation::Dedicated),
            Some(ThreadPolicy::Isolate)
        )
    );
    assert_eq!(c.pcpuset, CpuSet::from([0, 1]));
    assert_eq!(c.cpu_pinning, BTreeMap::from([(0, 4), (1, 5)]));
    assert_eq!(pci.len(), 1);
    assert_eq!(
        (pci[0].count, pci[0].numa_policy),
        (2, Some(PciNumaPolicy::Socket))
    );
    assert_eq!(pci[0].spec[0].get("physical_network"), Some(&None));
    let (none, no_pci) = read(&json!({})).unwrap();
    assert!(none.is_none() && no_pci.is_empty());
}

#[test]
fn malformed_topologies_and_requests_are_refused_naming_the_field() {
    let numa = |c: Value| {
        spec(
            obj("InstanceNUMATopology", json!({"cells": [cell(c)]})),
            Value::Null,
        )
    };
    let pci = |r: Value| {
        spec(
            Value::Null,
            obj(
                "InstancePCIRequests",
                json!({"requests": [obj("InstancePCIRequest", r)]}),
            ),
        )
    };
    let cases = [
        (
            numa(json!({"id": 0, "memory": 512, "cpuset": [-1]})),
            "spec_obj.numa_topology.cells[0].cpuset[0] must be a CPU id",
        ),
        (
            numa(json!({"id": 0, "memory": 512, "cpuset": "0-3"})),
            "spec_obj.numa_topology.cells[0].cpuset must be a list",
        ),
        (
            numa(json!({"id": 0, "cpuset": [0]})),
            "spec_obj.numa_topology.cells[0].memory is missing",
        ),
        (
            numa(json!({"memory": 512})),
            "spec_obj.numa_topology.cells[0].id is missing",
        ),
        (
            numa(json!({"id": 0, "memory": 512, "cpu_policy": "pinned"})),
            "cpu_policy must be one of dedicated, shared, mixed",
        ),
        (
            numa(json!({"id": 0, "memory": 512, "pagesize": -7})),
            "pagesize must be a size in KiB",
        ),
        (
            numa(json!({"id": 0, "memory": 512, "cpu_pinning_raw": {"x": 1}})),
            "cpu_pinning_raw.x must be keyed by a vCPU id",
        ),
        (
            spec(obj("InstanceNUMACell", json!({})), Value::Null),
            "expected a InstanceNUMATopology object",
        ),
        (
            pci(json!({"spec": []})),
            "spec_obj.pci_requests.requests[0].count is missing",
        ),
        (
            pci(json!({"count": 1, "spec": [{"vendor_id": 8086}]})),
            "spec_obj.pci_requests.requests[0].spec[0].vendor_id must be a string or null",
        ),
        (
            pci(json!({"count": 1, "spec": [], "numa_policy": "strict"})),
            "numa_policy must be one of required, legacy, preferred, socket",
        ),
    ];
    for (value, want) in cases {
        let err = read(&value).unwrap_err().to_string();
        assert!(err.contains(want), "{err:?} should contain {want:?}");
    }
}

#[test]
fn a_host_s_columns_are_read_as_nova_stores_them() {
    let page = obj(
        "NUMAPagesTopology",
        json!({"size_kb": 2048, "total": 512, "used": 2, "reserved": 1}),
    );
    let cellv = obj(
        "NUMACell",
        json!({"id": 1, "cpuset": [2, 3], "pcpuset": [0, 1], "memory": 2048,
        "cpu_usage": 1, "memory_usage": 256, "pinned_cpus": [1], "siblings": [[0, 1], [2, 3]],
        "mempages": [page], "socket": 0,
        "network_metadata": obj("NetworkMetadata", json!({"physnets": ["foo"], "tunneled": true}))}),
    );
    let text = obj("NUMATopology", json!({"cells": [cellv]})).to_string();
    let host = host_numa(Some(&text)).unwrap().unwrap();
    let c = &host.cells[0];
    assert_eq!(
        (c.id, c.avail_memory(), c.free_pcpus()),
        (1, 1792, CpuSet::from([0]))
    );
    assert_eq!(c.mempages[0].free_kb(), 509 * 2048);
    assert!(c.network_metadata.as_ref().unwrap().tunneled && host.has_threads());
    assert_eq!(host_numa(Some("")).unwrap(), None);
    let err = host_numa(Some("{\"cells\": []}")).unwrap_err().to_string();
    assert!(
        err.contains("numa_topology.nova_object.name is missing"),
        "{err}"
    );
    // pci_stats: the object, an older list, a single pool; text that is not JSON is none.
    let pool = json!({"product_id": "1520", "vendor_id": "8086", "numa_node": 0, "count": 3,
                      "tags": {"dev_type": "type-VF", "physical_network": "physnet1"}});
    let list = obj(
        "PciDevicePoolList",
        json!({"objects": [obj("PciDevicePool", pool.clone())]}),
    )
    .to_string();
    let pools = pci_pools(Some(&list)).unwrap();
    assert_eq!((pools.free(), pools.pools[0].numa_node()), (3, Some(0)));
    assert_eq!(pools.pools[0].props["physical_network"], json!("physnet1"));
    assert_eq!(
        pci_pools(Some(&json!([pool.clone(), pool]).to_string()))
            .unwrap()
            .free(),
        6
    );
    assert_eq!(pci_pools(Some("not json")).unwrap().free(), 0);
    let err = pci_pools(Some("[{\"vendor_id\": \"8086\"}]"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("pci_stats[0].count must be a non-negative integer"),
        "{err}"
    );
}
