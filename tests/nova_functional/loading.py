"""Test ids from the installed Nova, as stestr would list them (runs in the venv).

A pattern is a test id, a prefix of ids (module, class), or a glob (`*`, `?`, `[`) over ids;
names without the `nova.` prefix are relative to `nova.tests.functional`, but for Parasol's own
tests (`nova_functional.parasol_tests…`). Modules are loaded
with unittest's loader, which honours a module's `load_tests` (test scenarios).
"""

import fnmatch
import importlib
import pkgutil
import re
import unittest

FUNCTIONAL = "nova.tests.functional"
_GLOB = re.compile(r"[*?\[]")


# Parasol's own tests in the harness (`nova_functional.parasol_tests`) are named in full.
OWN = "nova_functional."


def normalise(pattern):
    if pattern.startswith(("nova.", OWN)):
        return pattern
    return f"{FUNCTIONAL}.{pattern}"


def _all_modules(package):
    pkg = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(pkg.__path__, prefix=package + "."):
        names.append(info.name)
    return names


def _deepest_package(literal):
    """The longest dotted prefix of `literal` that is an importable package."""
    parts = literal.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "__path__"):
            return name
    return None


def _importable_prefix(pattern):
    """The longest dotted prefix of `pattern` that imports (the module of an id)."""
    parts = pattern.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        try:
            importlib.import_module(name)
            return name
        except ImportError:
            continue
    return None


def candidate_modules(pattern):
    """Modules whose tests may match `pattern`."""
    if not _GLOB.search(pattern):
        module = _importable_prefix(pattern)
        if module is None:
            raise LookupError(f"{pattern}: no such module in the installed Nova")
        mod = importlib.import_module(module)
        if hasattr(mod, "__path__") and module == pattern:
            return [m for m in _all_modules(module) if m.rsplit(".", 1)[-1].startswith("test")]
        return [module]
    literal = _GLOB.split(pattern, 1)[0]
    package = _deepest_package(literal.rstrip(".")) or "nova"
    return [m for m in _all_modules(package)
            if (m.startswith(literal) or literal.startswith(m + "."))
            and m.rsplit(".", 1)[-1].startswith("test")]


def _flatten(suite):
    stack = [suite]
    while stack:
        item = stack.pop()
        if isinstance(item, unittest.TestSuite):
            stack.extend(reversed(list(item)))
        else:
            yield item


_suites = {}


def tests_of(module):
    """Every test of `module`, by id, in loader order."""
    if module not in _suites:
        mod = importlib.import_module(module)
        suite = unittest.TestLoader().loadTestsFromModule(mod)
        tests = {}
        for test in _flatten(suite):
            if isinstance(test, unittest.loader._FailedTest):
                raise LookupError(f"{module}: {test._exception}")
            tests[test.id()] = test
        _suites[module] = tests
    return _suites[module]


def matches(test_id, pattern):
    if _GLOB.search(pattern):
        return fnmatch.fnmatchcase(test_id, pattern)
    return (test_id == pattern or test_id.startswith(pattern + ".")
            or test_id.startswith(pattern + "("))


def excluded(module, exclude):
    """Whether `module` is one of the `exclude` modules or packages (normalised names)."""
    return any(module == e or module.startswith(e + ".") for e in exclude)


def expand(patterns, exclude=()):
    """[(module, test id)] for `patterns`, each test once, in the order given; the modules
    and packages `exclude` names are never loaded."""
    exclude = [normalise(e) for e in exclude]
    seen = set()
    found = []
    for raw in patterns:
        pattern = normalise(raw)
        hits = 0
        for module in candidate_modules(pattern):
            if excluded(module, exclude):
                continue
            for test_id in tests_of(module):
                if matches(test_id, pattern):
                    hits += 1
                    if test_id not in seen:
                        seen.add(test_id)
                        found.append((module, test_id))
        if hits == 0:
            raise LookupError(f"{raw}: matches no test in the installed Nova")
    return found
