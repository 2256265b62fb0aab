"""Nova 34's own weighers and weight handler on the cases tests/nova_filters.rs generates:
reads the cases (JSON) on stdin, prints each case's final weight per host (JSON)."""
import json
import sys

import nova.conf
from nova import objects
from nova.scheduler import weights
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
                "free_ram_mb": h["free_ram_mb"],
                "vcpus_total": h["vcpus_total"],
                "vcpus_used": h["vcpus_used"],
                "cpu_allocation_ratio": 1.0,
                "free_disk_mb": h["free_disk_mb"],
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
