"""`docs/nova-functional.md` from the two results files (standard library only).

For a test that passes with Nova's scheduler but not with Parasol, the cause is found in this
order: the harness or Parasol's start failed; the test reached into the in-process scheduler;
the first `select_destinations` call whose answer differs between the two runs (an error, a
host that is Parasol's node name, another host); else the class of the test's first error
line (`classify.py`).
"""

import collections
import datetime

from nova_functional import agreement_report, causes

OUTCOMES = ("pass", "fail", "error", "skip")


_short = causes.short_id


def _run_line(doc, who):
    line = (f"- {who}: `{doc.get('command')}` on {doc.get('date')}: {len(doc.get('tests', {}))} "
            f"tests, `--concurrency {doc.get('concurrency')}`, {doc.get('wall_s')} s wall "
            f"for the {doc.get('tests_run')} it ran")
    if doc.get("excluded"):
        line += f", leaving out {', '.join(f'`{e}`' for e in doc['excluded'])}"
    if doc.get("sample"):
        line += (f", a stratified sample of {doc['sample']['per_module']} tests per module "
                 f"(all of a smaller one), seed {doc['sample']['seed']}")
    for m in doc.get("merged", []):
        line += (f"; then `{m.get('command')}` on {m.get('date')} reran {m.get('tests_run')} "
                 f"of them ({m.get('wall_s')} s wall), whose records replace the first run's")
    return line


def _counts(doc):
    c = collections.Counter(r.get("status") for r in doc["tests"].values())
    return [c.get(o, 0) for o in OUTCOMES]


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(nova, parasol, command, nova_path="tests/nova_functional/results/nova.json",
           parasol_path="tests/nova_functional/results/parasol.json"):
    nt, pt = nova["tests"], parasol["tests"]
    baseline = sorted(t for t, r in nt.items() if r.get("status") == "pass")
    passing = [t for t in baseline if pt.get(t, {}).get("status") == "pass"]
    found = {t: causes.cause(nt[t], pt.get(t)) for t in baseline if t not in passing}
    internals = sum(1 for c, _ in found.values() if c == "scheduler-internals")
    judged = len(baseline) - internals
    share = f"{100.0 * len(passing) / judged:.1f} %" if judged else "n/a"
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    out = [
        "# Nova's functional tests with Parasol as the scheduler",
        "",
        f"Written by `{command}` on {now}, from:",
        "",
        _run_line(nova, f"Nova's scheduler (`{nova_path}`)"),
        _run_line(parasol, f"Parasol (`{parasol_path}`)"),
        "",
        f"{internals} of the tests that pass with Nova's scheduler reach into the in-process "
        f"scheduler (`scheduler-internals`: its manager, host manager, filters or weighers), "
        f"which no scheduler in another process can satisfy; of the other {judged}, Parasol "
        f"passes {len(passing)} ({share}).",
        "",
        f"**Parasol passes {len(passing)} of {len(baseline)} tests that pass with Nova's "
        f"scheduler**",
        "",
        "The harness ([tests/nova_functional/README.md](../tests/nova_functional/README.md)) runs "
        "the tests of the installed `nova==34.0.0` unchanged, with Nova's RPC and versioned "
        "notifications on RabbitMQ (a vhost per worker), Placement also served on a loopback "
        "port, and, with Parasol, `parasol serve` started where a test starts the scheduler. "
        "The whole visible set, both modes and this report:",
        "",
        "```sh",
        "cd tests",
        "python3 -m nova_functional run --mode nova --concurrency 2",
        "cargo build --release && python3 -m nova_functional run --mode parasol --concurrency 2",
        "python3 -m nova_functional report",
        "```",
        "",
        "Any test ids, module or class prefixes or globs of the installed Nova can follow `run`. "
        "What Parasol lacks, by cause: "
        "[tests/nova_functional/GAPS.md](../tests/nova_functional/GAPS.md).",
        "",
        "## Outcomes",
        "",
        "| | " + " | ".join(OUTCOMES) + " |",
        "|---|" + "---|" * len(OUTCOMES),
        "| Nova's scheduler | " + " | ".join(map(str, _counts(nova))) + " |",
        "| Parasol | " + " | ".join(map(str, _counts(parasol))) + " |",
        "",
    ]
    out += _time_table(nt, pt, nova, parasol)
    out += _cause_table(found)
    out += agreement_report.section(nova, parasol)
    out += _baseline_failures(nova)
    out += causes.settings_table(pt, found)
    out += _per_test(nt, pt, found)
    return "\n".join(out) + "\n"


def _time_table(nt, pt, nova_doc, parasol_doc):
    """Issue 42: the per-test time in Parasol mode against Nova mode, on the tests that pass
    in both (each test's own duration, setup and cleanups included, not the run's wall)."""
    both = [t for t, r in nt.items()
            if r.get("status") == "pass" and pt.get(t, {}).get("status") == "pass"]
    out = ["## Time per test", ""]
    if not both:
        return out + ["No test passed in both runs.", ""]
    machines = (nova_doc.get("machine"), parasol_doc.get("machine"))
    if None in machines or machines[0] != machines[1]:
        return out + [
            f"Not compared: the runs are not known to be from one machine (Nova mode: "
            f"{machines[0] or 'not recorded'}; Parasol mode: {machines[1] or 'not recorded'}).",
            ""]
    nova = sum(nt[t].get("duration_s", 0.0) for t in both)
    parasol = sum(pt[t].get("duration_s", 0.0) for t in both)
    ratios = sorted(pt[t]["duration_s"] / nt[t]["duration_s"] for t in both
                    if nt[t].get("duration_s") and pt[t].get("duration_s") is not None)
    median = ratios[len(ratios) // 2] if ratios else float("nan")

    def checks(tests):
        return sum(tests[t].get("agreement_s", 0.0) for t in both)
    nova_check, parasol_check = checks(nt), checks(pt)
    return out + [
        f"On the {len(both)} tests that pass in both runs, Parasol mode took {parasol:.0f} s "
        f"and Nova mode {nova:.0f} s: **{parasol / nova:.2f}×** (the median test "
        f"{median:.2f}×). A test's time includes its setup and cleanups: in Parasol mode, "
        "starting `parasol serve` and waiting for its first Placement sync and read of "
        "Nova's records, and stopping it. It also includes the harness's end-of-test "
        f"agreement check (`agreement_s`: {parasol_check:.0f} s in Parasol mode, which compares "
        f"three pairs and re-reads for up to 3 s while Parasol's ledger catches up, "
        f"{nova_check:.0f} s in Nova mode); without it, "
        f"**{(parasol - parasol_check) / max(nova - nova_check, 1e-9):.2f}×**.", ""]


def _cause_table(found):
    by = collections.Counter(c for c, _ in found.values())
    out = ["## Why tests that pass with Nova's scheduler fail with Parasol", "",
           "| cause | tests | meaning |", "|---|---|---|"]
    for name, n in by.most_common():
        out.append(f"| `{name}` | {n} | {_cell(causes.MEANING.get(name, ''))} |")
    return out + [""]


def _baseline_failures(nova):
    bad = {t: r for t, r in nova["tests"].items() if r.get("status") not in ("pass", "skip")}
    out = ["## Tests that fail with Nova's scheduler in the harness", ""]
    if not bad:
        return out + ["None.", ""]
    for t, r in sorted(bad.items()):
        note = causes.BASELINE_NOTES.get(_short(t), "")
        out.append(f"- `{_short(t)}`: {r.get('status')}, `{_cell(r.get('first_error', ''))[:300]}`"
                   + (f" — {note}" if note else ""))
    return out + [""]


def _per_test(nt, pt, found):
    out = ["## Per test", "", "| test | Nova's scheduler | Parasol | cause |", "|---|---|---|---|"]
    for t in sorted(set(nt) | set(pt)):
        n = nt.get(t, {}).get("status", "not run")
        p = pt.get(t, {}).get("status", "not run")
        cause = ""
        if t in found:
            name, detail = found[t]
            error = (pt.get(t, {}).get("first_error") or "")[:160]
            cause = f"`{name}`: {_cell(detail)[:360]}"
            if error and error[:60] not in detail:
                cause += f" — first error: `{_cell(error)}`"
        out.append(f"| `{_short(t)}` | {n} | {p} | {cause} |")
    return out + [""]
