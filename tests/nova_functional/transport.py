"""Nova's RPC and versioned notifications on the machine's RabbitMQ (runs in the venv).

Nova's `RPCFixture` puts every service on oslo.messaging's in-memory `fake:/` driver and the
cell mappings on `fake://nowhere/`. `RabbitRPCFixture` replaces it: the same services, clients
and cells, on oslo.messaging's rabbit driver in this worker's own vhost. As Nova's fixture
collapses every cell's transport onto one bus, every transport URL here is the worker's vhost
(in one process with one CONF, cell2's computes cannot listen on another broker). Four
differences a real broker makes, each handled here:

- `CheatingSerializer` puts the cell's database and transport objects into the RPC context;
  the fake driver never serialises them, rabbit must. They are replaced by a token naming
  the object in a per-process table, and looked up again on receipt (what the fake driver's
  shared memory did); an outside process only sees an opaque string.
- The rabbit listener's poll back-off grows to 5 s, so each service stop waited up to 5 s;
  it is capped at `POLL_CAP_S`.
- Nova's queue names are fixed and outlive a test on a broker: the queues a test declared
  are deleted when it ends, as the fake driver's exchanges were reset.
- A remote exception comes back as a subclass named `<Name>_Remote` whose text carries the
  remote traceback (the fake driver passes the object itself); tests assert the class's name
  and the text, so it is put back in the class that was raised.

Versioned notifications still reach `FakeVersionedNotifier` (the tests wait on it) and are
also published with `messagingv2` on `versioned_notifications.info`, where an outside
scheduler consumes them; a test without Nova's notification fixture publishes them there too
(`_versioned_on_the_broker`), as a deployment's notification driver would.
"""

import importlib
import itertools
import threading
from urllib.parse import unquote, urlsplit

import amqp
import fixtures
import oslo_messaging as messaging
from oslo_messaging import conffixture as messaging_conffixture
from oslo_messaging._drivers import amqpdriver, impl_rabbit
from oslo_messaging._drivers import common as rpc_common
from unittest import mock

from nova import rpc
from nova import test as nova_test
from nova.tests import fixtures as nova_fixtures
from nova.tests.fixtures import notifications as nova_notifications

CONF = nova_test.CONF
# (`from nova.tests.fixtures import nova` would give the top-level `nova` it re-exports.)
nova_fixtures_nova = importlib.import_module("nova.tests.fixtures.nova")
# Longest wait of an idle rabbit listener between two polls (oslo: 5 s).
POLL_CAP_S = 0.05


class Broker:
    """Where this worker's messages go: `rabbit://user:pass@host:port/vhost`."""

    url = None
    # Queue names declared during the current test, deleted when it ends.
    declared = set()

    @classmethod
    def connect(cls):
        """A plain AMQP connection to the worker's vhost (for cleanup and checks)."""
        parts = urlsplit(cls.url)
        conn = amqp.Connection(
            host=f"{parts.hostname}:{parts.port or 5672}",
            userid=unquote(parts.username or "guest"),
            password=unquote(parts.password or "guest"),
            virtual_host=unquote(parts.path[1:]) or "/")
        conn.connect()
        return conn

    @classmethod
    def delete_queues(cls, names):
        """Deletes `names` in the vhost; a missing queue is not an error."""
        if not names:
            return
        conn = cls.connect()
        try:
            for name in sorted(names):
                ch = conn.channel()
                try:
                    ch.queue_delete(name)
                except amqp.exceptions.NotFound:
                    pass
                finally:
                    if ch.is_open:
                        ch.close()
        finally:
            conn.close()


class _Refs:
    """Objects a context carried in-process, by token (CheatingSerializer's cargo)."""

    _lock = threading.Lock()
    _objects = {}
    _ids = {}
    _counter = itertools.count(1)
    PREFIX = "nova-functional-ref:"

    @classmethod
    def token(cls, obj):
        if obj is None:
            return None
        with cls._lock:
            key = cls._ids.get(id(obj))
            if key is None or cls._objects.get(key) is not obj:
                key = f"{cls.PREFIX}{next(cls._counter)}"
                cls._objects[key] = obj
                cls._ids[id(obj)] = key
            return key

    @classmethod
    def resolve(cls, token):
        if token is None:
            return None
        with cls._lock:
            # A message of a finished test finds nothing: an untargeted context.
            return cls._objects.get(token)

    @classmethod
    def clear(cls):
        with cls._lock:
            cls._objects.clear()
            cls._ids.clear()


def _serialize_context(self, context):
    values = rpc.RequestContextSerializer.serialize_context(self, context)
    values["db_connection"] = _Refs.token(context.db_connection)
    values["mq_connection"] = _Refs.token(context.mq_connection)
    return values


def _deserialize_context(self, values):
    db = values.pop("db_connection", None)
    mq = values.pop("mq_connection", None)
    ctxt = rpc.RequestContextSerializer.deserialize_context(self, values)
    ctxt.db_connection = _Refs.resolve(db)
    ctxt.mq_connection = _Refs.resolve(mq)
    return ctxt


def _versioned_on_the_broker():
    """A test without Nova's `NotificationFixture` keeps `nova.rpc.NOTIFIER`, whose drivers
    are none or oslo's in-memory `test` (`nova.test` sets it after `rpc.init`): its versioned
    notifications (an operator's `service.update` among them) would reach no outside
    scheduler, or not be emitted at all, where a deployment's `messagingv2` driver puts them
    on the broker. The notifier gets that driver in place of its own (no functional test
    reads oslo's in-memory list; the fixture, when a test uses it, replaces the notifier and
    publishes through `_also_publish`)."""
    if CONF.notifications.notification_format == "unversioned":
        return
    if "messagingv2" in rpc.NOTIFIER._driver_names:
        return
    rpc.NOTIFIER = messaging.Notifier(
        rpc.NOTIFICATION_TRANSPORT, serializer=rpc.NOTIFIER._serializer,
        driver="messagingv2", topics=CONF.notifications.versioned_notifications_topics)


class RabbitRPCFixture(fixtures.Fixture):
    """`nova.tests.fixtures.RPCFixture` on the rabbit driver, in the worker's vhost."""

    def __init__(self, *exmods):
        super().__init__()
        self.exmods = list(exmods)
        self._transport = None

    def _create_transport(self, url):
        # Every cell's URL is the worker's vhost: one transport, as Nova's fixture has one bus.
        if self._transport is None:
            self._transport = messaging.get_rpc_transport(
                CONF, url=Broker.url, allowed_remote_exmods=rpc.get_allowed_exmods())
        return self._transport

    def setUp(self):
        super().setUp()
        Broker.declared = set()
        self.addCleanup(self._delete_declared_queues)
        self.addCleanup(_Refs.clear)
        self.addCleanup(rpc.cleanup)
        rpc.add_extra_exmods(*self.exmods)
        self.addCleanup(rpc.clear_extra_exmods)
        self.messaging_conf = messaging_conffixture.ConfFixture(CONF)
        self.messaging_conf.transport_url = Broker.url
        self.useFixture(self.messaging_conf)
        self.useFixture(fixtures.MonkeyPatch(
            "nova.rpc.create_transport", self._create_transport))
        with mock.patch("nova.rpc.get_transport_url") as mock_gtu:
            mock_gtu.return_value = None
            rpc.init(CONF)
        _versioned_on_the_broker()

    @staticmethod
    def _delete_declared_queues():
        names, Broker.declared = Broker.declared, set()
        Broker.delete_queues(names)


def _record_consumer_declare(orig):
    def declare(self, conn):
        Broker.declared.add(self.queue_name)
        return orig(self, conn)
    return declare


def _record_default_queue(orig):
    def publish(self, exchange, msg, routing_key=None, timeout=None, transport_options=None):
        Broker.declared.add(routing_key)
        return orig(self, exchange, msg, routing_key=routing_key, timeout=timeout,
                    transport_options=transport_options)
    return publish


_publishers = {}


def _broker_notifier(transport, serializer):
    """A messagingv2 notifier on `transport` (one per transport)."""
    key = id(transport)
    entry = _publishers.get(key)
    if entry is None or entry[0] is not transport:
        notifier = messaging.Notifier(
            transport, driver="messagingv2", serializer=serializer,
            topics=CONF.notifications.versioned_notifications_topics)
        entry = _publishers[key] = (transport, notifier)
    return entry[1]


def _also_publish(orig):
    def _notify(self, priority, ctxt, event_type, payload):
        orig(self, priority, ctxt, event_type, payload)
        notifier = _broker_notifier(self.transport, self._serializer)
        prepared = notifier.prepare(publisher_id=self.publisher_id)
        getattr(prepared, priority.lower())(ctxt, event_type, payload)
    return _notify


def _cells_on_the_broker(orig):
    def _setup_cells(self):
        orig(self)
        for mapping in self.cell_mappings.values():
            mapping.transport_url = Broker.url
            mapping.save()
    return _setup_cells


def _as_raised(deserialize):
    """oslo.messaging re-raises a remote exception as a subclass named `<Name>_Remote` in
    module `<module>_Remote` whose text carries the remote traceback; the fake driver hands
    over the exception object itself. Tests assert the class's name (an API error's, a fault
    notification's `exception`) and its text (`exception_message`), so the exception is put
    back in the class that was raised."""
    suffix = rpc_common._REMOTE_POSTFIX

    def deserialize_remote_exception(data, allowed_remote_exmods):
        failure = deserialize(data, allowed_remote_exmods)
        remote = type(failure)
        if remote.__name__.endswith(suffix) and remote.__module__.endswith(suffix):
            failure.__class__ = remote.__mro__[1]
        return failure
    return deserialize_remote_exception


def install(url):
    """Puts every Nova test of this process on the rabbit vhost `url`."""
    Broker.url = url
    amqpdriver.ACK_REQUEUE_EVERY_SECONDS_MAX = POLL_CAP_S
    rpc_common.deserialize_remote_exception = _as_raised(
        rpc_common.deserialize_remote_exception)
    nova_fixtures.RPCFixture = RabbitRPCFixture
    nova_fixtures_nova.RPCFixture = RabbitRPCFixture
    cheat = nova_fixtures_nova.CheatingSerializer
    cheat.serialize_context = _serialize_context
    cheat.deserialize_context = _deserialize_context
    impl_rabbit.Consumer.declare = _record_consumer_declare(impl_rabbit.Consumer.declare)
    conn = impl_rabbit.Connection
    conn._publish_and_creates_default_queue = _record_default_queue(
        conn._publish_and_creates_default_queue)
    fake = nova_notifications.FakeVersionedNotifier
    fake._notify = _also_publish(fake._notify)
    nova_test.TestCase._setup_cells = _cells_on_the_broker(nova_test.TestCase._setup_cells)
