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


# (class, description, regex over "error line\nlogs"); first match wins.
RULES = [
    ("scheduler-internals",
     "the test reaches into the in-process scheduler (its manager, host manager, filters or "
     "weighers), which no external scheduler has",
     r"ExternalScheduler|has no attribute 'manager'|nova\.scheduler\.(host_manager|filters|"
     r"weights|manager|request_filter)"),
    ("harness", "the harness itself failed", r"^harness:"),
    ("parasol-start", "Parasol did not start or refused the generated configuration",
     r"Parasol (did not|never|exited)|configuration refused"),
    ("no-valid-host", "Parasol answered NoValidHost where Nova's scheduler found a host",
     r"NoValidHost|No valid host"),
    ("rpc-timeout", "a call to the scheduler got no answer (MessagingTimeout)",
     r"MessagingTimeout|Timed out waiting for a reply"),
    ("rpc-refused", "Parasol refused the RPC message (version, method or arguments)",
     r"UnsupportedVersion|NoSuchMethod|bad_arguments|RemoteError"),
    ("placement-allocations",
     "Placement's allocations or usages differ from what the test expects (Parasol does not "
     "claim in Placement)",
     r"allocation|usage|resource_provider|Placement"),
    ("wrong-host", "the server landed on another host than the test expects",
     r"host|'compute'|fake-mini|node"),
    ("server-state", "a server never reached the state the test waits for",
     r"_wait_for_state_change|status|Timed out waiting|ERROR"),
    ("timeout", "the test ran out of time", r"TimeoutException|hung"),
]


def classify(error_line, context=""):
    """(class, description) of a failure from its error line and supporting text."""
    for name, description, pattern in RULES:
        if re.search(pattern, error_line):
            return name, description
    for name, description, pattern in RULES[:6]:
        if re.search(pattern, context):
            return name, description
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


def scheduler_reach(source):
    """Distinct expressions in `source` that reach into the in-process scheduler."""
    found = []
    for m in SCHEDULER_REACH.finditer(source):
        text = m.group(0)
        if text not in found:
            found.append(text)
    return found
