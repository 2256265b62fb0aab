"""The first real error line of a failed test, and the class of cause it shows (standard
library only: the report uses it outside the venv).

The error line is the exception a chain finally raised, in the first traceback of the test's
details (testtools puts captured logs beside it). The classes are ordered: the first rule
that matches the error line, the test's source hints or the logs wins.
"""

import re

_TB = "Traceback (most recent call last):"
_CHAINED = ("During handling of the above exception",
            "The above exception was the direct cause")


def _exception_line(block):
    """(first non-indented line after the frames, text after it) of one traceback block."""
    lines = block.splitlines()
    for i, line in enumerate(lines):
        if line and not line.startswith((" ", "\t")) and not line.startswith(_TB):
            rest = "\n".join(lines[i + 1:])
            return line.strip(), rest
    return None, ""


def first_error(text):
    """The exception line a test ended with, e.g. `AssertionError: 'host1' != 'host2'`."""
    blocks = text.split(_TB)[1:]
    for block in blocks:
        line, rest = _exception_line(block)
        if line is None:
            continue
        if any(marker in rest.split(_TB)[0] for marker in _CHAINED):
            continue
        return line[:400]
    stripped = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return stripped[0][:400] if stripped else ""


# Log lines worth keeping beside a failure: what Nova's services said about the scheduler's
# answer (cells, claims in Placement, retries, faults).
EVIDENCE = (r"not mapped to any cell|Failed to save allocation|Exceeded maximum number of "
            r"retries|No valid host was found|Unable to (claim|move|replace) |"
            r"AllocationUpdateFailed|MessagingTimeout|RemoteError|JSON does not validate")

# (class, meaning, regex over the error line); first match wins. `causes.py` tries the
# scheduler calls first; these classify what is left.
RULES = [
    ("scheduler-internals",
     "the test reaches into the in-process scheduler service (its manager, host manager, "
     "filters or weighers); no scheduler in another process can satisfy it",
     r"ExternalScheduler|no attribute 'manager'|no attribute 'host_manager'"),
    ("harness", "the harness failed or the worker hung (not Parasol's answer)",
     r"^harness:|^hung|^worker died"),
    ("parasol-start", "Parasol did not start or did not serve RPC",
     r"Parasol exited|did not serve RPC"),
    ("availability-zone", "the server is not in the availability zone the test expects",
     r"'zone\w*'|availability.?zone"),
    ("no-placement-claim",
     "the test finds no allocation or usage in Placement for its server: Parasol claims in its "
     "own ledger only",
     r"allocation|usage of the RP|resource_provider|[Pp]lacement"),
    ("rpc-timeout", "a scheduler call got no answer in time", r"MessagingTimeout"),
    ("no-valid-host", "Parasol answered NoValidHost where Nova's scheduler found a host",
     r"NoValidHost|No valid host"),
    ("server-state", "a server never reached the state the test waits for",
     r"Wait for state change failed|_wait_for_state_change"),
]


def classify(error_line):
    """(class, meaning) of a failure from its error line."""
    for name, meaning, pattern in RULES:
        if re.search(pattern, error_line):
            return name, meaning
    return "other", "not classified"


def first_lines(text, pattern, limit=3):
    """Up to `limit` lines of `text` matching `pattern` (log evidence for a cause)."""
    out = []
    for line in text.splitlines():
        if re.search(pattern, line):
            out.append(line.strip()[:300])
            if len(out) >= limit:
                break
    return out


# Source text of a test (its method and its classes' setUp) that reaches into the scheduler
# service's own objects: patches or reads that no scheduler in another process can honour.
SCHEDULER_REACH = re.compile(
    r"(scheduler(_service)?\.manager\b[\w.]*|host_manager[\w.]*|HostManager[\w.]*"
    r"|SchedulerManager[\w.]*|nova\.scheduler\.(manager|host_manager|filters|weights|"
    r"request_filter|filter_scheduler)[\w.]*)")


# Patches that inject Placement failures into in-process code: they reach a scheduler in
# another process only if the patched code is not the scheduler's own claim.
PLACEMENT_FAULTS = re.compile(
    r"(nova\.scheduler\.utils\.claim_resources|keystoneauth1\.adapter\.Adapter\.\w+"
    r"|SchedulerReportClient\.\w+)")


def placement_faults(source):
    """Distinct patch targets in `source` that fake Placement's answers in-process."""
    found = []
    for m in PLACEMENT_FAULTS.finditer(source):
        if m.group(0) not in found:
            found.append(m.group(0))
    return found


# What a patch, stub or spy of the scheduler's code looks like just before its target.
_PATCHING = re.compile(r"patch|stub_out|spy|[Mm]ock|wraps")


def _names_a_configured_class(source, m):
    """True when match `m` is a quoted class path (`'nova.scheduler.weights.cross_cell.
    CrossCellWeigher'`) outside any patch: a value of `weight_classes` or `enabled_filters`,
    which Parasol reads by name like any configuration, not a reach into the scheduler."""
    text = m.group(0)
    last = text.rstrip(".").rsplit(".", 1)[-1]
    quoted = m.start() > 0 and source[m.start() - 1] in "'\""
    before = source[max(0, m.start() - 120):m.start()]
    return quoted and last[:1].isupper() and not _PATCHING.search(before)


def scheduler_reach(source):
    """Distinct expressions in `source` that reach into the in-process scheduler."""
    found = []
    for m in SCHEDULER_REACH.finditer(source):
        text = m.group(0)
        if text not in found and not _names_a_configured_class(source, m):
            found.append(text)
    return found
