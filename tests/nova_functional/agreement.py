"""The end-of-test check: Nova's servers, Placement's allocations and (in `parasol` mode)
Parasol's ledger agree (runs in the venv, inside the test, before its cleanups). Three pairs,
each reported on its own:

- `placement_nova` (Nova's own part): every server on a node, soft-deleted ones included (a
  deferred delete keeps the allocation until the reclaim, and a restore needs it), holds, on
  that node's provider, exactly its flavor's VCPU, MEMORY_MB and DISK_GB (Nova's
  `resources_from_flavor`); every Placement consumer is such a server or a migration still in
  progress.
- `parasol_placement`: every compute provider is a host in Parasol's ledger with the same usage
  of the three classes, and the ledger has no host Placement lacks.
- `parasol_nova`: Parasol's ledger counts, per host, as many instances as Nova has servers on
  that node.

Background work of the test may still be landing, and Parasol learns from notifications and
syncs, so a disagreement is re-read for up to `SETTLE_S` before it is recorded.
"""

import time

import requests

from nova import context as nova_context
from nova import objects
from nova.scheduler import utils as scheduler_utils

CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB")
SETTLE_S = 3.0
FINAL_MIGRATION_STATES = {"confirmed", "reverted", "error", "failed", "completed", "done",
                          "cancelled"}
HEADERS = {"x-auth-token": "admin", "OpenStack-API-Version": "placement 1.28"}


def _get(url):
    resp = requests.get(url, headers=HEADERS, timeout=10)
    resp.raise_for_status()
    return resp.json()


def placement_view(base):
    """{rp uuid: {"name", "usages", "allocations": {consumer: {class: amount}}}}."""
    view = {}
    for rp in _get(f"{base}/resource_providers")["resource_providers"]:
        u = rp["uuid"]
        allocs = _get(f"{base}/resource_providers/{u}/allocations")["allocations"]
        view[u] = {
            "name": rp["name"],
            "usages": _get(f"{base}/resource_providers/{u}/usages")["usages"],
            "allocations": {c: a["resources"] for c, a in allocs.items()},
        }
    return view


def nova_view():
    """Instances not deleted (soft-deleted ones included), migrations and compute nodes
    ({node: service host}) of every cell."""
    ctxt = nova_context.get_admin_context()
    instances, migrations, computes = [], {}, {}
    for cell in objects.CellMappingList.get_all(ctxt):
        with nova_context.target_cell(ctxt, cell) as cctxt:
            instances.extend(objects.InstanceList.get_by_filters(
                cctxt, {"deleted": False, "soft_deleted": True}, expected_attrs=["flavor"]))
            for m in objects.MigrationList.get_by_filters(cctxt, {}):
                migrations[m.uuid] = m.status
            for node in objects.ComputeNodeList.get_all(cctxt):
                computes[node.hypervisor_hostname] = node.host
    return instances, migrations, computes


def _node_uuid(placement, node):
    for u, rp in placement.items():
        if rp["name"] == node:
            return u
    return None


def nova_problems(placement, instances, migrations):
    problems = []
    consumers = {}
    for u, rp in placement.items():
        for consumer, resources in rp["allocations"].items():
            consumers.setdefault(consumer, {})[u] = resources
    live = {i.uuid: i for i in instances}
    for inst in instances:
        if not inst.node or inst.vm_state == "shelved_offloaded":
            continue
        rp = _node_uuid(placement, inst.node)
        want = {c: v for c, v in scheduler_utils.resources_from_flavor(
            inst, inst.flavor).items() if c in CLASSES and v}
        got = {c: v for c, v in consumers.get(inst.uuid, {}).get(rp, {}).items()
               if c in CLASSES and v}
        if want != got:
            problems.append(f"server {inst.uuid} on {inst.node}: flavor {want}, "
                            f"Placement {got or 'nothing'}")
    for consumer, where in consumers.items():
        if consumer in live:
            continue
        status = migrations.get(consumer)
        if status is None:
            problems.append(f"Placement consumer {consumer} is no live server or migration")
        elif status in FINAL_MIGRATION_STATES:
            problems.append(f"migration {consumer} is {status} but holds {where}")
    return problems


PAIRS = ("placement_nova", "parasol_placement", "parasol_nova")


def parasol_problems(placement, parasol_url, instances):
    """(Parasol ↔ Placement problems, Parasol ↔ Nova problems)."""
    usage, counts = [], []
    hosts = _get(f"{parasol_url}/v1/hosts")["hosts"]
    by_uuid = {h["compute_node_uuid"]: h for h in hosts}
    for u, rp in placement.items():
        if not any(c in rp["usages"] or c in rp["allocations"] for c in CLASSES):
            continue
        host = by_uuid.pop(u, None)
        if host is None:
            usage.append(f"provider {rp['name']} ({u}) is not in Parasol's ledger")
            continue
        want = {c: rp["usages"].get(c, 0) for c in CLASSES}
        got = {c: host["used"].get(c, 0) for c in CLASSES}
        if want != got:
            usage.append(f"{rp['name']}: Placement uses {want}, Parasol's ledger {got}")
        servers = sum(1 for i in instances if i.node == rp["name"])
        if host.get("num_instances") != servers:
            counts.append(f"{rp['name']}: Nova has {servers} servers, Parasol's ledger "
                          f"{host.get('num_instances')}")
    for host in by_uuid.values():
        usage.append(f"Parasol's ledger has {host['host']} ({host['compute_node_uuid']}), "
                     f"Placement does not")
    return usage, counts


def _pair(problems):
    return {"agree": not problems, "problems": problems[:10]}


def check(placement_url, parasol_url=None, settle_s=SETTLE_S):
    """{"agree": bool, "pairs": {pair: {"agree", "problems"}}, "problems": [...] (all pairs),
    "computes": {node: host}} (the Parasol pairs only with `parasol_url`), or
    {"agree": None, "skipped": why}."""
    if placement_url is None:
        return {"agree": None, "skipped": "the test started no Placement"}
    deadline = time.monotonic() + settle_s
    while True:
        try:
            placement = placement_view(placement_url)
            instances, migrations, computes = nova_view()
            pairs = {"placement_nova": nova_problems(placement, instances, migrations)}
            if parasol_url:
                pairs["parasol_placement"], pairs["parasol_nova"] = parasol_problems(
                    placement, parasol_url, instances)
        except Exception as e:  # the test may have torn down what the check reads
            return {"agree": None, "skipped": f"{type(e).__name__}: {e}"[:300]}
        problems = [p for pair in pairs.values() for p in pair]
        if not problems or time.monotonic() >= deadline:
            return {"agree": not problems, "problems": problems[:10],
                    "pairs": {k: _pair(v) for k, v in pairs.items()}, "computes": computes}
        time.sleep(0.25)
