"""Nova's own client (nova.scheduler.rpcapi.SchedulerAPI, Nova's objects and oslo.messaging)
against Parasol's RPC server. Run by tests/nova_compat.rs, which starts the Parasol processes
and passes their coordinates in PARASOL_* environment variables."""

import json
import os
import threading
import time
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

    configure("nova-compat", AMQP_URL, EXCHANGE)
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
    # The same casts point-to-point reach Parasol's topic queue and change its ledger.
    cctxt = api.client.prepare(version="4.2")
    cctxt.cast(ctx(), "update_instance_info", host_name=host, instance_info=info)
    cctxt.cast(ctx(), "delete_instance_info", host_name=host, instance_uuid=uuids[0])
    api.client.prepare(version="4.1").cast(ctx(), "update_aggregates", aggregates=[])
    for _ in range(100):
        if used_vcpus()[host] == before[host] - 2:
            break
        time.sleep(0.1)
    assert used_vcpus()[host] == before[host] - 2, "delete_instance_info freed the instance"
    spec, uuids = request_spec(ctx())
    assert api.select_destinations(ctx(), spec, uuids, return_objects=True)


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
