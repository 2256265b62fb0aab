"""Parasol's own versioned notifications, into the test's `FakeVersionedNotifier` (runs in the
venv, `parasol` mode).

nova-scheduler emits `scheduler.select_destinations.start` and `.end` inside the call, in the
test's process, so the fake notifier holds them before the conductor goes on; the notification
sample tests assert them first, in that order. Parasol publishes the same notifications on
the broker (`[rpc] versioned_notifications`, routing key `<topic>.info` on the control
exchange) before it replies. Here an exclusive queue bound to those routing keys takes them,
and when a `select_destinations` call returns (placed or NoValidHost) the notifications
Parasol sent for that call's RequestSpec are appended to the fake notifier, as Nova's
scheduler would have appended them, before the caller sees the answer. Nothing is made up
here: what is relayed is what Parasol published; a call whose `.end` never arrives fails the
test's own assertions, as it would with Nova.
"""

import json
import threading
import time

from nova import rpc
from nova.scheduler import rpcapi as scheduler_rpcapi
from nova.tests.fixtures import notifications as nova_notifications

from nova_functional import transport
from nova_functional.state import Current

# How long a call that placed its instances waits for Parasol's `.end` (sent before the
# reply, so it is normally already queued).
END_WAIT_S = 5.0
# How long a NoValidHost waits for a `.start` Parasol may have sent (none when Placement
# would have listed no candidate).
START_WAIT_S = 0.3
PUBLISHER = "nova-scheduler:"

_relay = None


class Relay:
    """One test's queue of Parasol's scheduler notifications."""

    def __init__(self, exchange, topics):
        self.lock = threading.Lock()
        self.pending = []
        self.conn = transport.Broker.connect()
        self.ch = self.conn.channel()
        self.slug = Current.slug
        self.queue = f"parasol.scheduler_notifications.{self.slug}"
        self.ch.queue_declare(self.queue, exclusive=True, auto_delete=True)
        for topic in topics:
            self.ch.queue_bind(self.queue, exchange=exchange, routing_key=f"{topic}.info")

    def close(self):
        try:
            self.conn.close()
        except Exception:
            pass

    def _drain(self):
        """Moves what the queue holds from Parasol into `pending` (the test's own services'
        notifications, republished on the same routing key, are dropped)."""
        while True:
            msg = self.ch.basic_get(self.queue, no_ack=True)
            if msg is None:
                return
            body = json.loads(msg.body)
            inner = json.loads(body["oslo.message"]) if "oslo.message" in body else body
            if str(inner.get("publisher_id", "")).startswith(PUBLISHER):
                self.pending.append(inner)

    def take(self, instance_uuid, until_event, wait_s):
        """Parasol's notifications for `instance_uuid`, waiting up to `wait_s` for one of
        `until_event` (None: whatever has arrived by then)."""
        deadline = time.monotonic() + wait_s
        with self.lock:
            while True:
                self._drain()
                mine = [n for n in self.pending
                        if n["payload"]["nova_object.data"].get("instance_uuid") == instance_uuid]
                done = until_event is not None and any(
                    n["event_type"] == until_event for n in mine)
                if done or time.monotonic() >= deadline:
                    self.pending = [n for n in self.pending if n not in mine]
                    return mine
                time.sleep(0.01)


def _append(notification):
    """What `FakeVersionedNotifier._notify` does with a serialised notification. A test
    without Nova's notification fixture has oslo's own notifier there, which would have sent
    nova-scheduler's notification on the broker: Parasol has sent it, nothing is to add."""
    fake = rpc.NOTIFIER
    if not isinstance(fake, nova_notifications.FakeVersionedNotifier):
        return
    entry = {key: notification[key]
             for key in ("publisher_id", "priority", "event_type", "payload")}
    fake.versioned_notifications.append(entry)
    fake.subscriptions[entry["event_type"]].received(entry)


def _relayed(orig):
    def select_destinations(self, ctxt, spec_obj, instance_uuids, *args, **kwargs):
        relay = _relay
        try:
            result = orig(self, ctxt, spec_obj, instance_uuids, *args, **kwargs)
        except Exception:
            if relay is not None:
                for n in relay.take(spec_obj.instance_uuid, None, START_WAIT_S):
                    _append(n)
            raise
        if relay is not None:
            for n in relay.take(spec_obj.instance_uuid, "scheduler.select_destinations.end",
                                END_WAIT_S):
                _append(n)
        return result
    return select_destinations


def open_relay(exchange, topics):
    """Starts relaying for the running test (before Parasol starts, so nothing is lost); a
    restart of Parasol within the test keeps the test's queue."""
    global _relay
    if _relay is not None and _relay.slug == Current.slug:
        return
    close_relay()
    _relay = Relay(exchange, topics)


def close_relay():
    global _relay
    relay, _relay = _relay, None
    if relay is not None:
        relay.close()


def install():
    scheduler_rpcapi.SchedulerAPI.select_destinations = _relayed(
        scheduler_rpcapi.SchedulerAPI.select_destinations)
