"""The server's collector thread: puts stored uploads on the queue and records what workers return.

It is the only code that moves a job along (see records.py for the states),
and it runs in the server process, so the course database has one writer.
Every ``interval`` seconds it looks at each open job:

- ``received``: enqueue try 1 (also after a server restart: nothing stored is lost);
- ``queued``/``running``: if a result of any of its tries is in the queue's
  result store, record it (attempt + job done, one transaction) and delete it
  from the queue; else, if the worker's start note says it began, mark the job
  running, and when that worker is gone (same host, process dead) or the try
  has run past ``job_timeout`` seconds, retry once (try 2), then record the
  job as an error with the reason.

A failure of one tick (the database busy, Redis unreachable) is logged and the
next tick tries again; nothing is marked done unless it was recorded.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.server import records
from grader.server.jobs import MAX_TRIES, Queue, open_queue, task_id
from grader.student.store import Store
from grader.student.wire import report_from_dict

log = logging.getLogger("normgrade.collector")


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): trust kill(0)
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


class Collector(threading.Thread):
    """Moves jobs from ``received`` to ``done``/``error``; see the module docstring."""

    def __init__(self, db_path: Path, queue_url: str, grader_version: str,
                 job_timeout: float = 600.0, interval: float = 0.2,
                 on_closed: Callable[[int], None] | None = None) -> None:
        super().__init__(name="normgrade-collector", daemon=True)
        self.db_path = db_path
        self.queue_url = queue_url
        self.grader_version = grader_version
        self.job_timeout = job_timeout
        self.interval = interval
        self.stopping = threading.Event()
        self.host = socket.gethostname()
        self.on_closed = on_closed  # told the id of each job closed (done or error): wakes long polls

    def stop(self) -> None:
        """Ask the thread to finish after the current tick."""
        self.stopping.set()

    def run(self) -> None:
        store = Store.open(self.db_path, inspect=False)  # the server's own connection was opened (checked) first
        queue = open_queue(self.queue_url)
        try:
            while not self.stopping.is_set():
                try:
                    self.tick(store, queue)
                except Exception:  # the next tick retries; a job is only ever closed after its record
                    log.exception("collector tick failed; retrying")
                self.stopping.wait(self.interval)
        finally:
            store.close()

    # -- one pass --------------------------------------------------------------

    def tick(self, store: Store, queue: Queue) -> None:
        """One pass over the open jobs."""
        for job in records.open_jobs(store):
            if job["status"] == "received":
                self._enqueue(store, queue, job, 1, None)
                continue
            if self._collect(store, queue, job):
                continue
            self._watch(store, queue, job)

    def _enqueue(self, store: Store, queue: Queue, job: dict[str, Any], attempt: int, note: str | None) -> None:
        files = records.job_files(store, job["id"])
        tid = queue.enqueue(job["id"], attempt, job["student"], records.exercise_ids(job), files)
        records.mark_queued(store, job["id"], attempt, tid, note)

    def _collect(self, store: Store, queue: Queue, job: dict[str, Any]) -> bool:
        """Record a result of any try of this job; True when the job is closed now."""
        for attempt in range(1, int(job["tries"]) + 1):
            tid = task_id(job["id"], attempt)
            result = queue.result(tid)
            if result is None:
                continue
            if job["status"] == "queued":  # begun and finished between two passes: still say which worker
                self._mark_running(store, queue, job, tid)
            if result.get("ok"):
                try:
                    report = report_from_dict(result["report"])
                except (KeyError, TypeError, ValueError) as exc:
                    records.record_error(store, job["id"], f"the worker returned an unreadable report ({exc})")
                else:
                    report.student = job["student"]  # the job says whose it is, not the worker
                    records.record_done(store, job, report, self.grader_version)
            else:
                records.record_error(store, job["id"], str(result.get("error") or "grading failed"))
            for other in range(1, int(job["tries"]) + 1):
                if other != attempt:
                    queue.cancel_if_waiting(task_id(job["id"], other))
                queue.forget(task_id(job["id"], other))
            self._closed(job["id"])
            return True
        return False

    def _watch(self, store: Store, queue: Queue, job: dict[str, Any]) -> None:
        """Mark a started try running; retry or fail a try whose worker died or overran."""
        started = queue.started(job["task_id"])
        if started is None:
            return
        pid, host = int(started.get("pid", 0)), str(started.get("host", ""))
        if job["status"] == "queued":
            self._mark_running(store, queue, job, job["task_id"])
        reason = None
        if host == self.host and not process_alive(pid):
            reason = f"the grading worker (process {pid}) stopped in the middle of the job"
        elif time.time() - float(started.get("at", 0)) > self.job_timeout:
            reason = f"grading took longer than {self.job_timeout:g} s (worker {pid} on {host})"
        if reason is None:
            return
        attempt = int(job["tries"])
        if attempt < MAX_TRIES:
            log.warning("job %s try %s failed (%s); retrying", job["id"], attempt, reason)
            self._enqueue(store, queue, job, attempt + 1, f"try {attempt}: {reason}")
        else:
            records.record_error(
                store, job["id"],
                f"{reason}, on each of {attempt} tries: submit again, and tell your instructor if it happens again",
            )
            self._closed(job["id"])

    @staticmethod
    def _mark_running(store: Store, queue: Queue, job: dict[str, Any], tid: str) -> None:
        """Record that the worker of try ``tid`` (``host:pid`` from its start note) began the job."""
        started = queue.started(tid)
        if started is not None:
            records.mark_running(store, job["id"], f"{started.get('host', '')}:{int(started.get('pid', 0))}")

    def _closed(self, job_id: int) -> None:
        if self.on_closed is not None:
            self.on_closed(job_id)
