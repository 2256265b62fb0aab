"""Where a test starts the scheduler service, `parasol` mode starts `parasol serve` instead
(runs in the venv). In both modes every call Nova makes to the scheduler is recorded with
what came back, so the report can set Nova's scheduler's answers beside Parasol's.

Parasol gets its own SQLite ledger in a temporary directory, Nova's RPC on the worker's vhost
(`[rpc]`, Nova's exchange and topic), the test's TCP Placement (`[placement]`, noauth), and
the test's scheduler settings (`parasol_config`), and the test's cell databases
(`[nova_db] cells`: in `parasol` mode Nova runs in threading mode, where Nova's
`CellDatabases` fixture keeps each cell in a SQLite file, recorded here as it makes them, and
the API database for the host aggregates, `api_database_url`), from
which Parasol learns each compute node's service host, cell and service state as
nova-scheduler's `HostManager` does. A `self.flags(...)` on a scheduler group
while it runs rewrites the file and sends SIGHUP. The process is killed, by pid, when the test
ends, however it ends.
"""

import datetime
import importlib
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
from urllib.parse import quote, unquote, urlsplit

import oslo_messaging as messaging
import requests
from oslo_utils import timeutils

from nova import context as nova_context
from nova import rpc
from nova import objects
from nova import test as nova_test
from nova.scheduler import rpcapi as scheduler_rpcapi

from nova_functional import parasol_config, passthrough_plugins, scheduler_notifications, transport
from nova_functional.placement_tcp import Served
from nova_functional.state import Current

CONF = nova_test.CONF
# The module itself: the package's `nova` attribute is shadowed by a re-export.
nova_fixtures = importlib.import_module("nova.tests.fixtures.nova")
READY_TIMEOUT_S = 60
RELOAD_TIMEOUT_S = 10
# src/configuration/reload.rs `READ_AT_START`, the sections the harness writes.
READ_AT_START = ("server", "ledger", "amqp", "rpc", "placement", "nova_db")
REPAIR_GRACE_S = 1.0
SYNC_INTERVAL_S = 0.2
# `PARASOL_NF_SETTINGS=shipped`: Parasol's shipped intervals (etc/parasol.toml: syncs, reads
# of Nova's records and the repair's grace at 60 s, timeouts at 10 s) in place of the
# harness's fast ones above, so a run tells what the fast ones are worth (issue 42: the
# figure on defaults).
SHIPPED = os.environ.get("PARASOL_NF_SETTINGS", "") == "shipped"
_running = {}  # pid -> ExternalScheduler
# A cell mapping's database_connection (Nova's fixture uses the cell's uuid) -> the SQLite
# URL of the file CellDatabases made for it (threading mode); the last test's wins.
_cell_files = {}


def _record_cell_files(orig):
    def use_file_backed_sqlite_with_wal(name):
        url, path = orig(name)
        _cell_files[name] = url
        return url, path
    return use_file_backed_sqlite_with_wal


def _fast(values):
    """`values` unless the run takes Parasol's shipped intervals."""
    return {} if SHIPPED else values


_behind_s = {}  # (test, frozen time) -> how far behind the real clock it was when first seen


def service_down_time_s():
    """Nova's `service_down_time`, widened by how far a test set Nova's clock back.

    The notification sample tests freeze oslo's `timeutils.utcnow` in 2012 (`TimeFixture`):
    Nova writes its services' heartbeats at that time and judges them on it, so they are up.
    Parasol, another process, judges them on the real clock. The gap is added: a heartbeat
    Nova calls fresh is fresh to Parasol too. It is measured once per test and frozen time,
    so the section stays the same while the test runs (a changed `[nova_db]` restarts
    Parasol); not once per run: every notification test freezes the same time, and a gap
    measured at the first would be minutes short at a later one (every compute down)."""
    down = float(CONF.service_down_time)
    # The override itself: `utcnow()` would pop a listed one, which the test would miss.
    frozen = getattr(timeutils, "_override_time", None)
    if isinstance(frozen, list):
        frozen = frozen[0] if frozen else None
    if frozen is None:
        return down
    key = (Current.slug, frozen)
    if key not in _behind_s:
        real = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        _behind_s.clear()
        _behind_s[key] = math.ceil((real - frozen.replace(tzinfo=None)).total_seconds())
    behind = _behind_s[key]
    return down + behind if behind > down else down


def nova_db_section(test):
    """`[nova_db]` naming the test's cell databases, or disabled when they are not files."""
    cells = []
    for name, mapping in sorted(getattr(test, "cell_mappings", {}).items()):
        if mapping.uuid == objects.CellMapping.CELL0_UUID:
            continue
        url = _cell_files.get(mapping.database_connection)
        if url is None:
            return {"enabled": False}
        cells.append({"uuid": mapping.uuid, "name": name, "database_url": url})
    if not cells:
        return {"enabled": False}
    section = {"enabled": True, "cells": cells, "service_down_time_s": service_down_time_s(),
               **_fast({"refresh_interval_s": SYNC_INTERVAL_S, "timeout_s": 5.0})}
    # The test's API database (Nova's `Database(database='api')` fixture makes it the same
    # way): Parasol loads Nova's host aggregates from it at start, as nova-scheduler does, so
    # a scheduler the test restarts knows them before the next cast.
    api = _cell_files.get("api")
    if api is not None:
        section["api_database_url"] = api
    return section


def parasol_url():
    """The HTTP API of the test's running Parasol, if one runs."""
    for ext in _running.values():
        return ext.http_url
    return None


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _amqp_url(broker_url):
    """oslo's rabbit:// URL of the vhost as an amqp:// URL for Parasol (lapin)."""
    parts = urlsplit(broker_url)
    vhost = unquote(parts.path[1:]) or "/"
    return f"amqp://{parts.username}:{parts.password}@{parts.hostname}:{parts.port or 5672}/" \
        + quote(vhost, safe="")


class ExternalScheduler:
    """Stands where the scheduler's `nova.service.Service` stood: start, stop, kill."""

    def __init__(self, test, host):
        self._test = test
        self.host = host
        self.dir = tempfile.mkdtemp(prefix="parasol-nf-")
        self.config_path = os.path.join(self.dir, "parasol.toml")
        self.port = _free_port()
        self.http_url = f"http://127.0.0.1:{self.port}"
        self.queue = f"parasol.notifications.{Current.slug}"
        self.dead_letter = f"parasol.dead_letter.{Current.slug}"
        self.log_path = Current.path(".parasol.log")
        self.proc = None
        self.text = None
        self.sections = None

    @property
    def manager(self):
        """What the libvirt tests' setUp reads of the scheduler service: its host manager's
        `filter_cls_map` (Nova's filter classes, which they wrap in a spy of
        `host_passes`). Parasol never calls Nova's classes, so a test that then asserts the
        spy was called fails there (`scheduler-internals`); what it checked before that —
        the server's state, the host, the usage — is Parasol's decision."""
        from types import SimpleNamespace
        from nova.scheduler import filters
        from nova import conf as nova_conf
        classes = filters.HostFilterHandler().get_matching_classes(
            nova_conf.CONF.filter_scheduler.available_filters)
        return SimpleNamespace(host_manager=SimpleNamespace(
            filter_cls_map={cls.__name__: cls for cls in classes}))

    def __getattr__(self, name):
        raise AttributeError(
            f"ExternalScheduler has no attribute {name!r}: the test reaches into the "
            f"in-process scheduler service, and Parasol runs in another process")

    def _sections(self):
        """({section: {key: value}} of the test's Parasol configuration, what was not
        carried)."""
        policy, record = parasol_config.translate(CONF)
        cell = self._test.cell_mappings.get("cell1")
        sections = {
            "server": {"host": "127.0.0.1", "port": self.port, "http_workers": 1},
            "ledger": {"url": f"sqlite://{self.dir}/ledger.db", "max_connections": 2},
            "scheduler": {"backend": "filter", "workers": 2, "seed": 1,
                          "cell_uuid": cell.uuid if cell else
                          "00000000-0000-0000-0000-000000000000",
                          **parasol_config.scheduler_options(CONF)},
            "policy": policy,
            "amqp": {"url": _amqp_url(transport.Broker.url), "exchange": CONF.control_exchange,
                     "queue": self.queue, "dead_letter": self.dead_letter,
                     "fanout_exchange": f"{scheduler_rpcapi.RPC_TOPIC}_fanout",
                     "reconnect_min_s": 0.1, "reconnect_max_s": 1.0},
            "rpc": {"enabled": True, "host": self.host, "topic": scheduler_rpcapi.RPC_TOPIC,
                    **versioned_notifications()},
            # A test without Placement runs Parasol without it (an empty URL is refused).
            "placement": {"enabled": Served.url is not None, "url": Served.url or "",
                          "auth": "noauth",
                          # A test body lasts seconds: the consistency repair (an alternate
                          # the conductor claimed, a move or build Nova undid in Placement
                          # without a notification) must act within the agreement check's
                          # settle time, not after the production default of 60 s.
                          **_fast({"sync_interval_s": SYNC_INTERVAL_S, "timeout_s": 5.0,
                                   "repair_grace_s": REPAIR_GRACE_S})},
            "nova_db": nova_db_section(self._test),
        }
        # `[batch] mode` to run the tests with (issue 44: they must pass with "call" too).
        batch_mode = os.environ.get("PARASOL_NF_BATCH_MODE")
        if batch_mode:
            sections["batch"] = {"mode": batch_mode}
        # A Parasol test's own settings (`parasol_sections` on its class, `parasol_tests/`).
        for name, values in getattr(self._test, "parasol_sections", {}).items():
            sections[name] = {**sections.get(name, {}), **values}
        return sections, record

    def start(self):
        # A test may start the service again after stopping it (`test_service`: Nova's
        # `Service.stop()` then `.start()`); the stop removed the directory with its ledger,
        # so this start is on a new one, as a restarted nova-scheduler has no state either.
        os.makedirs(self.dir, exist_ok=True)
        self.sections, record = self._sections()
        self.text = _text(self.sections)
        rpc_section = self.sections["rpc"]
        if rpc_section["versioned_notifications"]:
            scheduler_notifications.open_relay(
                CONF.control_exchange, rpc_section["versioned_notifications_topics"])
        _remember_settings(record)
        with open(self.config_path, "w") as f:
            f.write(self.text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PARASOL__")}
        env["RUST_LOG"] = "info,parasol=debug"
        log = open(self.log_path, "ab")
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [Current.parasol_bin, "--config", self.config_path, "serve"],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env,
            preexec_fn=_die_with_parent)
        log.close()
        _running[self.proc.pid] = self
        Current.send("pid", pid=self.proc.pid, exe=Current.parasol_bin)
        self._wait_ready()
        # Where a test's time goes in this mode (issue 42: the per-test overhead).
        Current.note("parasol_start_s", round(time.monotonic() - started, 2))

    def _wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT_S
        ctxt = nova_context.get_admin_context()
        target = messaging.Target(topic=scheduler_rpcapi.RPC_TOPIC, server=self.host,
                                  namespace="baseapi", version="1.0")
        client = messaging.get_rpc_client(rpc.TRANSPORT, target,
                                          serializer=rpc.RequestContextSerializer(None))
        synced = False
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Parasol exited with {self.proc.returncode} at start; "
                                   f"see {self.log_path}")
            try:
                health = requests.get(f"{self.http_url}/healthz", timeout=1).json()
                synced = health.get("placement", {}).get("syncs", 0) > 0 or not Served.url
                nova_db = health.get("nova_db")
                synced = synced and (nova_db is None or nova_db.get("read", False))
            except (requests.RequestException, ValueError):
                time.sleep(0.1)
                continue
            if not synced:
                time.sleep(0.1)
                continue
            try:
                client.prepare(timeout=1).call(ctxt, "ping", arg="nova-functional")
                return
            except messaging.MessagingTimeout:
                continue
        raise RuntimeError(f"Parasol did not serve RPC within {READY_TIMEOUT_S} s; "
                           f"see {self.log_path}")

    def reload(self):
        """Rewrites the configuration from CONF and applies it as an operator would: SIGHUP
        when only what Parasol applies on a reload changed, a restart (same ledger file) when
        a section it reads only at start changed (`[placement]` once a test starts its
        Placement after the scheduler, `[nova_db]`). A reload Parasol refuses, or one it does
        not answer within `RELOAD_TIMEOUT_S`, fails the test: it would otherwise run on
        settings it did not ask for."""
        if self.proc is None or self.proc.poll() is not None:
            return
        building = time.monotonic()
        sections, record = self._sections()
        _remember_settings(record)
        text = _text(sections)
        # Where a test's time goes in this mode (issue 42): each `flags()` rebuilds the file.
        Current.record["parasol_config_s"] = round(
            Current.record.get("parasol_config_s", 0.0) + time.monotonic() - building, 3)
        if text == self.text:
            return
        Current.note("reloads", record)
        if _read_at_start(self.sections) != _read_at_start(sections):
            Current.note("restarts", sorted(
                k for k in READ_AT_START if self.sections.get(k) != sections.get(k)))
            self._end_process()
            self.start()
            return
        before = _reload_outcomes(self.log_path)
        with open(self.config_path, "w") as f:
            f.write(text)
        self.text, self.sections = text, sections
        self.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + RELOAD_TIMEOUT_S
        while time.monotonic() < deadline:
            reloaded, refused = _reload_outcomes(self.log_path)
            if refused[0] > before[1][0]:
                raise RuntimeError(f"Parasol refused the test's configuration: {refused[1]} "
                                   f"(see {self.log_path})")
            if reloaded > before[0]:
                return
            time.sleep(0.05)
        raise RuntimeError(f"Parasol did not answer a reload within {RELOAD_TIMEOUT_S} s "
                           f"(see {self.log_path})")

    def stop(self):
        self._test._service_fixture_count["scheduler"] -= 1
        self.kill()

    def _end_process(self):
        """Ends the process (TERM, then KILL), keeping its ledger file and queues."""
        proc, self.proc = self.proc, None
        stopping = time.monotonic()
        Current.record.setdefault("parasol", {}).update(_metrics(self.http_url))
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        Current.note("parasol_stop_s", round(time.monotonic() - stopping, 2))
        Current.note("parasol_exit", proc.returncode)
        _running.pop(proc.pid, None)
        Current.send("pid_gone", pid=proc.pid)

    def kill(self):
        """Ends the process, then its queues and files."""
        if self.proc is None:
            return
        killing = time.monotonic()
        self._end_process()
        scheduler_notifications.close_relay()
        Current.record.setdefault("parasol", {})["log"] = self.log_path
        Current.record["parasol"]["dead_letters"] = _dead_letters(self.dead_letter)
        topic = scheduler_rpcapi.RPC_TOPIC
        transport.Broker.delete_queues({self.queue, self.dead_letter, topic,
                                        f"{topic}.{self.host}"})
        shutil.rmtree(self.dir, ignore_errors=True)
        Current.note("parasol_kill_s", round(time.monotonic() - killing, 2))


def versioned_notifications():
    """`[rpc] versioned_notifications`: whether Nova's scheduler would emit its versioned
    notifications (`nova.rpc.if_notifications_enabled`: `[notifications]
    notification_format` versioned or both, and a notification driver other than noop)."""
    drivers = [d for d in (CONF.oslo_messaging_notifications.driver or []) if d != "noop"]
    enabled = CONF.notifications.notification_format in ("both", "versioned") and bool(drivers)
    return {"versioned_notifications": enabled,
            "versioned_notifications_topics":
                list(CONF.notifications.versioned_notifications_topics)}


def _text(sections):
    """The TOML file of `sections`, with a pass-through plugin chain on every event when
    `PARASOL_NF_PLUGINS=passthrough` (issue 47: the tests must pass with one)."""
    text = parasol_config.toml(sections)
    if os.environ.get("PARASOL_NF_PLUGINS") == "passthrough":
        text += "\n" + passthrough_plugins.chain_toml()
    return text


def _remember_settings(record):
    """Adds what a start or a reload could not carry to the test's record (a test may set
    options after the scheduler started)."""
    mine = Current.record.setdefault(
        "scheduler_settings", {"filters_dropped": [], "weighers_dropped": [], "not_carried": {}})
    for key in ("filters_dropped", "weighers_dropped"):
        for item in record[key]:
            if item not in mine[key]:
                mine[key].append(item)
    mine["not_carried"].update(record["not_carried"])


def _die_with_parent():
    """In the child before exec: SIGKILL when the worker dies (Linux prctl)."""
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def _reload_outcomes(path):
    """(reloads applied, (reloads refused, the last refusal's line)) in Parasol's log."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return 0, (0, "")
    refusals = [line for line in data.splitlines() if b"new configuration refused" in line]
    last = refusals[-1].decode("utf-8", "replace")[-500:] if refusals else ""
    return data.count(b"configuration reloaded"), (len(refusals), last)


def _read_at_start(sections):
    """The sections Parasol reads only at start (src/configuration/reload.rs
    `READ_AT_START`): a change to one needs a restart."""
    return {k: sections.get(k) for k in READ_AT_START}


def _metrics(http_url):
    """Parasol's own counts: per backend requests, placed, no_valid_host, declines; and the
    notifications it applied or rejected (`/v1/stats`; the RPC server's counters are not
    exported over HTTP)."""
    try:
        stats = requests.get(f"{http_url}/v1/stats", timeout=2).json()
    except (requests.RequestException, ValueError) as e:
        return {"stats_error": str(e)}
    keep = ("requests", "placed", "no_valid_host", "declines")
    backends = {name: {k: b.get(k) for k in keep}
                for name, b in (stats.get("backends") or {}).items()}
    out = {"backends": backends, "notifications": stats.get("notifications")}
    # With a plugin chain (PARASOL_NF_PLUGINS): each plugin's calls and failures, so a run
    # shows the chain was called and never failed.
    plugin_keys = ("calls", "errors", "timeouts", "refused", "denials", "short_circuited")
    plugins = {f"{event}/{name}": {k: p.get(k) for k in plugin_keys}
               for event, names in (stats.get("plugins") or {}).items()
               for name, p in names.items()}
    if plugins:
        out["plugins"] = plugins
    return out


def _dead_letters(queue):
    """Reasons of the messages Parasol dead-lettered (header x-parasol-reason)."""
    reasons = []
    try:
        conn = transport.Broker.connect()
        ch = conn.channel()
        while len(reasons) < 20:
            msg = ch.basic_get(queue, no_ack=True)
            if msg is None:
                break
            headers = msg.properties.get("application_headers") or {}
            reasons.append(str(headers.get("x-parasol-reason", "?"))[:300])
        conn.close()
    except Exception as e:
        reasons.append(f"unreadable: {type(e).__name__}: {e}")
    return reasons


def kill_all():
    for ext in list(_running.values()):
        ext.kill()


def _start_service(orig):
    def start_service(self, name, host=None, cell_name=None, **kwargs):
        if name != "scheduler":
            return orig(self, name, host=host, cell_name=cell_name, **kwargs)
        if self._service_fixture_count[name]:
            raise nova_test.TestingException("Duplicate start_service(%s)!" % name)
        if host is not None:
            self.useFixture(nova_test.nova_fixtures.ConfPatcher(host=host))
        ext = ExternalScheduler(self, host or CONF.host)
        self.addCleanup(ext.kill)
        ext.start()
        self._service_fixture_count[name] += 1
        return ext
    return start_service


def _flags(orig):
    """Every option Parasol reads reaches it when a test changes it, whatever the group
    (`[DEFAULT] default_availability_zone`, `[workarounds]`, the scheduler's groups): the
    configuration is rebuilt from CONF and applied only when its text changed."""
    def flags(self, **kw):
        orig(self, **kw)
        for ext in list(_running.values()):
            ext.reload()
    return flags


def _placement_started():
    """A test that starts its Placement after the scheduler: the running Parasol restarts
    with it (`[placement]` is read at start)."""
    for ext in list(_running.values()):
        ext.reload()


def install(mode):
    from nova_functional import recording
    recording.install()
    if mode == "parasol":
        nova_fixtures._use_file_backed_sqlite_with_wal = _record_cell_files(
            nova_fixtures._use_file_backed_sqlite_with_wal)
        nova_test.TestCase.start_service = _start_service(nova_test.TestCase.start_service)
        scheduler_notifications.install()
        nova_test.TestCase.flags = _flags(nova_test.TestCase.flags)
        Served.listeners.append(_placement_started)
