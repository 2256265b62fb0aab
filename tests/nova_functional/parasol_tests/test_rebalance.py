"""`parasol rebalance apply` in Nova's functional harness (issue 46 item 2, docs/fmu.md §8.6):
three computes of the fake driver (2 CPUs each), servers booted by Parasol onto host1 (four
ACTIVE, one stopped) and host2 (one, in an anti-affinity group with one of host1's), and
measured usage the test injects as Nova's `metrics.update` (host1 busy, host2 half, host3
idle). The apply, run as the `parasol` binary, plans on that usage and live-migrates through
`os-migrateLive`: every planned server ends on its planned host, the stopped one and the group
are respected, F rises as planned, and Placement and Parasol's ledger agree (the apply checks
after every move; the harness again at the end). With Nova's policy forbidding live migration,
the apply stops at the first move naming the server and Nova's reason, and nothing moves. With
the second move's destination failing `pre_live_migration` after Nova accepted the move, the
apply stops after the first, naming the server, and says Nova put it back on its source with
Placement and the ledger agreeing. A plan saved with `apply --dry-run --json` is carried out
as saved by `apply --plan FILE`, refused (nothing moved) once a server was booted since, and
planned again with `--replan`.

Nova's API is served to the binary on a loopback port as a deployment serves it: api-paste.ini's
`keystone` pipeline with the real `authtoken` filter (keystonemiddleware, from Nova's venv)
validating tokens against the real Keystone (`keystone==30.0.0`, its own venv, SQLite, Fernet)
that `cargo test --test nova_functional rebalance_apply` starts, provisions (Nova's service
user `nova`, admin in project `service`; the identity endpoints in the catalog) and names in
`PARASOL_NF_KEYSTONE`; Nova's real `keystonecontext` makes the request context from what the
filter validated. The apply gets its token from that Keystone as `[placement]`'s service user
(`[rebalance] nova_auth = "keystone"`); a token Keystone has revoked, given as the static
`nova_token`, is refused by the filter (401): the apply says so and nothing moves.

Runs only in `parasol` mode (the binary and the running Parasol are what is tested); without
`PARASOL_NF_KEYSTONE` it fails, naming what it needs.
"""

import functools
import json
import os
import subprocess
import time
from unittest import mock

import fixtures
import requests
from keystonemiddleware import auth_token
from nova.api import auth as nova_auth
from nova.api import wsgi as nova_wsgi
from nova import test
from nova.tests.functional import integrated_helpers
from nova import utils

from nova_functional import placement_tcp, swap
from nova_functional.parasol_tests import messages
from nova_functional.state import Current

# Nova's own middleware as this module is loaded, before a test's OSAPIFixture stubs them for
# its in-process clients (`_stub_keystone`: auth_token's filter a no-op, the context made from
# X-Auth-User): the port the binary calls runs these.
_AUTH_TOKEN_FILTER = auth_token.filter_factory
_CREATE_CONTEXT = nova_auth.NovaKeystoneContext._create_context


def _keystone():
    """The real Keystone the cargo test started (`PARASOL_NF_KEYSTONE`: its `auth_url` and
    Nova's service user `username`, `password`, `project_name`), or None."""
    text = os.environ.get("PARASOL_NF_KEYSTONE")
    return json.loads(text) if text else None


def _authtoken_conf(keystone):
    """Nova's `[keystone_authtoken]`, as a deployment's nova.conf has it."""
    return "\n".join([
        "[keystone_authtoken]",
        f"www_authenticate_uri = {keystone['auth_url']}",
        f"auth_url = {keystone['auth_url']}",
        "auth_type = password",
        f"username = {keystone['username']}",
        f"password = {keystone['password']}",
        f"project_name = {keystone['project_name']}",
        "user_domain_name = Default",
        "project_domain_name = Default",
        "",
    ])


class RebalanceApplyTest(integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = "fake.SmallFakeDriver"
    microversion = "2.74"

    def setUp(self):
        super().setUp()
        if Current.mode != "parasol":
            self.skipTest("tests the parasol binary against a running Parasol")
        self.keystone = _keystone()
        if self.keystone is None:
            self.fail("needs the real Keystone: `cargo test --test nova_functional "
                      "rebalance_apply` starts one and names it in PARASOL_NF_KEYSTONE")
        for host in ("host1", "host2", "host3"):
            self._start_compute(host)
        self.flavor_id = self.api.get_flavors()[0]["id"]
        self.nova_url = self._serve_nova_api()

    def _serve_nova_api(self):
        """Nova's API app (api-paste.ini's `osapi_compute`, its `keystone` pipeline) also on a
        loopback port, for the binary, with the real `authtoken` filter (keystonemiddleware,
        `[keystone_authtoken]` of a file, validating against the real Keystone) and Nova's real
        `keystonecontext`. The test's own clients keep the fixture's stubs: a request that
        keystonemiddleware validated (`keystone.token_auth` in its environ) gets Nova's context
        from it, any other the fixture's."""
        conf = self.useFixture(fixtures.TempDir()).join("nova-authtoken.conf")
        with open(conf, "w") as f:
            f.write(_authtoken_conf(self.keystone))
        stubbed = nova_auth.NovaKeystoneContext._create_context

        def create_context(environ, **kwargs):
            if "keystone.token_auth" in environ:
                return _CREATE_CONTEXT(environ, **kwargs)
            return stubbed(environ, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            "nova.api.auth.NovaKeystoneContext._create_context", create_context))
        real_filter = functools.partial(_AUTH_TOKEN_FILTER, oslo_config_project="nova",
                                        oslo_config_file=conf)
        with mock.patch.object(auth_token, "filter_factory", real_filter):
            app = nova_wsgi.Loader().load_app("osapi_compute")
        serve = (placement_tcp._serve_threads if utils.concurrency_mode_threading()
                 else placement_tcp._serve_eventlet)
        port, stop = serve(app)
        self.addCleanup(stop)
        return f"http://127.0.0.1:{port}/v2.1"

    def _keystone_token(self):
        """A project-scoped token of Nova's service user, from Keystone."""
        k = self.keystone
        body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": k["username"], "password": k["password"], "domain": {"id": "default"}}}},
            "scope": {"project": {"name": k["project_name"], "domain": {"id": "default"}}}}}
        r = requests.post(f"{k['auth_url']}/auth/tokens", json=body, timeout=30)
        self.assertEqual(201, r.status_code, r.text)
        return r.headers["X-Subject-Token"]

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
            messages.notify(self, messages.metrics_update(host, percent, "fake.SmallFakeDriver"))
        return servers

    def _apply(self, *flags, token=None):
        """`parasol rebalance apply --json`: see `_rebalance`."""
        return self._rebalance("apply", *flags, token=token)

    def _rebalance(self, command, *flags, token=None):
        """Runs `parasol rebalance <command> --json` with the running Parasol's configuration and
        Nova's compute API; (exit code, the plan, the lines after it, stderr). The apply
        authenticates as a deployment's would: `[placement]`'s Keystone user (Nova's service
        user) gets its token from Keystone; with `token`, that static token instead."""
        ext = next(iter(swap._running.values()))
        sections = dict(ext.sections)
        k = self.keystone
        sections["placement"] = dict(sections.get("placement", {}), keystone_url=k["auth_url"],
                                     username=k["username"], password=k["password"],
                                     project_name=k["project_name"])
        sections["rebalance"] = {"nova_url": self.nova_url, "nova_auth": "keystone",
                                 "apply_poll_interval_s": 0.2, "move_timeout_s": 60.0,
                                 "agree_timeout_s": 20.0}
        if token is not None:
            sections["rebalance"].update(nova_auth="token", nova_token=token)
        path = os.path.join(ext.dir, "apply.toml")
        with open(path, "w") as f:
            f.write(swap._text(sections))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PARASOL__")}
        done = subprocess.run(
            [Current.parasol_bin, "--config", path, "rebalance", command, "--json",
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

    def test_a_token_keystone_no_longer_honours_is_refused_and_nothing_moves(self):
        servers = self._unbalanced_cloud()
        token = self._keystone_token()
        r = requests.delete(f"{self.keystone['auth_url']}/auth/tokens", timeout=30,
                            headers={"X-Auth-Token": token, "X-Subject-Token": token})
        self.assertEqual(204, r.status_code, r.text)
        code, plan, lines, stderr = self._apply(token=token)
        self.assertNotEqual(0, code, lines)
        # Refused by keystonemiddleware at the first call (reading Nova's servers): no plan
        # asked for, nothing moved, and the operator told it is the token.
        self.assertIsNone(plan, lines)
        self.assertIn("Nova's compute API refused the static token", stderr)
        self.assertIn("(401 Unauthorized)", stderr)
        self.assertIn("requires authentication", stderr)
        for name, server in servers.items():
            now = self.admin_api.get_server(server["id"])
            self.assertEqual(server["OS-EXT-SRV-ATTR:host"], now["OS-EXT-SRV-ATTR:host"],
                             name)
        self.assertEqual([], self.admin_api.get_migrations())

    def _placement_and_ledger_disagree(self):
        """What Placement's usages and Parasol's ledger (`GET /v1/hosts` `used`) disagree on,
        host by host and class by class (empty: they agree)."""
        r = requests.get(f"{swap.parasol_url()}/v1/hosts", timeout=10)
        self.assertEqual(200, r.status_code, r.text)
        problems = []
        for host in r.json()["hosts"]:
            usages = self.placement.get(
                f"/resource_providers/{host['compute_node_uuid']}/usages").body["usages"]
            for cls in ("VCPU", "MEMORY_MB", "DISK_GB"):
                ledger = host["used"].get(cls, 0)
                if usages.get(cls, 0) != ledger:
                    problems.append(f"{host['host']} {cls}: Placement {usages.get(cls, 0)}, "
                                    f"Parasol {ledger}")
        return problems

    def test_a_live_migration_that_fails_after_nova_accepts_it_stops_the_apply_there(self):
        servers = self._unbalanced_cloud()
        calls = []

        def pre_live_migration(*args, **kwargs):
            # The second move's destination fails, as Nova's own rollback tests make it
            # (test_servers' test_live_migrate_rollback_cleans_dest_node_allocations): Nova
            # has accepted the os-migrateLive, scheduled it and claimed the destination.
            calls.append(args)
            if len(calls) == 2:
                raise test.TestingException("the destination could not prepare the guest")
            return args[-1]
        self.useFixture(fixtures.MockPatch("nova.virt.fake.FakeDriver.pre_live_migration",
                                           side_effect=pre_live_migration))
        code, plan, lines, stderr = self._apply()
        moves = [m for step in plan["steps"] for m in step]
        self.assertGreater(len(moves), 1, plan)
        first, second = moves[0], moves[1]
        self.assertNotEqual(0, code, lines)
        self.assertEqual([f"moved {first['instance']} {first['source']} -> "
                          f"{first['destination']} (1/{len(moves)}); Placement and Parasol "
                          "agree"], lines)
        self.assertIn(f"stopped after 1 of {len(moves)} moves: the live migration of server "
                      f"{second['instance']} to {second['destination']} failed: its migration "
                      "is ", stderr)
        # The apply waited for Nova to settle the server and says where it is, and that
        # Placement and the ledger agree on it there.
        self.assertIn(f"; the server is now ACTIVE on {second['source']} (the move's source), "
                      "and Placement and Parasol's ledger agree", stderr)
        # Nova rolled the second move back: the server is ACTIVE on its source, the others
        # untouched, and Placement (the destination's claim dropped) and the ledger agree.
        moved = self._wait_for_server_parameter(
            {"id": second["instance"]}, {"OS-EXT-STS:task_state": None})
        self.assertEqual(("ACTIVE", second["source"]),
                         (moved["status"], moved["OS-EXT-SRV-ATTR:host"]))
        for name, server in servers.items():
            now = self.admin_api.get_server(server["id"])
            want = (first["destination"] if server["id"] == first["instance"]
                    else server["OS-EXT-SRV-ATTR:host"])
            self.assertEqual(want, now["OS-EXT-SRV-ATTR:host"], name)
            allocations = self._get_allocations_by_server_uuid(server["id"])
            self.assertEqual([self._get_provider_uuid_by_host(want)], list(allocations), name)
        for _ in range(100):
            problems = self._placement_and_ledger_disagree()
            if not problems:
                break
            time.sleep(0.2)
        self.assertEqual([], problems)

    def test_a_saved_plan_is_applied_as_saved_and_refused_once_the_ledger_changed(self):
        servers = self._unbalanced_cloud()
        # The plan apply would carry out (made with Nova's stopped server and group),
        # saved; nothing moves.
        code, saved, lines, stderr = self._apply("--dry-run")
        self.assertEqual(0, code, stderr)
        self.assertEqual([], lines)
        moves = [m for step in saved["steps"] for m in step]
        self.assertTrue(moves, saved)
        for name, server in servers.items():
            now = self.admin_api.get_server(server["id"])
            self.assertEqual(server["OS-EXT-SRV-ATTR:host"], now["OS-EXT-SRV-ATTR:host"],
                             name)
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, "plan.json")
        with open(path, "w") as f:
            json.dump(saved, f)
        # The ledger is where the plan was made: the saved plan is the one carried out.
        code, plan, lines, stderr = self._apply("--plan", path)
        self.assertEqual(0, code, f"stdout: {lines}\nstderr: {stderr}")
        self.assertEqual(saved, plan)
        self.assertIn(f"applied {len(moves)} of {len(moves)} moves", lines[-1])
        planned = {m["instance"]: m["destination"] for m in moves}
        hosts = {}
        for name, server in servers.items():
            now = self.admin_api.get_server(server["id"])
            want = planned.get(server["id"], server["OS-EXT-SRV-ATTR:host"])
            self.assertEqual(want, now["OS-EXT-SRV-ATTR:host"], name)
            hosts[name] = want
        # A server booted since: the plan is older than the ledger, refused, nothing moved.
        self._boot("h", "host1")
        code, plan, lines, stderr = self._apply("--plan", path)
        self.assertNotEqual(0, code, lines)
        self.assertIsNone(plan, lines)
        self.assertIn(f"the plan in {path} is older than the ledger's state, nothing was "
                      "moved", stderr)
        self.assertIn(saved["base_revision"], stderr)
        for name, server in servers.items():
            now = self.admin_api.get_server(server["id"])
            self.assertEqual(hosts[name], now["OS-EXT-SRV-ATTR:host"], name)
        # With --replan: planned again on the current state, and that plan carried out.
        code, plan, lines, stderr = self._apply("--plan", path, "--replan")
        self.assertEqual(0, code, f"stdout: {lines}\nstderr: {stderr}")
        self.assertIn(f"the plan's base revision {saved['base_revision']} was stale", stderr)
        self.assertIn("applying the new plan", stderr)
        self.assertNotEqual(saved["base_revision"], plan["base_revision"])
        self.assertIn("applied ", lines[-1])
