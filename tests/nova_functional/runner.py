"""The parent: lists the tests, runs them on N workers (one vhost each, created and deleted
here), watches for hung workers, and writes the results JSON (standard library only).

A worker that stops answering for `hard_timeout_s` is killed with its process group (and the
Parasol processes it reported); its test is recorded as an error and a fresh worker on a
fresh vhost takes the rest.
"""

import datetime
import json
import os
import queue
import selectors
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from nova_functional import venv

TESTS_DIR = Path(__file__).resolve().parent.parent
REPO = TESTS_DIR.parent


class Rabbit:
    """Vhosts through rabbitmqctl (the broker's management API is not assumed)."""

    def __init__(self, host="127.0.0.1", port=5672, user="guest", password="guest"):
        self.host, self.port, self.user, self.password = host, port, user, password

    def _ctl(self, *args):
        done = subprocess.run(["rabbitmqctl", "-q", *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)}: {done.stderr.strip()}")

    def create(self, vhost):
        self._ctl("add_vhost", vhost)
        self._ctl("set_permissions", "-p", vhost, self.user, ".*", ".*", ".*")
        return f"rabbit://{self.user}:{self.password}@{self.host}:{self.port}/{vhost}"

    def delete(self, vhost):
        try:
            self._ctl("delete_vhost", vhost)
        except RuntimeError as e:
            print(f"nova_functional: {e}", file=sys.stderr)


def list_tests(python, patterns, exclude=()):
    args = [a for name in exclude for a in ("--exclude", name)]
    done = subprocess.run([str(python), "-m", "nova_functional.list_tests", *args, *patterns],
                          cwd=TESTS_DIR, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(TESTS_DIR)))
    if done.returncode != 0:
        raise SystemExit(done.stderr.strip() or "listing the tests failed")
    return json.loads(done.stdout)


def _kill_if(pid, exe):
    """SIGKILL `pid` if it still runs `exe` (a recycled pid is someone else's)."""
    try:
        if exe and os.path.realpath(f"/proc/{pid}/exe") != os.path.realpath(exe):
            return
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, FileNotFoundError):
        pass


class Slot:
    """One worker process and its vhost; replaced whole when the worker dies."""

    def __init__(self, run, number):
        self.run, self.number, self.generation = run, number, 0
        self.proc = self.vhost = None
        self.pids = {}  # pid -> executable, as the worker reported them

    def start(self):
        self.generation += 1
        self.vhost = f"parasol_nf_{self.run.tag}_{self.number}_{self.generation}"
        url = self.run.rabbit.create(self.vhost)
        cmd_r, cmd_w = os.pipe()
        out_r, out_w = os.pipe()
        log = open(self.run.dir / f"worker-{self.number}-{self.generation}.log", "ab")
        args = [str(self.run.python), "-m", "nova_functional.worker", "--mode", self.run.mode,
                "--broker-url", url, "--run-dir", str(self.run.dir),
                "--in-fd", str(cmd_r), "--out-fd", str(out_w)]
        if self.run.parasol_bin:
            args += ["--parasol-bin", str(self.run.parasol_bin)]
        env = dict(os.environ, PYTHONPATH=str(TESTS_DIR),
                   OS_TEST_TIMEOUT=str(self.run.soft_timeout_s))
        if self.run.mode == "parasol":
            # Threading mode: Nova's fixtures keep the cell databases in SQLite files, which
            # Parasol reads ([nova_db]) as nova-scheduler reads them.
            env["OS_NOVA_DISABLE_EVENTLET_PATCHING"] = "1"
        try:
            self.proc = subprocess.Popen(args, cwd=TESTS_DIR, stdout=log, stderr=log, env=env,
                                         pass_fds=(cmd_r, out_w), start_new_session=True)
        finally:
            log.close()
            os.close(cmd_r)
            os.close(out_w)
        self.commands = os.fdopen(cmd_w, "w")
        self.out = os.fdopen(out_r, "r")
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.out, selectors.EVENT_READ)
        if self.read(120).get("event") != "ready":
            raise RuntimeError(f"worker {self.number} did not start; see {log.name}")

    def read(self, timeout):
        """The next line from the worker, or {} on timeout or end of file."""
        if not self.selector.select(timeout):
            return {}
        line = self.out.readline()
        return json.loads(line) if line else {"event": "eof"}

    def run_test(self, module, test_id, index):
        self.commands.write(json.dumps({"module": module, "id": test_id, "index": index}) + "\n")
        self.commands.flush()
        deadline = time.monotonic() + self.run.hard_timeout_s
        while True:
            msg = self.read(max(0.0, deadline - time.monotonic()))
            event = msg.get("event")
            if event == "pid":
                self.pids[msg["pid"]] = msg.get("exe")
            elif event == "pid_gone":
                self.pids.pop(msg["pid"], None)
            elif event == "result":
                msg.pop("event")
                return msg
            elif event in (None, "eof"):
                why = ("hung: killed after %d s" % self.run.hard_timeout_s if event is None
                       else f"worker died (exit {self.proc.poll()})")
                self.stop(force=True)
                return {"id": test_id, "status": "error", "first_error": why}

    def stop(self, force=False):
        """Ends the worker (politely unless `force`), its reported children, and the vhost."""
        if self.proc is not None:
            if not force:
                try:
                    self.commands.write(json.dumps({"quit": True}) + "\n")
                    self.commands.flush()
                    self.proc.wait(60)
                except (OSError, ValueError, subprocess.TimeoutExpired):
                    pass
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.wait()
            self.proc = None
        for pid, exe in self.pids.items():  # children that outlived the group, by pid
            _kill_if(pid, exe)
        self.pids.clear()
        for name in ("commands", "out", "selector"):
            handle = self.__dict__.pop(name, None)
            if handle is not None:
                try:
                    handle.close()
                except OSError:
                    pass
        if self.vhost is not None:
            self.run.rabbit.delete(self.vhost)
            self.vhost = None


class Run:
    def __init__(self, mode, tests, concurrency, parasol_bin, soft_timeout_s=240,
                 hard_timeout_s=420, progress=sys.stderr):
        self.mode, self.tests, self.concurrency = mode, tests, concurrency
        self.parasol_bin = parasol_bin
        self.soft_timeout_s, self.hard_timeout_s = soft_timeout_s, hard_timeout_s
        self.python = venv.python_of(venv.ensure_venv())
        self.tag = uuid.uuid4().hex[:8]
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.dir = venv.cache_root() / "nova-functional-runs" / f"{stamp}-{mode}-{self.tag}"
        self.dir.mkdir(parents=True)
        self.rabbit = Rabbit()
        self.progress = progress
        self.results = {}
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self.fatal = None
        self.slots = []

    def _slot_loop(self, slot, work):
        try:
            while not self.stopping.is_set():
                try:
                    index, (module, test_id) = work.get_nowait()
                except queue.Empty:
                    return
                if slot.proc is None:
                    try:
                        slot.start()
                    except Exception as e:  # the harness cannot work: stop the run
                        self.fatal = f"{type(e).__name__}: {e}"
                        self.stopping.set()
                        return
                try:
                    record = slot.run_test(module, test_id, index)
                except Exception as e:  # the harness's own fault: say so, go on
                    slot.stop(force=True)
                    record = {"id": test_id, "status": "error",
                              "first_error": f"harness: {type(e).__name__}: {e}"}
                with self._lock:
                    self.results[test_id] = record
                    done = len(self.results)
                print(f"[{done}/{len(self.tests)}] {record.get('status'):5} "
                      f"{record.get('duration_s', '-')}s {test_id}", file=self.progress,
                      flush=True)
        finally:
            slot.stop()

    def execute(self):
        work = queue.Queue()
        for item in enumerate(self.tests):
            work.put(item)
        self.slots = [Slot(self, n) for n in range(self.concurrency)]
        threads = [threading.Thread(target=self._slot_loop, args=(s, work))
                   for s in self.slots]
        started = time.monotonic()
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        except KeyboardInterrupt:
            # Kill the workers' groups: each thread then sees end of file, records the test
            # as an error and deletes its vhost.
            self.stopping.set()
            for slot in self.slots:
                proc = slot.proc
                if proc is not None:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            for t in threads:
                t.join()
            raise
        return time.monotonic() - started
