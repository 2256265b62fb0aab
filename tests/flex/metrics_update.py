"""Prints the versioned `metrics.update` notification nova-compute sends, made by Nova's own
code: the `cpu.virt_driver` monitor reading the fake virt driver's host CPU statistics, then
`nova.compute.utils.notify_about_metrics_update` emitting it through oslo.messaging's
notifier (its in-memory `test` driver keeps what it sent). One JSON object per line, the
message as it goes out on the bus (without oslo's envelope).

stdin: {"host": ..., "nodename": ..., "cpu_stats": {...}}; `cpu_stats` (optional) replaces what
the fake driver's `get_host_cpu_stats` returns (its `user`, `kernel`, `idle`, `iowait` times and
`frequency`), so that hosts report different loads; the monitor computes the rest.
"""

import json
import sys

import oslo_messaging

from oslo_messaging.notify import _impl_test
from oslo_messaging.notify import notifier as oslo_notifier

import nova.conf
from nova.compute.monitors.cpu import virt_driver as cpu_monitor
from nova.compute import utils as compute_utils
from nova import context as nova_context
from nova import objects
from nova import rpc
from nova.virt import fake

CONF = nova.conf.CONF


def main():
    args = json.load(sys.stdin)
    CONF([], project="nova")
    CONF.register_opts(oslo_notifier._notifier_opts, group="oslo_messaging_notifications")
    oslo_messaging.set_transport_defaults("nova")
    oslo_messaging.get_notification_transport(CONF, url="fake:/")
    CONF.set_override("transport_url", "fake:/")
    CONF.set_override("notification_format", "versioned", group="notifications")
    CONF.set_override("driver", ["test"], group="oslo_messaging_notifications")
    CONF.set_override("compute_driver", "fake.FakeDriver")
    objects.register_all()
    rpc.init(CONF)

    class Tracker:
        """What the monitor reads of nova-compute's resource tracker: its virt driver."""

        driver = fake.FakeDriver(None)

    if args.get("cpu_stats"):
        Tracker.driver.get_host_cpu_stats = lambda: dict(args["cpu_stats"])

    monitor = cpu_monitor.Monitor(Tracker())
    metrics = objects.MonitorMetricList()
    monitor.populate_metrics(metrics)
    ctxt = nova_context.get_admin_context()
    compute_utils.notify_about_metrics_update(
        ctxt, args["host"], "10.0.0.2", args["nodename"], metrics
    )
    for _ctxt, message, _priority, _retry in _impl_test.NOTIFICATIONS:
        if message["event_type"] == "metrics.update":
            print(json.dumps(message, default=str))


if __name__ == "__main__":
    main()
