"""Nova's side of tests/nova_compat.rs's quorum-queue test, configured with
`[oslo_messaging_rabbit] rabbit_quorum_queue = true`. Not a pytest module.

`declare`: an oslo.messaging RPC server on the scheduler topic, made by Nova's own
`nova.rpc.get_server` as nova-scheduler's is, started and stopped: it leaves the topic's queues
declared as nova-scheduler leaves them. `call`: one select_destinations from Nova's own client
(SchedulerAPI); prints the selection's host and its number of alternates as one JSON line."""

import json
import os
import sys
import uuid

from nova_setup import configure as configure_nova
from nova_setup import one_instance_spec

AMQP_URL = os.environ["PARASOL_AMQP_URL"]
EXCHANGE = os.environ["PARASOL_EXCHANGE"]
TOPIC = os.environ["PARASOL_TOPIC"]
HOST = os.environ["PARASOL_RPC_HOST"]


def configure(program):
    configure_nova(program, AMQP_URL, EXCHANGE,
                   f"host = {HOST}\n[oslo_messaging_rabbit]\nrabbit_quorum_queue = true\n")


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
    from nova import context
    from nova.scheduler import rpcapi

    configure("nova-conductor")
    rpcapi.RPC_TOPIC = TOPIC
    api = rpcapi.SchedulerAPI()
    ctxt = context.get_admin_context()
    instance = str(uuid.uuid4())
    spec = one_instance_spec(ctxt, instance)
    [[selection, *alternates]] = api.select_destinations(
        ctxt, spec, [instance], return_objects=True, return_alternates=True)
    print(json.dumps({"host": selection.service_host, "alternates": len(alternates)}))


if __name__ == "__main__":
    {"declare": declare, "call": call}[sys.argv[1]]()
    sys.stdout.flush()
