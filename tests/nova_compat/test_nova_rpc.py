"""Nova's own client (nova.scheduler.rpcapi.SchedulerAPI, Nova's objects and oslo.messaging)
against Parasol's RPC server. Run by tests/nova_compat.rs, which starts the Parasol processes
and passes their coordinates in PARASOL_* environment variables."""

import json
import os
import threading
import time
import urllib.parse
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from nova_setup import configure

AMQP_URL = os.environ["PARASOL_AMQP_URL"]
EXCHANGE = os.environ["PARASOL_EXCHANGE"]
TOPIC = os.environ["PARASOL_TOPIC"]
SLOW_TOPIC = os.environ["PARASOL_SLOW_TOPIC"]
SLOW_DELAY_S = float(os.environ["PARASOL_SLOW_DELAY_S"])
HTTP = os.environ["PARASOL_HTTP"].split(",")
HOSTS = int(os.environ["PARASOL_HOSTS"])
HOST_VCPUS = int(os.environ["PARASOL_HOST_VCPUS"])
_LOCK = threading.Lock()


@pytest.fixture(scope="session")
def nova():
    """Nova configured as nova-conductor would be, on the test's exchange."""
    import nova.conf

    # Versioned notifications on, as for the Parasol processes (`[rpc]
    # versioned_notifications`): Nova's payload classes build nothing otherwise.
    configure("nova-compat", AMQP_URL, EXCHANGE,
              "[notifications]\nnotification_format = versioned\n"
              "[oslo_messaging_notifications]\ndriver = messagingv2\n")
    return nova.conf.CONF


def scheduler_api(conf, level, topic=TOPIC):
    """A SchedulerAPI capped at `level` ([upgrade_levels] scheduler) on `topic`."""
    from nova.scheduler import rpcapi

    with _LOCK:
        conf.set_override("scheduler", level, group="upgrade_levels")
        saved, rpcapi.RPC_TOPIC = rpcapi.RPC_TOPIC, topic
        try:
            return rpcapi.SchedulerAPI()
        finally:
            rpcapi.RPC_TOPIC = saved
            conf.clear_override("scheduler", group="upgrade_levels")


def request_spec(ctxt, n=1, vcpus=1, memory_mb=512, root_gb=1):
    from nova import objects

    flavor = objects.Flavor(id=1, name=f"f{vcpus}", memory_mb=memory_mb, vcpus=vcpus, root_gb=root_gb,
                            ephemeral_gb=0, flavorid="1", swap=0, rxtx_factor=1.0, vcpu_weight=0,
                            disabled=False, is_public=True, extra_specs={}, projects=[], description=None)
    image = objects.ImageMeta.from_dict({"id": str(uuid.uuid4()), "name": "cirros", "properties": {}})
    uuids = [str(uuid.uuid4()) for _ in range(n)]
    spec = objects.RequestSpec.from_components(
        ctxt, uuids[0], image, flavor, None, objects.InstancePCIRequests(requests=[]), {}, None, None,
        project_id="p", user_id="u")
    spec.num_instances = n
    return spec, uuids


def get(path, base=HTTP[0]):
    with urllib.request.urlopen(base + path, timeout=10) as r:
        return json.load(r)


def used_vcpus():
    """VCPUs used per host once both processes' tables agree (each follows the other's claims
    through the ledger's change notifications, within milliseconds)."""
    seen = None
    for _ in range(100):
        views = [{h["host"]: h["used"]["VCPU"] for h in get("/v1/hosts", b)["hosts"]} for b in HTTP]
        if all(v == views[0] for v in views) and views[0] == seen:
            return seen
        seen = views[0] if all(v == views[0] for v in views) else None
        time.sleep(0.05)
    raise AssertionError(f"the processes' host tables never agreed: {views}")


def rpc_count(outcome):
    """How many of Nova's RPC messages both processes counted under `outcome` (`/v1/stats`)."""
    return sum(get("/v1/stats", b)["rpc"].get(outcome, 0) for b in HTTP)


def ctx():
    from nova import context
    return context.get_admin_context()


@pytest.mark.parametrize("level", ["4.5"])
def test_selections_deserialise_as_nova_objects_with_alternates(nova, level):
    from nova import objects

    api = scheduler_api(nova, level)
    spec, uuids = request_spec(ctx(), n=2)
    result = api.select_destinations(ctx(), spec, uuids, return_objects=True, return_alternates=True)
    assert len(result) == 2
    for per_instance in result:
        assert len(per_instance) == 3, "the pick and max_attempts - 1 alternates"
        assert len({s.service_host for s in per_instance}) == 3
        for sel in per_instance:
            assert isinstance(sel, objects.Selection)
            assert isinstance(sel.limits, objects.SchedulerLimits)
            assert sel.nodename == sel.service_host
            assert sel.availability_zone == "nova"
            json.loads(sel.allocation_request)
            assert sel.obj_to_primitive()["nova_object.version"] == "1.1"


@pytest.mark.parametrize("level", ["4.4", "4.3", "4.0", "pike", "mitaka", "kilo"])
def test_older_versions_get_nova_s_legacy_host_dicts(nova, level):
    api = scheduler_api(nova, level)
    spec, uuids = request_spec(ctx(), n=1)
    with pytest.raises(Exception) as e:
        api.select_destinations(ctx(), spec, uuids, return_objects=True)
    assert type(e.value).__name__ == "SelectionObjectsWithOldRPCVersionNotSupported"
    before = sum(used_vcpus().values())
    result = api.select_destinations(ctx(), spec, uuids)
    assert len(result) == 1 and set(result[0]) == {"host", "nodename", "limits"}
    assert result[0]["host"].startswith("compute")
    assert sum(used_vcpus().values()) == before + 1


def test_nothing_fits_raises_nova_s_own_no_valid_host(nova):
    from nova import exception

    for level in ["4.5", "4.0"]:
        api = scheduler_api(nova, level)
        spec, uuids = request_spec(ctx(), vcpus=HOST_VCPUS + 1)
        with pytest.raises(exception.NoValidHost) as e:
            api.select_destinations(ctx(), spec, uuids, return_objects=level == "4.5")
        assert "No valid host was found" in str(e.value)


def test_a_slow_call_outlives_rpc_response_timeout_through_heartbeats(nova):
    nova.set_override("rpc_response_timeout", 2)
    try:
        api = scheduler_api(nova, "4.5", topic=SLOW_TOPIC)
        spec, uuids = request_spec(ctx())
        assert SLOW_DELAY_S > 2 * nova.rpc_response_timeout
        result = api.select_destinations(ctx(), spec, uuids, return_objects=True)
        assert len(result) == 1
    finally:
        nova.clear_override("rpc_response_timeout")


def test_ping_answers_as_base_rpc_api(nova):
    from nova import baserpc, rpc
    import oslo_messaging as messaging

    target = messaging.Target(topic=TOPIC, namespace=baserpc._NAMESPACE, version="1.1")
    client = rpc.get_client(target)
    assert client.call(ctx(), "ping", arg={"x": 1}) == {"service": "scheduler", "arg": {"x": 1}}


def test_fanout_and_instance_info_casts(nova):
    from nova import objects

    api = scheduler_api(nova, "4.5")
    spec, uuids = request_spec(ctx(), n=1, vcpus=2)
    [[sel, *_]] = api.select_destinations(ctx(), spec, uuids, return_objects=True, return_alternates=True)
    host, before = sel.service_host, used_vcpus()
    instance = objects.Instance(uuid=uuids[0], host=host, node=host)
    info = objects.InstanceList(objects=[instance])
    # Nova's fanout casts (to <topic>_fanout, this test's own exchange: no parallel test sees them).
    api.update_instance_info(ctx(), host, info)
    api.sync_instance_info(ctx(), host, uuids)
    api.update_aggregates(ctx(), [])
    api.delete_aggregate(ctx(), objects.Aggregate(id=1, name="a"))
    # The same casts point-to-point reach Parasol's topic queue and change its ledger:
    # update_instance_info confirms the claim (so a second call for the instance is a move, its
    # source held on `host`); delete_instance_info from `host`, where nothing is held yet,
    # frees nothing (it never frees the instance itself: after a resize on the same host the
    # instance stays on the host that sends it).
    applied = rpc_count("instance_info")
    cctxt = api.client.prepare(version="4.2")
    cctxt.cast(ctx(), "update_instance_info", host_name=host, instance_info=info)
    cctxt.cast(ctx(), "delete_instance_info", host_name=host, instance_uuid=uuids[0])
    api.client.prepare(version="4.1").cast(ctx(), "update_aggregates", aggregates=[])
    for _ in range(100):
        if rpc_count("instance_info") >= applied + 2:
            break
        time.sleep(0.1)
    assert rpc_count("instance_info") == applied + 2, "both casts applied"
    assert used_vcpus()[host] == before[host], "delete_instance_info freed the instance"
    # Migrated elsewhere: the source stays held until the source's delete_instance_info (what
    # confirm_resize sends) releases it.
    spec.ignore_hosts = [host]
    [[moved, *_]] = api.select_destinations(ctx(), spec, uuids, return_objects=True, return_alternates=True)
    assert moved.service_host != host
    assert used_vcpus()[host] == before[host], "the source is held"
    cctxt.cast(ctx(), "delete_instance_info", host_name=host, instance_uuid=uuids[0])
    for _ in range(100):
        if used_vcpus()[host] == before[host] - 2:
            break
        time.sleep(0.1)
    assert used_vcpus()[host] == before[host] - 2, "delete_instance_info released the held source"
    spec, uuids = request_spec(ctx())
    assert api.select_destinations(ctx(), spec, uuids, return_objects=True)


def _nova_payload(spec):
    """The RequestSpecPayload Nova's own code builds from `spec`, as Nova emits it."""
    from nova.notifications.objects import request_spec as payloads

    payload = payloads.RequestSpecPayload(request_spec=spec)
    payload.obj_reset_changes(recursive=True)
    return json.loads(json.dumps(payload.obj_to_primitive()))


def _differences(got, want, path="payload"):
    """Where two JSON values differ, as `path: got != want` lines."""
    if isinstance(got, dict) and isinstance(want, dict):
        out = []
        for k in sorted(set(got) | set(want)):
            if k not in got or k not in want:
                out.append(f"{path}.{k}: {got.get(k, '<absent>')!r} != {want.get(k, '<absent>')!r}")
            else:
                out += _differences(got[k], want[k], f"{path}.{k}")
        return out
    return [] if got == want else [f"{path}: {got!r} != {want!r}"]


def _varied_specs(ctxt):
    """RequestSpecs that exercise every part of the payload Parasol can place: a server
    group with rules, a retry, forced hosts, a requested destination in a cell, security
    groups by name and by uuid, image properties, scheduler hints."""
    from nova import objects

    spec, uuids = request_spec(ctxt)
    spec.image = objects.ImageMeta.from_dict({
        "id": str(uuid.uuid4()), "name": "img", "status": "active", "min_ram": 0,
        "disk_format": "qcow2", "container_format": "bare", "size": 1024, "tags": ["t"],
        "properties": {"hw_architecture": "x86_64", "hw_disk_bus": "virtio"}})
    spec.scheduler_hints = {"group": ["g"], "same_host": []}
    spec.security_groups = objects.SecurityGroupList(objects=[
        objects.SecurityGroup(name="default"),
        objects.SecurityGroup(name="web", uuid=str(uuid.uuid4()))])
    spec.instance_group = objects.InstanceGroup(
        uuid=str(uuid.uuid4()), name="g", policy="anti-affinity", members=[uuids[0]],
        hosts=[], rules={"max_server_per_host": "2"}, user_id="u", project_id="p")
    spec.retry = objects.SchedulerRetries(num_attempts=2, hosts=objects.ComputeNodeList(
        objects=[objects.ComputeNode(host="compute05", hypervisor_hostname="compute05")]))
    forced, _ = request_spec(ctxt)
    forced.force_hosts = ["compute03"]
    forced.force_nodes = ["compute03"]
    aimed, _ = request_spec(ctxt)
    aimed.requested_destination = objects.Destination(
        host="compute04", node="compute04",
        cell=objects.CellMapping(uuid=str(uuid.uuid4()), name="cell1", disabled=False))
    return [(spec, uuids), (forced, [forced.instance_uuid]), (aimed, [aimed.instance_uuid])]


def test_select_destinations_emits_nova_s_versioned_notifications(nova):
    """`[rpc] versioned_notifications`: every call publishes `scheduler.select_destinations
    .start` and `.end` as nova-scheduler does, received here by oslo.messaging's own
    notification listener, with the payload Nova's own `RequestSpecPayload` builds from the
    same RequestSpec; a call refused by a filter (a PCI request, which Parasol cannot place
    without [nova_db]) sends `.start` alone, and one Placement would have had no candidate
    for (more VCPUs than any host has) sends none, as Nova raises before its notifications."""
    import amqp
    import oslo_messaging as messaging
    from nova import exception, objects, rpc

    got = []

    class Endpoint:
        def info(self, ctxt, publisher_id, event_type, payload, metadata):
            got.append({"ctxt": ctxt, "publisher_id": publisher_id, "event_type": event_type,
                        "payload": payload})

    pool = f"parasol-compat-notifications-{uuid.uuid4().hex}"
    listener = messaging.get_notification_listener(
        rpc.NOTIFICATION_TRANSPORT,
        [messaging.Target(topic="versioned_notifications", exchange=EXCHANGE)],
        [Endpoint()], executor="threading", pool=pool)
    listener.start()

    def notifications_of(instance, n):
        for _ in range(100):
            mine = [g for g in got if g["payload"]["nova_object.data"]["instance_uuid"] == instance]
            if len(mine) >= n:
                time.sleep(0.2)  # nothing more may come
                return [g for g in got
                        if g["payload"]["nova_object.data"]["instance_uuid"] == instance]
            time.sleep(0.05)
        return [g for g in got if g["payload"]["nova_object.data"]["instance_uuid"] == instance]

    try:
        api = scheduler_api(nova, "4.5")
        ctxt = ctx()
        for spec, uuids in _varied_specs(ctxt):
            api.select_destinations(ctxt, spec, uuids, return_objects=True,
                                    return_alternates=True)
            mine = notifications_of(spec.instance_uuid, 2)
            assert [m["event_type"] for m in mine] == [
                "scheduler.select_destinations.start", "scheduler.select_destinations.end"]
            expected = _nova_payload(spec)
            for m in mine:
                assert m["publisher_id"] in ("nova-scheduler:p1", "nova-scheduler:p2")
                assert m["ctxt"]["request_id"] == ctxt.request_id
                assert m["payload"] == expected, _differences(m["payload"], expected)

        refused, uuids = request_spec(ctxt)
        refused.pci_requests = objects.InstancePCIRequests(requests=[objects.InstancePCIRequest(
            count=1, spec=[{"vendor_id": "8086", "product_id": "1520"}], alias_name="a1",
            request_id=str(uuid.uuid4()))])
        refused.numa_topology = objects.InstanceNUMATopology(cells=[objects.InstanceNUMACell(
            id=0, cpuset=set([0]), pcpuset=set(), memory=512)])
        with pytest.raises(exception.NoValidHost):
            api.select_destinations(ctxt, refused, uuids, return_objects=True)
        mine = notifications_of(refused.instance_uuid, 1)
        assert [m["event_type"] for m in mine] == ["scheduler.select_destinations.start"]
        expected = _nova_payload(refused)
        assert mine[0]["payload"] == expected, _differences(mine[0]["payload"], expected)

        too_big, uuids = request_spec(ctxt, vcpus=HOST_VCPUS + 1)
        with pytest.raises(exception.NoValidHost) as e:
            api.select_destinations(ctxt, too_big, uuids, return_objects=True)
        # Nova's NoValidHost(reason="") when Placement lists no candidate (the remote
        # exception's text goes on with the remote traceback).
        assert e.value.kwargs.get("reason") == "", e.value.kwargs
        assert str(e.value).split("\n")[0] == "No valid host was found. "
        assert notifications_of(too_big.instance_uuid, 1) == []
    finally:
        listener.stop()
        listener.wait()
        parts = urllib.parse.urlsplit(AMQP_URL)
        conn = amqp.Connection(host=f"{parts.hostname}:{parts.port or 5672}",
                               userid=parts.username, password=parts.password,
                               virtual_host=urllib.parse.unquote(parts.path[1:]) or "/")
        conn.connect()
        conn.channel().queue_delete(pool)
        conn.close()


def test_32_concurrent_nova_clients_never_oversubscribe(nova):
    from nova import exception

    calls_per_client, clients = 10, 32
    start = {h: u for h, u in used_vcpus().items()}
    free = HOSTS * HOST_VCPUS - sum(start.values())
    assert clients * calls_per_client > free, "the load must exceed the capacity"
    requests_before = sum(get("/v1/stats", b)["backends"]["filter"]["requests"] for b in HTTP)

    def client(i):
        api = scheduler_api(nova, "4.5")
        placed, refused = [], 0
        for _ in range(calls_per_client):
            spec, uuids = request_spec(ctx())
            try:
                [[sel, *_]] = api.select_destinations(ctx(), spec, uuids, return_objects=True,
                                                      return_alternates=True)
                placed.append(sel.service_host)
            except exception.NoValidHost:
                refused += 1
        return placed, refused

    with ThreadPoolExecutor(clients) as pool:
        outcomes = list(pool.map(client, range(clients)))
    placed = [h for p, _ in outcomes for h in p]
    refused = sum(r for _, r in outcomes)
    assert len(placed) + refused == clients * calls_per_client, "every call answered"
    assert len(placed) == free, "every free slot used, none twice"
    used = used_vcpus()
    assert all(u <= HOST_VCPUS for u in used.values()), f"oversubscribed: {used}"
    assert sum(used.values()) == sum(start.values()) + len(placed)
    per_process = [get("/v1/stats", b)["backends"]["filter"]["requests"] for b in HTTP]
    assert sum(per_process) - requests_before == clients * calls_per_client, "each call decided once"
    assert all(n > 0 for n in per_process), f"both processes served calls: {per_process}"

