"""The cause of a test passing with Nova's scheduler and failing with Parasol, from the two
records of that test (standard library only)."""

import collections
import re

from nova_functional import classify

MEANING = dict((name, meaning) for name, meaning, _ in classify.RULES)
MEANING.update({
    "host-is-node": "Parasol answered a compute node's name as the service host (`fake-mini` "
                    "for service `compute`); the conductor finds no cell mapping for that host",
    "availability-zone": "Parasol knows no host aggregate, so no availability zone but the "
                         "default: AvailabilityZoneFilter removes every host for a zone set "
                         "on an aggregate, or the server lands outside the zone",
    "placed-where-nova-refused": "Nova's scheduler found no valid host (a filter or a Placement "
                                 "pre-filter removed them all) but Parasol placed the server",
    "different-host": "Parasol chose another host than Nova's scheduler",
    "alternate-claim-refused": "a reschedule to an alternate failed: Placement refused the "
                               "alternate's `allocation_request` (`\"mappings\": {}` at "
                               "version 1.36)",
    "fewer-alternates": "Parasol returned fewer alternates than Nova's scheduler, so a "
                        "reschedule ran out of hosts: a compute started less than "
                        "`[placement] sync_interval_s` before the request is not in Parasol's "
                        "ledger yet (Nova's scheduler reads compute nodes and Placement on "
                        "every request)",
    "rpc-error": "Parasol answered a scheduler call with an error other than NoValidHost",
    "threading-mode": "fails with Nova's own scheduler too when Nova runs in threading mode, "
                      "which `parasol` mode needs (Nova's cell databases in SQLite files "
                      "that Parasol reads); Nova mode runs Nova on eventlet",
    "other": "not classified",
})
# Tests that fail with Nova's scheduler in the harness, and why.
BASELINE_NOTES = {
    "test_servers.ConsumerGenerationConflictTest.test_migrate_claim_on_dest_fails":
        "fails over any real transport: it asserts that the instance action's traceback names "
        "the scheduler's `claim_resources`, which only the fake driver carries (it raises the "
        "scheduler's own exception object in the conductor); over RabbitMQ the conductor gets "
        "a deserialised remote exception whose traceback starts at its own call (it passes "
        "with Nova's fake driver)",
    "test_servers.ServersTest.test_unshelve_offloaded_overquota_placement":
        "intermittent: passed when run again, here and with Nova's fake driver (a race of "
        "Nova's database access, `Can't upgrade a READER transaction to a WRITER`)",
}


# Tests that fail with Nova's own scheduler when Nova runs in threading mode, measured with
# `OS_NOVA_DISABLE_EVENTLET_PATCHING=1 python3 -m nova_functional run --mode nova <test>`.
THREADING_MODE = {
    "compute.test_init_host.ComputeManagerInitHostTestCase."
    "test_migrate_disk_and_power_off_crash_finish_revert_migration":
        "the test's fake `migrate_disk_and_power_off` restarts the source compute from inside "
        "that compute's own RPC handler and then sleeps; stopping the service waits for the "
        "handler's thread, which never returns in threading mode (eventlet kills the green "
        "thread), so the restart never happens: timed out with Nova's scheduler too, "
        "2026-12-06",
}


def short_id(test_id):
    """A test id without the `nova.tests.functional.` prefix (as the report writes ids)."""
    return test_id.replace("nova.tests.functional.", "")


def _selects(record):
    return [c for c in (record or {}).get("scheduler_calls", [])
            if c.get("method") == "select_destinations"]


def _hosts(answer):
    return [entry.split(" ")[0] for row in answer or [] for entry in row[:1]]


def _answer_text(call):
    if "error" in call:
        return call["error"].split(":")[0]
    return ", ".join(_hosts(call.get("answer"))) or "nothing"


def _dropped(record):
    s = (record or {}).get("scheduler_settings") or {}
    filters = [f for f in s.get("filters_dropped", [])
               if f not in ("ComputeCapabilitiesFilter", "ImagePropertiesFilter")]
    weighers = [w["name"] for w in s.get("weighers_dropped", [])
                if w["name"] not in ("CrossCellWeigher", "HypervisorVersionWeigher",
                                     "PCIWeigher", "MetricsWeigher")]
    options = list(s.get("not_carried", {}))
    parts = []
    if filters:
        parts.append("filters Parasol lacks: " + ", ".join(filters))
    if weighers:
        parts.append("weighers Parasol lacks: " + ", ".join(weighers))
    if options:
        parts.append("options not carried: " + ", ".join(options))
    return ("; " + "; ".join(parts)) if parts else ""


def _request_features(call):
    """What the request asked for beyond size and group (traits, cells, zones, aggregates)."""
    spec = call.get("spec", {})
    parts = []
    traits = [f"{k}={v}" for k, v in (spec.get("extra_specs") or {}).items()
              if k.startswith("trait")]
    traits += [f"image {k}={v}" for k, v in (spec.get("image_properties") or {}).items()
               if k.startswith("traits")]
    if traits:
        parts.append("traits " + ", ".join(traits))
    dest = spec.get("requested_destination") or {}
    for key in ("host", "node", "aggregates", "forbidden_aggregates"):
        if dest.get(key):
            parts.append(f"requested_destination.{key} {dest[key]}")
    if dest.get("cell") and dest.get("cell") != "cell1":
        parts.append(f"requested_destination.cell {dest['cell']}")
    for key in ("availability_zone", "force_hosts", "force_nodes", "ignore_hosts"):
        if spec.get(key):
            parts.append(f"{key} {spec[key]}")
    return ("; request: " + "; ".join(parts)) if parts else ""


def _node_owner(parasol):
    """{node: service host} of the test's computes (fake driver: service `compute` has node
    `fake-mini`, other services a node of their own name)."""
    owners = {"fake-mini": "compute"}
    owners.update(((parasol or {}).get("agreement") or {}).get("computes") or {})
    return owners


def _op(call):
    """The operation of a call; a rebuild is told from an evacuation by Nova's hint."""
    hints = call.get("spec", {}).get("hints") or {}
    if hints.get("_nova_check_type") == ["rebuild"]:
        return "rebuild"
    return {"evacuate/rebuild": "evacuate"}.get(call.get("op"), call.get("op", "?"))


def _first_divergence(nova, parasol):
    for n, p in zip(_selects(nova), _selects(parasol)):
        if _answer_text(n) != _answer_text(p):
            return n, p
    return None, None


def cause(nova, parasol):
    """(class, detail) of a test that passed with Nova's scheduler."""
    if parasol is None:
        return "harness", "not run with Parasol"
    why = THREADING_MODE.get(short_id(parasol.get("id", "")))
    if why:
        return "threading-mode", why
    error = parasol.get("first_error", "") or ""
    name, _ = classify.classify(error)
    if name in ("harness", "parasol-start", "scheduler-internals"):
        reach = parasol.get("reaches_scheduler") or []
        return name, error[:200] + (f" (the test uses {', '.join(reach)})" if reach else "")
    reach = parasol.get("reaches_scheduler") or []
    if reach:
        # A patch of the scheduler's own filters or host manager changes what Nova's scheduler
        # answers; no scheduler in another process sees it, whatever else differs.
        return "scheduler-internals", (f"the test patches or reads {', '.join(reach)}; "
                                       f"{error[:200]}")
    faults = parasol.get("placement_faults") or []
    if "nova.scheduler.utils.claim_resources" in faults:
        return "scheduler-internals", ("the test fakes the scheduler's own claim "
                                       "(nova.scheduler.utils.claim_resources); " + error[:200])
    evidence = " ".join(parasol.get("evidence") or [])
    extra = _dropped(parasol)
    n, p = _first_divergence(nova, parasol)
    if p is not None:
        op, want, got = _op(p), _answer_text(n), _answer_text(p)
        extra = _request_features(p) + extra
        said = f"{op}: Nova's scheduler answered {want}; Parasol "
        if "error" in p:
            if "AvailabilityZoneFilter returned 0" in p["error"]:
                zone = p.get("spec", {}).get("availability_zone")
                return "availability-zone", f"{said}NoValidHost (AvailabilityZoneFilter, zone {zone})"
            kind = ("no-valid-host" if "NoValidHost" in p["error"] else
                    "rpc-timeout" if "MessagingTimeout" in p["error"] else "rpc-error")
            return kind, f"{said}{p['error'][:160]}{extra}"
        owners = _node_owner(parasol)
        for entry in _hosts(p.get("answer")):
            host, node = entry.split("/")[0], entry.split("/")[-1]
            if owners.get(node, node) != host:
                return "host-is-node", f"{said}{got} (node {node} belongs to service " \
                                       f"{owners.get(node)})"
        if "error" in n and "AllocationUpdateFailed" in n["error"] and faults:
            return "scheduler-internals", (f"{said}{got}: the test fakes Placement's answer to "
                                           f"the scheduler's claim in-process ({', '.join(faults)})"
                                           f"; Parasol's claims do not go through that code")
        if "error" in n:
            return "placed-where-nova-refused", f"{said}{got}{extra}"
        return "different-host", f"{said}{got}{extra}"
    if "JSON does not validate" in evidence or "Failed to save allocation" in evidence:
        return "alternate-claim-refused", f"{error[:160]}; {evidence[:300]}"
    for n, p in zip(_selects(nova), _selects(parasol)):
        want = max((len(r) for r in n.get("answer") or []), default=0)
        got = max((len(r) for r in p.get("answer") or []), default=0)
        if got < want:
            return "fewer-alternates", (f"{_op(p)}: Nova's scheduler answered "
                                        f"{n.get('answer')}; Parasol {p.get('answer')}")
    problems = " ".join((parasol.get("agreement") or {}).get("problems", []))
    if name in ("other", "server-state") and "Placement nothing" in problems:
        name = "no-placement-claim"
    return name, error[:300] + extra


def problem_kind(problem):
    """A disagreement line reduced to its kind (numbers and names removed)."""
    rules = [
        (r"Placement uses .* Parasol's ledger", "Parasol's ledger usage differs from Placement's"),
        (r"Nova has \d+ servers, Parasol's ledger", "Parasol's ledger counts other instances than Nova"),
        (r"not in Parasol's ledger", "a Placement provider is missing from Parasol's ledger"),
        (r"Placement does not", "Parasol's ledger has a host Placement lacks"),
        (r"Placement nothing", "a server holds no allocation in Placement"),
        (r"flavor .* Placement", "a server's allocation differs from its flavor"),
        (r"no live server or migration", "Placement holds a consumer Nova does not have"),
        (r"migration .* holds", "a finished migration still holds resources"),
    ]
    for pattern, kind in rules:
        if re.search(pattern, problem):
            return kind
    return problem[:80]


def settings_table(parasol_tests, found):
    """Filters, weighers and options the tests set that Parasol lacks, with how many of those
    tests failed."""
    seen = collections.defaultdict(lambda: [0, 0])
    for t, r in parasol_tests.items():
        s = r.get("scheduler_settings") or {}
        names = ([f"filter `{f}`" for f in s.get("filters_dropped", [])]
                 + [f"weigher `{w['name']}` (multiplier {w.get('multiplier')})"
                    for w in s.get("weighers_dropped", [])]
                 + [f"option `{k}` = `{v}`" for k, v in s.get("not_carried", {}).items()])
        for name in set(names):
            seen[name][0] += 1
            seen[name][1] += t in found
    out = ["## Scheduler settings the tests use that Parasol lacks", "",
           "Left out of Parasol's configuration (Parasol refuses unknown names): what each "
           "test's CONF held when it started the scheduler.", "",
           "| setting | tests | of which fail with Parasol only |", "|---|---|---|"]
    for name, (n, failed) in sorted(seen.items(), key=lambda kv: (-kv[1][0], kv[0])):
        out.append(f"| {name} | {n} | {failed} |")
    return out + [""]
