"""Nova 34's own weighers and weight handler on the cases tests/nova_filters.rs generates:
reads the cases (JSON) on stdin, prints each case's final weight per host (JSON)."""
import json
import sys

import nova.conf
from nova import objects
from nova.scheduler import weights
from nova.scheduler.weights import compute, cross_cell, hypervisor_version, image_props
from nova.scheduler.weights import metrics, num_instances, pci
from nova.tests.unit.scheduler import fakes

objects.register_all()
CONF = nova.conf.CONF

WEIGHERS = {
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
