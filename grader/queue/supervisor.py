"""The server's own grading workers: one ``grade worker`` child, kept alive, and stopped with the server.

``grade serve --workers N`` (N > 0) starts ``grade worker --queue URL
--workers N --no-self-test`` as a child process (the server's own self-test
is the first task it takes: grader/queue/selftest.py) and watches it from a
thread:

- the child leads a process group of its own (the consumer, its grading
  processes and Huey's scheduler), so :meth:`WorkerPool.stop` ends all of them
  with one ``killpg``: SIGTERM, then SIGKILL after ``grace`` seconds;
- the child gets SIGTERM from the kernel when the server dies, even by SIGKILL
  (``PR_SET_PDEATHSIG``), and its own children get SIGKILL when it dies
  (grader/queue/jobs.py ``run_consumer``): no orphan grades beside the
  workers of a restarted server;
- a child that exits while the server runs (killed, crashed) is started
  again after a back-off (1 s doubling to 60 s, back to 1 s after a minute of
  life), one log line each time; whatever its group left is killed first.
  The try it was grading is put back by the collector when its lease expires.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time

from grader.queue.jobs import set_parent_death_signal

log = logging.getLogger("normgrade.workers")
RESTART_FIRST_S, RESTART_MAX_S, HEALTHY_S = 1.0, 60.0, 60.0


def _child_setup() -> None:
    """In the worker child, before exec: SIGTERM when the server dies (Linux)."""
    set_parent_death_signal(signal.SIGTERM)


def kill_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to process group ``pgid``; False when the group has no process left."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class WorkerPool:
    """The ``grade worker`` child of ``grade serve``; see the module docstring."""

    def __init__(self, queue_url: str, workers: int, no_sandbox: bool = False, grace: float = 30.0) -> None:
        # --no-self-test: the server's own self-test is the first task this worker takes
        self.command = [
            sys.executable,
            "-m",
            "grader.cli",
            "worker",
            "--queue",
            queue_url,
            "--workers",
            str(workers),
            "--no-self-test",
        ]
        self.command += ["--no-sandbox"] if no_sandbox else []
        self.grace = grace
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.restarts = 0
        self.watcher = threading.Thread(target=self._watch, name="normgrade-workers", daemon=True)

    def _spawn(self) -> subprocess.Popen[bytes]:
        linux = sys.platform.startswith("linux")
        return subprocess.Popen(
            self.command,
            process_group=0,  # noqa: PLW1509 (preexec: one prctl call)
            preexec_fn=_child_setup if linux else None,
        )

    def start(self) -> "WorkerPool":
        """Start the child and its watcher."""
        self.proc = self._spawn()
        self.watcher.start()
        return self

    def _watch(self) -> None:
        delay = RESTART_FIRST_S
        while not self.stopping.is_set():
            proc = self.proc
            assert proc is not None
            began = time.monotonic()
            code = proc.wait()
            if self.stopping.is_set():
                return
            kill_group(proc.pid, signal.SIGKILL)  # anything its group left behind
            if time.monotonic() - began > HEALTHY_S:
                delay = RESTART_FIRST_S
            log.warning(
                "the grading worker process %s exited (status %s); starting another in %.0f s", proc.pid, code, delay
            )
            if self.stopping.wait(delay):
                return
            delay = min(delay * 2, RESTART_MAX_S)
            with self.lock:
                if self.stopping.is_set():
                    return
                self.proc = self._spawn()
                self.restarts += 1

    def stop(self) -> None:
        """SIGTERM the child's whole group, SIGKILL what is left after ``grace`` seconds; reap the child."""
        with self.lock:
            self.stopping.set()
            proc = self.proc
        if proc is None:
            return
        kill_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=self.grace)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + self.grace
        while kill_group(proc.pid, 0) and time.monotonic() < deadline:  # its grading processes end too
            time.sleep(0.05)
        kill_group(proc.pid, signal.SIGKILL)
        proc.poll() if proc.returncode is not None else proc.wait(timeout=10)
