"""The caller side of `openstack-bench/examples/bench_nova_vs_parasol.rs`: what nova-conductor does
to schedule, with Nova 34's own code. It builds each RequestSpec with Nova's objects (flavor 1 VCPU
/ 512 MB / 1 GB root, no extra specs, one instance) and calls `select_destinations` through Nova's
`SchedulerQueryClient` (`SchedulerAPI` over oslo.messaging on the real RabbitMQ), Selection objects
with alternates, as conductor's `build_instances` asks for them.

Usage: python driver.py TRANSPORT_URL EXCHANGE DECISIONS CALLERS SEED WARMUP

The instance uuids come from SEED (the same series for every scheduler driven with that seed).
WARMUP calls are made first, one at a time, and not timed. Then DECISIONS calls are made by
CALLERS threads at once (each takes the next instance of the series) and timed one by one.
Prints one JSON object: every call's instance, latency, chosen host, node and compute node
uuid (or error), and the wall time of the timed part.
"""

import json
import random
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor


def wait_serving(ctxt):
    """Pings the scheduler topic (Nova's base RPC API) until a server answers: a call sent
    before the server's queue exists is lost, not queued."""
    from nova import baserpc, rpc
    import oslo_messaging as messaging

    target = messaging.Target(topic="scheduler", namespace=baserpc._NAMESPACE, version="1.1")
    pinger = rpc.get_client(target).prepare(timeout=2)
    deadline = time.monotonic() + 300
    while True:
        try:
            pinger.call(ctxt, "ping", arg={"placebench": 1})
            return
        except messaging.MessagingTimeout:
            if time.monotonic() > deadline:
                raise


def main(transport_url, exchange, decisions, callers, seed, warmup):
    from nova import config, context, objects
    from nova.scheduler.client import query
    import nova.conf

    conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    conf.write(f"[DEFAULT]\ntransport_url = {transport_url}\ncontrol_exchange = {exchange}\n"
               "rpc_response_timeout = 300\n"
               "[oslo_messaging_notifications]\ndriver = noop\n")
    conf.close()
    objects.register_all()
    config.parse_args(["placebench-driver", "--config-file", conf.name], configure_db=False,
                      init_rpc=True)
    client = query.SchedulerQueryClient()
    flavor = objects.Flavor(id=1, name="m1.bench", memory_mb=512, vcpus=1, root_gb=1,
                            ephemeral_gb=0, flavorid="1", swap=0, rxtx_factor=1.0, vcpu_weight=0,
                            disabled=False, is_public=True, extra_specs={}, projects=[],
                            description=None)
    image = objects.ImageMeta.from_dict({"id": "155d900f-4e14-4e4c-a73d-069cbf4541e6",
                                         "name": "cirros", "properties": {}})
    rng = random.Random(seed)
    series = [str(uuid.UUID(int=rng.getrandbits(128), version=4))
              for _ in range(warmup + decisions)]

    def call(instance):
        ctxt = context.get_admin_context()
        spec = objects.RequestSpec.from_components(
            ctxt, instance, image, flavor, None, objects.InstancePCIRequests(requests=[]), {},
            None, None, project_id="placebench", user_id="placebench")
        spec.num_instances = 1
        started = time.perf_counter()
        try:
            [[sel, *alternates]] = client.select_destinations(
                ctxt, spec, [instance], return_objects=True, return_alternates=True)
            out = {"host": sel.service_host, "node": sel.nodename,
                   "compute_node_uuid": sel.compute_node_uuid, "alternates": len(alternates)}
        except Exception as e:  # every failure is reported by its class
            out = {"error": f"{type(e).__name__}: {e}"}
        out["instance"] = instance
        out["ms"] = (time.perf_counter() - started) * 1000.0
        return out

    wait_serving(context.get_admin_context())
    warm = [call(i) for i in series[:warmup]]
    timed = series[warmup:]
    lock = threading.Lock()
    position = [0]

    def worker(_):
        done = []
        while True:
            with lock:
                if position[0] >= len(timed):
                    return done
                instance = timed[position[0]]
                position[0] += 1
            done.append(call(instance))

    started = time.perf_counter()
    with ThreadPoolExecutor(callers) as pool:
        results = [r for rs in pool.map(worker, range(callers)) for r in rs]
    wall_s = time.perf_counter() - started
    print(json.dumps({"warmup": warm, "calls": results, "wall_s": wall_s}))
    sys.stdout.flush()


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], int(a[2]), int(a[3]), int(a[4]), int(a[5]))
