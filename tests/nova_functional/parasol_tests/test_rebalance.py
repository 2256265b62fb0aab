"""`parasol rebalance apply` in Nova's functional harness (issue 46 item 2, docs/fmu.md §8.5):
three computes of the fake driver (2 CPUs each), servers booted by Parasol onto host1 (four
ACTIVE, one stopped) and host2 (one, in an anti-affinity group with one of host1's), and
measured usage the test injects as Nova's `metrics.update` (host1 busy, host2 half, host3
idle). The apply, run as the `parasol` binary against Nova's real API (served on a loopback
port behind a stand-in for keystonemiddleware that accepts one token), plans on that usage and
live-migrates through `os-migrateLive`: every planned server ends on its planned host, the
stopped one and the group are respected, F rises as planned, and Placement and Parasol's
ledger agree (the apply checks after every move; the harness again at the end). With Nova's
policy forbidding live migration, the apply stops at the first move naming the server and
Nova's reason, and nothing moves.

Runs only in `parasol` mode (the binary and the running Parasol are what is tested).
"""

import datetime
import json
import os
import subprocess
import uuid

from nova.tests.functional import integrated_helpers
from nova import utils

from nova_functional import placement_tcp, swap
from nova_functional.state import Current

TOKEN = "rebalance-apply-admin-token"
PROJECT = "6f70656e737461636b20342065766572"


def _authenticated(app, project_id):
    """What keystonemiddleware does in front of Nova's API, for one token: the identity
    headers of an admin of `project_id` (Nova's functional tests stub the context on them),
    401 for any other token."""
    def wrapped(environ, start_response):
        if environ.get("HTTP_X_AUTH_TOKEN") != TOKEN:
            start_response("401 Unauthorized", [("Content-Type", "application/json")])
            return [b'{"error": {"message": "The request you have made requires authentication."}}']
        environ["HTTP_X_AUTH_USER"] = "admin"
        environ["HTTP_X_AUTH_PROJECT_ID"] = project_id
        environ["HTTP_X_ROLES"] = "reader,member,admin"
        return app(environ, start_response)
    return wrapped


def _metrics_update(host, percent):
    """Nova's versioned `metrics.update` for `host` (node named as the host, as the fake
    driver names it) with `cpu.percent`, sent now."""
    now = datetime.datetime.now(datetime.timezone.utc)
    metric = {"nova_object.name": "MetricPayload", "nova_object.namespace": "nova",
              "nova_object.version": "1.0",
              "nova_object.data": {"name": "cpu.percent", "value": percent,
                                   "numa_membw_values": None,
                                   "timestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                   "source": "fake.SmallFakeDriver"}}
    return {"message_id": str(uuid.uuid4()), "publisher_id": f"nova-compute:{host}",
            "event_type": "metrics.update", "priority": "INFO",
            "timestamp": now.strftime("%Y-%m-%d %H:%M:%S.%f"),
            "payload": {"nova_object.name": "MetricsPayload", "nova_object.namespace": "nova",
                        "nova_object.version": "1.0",
                        "nova_object.data": {"host": host, "host_ip": "10.0.0.2",
                                             "nodename": host, "metrics": [metric]}}}


class RebalanceApplyTest(integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = "fake.SmallFakeDriver"
    microversion = "2.74"

    def setUp(self):
        super().setUp()
        if Current.mode != "parasol":
            self.skipTest("tests the parasol binary against a running Parasol")
        for host in ("host1", "host2", "host3"):
            self._start_compute(host)
        self.flavor_id = self.api.get_flavors()[0]["id"]
        self.nova_url = self._serve_nova_api()

    def _serve_nova_api(self):
        """Nova's API app also on a loopback port, for the binary."""
        app = _authenticated(self.api_fixture.app(), self.api_fixture.project_id)
        serve = (placement_tcp._serve_threads if utils.concurrency_mode_threading()
                 else placement_tcp._serve_eventlet)
        port, stop = serve(app)
        self.addCleanup(stop)
        return f"http://127.0.0.1:{port}/v2.1"

    def _boot(self, name, host, group=None):
        body = self._build_server(name=name, flavor_id=self.flavor_id, networks="none",
                                  host=host)
        request = {"server": body}
        if group:
            request["os:scheduler_hints"] = {"group": group}
        server = self.admin_api.post_server(request)
        server = self._wait_for_state_change(server, "ACTIVE")
        self.assertEqual(host, server["OS-EXT-SRV-ATTR:host"])
        return server

    def _unbalanced_cloud(self):
        """host1: a (in the group), b, c, d ACTIVE and e stopped; host2: g (in the group);
        host3: empty. Usage: host1 100 % (every guest hungry), host2 50 % (g satisfied and
        above the hungry's share: pseudo-hungry), host3 0 %."""
        group = self.admin_api.post_server_groups(
            {"name": "apart", "policy": "anti-affinity"})
        servers = {"a": self._boot("a", "host1", group["id"])}
        for name in "bcde":
            servers[name] = self._boot(name, "host1")
        servers["g"] = self._boot("g", "host2", group["id"])
        servers["e"] = self._stop_server(servers["e"])
        for host, percent in (("host1", 100), ("host2", 50), ("host3", 0)):
            self._notify_parasol(_metrics_update(host, percent))
        return servers

    def _notify_parasol(self, message):
        import requests
        r = requests.post(f"{swap.parasol_url()}/v1/notifications", json=message, timeout=10)
        self.assertEqual(200, r.status_code, r.text)

    def _apply(self, *flags):
        """Runs `parasol rebalance apply --json` with the running Parasol's configuration and
        Nova's compute API; (exit code, the plan, the lines after it, stderr)."""
        ext = next(iter(swap._running.values()))
        sections = dict(ext.sections)
        sections["rebalance"] = {"nova_url": self.nova_url, "nova_auth": "token",
                                 "nova_token": TOKEN, "apply_poll_interval_s": 0.2,
                                 "move_timeout_s": 60.0, "agree_timeout_s": 20.0}
        path = os.path.join(ext.dir, "apply.toml")
        with open(path, "w") as f:
            f.write(swap._text(sections))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PARASOL__")}
        done = subprocess.run(
            [Current.parasol_bin, "--config", path, "rebalance", "apply", "--json",
             "--seed", "1", *flags],
            capture_output=True, text=True, timeout=300, env=env)
        out = done.stdout
        plan, end = (json.JSONDecoder().raw_decode(out.lstrip()) if out.strip().startswith("{")
                     else (None, 0))
        lines = out.lstrip()[end:].strip().splitlines()
        return done.returncode, plan, lines, done.stderr

    def test_apply_live_migrates_as_planned_and_placement_and_parasol_agree(self):
        servers = self._unbalanced_cloud()
        by_id = {s["id"]: name for name, s in servers.items()}
        code, plan, lines, stderr = self._apply()
        self.assertEqual(0, code, f"stdout: {lines}\nstderr: {stderr}\nplan: {plan}")
        moves = [m for step in plan["steps"] for m in step]
        self.assertTrue(moves, plan)
        self.assertIn(f"applied {len(moves)} of {len(moves)} moves", lines[-1])
        self.assertEqual(len(moves) + 1, len(lines), lines)
        # F rises as planned, and the plan was made on the injected usage.
        self.assertGreater(plan["after"]["fairness"], plan["before"]["fairness"], plan)
        self.assertGreater(plan["after"]["utilization"], plan["before"]["utilization"], plan)
        # The stopped server is named as not movable, with Nova's status.
        pinned = {p["instance"]: p["reason"] for p in plan["not_movable"]}
        self.assertIn("SHUTOFF", pinned.get(servers["e"]["id"], ""), plan["not_movable"])
        for m in moves:
            self.assertEqual("host1", m["source"], m)
            self.assertNotEqual("e", by_id[m["instance"]], m)
            if by_id[m["instance"]] == "a":
                self.assertNotEqual("host2", m["destination"], "anti-affinity broken")
        # Every server is where the plan put it (or where it was).
        planned = {m["instance"]: m["destination"] for m in moves}
        for name, server in servers.items():
            now = self.admin_api.get_server(server["id"])
            want = planned.get(server["id"], server["OS-EXT-SRV-ATTR:host"])
            self.assertEqual(want, now["OS-EXT-SRV-ATTR:host"], name)
            self.assertEqual("SHUTOFF" if name == "e" else "ACTIVE", now["status"], name)
            allocations = self._get_allocations_by_server_uuid(server["id"])
            self.assertEqual([self._get_provider_uuid_by_host(want)], list(allocations), name)

    def test_a_move_nova_refuses_stops_the_apply_naming_the_server_and_reason(self):
        servers = self._unbalanced_cloud()
        # os-migrateLive with a host is `…:migrate_live:host` (without, `…:migrate_live`).
        self.policy.set_rules({"os_compute_api:os-migrate-server:migrate_live:host": "!",
                               "os_compute_api:os-migrate-server:migrate_live": "!"},
                              overwrite=False)
        code, plan, lines, stderr = self._apply()
        self.assertNotEqual(0, code, lines)
        first = plan["steps"][0][0]
        self.assertIn("stopped after 0 of", stderr)
        self.assertIn(f"Nova refused to live-migrate server {first['instance']} "
                      f"to {first['destination']} (403)", stderr)
        self.assertIn("os_compute_api:os-migrate-server:migrate_live", stderr)
        self.assertFalse([line for line in lines if line.startswith("moved ")], lines)
        for name, server in servers.items():
            now = self.admin_api.get_server(server["id"])
            self.assertEqual(server["OS-EXT-SRV-ATTR:host"], now["OS-EXT-SRV-ATTR:host"],
                             name)
