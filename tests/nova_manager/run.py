"""Nova 34's own SchedulerManager on the cases tests/nova_manager.rs generates: reads the cases
(JSON) on stdin, prints per case the service hosts of each instance's selection, claimed host
first then its alternates, or "NoValidHost" (JSON).

The manager's `_schedule` runs as nova-scheduler runs it, with Placement's answers: the
allocation candidates of the call (one per host that has room for the flavor when the call
starts) and the claims (`PUT /allocations`, which Placement grants while the host has room),
both computed from the case's inventories and usage, as Placement computes them; and with
the case's hosts as the HostManager's host states (`_get_all_host_states`)."""
import json
import sys

import nova.conf
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler import host_manager
from nova.scheduler import manager
from nova.scheduler import utils as scheduler_utils
from nova.scheduler import weights
from nova.scheduler import filters

objects.register_all()
CONF = nova.conf.CONF


class Placement:
    """Placement's view of the case's providers: usage against inventory."""

    def __init__(self, hosts):
        # Placement's capacity: int((total - reserved) * allocation_ratio).
        self.total = {
            h["uuid"]: [int((t - r) * a) for t, r, a in zip(
                (h["vcpus"], h["memory_mb"], h["disk_gb"]), h["reserved"], h["ratio"])]
            for h in hosts}
        self.used = {h["uuid"]: list(h["used"]) for h in hosts}

    def fits(self, uuid, demand):
        return all(u + d <= t for u, d, t in zip(self.used[uuid], demand, self.total[uuid]))

    def claim(self, uuid, demand):
        if not self.fits(uuid, demand):
            return False
        self.used[uuid] = [u + d for u, d in zip(self.used[uuid], demand)]
        return True

    def delete_allocation_for_instance(self, context, uuid, force=False):
        pass


class Manager(manager.SchedulerManager):
    """The manager without its service: a HostManager with the configured filters and
    weighers, the case's host states."""

    def __init__(self, host_states, placement):
        hm = host_manager.HostManager.__new__(host_manager.HostManager)
        hm.filter_handler = filters.HostFilterHandler()
        classes = hm.filter_handler.get_matching_classes(
            CONF.filter_scheduler.available_filters)
        hm.filter_cls_map = {cls.__name__: cls for cls in classes}
        hm.filter_obj_map = {}
        hm.enabled_filters = hm._choose_host_filters(CONF.filter_scheduler.enabled_filters)
        hm.weight_handler = weights.HostWeightHandler()
        hm.weighers = [cls() for cls in hm.weight_handler.get_matching_classes(
            CONF.filter_scheduler.weight_classes)]
        self.host_manager = hm
        self.host_states = host_states
        self.placement = placement

    @property
    def placement_client(self):
        return self.placement

    def _get_all_host_states(self, context, spec_obj, provider_summaries):
        return iter(self.host_states)


def host_state(h):
    """The host's HostState as `_update_from_compute_node` leaves it for a compute node that
    nova-compute's resource tracker filled: the reserved amounts counted as used, free =
    total - used (no allocation ratio), the ratios beside."""
    state = host_manager.HostState(h["host"], h["host"], h["cell"])
    state.uuid = h["uuid"]
    vcpus_used, ram_used, disk_used = h["used"]
    reserved_vcpus, reserved_ram, reserved_disk = h["reserved"]
    state.vcpus_total = h["vcpus"]
    state.vcpus_used = reserved_vcpus + vcpus_used
    state.total_usable_ram_mb = h["memory_mb"]
    state.free_ram_mb = h["memory_mb"] - reserved_ram - ram_used
    state.total_usable_disk_gb = h["disk_gb"]
    state.free_disk_mb = (h["disk_gb"] - reserved_disk - disk_used) * 1024
    state.cpu_allocation_ratio, state.ram_allocation_ratio, state.disk_allocation_ratio = (
        h["ratio"])
    state.num_instances = len(h["instances"])
    state.num_io_ops = len(h["instances"])
    state.instances = {u: objects.Instance(uuid=u) for u in h["instances"]}
    state.aggregates = []
    return state


def spec_of(case):
    f = case["flavor"]
    flavor = objects.Flavor(
        name="golden", flavorid="golden", vcpus=f[0], memory_mb=f[1], root_gb=f[2],
        ephemeral_gb=0, swap=0, extra_specs={})
    group = None
    if case["group"] is not None:
        g = case["group"]
        group = objects.InstanceGroup(
            uuid="11111111-2222-4333-8444-555555555555", policy=g["policy"],
            policies=[g["policy"]],
            members=list(g["members"]), hosts=list(g["hosts"]), rules={})
    return objects.RequestSpec(
        flavor=flavor, num_instances=len(case["instances"]),
        instance_uuid=case["instances"][0], instance_group=group,
        ignore_hosts=None, force_hosts=None, force_nodes=None,
        requested_destination=None, pci_requests=None, numa_topology=None,
        image=objects.ImageMeta(properties=objects.ImageMetaProps()),
        scheduler_hints={}, availability_zone=None, project_id="p", user_id="u",
        requested_resources=[], is_bfv=False)


def run(case):
    for key, value in case["config"].items():
        CONF.set_override(key, value, group="filter_scheduler")
    CONF.set_override("max_attempts", case["max_attempts"], group="scheduler")
    placement = Placement(case["hosts"])
    demand = case["flavor"]
    # Placement's allocation candidates when the call starts: the hosts with room.
    candidates = [h for h in case["hosts"] if placement.fits(h["uuid"], demand)]
    if not candidates:
        return "NoValidHost"
    alloc_reqs = {h["uuid"]: [{"allocations": {h["uuid"]: {}}, "mappings": {}}]
                  for h in candidates}
    summaries = {h["uuid"]: {} for h in candidates}
    mgr = Manager([host_state(h) for h in candidates], placement)

    def claim_resources(ctx, client, spec_obj, instance_uuid, alloc_req,
                        allocation_request_version=None):
        (uuid,) = alloc_req["allocations"].keys()
        return placement.claim(uuid, demand)

    scheduler_utils.claim_resources = claim_resources
    try:
        selections = mgr._schedule(
            nova_context.get_admin_context(), spec_of(case), list(case["instances"]),
            alloc_reqs, summaries, "1.36", True)
    except exception.NoValidHost:
        return "NoValidHost"
    return [[s.service_host for s in per_instance] for per_instance in selections]


def main():
    json.dump([run(case) for case in json.load(sys.stdin)], sys.stdout)


if __name__ == "__main__":
    main()
