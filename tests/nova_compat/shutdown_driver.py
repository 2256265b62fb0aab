"""64 concurrent select_destinations calls from Nova's own client (SchedulerAPI over
oslo.messaging), for tests/nova_compat.rs's shutdown test: prints one JSON line with every
call's outcome. Not a pytest module: the Rust test runs it while it stops a Parasol process."""

import json
import os
import sys
import tempfile
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

AMQP_URL = os.environ["PARASOL_AMQP_URL"]
EXCHANGE = os.environ["PARASOL_EXCHANGE"]
TOPIC = os.environ["PARASOL_TOPIC"]
CALLS = int(os.environ["PARASOL_CALLS"])
TIMEOUT_S = int(os.environ["PARASOL_RPC_TIMEOUT_S"])


def main():
    from nova import config, context, objects
    from nova.scheduler import rpcapi
    import nova.conf

    conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    transport_url = "rabbit://" + AMQP_URL.split("://", 1)[1].replace("/%2f", "/").replace("/%2F", "/")
    conf.write(f"[DEFAULT]\ntransport_url = {transport_url}\ncontrol_exchange = {EXCHANGE}\n"
               f"rpc_response_timeout = {TIMEOUT_S}\n")
    conf.close()
    objects.register_all()
    config.parse_args(["nova-shutdown", "--config-file", conf.name], configure_db=False, init_rpc=True)
    os.unlink(conf.name)  # read by parse_args; nothing reads it again
    rpcapi.RPC_TOPIC = TOPIC
    api = rpcapi.SchedulerAPI()
    flavor = objects.Flavor(id=1, name="f1", memory_mb=512, vcpus=1, root_gb=1, ephemeral_gb=0,
                            flavorid="1", swap=0, rxtx_factor=1.0, vcpu_weight=0, disabled=False,
                            is_public=True, extra_specs={}, projects=[], description=None)
    image = objects.ImageMeta.from_dict({"id": str(uuid.uuid4()), "name": "cirros", "properties": {}})
    start = threading.Barrier(CALLS)

    def call(i):
        ctxt = context.get_admin_context()
        instance = str(uuid.uuid4())
        spec = objects.RequestSpec.from_components(
            ctxt, instance, image, flavor, None, objects.InstancePCIRequests(requests=[]), {}, None,
            None, project_id="p", user_id="u")
        spec.num_instances = 1
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
