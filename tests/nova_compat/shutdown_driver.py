"""64 concurrent select_destinations calls from Nova's own client (SchedulerAPI over
oslo.messaging), for tests/nova_compat.rs's shutdown test: prints one JSON line with every
call's outcome. Not a pytest module: the Rust test runs it while it stops a Parasol process."""

import json
import os
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

from nova_setup import configure, one_instance_spec

AMQP_URL = os.environ["PARASOL_AMQP_URL"]
EXCHANGE = os.environ["PARASOL_EXCHANGE"]
TOPIC = os.environ["PARASOL_TOPIC"]
CALLS = int(os.environ["PARASOL_CALLS"])
TIMEOUT_S = int(os.environ["PARASOL_RPC_TIMEOUT_S"])


def main():
    from nova import context
    from nova.scheduler import rpcapi

    configure("nova-shutdown", AMQP_URL, EXCHANGE, f"rpc_response_timeout = {TIMEOUT_S}\n")
    rpcapi.RPC_TOPIC = TOPIC
    api = rpcapi.SchedulerAPI()
    start = threading.Barrier(CALLS)

    def call(i):
        ctxt = context.get_admin_context()
        instance = str(uuid.uuid4())
        spec = one_instance_spec(ctxt, instance)
        start.wait()
        try:
            [[sel, *_]] = api.select_destinations(ctxt, spec, [instance], return_objects=True,
                                                  return_alternates=True)
            return {"instance": instance, "host": sel.service_host}
        except Exception as e:  # the test reports every failure by its class
            return {"instance": instance, "error": f"{type(e).__name__}: {e}"}

    with ThreadPoolExecutor(CALLS) as pool:
        outcomes = list(pool.map(call, range(CALLS)))
    print(json.dumps(outcomes))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
