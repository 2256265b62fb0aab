"""Nova's side of tests/nova_compat.rs's quorum-queue test, configured with
`[oslo_messaging_rabbit] rabbit_quorum_queue = true`. Not a pytest module.

`declare`: an oslo.messaging RPC server on the scheduler topic, made by Nova's own
`nova.rpc.get_server` as nova-scheduler's is, started and stopped: it leaves the topic's queues
declared as nova-scheduler leaves them. `call`: one select_destinations from Nova's own client
(SchedulerAPI); prints the selection's host and its number of alternates as one JSON line."""

import json
import os
import sys
import tempfile
import uuid

AMQP_URL = os.environ["PARASOL_AMQP_URL"]
EXCHANGE = os.environ["PARASOL_EXCHANGE"]
TOPIC = os.environ["PARASOL_TOPIC"]
HOST = os.environ["PARASOL_RPC_HOST"]


def configure(program):
    from nova import config, objects

    conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    transport_url = "rabbit://" + AMQP_URL.split("://", 1)[1].replace("/%2f", "/").replace("/%2F", "/")
    conf.write(f"[DEFAULT]\ntransport_url = {transport_url}\ncontrol_exchange = {EXCHANGE}\n"
               f"host = {HOST}\n[oslo_messaging_rabbit]\nrabbit_quorum_queue = true\n")
    conf.close()
    objects.register_all()
    config.parse_args([program, "--config-file", conf.name], configure_db=False, init_rpc=True)
    os.unlink(conf.name)  # read by parse_args; nothing reads it again


def declare():
    import oslo_messaging as messaging
    from nova import rpc

    configure("nova-scheduler")
    server = rpc.get_server(messaging.Target(topic=TOPIC, server=HOST), endpoints=[])
    server.start()  # declares the exchange and the queues
    server.stop()
    server.wait()
    print(json.dumps({"declared": TOPIC}))


def call():
    from nova import context, objects
    from nova.scheduler import rpcapi

    configure("nova-conductor")
    rpcapi.RPC_TOPIC = TOPIC
    api = rpcapi.SchedulerAPI()
    flavor = objects.Flavor(id=1, name="f1", memory_mb=512, vcpus=1, root_gb=1, ephemeral_gb=0,
                            flavorid="1", swap=0, rxtx_factor=1.0, vcpu_weight=0, disabled=False,
                            is_public=True, extra_specs={}, projects=[], description=None)
    image = objects.ImageMeta.from_dict({"id": str(uuid.uuid4()), "name": "cirros", "properties": {}})
    ctxt = context.get_admin_context()
    instance = str(uuid.uuid4())
    spec = objects.RequestSpec.from_components(
        ctxt, instance, image, flavor, None, objects.InstancePCIRequests(requests=[]), {}, None,
        None, project_id="p", user_id="u")
    spec.num_instances = 1
    [[selection, *alternates]] = api.select_destinations(
        ctxt, spec, [instance], return_objects=True, return_alternates=True)
    print(json.dumps({"host": selection.service_host, "alternates": len(alternates)}))


if __name__ == "__main__":
    {"declare": declare, "call": call}[sys.argv[1]]()
    sys.stdout.flush()
