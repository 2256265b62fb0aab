"""The end-of-test agreement in the report, per pair (standard library only).

A record written before the check was split into pairs (`agreement.py`) has only `agree` and
`problems`; its pairs are told from the problems' wording, which has not changed.
"""

import collections
import re

from nova_functional import causes

PAIRS = ("placement_nova", "parasol_placement", "parasol_nova")
TITLES = {
    "placement_nova": "Placement ↔ Nova",
    "parasol_placement": "Parasol ↔ Placement",
    "parasol_nova": "Parasol ↔ Nova",
}
MEANING = {
    "placement_nova": "Nova's own part: each server (soft-deleted ones included) holds exactly "
                      "its flavor's VCPU, MEMORY_MB and DISK_GB on its node's provider; every "
                      "Placement consumer is such a server or an unfinished migration",
    "parasol_placement": "per compute provider, Placement's usages of the three classes equal "
                         "the used amounts in Parasol's ledger (`GET /v1/hosts`), and the "
                         "ledger has no host Placement lacks",
    "parasol_nova": "per node, Parasol's ledger counts as many instances (`num_instances`) as "
                    "Nova has servers there",
}

# Why a disagreement that remains is there (short test id → text).
NOTES = {
    "test_servers.ConsumerGenerationConflictTest.test_confirm_migrate_delete_alloc_on_source_fails":
        "Nova's own leak: the test makes Placement refuse the deletion of the migration's "
        "allocation (consumer generation conflict); Nova logs that the allocation held by the "
        "migration is leaked, and the test asserts that log",
    "test_servers.ConsumerGenerationConflictTest.test_live_migrate_drop_allocation_on_source_fails":
        "Nova's own leak: the test makes Placement refuse the deletion of the source allocation "
        "after the live migration; Nova leaves it held by the migration (the test's own note)",
    "test_servers.ConsumerGenerationConflictTest.test_revert_migrate_delete_dest_allocation_fails_due_to_conflict":
        "Nova's own leak: the test makes Placement refuse a deletion on revert; the allocation "
        "held by the migration is leaked, and the test asserts Nova's log of it",
    "test_servers.ConsumerGenerationConflictTest.test_revert_resize_same_host_delete_dest_fails_due_to_conflict":
        "Nova's own leak: the test makes Placement refuse a deletion on revert; the allocation "
        "held by the migration is leaked, and the test asserts Nova's log of it",
    "test_servers.ServerMovingTests.test_finish_resize_fails_allocation_cleanup":
        "Nova's own: finish_resize fails on the (same) host after it dropped the old flavor's "
        "allocation; the server keeps the old flavor while the host holds the new one's, which "
        "the test asserts (`assertFlavorMatchesUsage(source_rp_uuid, self.flavor2)`)",
}


def _pair_of_problem(problem):
    if re.search(r"Nova has \d+ servers, Parasol's ledger", problem):
        return "parasol_nova"
    if "Parasol's ledger" in problem:
        return "parasol_placement"
    return "placement_nova"


def pairs_of(record, mode):
    """{pair: {"agree": True|False|None, "problems": [...]}} for the pairs the mode checks."""
    wanted = PAIRS if mode == "parasol" else PAIRS[:1]
    a = record.get("agreement") or {}
    if a.get("pairs"):
        return {p: a["pairs"].get(p, {"agree": None, "problems": []}) for p in wanted}
    if a.get("agree") is None:
        return {p: {"agree": None, "problems": []} for p in wanted}
    split = {p: [] for p in wanted}
    for problem in a.get("problems", []):
        split.setdefault(_pair_of_problem(problem), []).append(problem)
    return {p: {"agree": not split[p], "problems": split[p]} for p in wanted}


def _counts(doc, mode):
    c = collections.defaultdict(collections.Counter)
    for r in doc["tests"].values():
        for p, v in pairs_of(r, mode).items():
            a = v["agree"]
            c[p]["agree" if a is True else "disagree" if a is False else "not checked"] += 1
    return c


def _short(test_id):
    return test_id.replace("nova.tests.functional.", "")


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def section(nova, parasol):
    out = ["## End-of-test agreement", "",
           "After each test body, before its cleanups, the harness checks three pairs "
           "(`tests/nova_functional/agreement.py`), re-reading for up to 3 s while background "
           "work lands; both runs use the same check:", ""]
    out += [f"- **{TITLES[p]}**: {MEANING[p]}." for p in PAIRS] + [""]
    cn, cp = _counts(nova, "nova"), _counts(parasol, "parasol")
    a, b = _all(nova, "nova"), _all(parasol, "parasol")
    out += ["| run | pair | agree | disagree | not checked |", "|---|---|---|---|---|"]
    for who, c, mode in (("Nova's scheduler", cn, "nova"), ("Parasol", cp, "parasol")):
        for p in (PAIRS if mode == "parasol" else PAIRS[:1]):
            out.append(f"| {who} | {TITLES[p]} | {c[p]['agree']} | {c[p]['disagree']} | "
                       f"{c[p]['not checked']} |")
    out += ["", f"All pairs at once: with Nova's scheduler {a['agree']} agree, {a['disagree']} "
            f"disagree, {a['not checked']} not checked; with Parasol {b['agree']} agree, "
            f"{b['disagree']} disagree, {b['not checked']} not checked.", ""]
    rows = []
    for who, doc, mode in (("Nova's scheduler", nova, "nova"), ("Parasol", parasol, "parasol")):
        for t, r in sorted(doc["tests"].items()):
            for p, v in pairs_of(r, mode).items():
                if v["agree"] is False:
                    note = NOTES.get(_short(t), "")
                    rows.append(f"| `{_short(t)}` | {who} | {TITLES[p]} | "
                                f"{_cell('; '.join(v['problems']))[:300]} | {_cell(note)} |")
    if rows:
        out += ["Disagreements, per test and pair:", "",
                "| test | run | pair | problems | why |", "|---|---|---|---|---|"] + rows + [""]
    kinds = collections.Counter()
    for r in parasol["tests"].values():
        for p in (r.get("agreement") or {}).get("problems", []):
            kinds[causes.problem_kind(p)] += 1
    if kinds:
        out += ["Disagreements with Parasol, by kind (problems, over all tests):", ""]
        out += [f"- {k}: {n}" for k, n in kinds.most_common()] + [""]
    return out


def _all(doc, mode):
    c = collections.Counter()
    for r in doc["tests"].values():
        vals = [v["agree"] for v in pairs_of(r, mode).values()]
        c["not checked" if None in vals else "agree" if all(vals) else "disagree"] += 1
    return c
