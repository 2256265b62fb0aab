"""What the worker knows about the test it is running, shared by its hooks (runs in the venv)."""

import json
import os


class Current:
    """The running test: its id, where its files go, and what the hooks recorded."""

    mode = "nova"
    run_dir = None
    parasol_bin = None
    out = None  # the result pipe to the parent
    test_id = None
    slug = None
    record = {}

    @classmethod
    def begin(cls, test_id, index):
        cls.test_id = test_id
        cls.slug = f"{index:04d}-{test_id.rsplit('.', 2)[-2]}.{test_id.rsplit('.', 1)[-1]}"
        cls.slug = "".join(ch if ch.isalnum() or ch in ".-_" else "_" for ch in cls.slug)[:150]
        cls.record = {"id": test_id}

    @classmethod
    def path(cls, suffix):
        return os.path.join(cls.run_dir, f"{cls.slug}{suffix}")

    @classmethod
    def note(cls, key, value):
        """Adds `value` to the list `key` of the test's record."""
        cls.record.setdefault(key, []).append(value)

    @classmethod
    def send(cls, event, **fields):
        """A line to the parent (pids of started processes, results)."""
        fields["event"] = event
        cls.out.write(json.dumps(fields) + "\n")
        cls.out.flush()
