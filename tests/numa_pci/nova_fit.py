"""Nova 34's own NUMA fitting and PCI support on the cases tests/numa_pci.rs generates.

Reads a JSON list of cases on standard input; each has the host's `numa_topology` and
`pci_stats` as Nova stores them in `compute_nodes`, the request's `numa_topology` and
`pci_requests` primitives, the allocation ratios, the candidate's provider mapping, the
packing strategy and, optionally, the request's `network_metadata`. Prints, per case, what
`hardware.numa_fit_instance_to_host` answers (null or the fitted cells) and what
`PciDeviceStats.support_requests` answers without NUMA cells.
"""

import json
import sys

import nova.conf
from nova import objects
from nova.pci import stats as pci_stats
from nova.virt import hardware

objects.register_all()
CONF = nova.conf.CONF
CONF([], default_config_files=[])


def cells_of(topology):
    if topology is None:
        return None
    return [
        {
            "id": c.id,
            "pagesize": c.pagesize,
            "cpu_pinning": {str(k): v for k, v in sorted((c.cpu_pinning or {}).items())},
            "cpuset_reserved": sorted(c.cpuset_reserved) if c.cpuset_reserved else None,
        }
        for c in topology.cells
    ]


def run(case):
    CONF.set_override("packing_host_numa_cells_allocation_strategy", case["pack"],
                      group="compute")
    host = objects.NUMATopology.obj_from_db_obj(case["host_numa"])
    pools = objects.pci_device_pool.from_pci_stats(case["pci_stats"])
    stats = pci_stats.PciDeviceStats(host, stats=pools)
    inst = objects.InstanceNUMATopology.obj_from_primitive(case["numa_topology"])
    requests = objects.InstancePCIRequests.obj_from_primitive(case["pci_requests"]).requests
    limits = objects.NUMATopologyLimits(
        cpu_allocation_ratio=case["cpu_ratio"], ram_allocation_ratio=case["ram_ratio"])
    if case.get("network_metadata"):
        limits.network_metadata = objects.NetworkMetadata.obj_from_primitive(
            case["network_metadata"])
    mapping = case["mapping"]
    fitted = hardware.numa_fit_instance_to_host(
        host, inst, provider_mapping=mapping, limits=limits,
        pci_requests=requests or None, pci_stats=stats)
    support = stats.support_requests(requests, provider_mapping=mapping) if requests else True
    return {"fit": cells_of(fitted), "pci": support}


print(json.dumps([run(c) for c in json.load(sys.stdin)]))
