"""Nova 34's own weighers and weight handler on the cases tests/nova_filters.rs generates:
reads the cases (JSON) on stdin, prints each case's final weight per host (JSON).

A host's resource fields (`free_ram_mb`, `free_disk_mb`, `vcpus_total`, `vcpus_used`, the
allocation ratios) are those of nova-scheduler's own `HostState` updated from a `ComputeNode`
(`HostState._update_from_compute_node`, the same with Placement or without), the node filled
as nova-compute's resource tracker fills it: reserved amounts counted as used
(`_update_usage_from_instances`), each instance's usage added (`_update_usage`), free = total
- used, the node's integer fields coercing as they do on assignment."""
import json
import sys

import nova.conf
from nova import objects
from nova.scheduler import host_manager, weights
from nova.scheduler.weights import compute, cpu, cross_cell, disk, hypervisor_version
from nova.scheduler.weights import image_props, io_ops, metrics, num_instances, pci, ram
from nova.tests.unit.scheduler import fakes

objects.register_all()
CONF = nova.conf.CONF

WEIGHERS = {
    "RAMWeigher": ram.RAMWeigher,
    "CPUWeigher": cpu.CPUWeigher,
    "DiskWeigher": disk.DiskWeigher,
    "IoOpsWeigher": io_ops.IoOpsWeigher,
    "BuildFailureWeigher": compute.BuildFailureWeigher,
    "CrossCellWeigher": cross_cell.CrossCellWeigher,
    "HypervisorVersionWeigher": hypervisor_version.HypervisorVersionWeigher,
    "ImagePropertiesWeigher": image_props.ImagePropertiesWeigher,
    "MetricsWeigher": metrics.MetricsWeigher,
    "NumInstancesWeigher": num_instances.NumInstancesWeigher,
    "PCIWeigher": pci.PCIWeigher,
}


class Pools:
    def __init__(self, free):
        self.pools = [{"count": free}] if free else []


def resource_fields(h):
    """What Nova's HostState says of `h`'s compute node (see the module's docstring)."""
    cn = objects.ComputeNode(
        uuid="00000000-0000-4000-8000-000000000000", hypervisor_hostname=h["host"],
        vcpus=h["vcpus"], memory_mb=h["memory_mb"], local_gb=h["local_gb"],
        cpu_allocation_ratio=h["cpu_allocation_ratio"],
        ram_allocation_ratio=h["ram_allocation_ratio"],
        disk_allocation_ratio=h["disk_allocation_ratio"],
        disk_available_least=None, numa_topology=None, pci_device_pools=None,
        host_ip=None, hypervisor_type="QEMU", hypervisor_version=0, cpu_info="{}",
        supported_hv_specs=[], stats={}, metrics="[]", updated_at=None)
    # ResourceTracker._update_usage_from_instances: room reserved for the host.
    cn.local_gb_used = h["reserved_host_disk_mb"] / 1024
    cn.memory_mb_used = h["reserved_host_memory_mb"]
    cn.vcpus_used = h["reserved_host_cpus"]
    # ResourceTracker._update_usage: the instances' usage, summed.
    cn.memory_mb_used += h["used_memory_mb"]
    cn.local_gb_used += h["used_disk_gb"]
    cn.vcpus_used += h["used_vcpus"]
    cn.free_ram_mb = cn.memory_mb - cn.memory_mb_used
    cn.free_disk_gb = cn.local_gb - cn.local_gb_used
    state = host_manager.HostState(h["host"], h["host"], None)
    state._update_from_compute_node(cn)
    return {key: getattr(state, key) for key in (
        "free_ram_mb", "free_disk_mb", "vcpus_total", "vcpus_used",
        "cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio")}


def main():
    out = []
    for case in json.load(sys.stdin):
        for key, value in case["config"].items():
            CONF.set_override(key, value, group="filter_scheduler")
        dest = None
        if case["dest_cell"] is not None:
            dest = objects.Destination(
                cell=objects.CellMapping(uuid=case["dest_cell"]),
                allow_cross_cell_move=case["cross_cell"])
        spec = objects.RequestSpec(requested_destination=dest, image=None)
        hosts = []
        for h in case["hosts"]:
            host = fakes.FakeHostState(h["host"], h["host"], {
                "failed_builds": h["failed_builds"],
                "hypervisor_version": h["hypervisor_version"],
                "num_instances": h["num_instances"],
                "cell_uuid": h["cell_uuid"],
                "num_io_ops": h["num_io_ops"],
                **resource_fields(h),
            })
            host.pci_stats = Pools(h["pci_free"])
            host.aggregates = []
            hosts.append(host)
        weighers = [WEIGHERS[name]() for name in case["weighers"]]
        weighed = weights.HostWeightHandler().get_weighed_objects(weighers, hosts, spec)
        out.append({w.obj.host: w.weight for w in weighed})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
