"""Prints the tests the patterns select, as JSON `[[module, id], ...]` (runs in the venv).

`--exclude NAME` (repeated) leaves out a module or package: its tests are never loaded."""

import json
import os
import sys

# Nova logs to stdout on import: the JSON goes to the real stdout, everything else to stderr.
RESULT = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)

import nova.tests  # noqa: F401  (eventlet monkey patching, as the workers do)

from nova_functional import loading


def main():
    try:
        args, exclude = [], []
        argv = iter(sys.argv[1:])
        for arg in argv:
            if arg == "--exclude":
                name = next(argv, None)
                if name is None:
                    raise LookupError("--exclude: needs a module or package name")
                exclude.append(name)
            else:
                args.append(arg)
        found = loading.expand(args, exclude)
    except LookupError as e:
        print(f"nova_functional: {e}", file=sys.stderr)
        return 2
    json.dump(found, RESULT)
    RESULT.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
