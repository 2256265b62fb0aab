"""`python -m nova_functional` (from `tests/`, standard library only):

    run [--mode nova|parasol] [--concurrency N] [--parasol-bin PATH] [--out FILE] [--merge]
        [--suite visible|fast|widened] [--sample N [--seed S]] [PATTERN ...]
                                      run tests (default: the visible set), write results JSON
    report [--nova FILE] [--parasol FILE] [--out FILE]
                                      write docs/nova-functional.md from the two results files
    list [--suite S] [--sample N [--seed S]] [--by-module] [PATTERN ...]
                                      print the test ids the patterns select
    venv                              build (once) and print the cached virtualenv

A PATTERN is a test id, a module or class prefix, or a glob over ids, from the installed Nova;
without the `nova.` prefix it is relative to `nova.tests.functional`.
"""

import argparse
import datetime
import json
import os
import shlex
import sys
from pathlib import Path

from nova_functional import runner, suites, venv

# Environment variables of the harness that change how Parasol runs (tests/nova_functional/README.md).
RUN_SETTINGS = ("PARASOL_NF_BATCH_MODE", "PARASOL_NF_PLUGINS", "PARASOL_NF_SETTINGS")

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def machine():
    """The CPU model and the number of CPUs this run had (`/proc/cpuinfo`)."""
    try:
        with open("/proc/cpuinfo") as f:
            models = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
    except OSError:
        models = []
    return f"{models[0] if models else 'unknown CPU'}, {os.cpu_count()} CPUs"


def default_parasol_bin():
    if os.environ.get("PARASOL_BIN"):
        return Path(os.environ["PARASOL_BIN"])
    target = os.environ.get("CARGO_TARGET_DIR")
    base = Path(target) if target else runner.REPO / "target"
    return base / "release" / "parasol"


def select(args, python):
    """The tests `run` and `list` take: the patterns or the suite, less what the suite
    excludes, sampled if asked; a held-out test is refused unless `--held-out`."""
    patterns = args.patterns or suites.by_name(args.suite)
    exclude = [] if args.patterns else suites.excluded_by(args.suite)
    tests = runner.list_tests(python, patterns, exclude)
    if args.sample:
        tests = suites.stratified_sample(tests, args.sample, args.seed)
    held = suites.held_out_hits(tests)
    if held and not args.held_out:
        raise SystemExit(f"nova_functional: {len(held)} of the selected tests (first "
                         f"{held[0]}) are in issue 42's held-out modules "
                         f"({', '.join(suites.HELD_OUT)}); pass --held-out to run them anyway")
    return patterns, exclude, tests


def cmd_run(args):
    settings = os.environ.get("PARASOL_NF_SETTINGS", "")
    if settings not in ("", "shipped"):
        raise SystemExit(f"nova_functional: PARASOL_NF_SETTINGS={settings!r}: the only value is "
                         f"'shipped' (Parasol's shipped intervals); unset, the harness's fast ones")
    python = venv.python_of(venv.ensure_venv())
    patterns, exclude, tests = select(args, python)
    parasol_bin = None
    if args.mode == "parasol":
        parasol_bin = Path(args.parasol_bin or default_parasol_bin()).resolve()
        if not os.access(parasol_bin, os.X_OK):
            raise SystemExit(f"{parasol_bin}: no Parasol binary (cargo build --release, or "
                             f"--parasol-bin / PARASOL_BIN)")
    out = Path(args.out or RESULTS / f"{args.mode}.json")
    print(f"{len(tests)} tests, mode {args.mode}, concurrency {args.concurrency}",
          file=sys.stderr, flush=True)
    run = runner.Run(args.mode, tests, args.concurrency, parasol_bin,
                     soft_timeout_s=args.timeout, hard_timeout_s=args.timeout + 120)
    print(f"logs: {run.dir}", file=sys.stderr, flush=True)
    wall = run.execute()
    if run.fatal:
        raise SystemExit(f"nova_functional: {run.fatal}")
    this = {
        "mode": args.mode,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        # The settings that change what Parasol runs with are part of the command: a run with
        # a batch mode or a plugin chain says so (not PARASOL_NF_KEYSTONE: it holds a password).
        "command": "cd tests && " + "".join(
            f"{k}={shlex.quote(os.environ[k])} " for k in RUN_SETTINGS if os.environ.get(k))
        + "python3 -m nova_functional " + shlex.join(sys.argv[1:]),
        "patterns": patterns,
        "excluded": exclude,
        "sample": {"per_module": args.sample, "seed": args.seed} if args.sample else None,
        "concurrency": args.concurrency,
        # Time per test is compared between two runs only on the same machine.
        "machine": machine(),
        "wall_s": round(wall, 1),
        "tests_run": len(run.results),
        "logs": str(run.dir),
    }
    previous = json.loads(out.read_text()) if args.merge and out.exists() else {}
    tests = previous.get("tests", {})
    tests.update(run.results)
    if previous:
        # The file still describes the run that made it; this one is listed as merged in.
        doc = {k: v for k, v in previous.items() if k != "tests"}
        doc["merged"] = doc.get("merged", []) + [
            {k: this[k] for k in ("date", "command", "wall_s", "tests_run", "logs")}]
    else:
        doc = this
    doc["tests"] = {t: tests[t] for t in sorted(tests)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    counts = {}
    for record in run.results.values():
        counts[record.get("status")] = counts.get(record.get("status"), 0) + 1
    print(f"{out}: {counts} in {wall:.0f} s", file=sys.stderr)
    failed = sum(v for k, v in counts.items() if k not in ("pass", "skip"))
    return 1 if failed else 0


def cmd_list(args):
    python = venv.python_of(venv.ensure_venv())
    _patterns, _exclude, tests = select(args, python)
    if args.by_module:
        counts = {}
        for module, _test_id in tests:
            counts[module] = counts.get(module, 0) + 1
        for module, n in counts.items():
            print(f"{n:5} {module}")
        print(f"{len(tests):5} tests in {len(counts)} modules")
        return 0
    for _module, test_id in tests:
        print(test_id)
    return 0


def add_selection(parser):
    parser.add_argument("--suite", choices=sorted(suites.SUITES), default="visible",
                        help="the tests to take when no PATTERN is given")
    parser.add_argument("--sample", type=int, metavar="N",
                        help="a stratified sample: every test of a module with at most N, "
                        "N drawn from a larger one")
    parser.add_argument("--seed", type=int, default=1, help="the sample's seed (default 1)")
    parser.add_argument("--held-out", action="store_true",
                        help="allow tests of issue 42's held-out modules")
    parser.add_argument("patterns", nargs="*")


def _in_repo(path):
    """`path` relative to the repository when it is inside it (as the report names it)."""
    path = Path(path).resolve()
    return str(path.relative_to(runner.REPO)) if path.is_relative_to(runner.REPO) else str(path)


def cmd_report(args):
    from nova_functional import report
    out = Path(args.out or runner.REPO / "docs" / "nova-functional.md")
    text = report.render(json.loads(Path(args.nova).read_text()),
                         json.loads(Path(args.parasol).read_text()),
                         " ".join(["cd tests && python3 -m nova_functional"]
                                  + [shlex.quote(a) for a in sys.argv[1:]]),
                         _in_repo(args.nova), _in_repo(args.parasol))
    out.write_text(text)
    print(f"wrote {out}", file=sys.stderr)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m nova_functional",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run tests and write a results file")
    run.add_argument("--mode", choices=["nova", "parasol"], default="nova")
    run.add_argument("--concurrency", type=int, default=2)
    run.add_argument("--parasol-bin", help="default: $PARASOL_BIN, else "
                     "$CARGO_TARGET_DIR/release/parasol, else target/release/parasol")
    run.add_argument("--out", help="default: tests/nova_functional/results/<mode>.json")
    run.add_argument("--merge", action="store_true",
                     help="keep the other tests' records of an existing results file (and its "
                     "header: this run is listed under `merged`)")
    run.add_argument("--timeout", type=int, default=240,
                     help="seconds per test (OS_TEST_TIMEOUT); the worker is killed 120 s later")
    add_selection(run)
    lst = sub.add_parser("list", help="print the ids the patterns select")
    add_selection(lst)
    lst.add_argument("--by-module", action="store_true", help="print a count per module")
    rep = sub.add_parser("report", help="write docs/nova-functional.md")
    rep.add_argument("--nova", default=str(RESULTS / "nova.json"))
    rep.add_argument("--parasol", default=str(RESULTS / "parasol.json"))
    rep.add_argument("--out")
    sub.add_parser("venv", help="build (once) and print the virtualenv")
    args = parser.parse_args(argv)
    if args.command == "venv":
        print(venv.ensure_venv())
        return 0
    return {"run": cmd_run, "list": cmd_list, "report": cmd_report}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
