"""Messages Parasol's own functional tests send to the running Parasol (`POST
/v1/notifications`), as Nova's services would publish them."""

import datetime
import uuid

import requests

from nova_functional import swap


def metrics_update(host, percent, source):
    """Nova's versioned `metrics.update` for `host` (node named as the host, as the fake
    driver names it) with `cpu.percent`, measured now by driver `source`."""
    now = datetime.datetime.now(datetime.timezone.utc)
    metric = {"nova_object.name": "MetricPayload", "nova_object.namespace": "nova",
              "nova_object.version": "1.0",
              "nova_object.data": {"name": "cpu.percent", "value": percent,
                                   "numa_membw_values": None,
                                   "timestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                   "source": source}}
    return {"message_id": str(uuid.uuid4()), "publisher_id": f"nova-compute:{host}",
            "event_type": "metrics.update", "priority": "INFO",
            "timestamp": now.strftime("%Y-%m-%d %H:%M:%S.%f"),
            "payload": {"nova_object.name": "MetricsPayload", "nova_object.namespace": "nova",
                        "nova_object.version": "1.0",
                        "nova_object.data": {"host": host, "host_ip": "10.0.0.2",
                                             "nodename": host, "metrics": [metric]}}}


def notify(test, message):
    """Posts `message` to the test's running Parasol; asserts it was taken."""
    r = requests.post(f"{swap.parasol_url()}/v1/notifications", json=message, timeout=10)
    test.assertEqual(200, r.status_code, r.text)
