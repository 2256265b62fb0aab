"""One worker process (runs in the venv): puts Nova's tests on the broker and the TCP
Placement, swaps the scheduler in `parasol` mode, and runs the tests the parent sends one
by one, answering each with a result line.

Protocol on two inherited pipes, one JSON object a line. In: `{"module", "id", "index"}` or
`{"quit": true}`. Out: `ready`, `start`, `pid` (a process this worker started, so the parent
can kill it if the worker dies), `result`.
"""

import argparse
import inspect
import json
import os
import sys
import time

# Nova's monkey_patch.patch() before anything else: eventlet, or native threading when
# OS_NOVA_DISABLE_EVENTLET_PATCHING is set (parasol mode).
import nova.tests.functional  # noqa: F401

import testtools

from nova_functional import agreement, classify, loading, placement_tcp, transport
from nova_functional.state import Current

DETAIL_LIMIT = 200_000


class Recorder(testtools.TestResult):
    """The outcome of one test and the text of its details."""

    def __init__(self):
        super().__init__()
        self.status = None
        self.text = ""
        self.reason = None

    def _details(self, err, details):
        self.text += self._err_details_to_string(self._test, err, details) + "\n"

    def startTest(self, test):
        super().startTest(test)
        self._test = test

    def addSuccess(self, test, details=None):
        self.status = self.status or "pass"

    def addError(self, test, err=None, details=None):
        self.status = "error" if self.status != "fail" else "fail"
        self._details(err, details)

    def addFailure(self, test, err=None, details=None):
        self.status = "fail"
        self._details(err, details)

    def addSkip(self, test, reason=None, details=None):
        self.status = "skip"
        if reason is None and details and "reason" in details:
            reason = details["reason"].as_text()
        self.reason = reason

    def addExpectedFailure(self, test, err=None, details=None):
        self.status = "pass"
        self.reason = "expected failure"

    def addUnexpectedSuccess(self, test, details=None):
        self.status = "fail"
        self.text += "unexpected success\n"


def _check_at_the_end(test):
    """Runs the agreement check right after the test body, before its cleanups.

    The body is wrapped in a subclass made for this test (same name and module, so the same
    id), not on the instance: a `testscenarios` class runs copies of the test, one per
    scenario, and a wrapper bound to this instance would run the body on it rather than on
    the copy that `setUp` prepared."""
    name = test._testMethodName
    klass = type(test)
    body = getattr(klass, name)

    def body_then_check(self, *args, **kwargs):
        try:
            return body(self, *args, **kwargs)
        finally:
            from nova_functional import swap
            checking = time.monotonic()
            Current.record["agreement"] = agreement.check(
                placement_tcp.Served.url, swap.parasol_url())
            Current.record["agreement_s"] = round(time.monotonic() - checking, 2)

    checked = type(klass.__name__, (klass,), {name: body_then_check})
    checked.__module__, checked.__qualname__ = klass.__module__, klass.__qualname__
    test.__class__ = checked


def _source_of(test):
    """The test method's source and its classes' own setUp (what it patches or reads)."""
    parts = []
    try:
        parts.append(inspect.getsource(getattr(type(test), test._testMethodName)))
    except (OSError, TypeError, AttributeError):
        pass
    for klass in type(test).__mro__:
        if "setUp" in vars(klass) and klass.__module__.startswith("nova.tests.functional."):
            try:
                parts.append(inspect.getsource(vars(klass)["setUp"]))
            except (OSError, TypeError):
                pass
    return "\n".join(parts)


def run_one(module, test_id, index):
    Current.begin(test_id, index)
    Current.send("start", id=test_id)
    test = loading.tests_of(module)[test_id]
    source = _source_of(test)
    reach = classify.scheduler_reach(source)
    if reach:
        Current.record["reaches_scheduler"] = reach
    faults = classify.placement_faults(source)
    if faults:
        Current.record["placement_faults"] = faults
    _check_at_the_end(test)
    result = Recorder()
    started = time.monotonic()
    test.run(result)
    record = Current.record
    record["duration_s"] = round(time.monotonic() - started, 2)
    record["status"] = result.status or "error"
    if result.reason:
        record["reason"] = result.reason
    if result.text:
        path = Current.path(".txt")
        with open(path, "w") as f:
            f.write(result.text[-DETAIL_LIMIT:])
        record["details"] = path
        record["first_error"] = classify.first_error(result.text)
        record["evidence"] = classify.first_lines(result.text, classify.EVIDENCE, 6)
    return record


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["nova", "parasol"], required=True)
    parser.add_argument("--broker-url", required=True)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--parasol-bin")
    parser.add_argument("--in-fd", type=int, required=True)
    parser.add_argument("--out-fd", type=int, required=True)
    args = parser.parse_args()
    Current.mode = args.mode
    Current.run_dir = args.run_dir
    Current.parasol_bin = args.parasol_bin
    Current.out = os.fdopen(args.out_fd, "w")
    transport.install(args.broker_url)
    placement_tcp.install()
    from nova_functional import swap
    swap.install(args.mode)
    commands = os.fdopen(args.in_fd, "r")
    Current.send("ready", pid=os.getpid())
    try:
        for line in commands:
            cmd = json.loads(line)
            if cmd.get("quit"):
                break
            try:
                record = run_one(cmd["module"], cmd["id"], cmd["index"])
            except Exception as e:  # a harness fault, not the test's
                record = dict(Current.record, status="error",
                              first_error=f"harness: {type(e).__name__}: {e}")
            Current.send("result", **record)
    finally:
        swap.kill_all()


if __name__ == "__main__":
    sys.exit(main())
