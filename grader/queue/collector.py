"""The server's collector thread: puts stored uploads on the queue and records what workers return.

It is the only code that moves a job along (see records.py for the states),
and it runs in the server process, so the course database has one writer.
Every ``interval`` seconds it looks at each open job:

- ``received``: enqueue try 1 (also after a server restart: nothing stored is lost);
- ``queued``/``running``: if a result of any of its tries is in the queue's
  result store, record it (attempt + job done, one transaction) and delete it
  and every other key of the job from the queue's store;
- ``queued`` with no ``queued:`` mark, no lease and no result: the try was lost
  from the queue (Redis restarted empty) before a worker took it; it is
  enqueued again (the same try: it never ran);
- with a lease: the job is ``running`` on that worker. The lease expires when
  it stays unchanged (or missing) for ``lease_timeout`` seconds of this
  thread's clock, at once when its worker released it (SIGTERM) or is a dead
  process on this host; a try running past ``job_timeout`` (the worker's own
  count of seconds) has also failed. A failed try is put back as the next
  try, at most MAX_TRIES in all; then the job is held (not graded, with the
  reason: the grader's machine failed it, never the student) and a
  self-test asked for; it is sent again as held work is (below). A job is
  never lost, nor recorded as an error, however many workers die under it.

**Held work and the self-test** (the server passes a
:class:`grader.queue.selftest.SelfTest`; ``grade batch --queue`` does not):
until the first self-test verdict no job is enqueued; a job's exercises of a
kind the self-test refuses are held, not sent (all refused: the job is held
at once); a result with ``not_graded`` exercises records the graded ones and
holds the rest (records.py ``record_done``), and asks for a self-test. A held
job is sent again (a new round: only its held exercises, tries counting on)
once a self-test newer than its hold passes every kind it holds, and not
before ``regrade_backoff(regrades)`` seconds after it was last held: at once
the first time, then 30 s doubling up to an hour, should the machine fail it
again while the self-test passes (after a restart, the first verdict is newer
than every hold). A round that fails on the queue (leases) is
held again rather than closed as an error: the student's work is not at fault.

Every ``SWEEP_S`` seconds the keys of closed jobs still in the queue's store
(the late result of an overrun try, its lease) are deleted, and a try taken
from the queue by a worker that died before writing its lease (marked, no
longer pending, no lease, at two sweeps in a row) is enqueued again.

A failure of one tick (the database busy, Redis unreachable) is logged in a
bounded way (jobs.Outage) and the next tick tries again, after a back-off;
nothing is marked done unless it was recorded. A result that cannot be
recorded for any other reason (a grader bug on one student's values) is not
an outage: that job ends ``error`` with the reason, the failure is logged and
counted (``unrecorded``, shown by /health), and the other jobs go on.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from grader.queue import records
from grader.queue.jobs import DEFAULT_LEASE_TIMEOUT_S, MAX_TRIES, Outage, Queue, job_of_key, open_queue, task_id
from grader.queue.selftest import LABELS, SelfTest, kind_of, sentence
from grader.student import practice_schedule
from grader.student.course import parse_time
from grader.student.store import Store
from grader.student.client.wire import report_from_dict
from grader.student.engine.model import GradeReport

log = logging.getLogger("normgrade.collector")
SWEEP_S = 30.0
REGRADE_FIRST_S, REGRADE_MAX_S = 30.0, 3600.0


def regrade_backoff(regrades: int) -> float:
    """Seconds a held job waits (after it was held) before its next round: 0 before the first, then 30 s doubling
    up to an hour."""
    return 0.0 if regrades <= 0 else min(REGRADE_FIRST_S * 2 ** (regrades - 1), REGRADE_MAX_S)


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database or the queue cannot be reached (busy, locked, I/O, a connection lost):
    the tick is retried. Anything else raised while handling one job is that job's failure."""
    if isinstance(exc, (sqlite3.OperationalError, OSError)):
        return True
    return any(
        c.__module__.startswith(("redis", "huey")) and c.__name__ in ("ConnectionError", "TimeoutError")
        for c in type(exc).__mro__
    )


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

    def __init__(
        self,
        db_path: Path,
        queue_url: str,
        grader_version: str,
        job_timeout: float = 600.0,
        interval: float = 0.2,
        on_closed: Callable[[int], None] | None = None,
        lease_timeout: float = DEFAULT_LEASE_TIMEOUT_S,
        selftest: SelfTest | None = None,
        practice_view: Callable[[GradeReport, datetime], GradeReport] | None = None,
    ) -> None:
        super().__init__(name="normgrade-collector", daemon=True)
        self.db_path = db_path
        self.queue_url = queue_url
        self.grader_version = grader_version
        self.job_timeout = job_timeout
        self.lease_timeout = lease_timeout
        self.interval = interval
        self.stopping = threading.Event()
        self.host = socket.gethostname()
        self.on_closed = on_closed  # told the id of each job closed (done, held or error): wakes long polls
        self.selftest = selftest  # the server's (grade batch --queue has none)
        # what of a report its student may see at the upload's time (the server's exam mode): only the mistakes
        # they are told of go on their practice schedule; None: the whole report
        self.practice_view = practice_view
        self.held_at_verdict: dict[int, int] = {}  # job id -> the self-test generation when it was held
        self.now = time.time  # held jobs' back-off is timed on the wall clock (their held_at is stored)
        self.seen: dict[str, tuple[Any, float]] = {}  # task id -> (lease beat, this clock when it last changed)
        self.first_seen: dict[str, float] = {}  # task id -> this clock when its lease was first seen
        self.clock = time.monotonic  # leases are timed on this clock only (tests give it a fake one)
        self.suspects: set[str] = set()  # marked tries missing from the queue at the last sweep
        self.last_sweep = self.clock()
        self.outage = Outage("the server's collector", log)
        self.unrecorded = 0  # results that could not be recorded (each job ended error), for /health
        self.last_unrecorded: str | None = None  # "job N: the reason" of the last one

    def stop(self) -> None:
        """Ask the thread to finish after the current tick."""
        self.stopping.set()

    def run(self) -> None:
        store = Store.open(self.db_path)  # in the serving process: no second inspection, no lock dropped
        queue = open_queue(self.queue_url)
        try:
            while not self.stopping.is_set():
                wait = self.interval
                try:
                    self.tick(store, queue)
                    self.outage.recovered()
                except Exception as exc:  # the next tick retries; a job is only ever closed after its record
                    wait = max(wait, self.outage.failed(exc))
                    if self.outage.failures == 1:
                        log.debug("collector tick failed", exc_info=True)
                self.stopping.wait(wait)
        finally:
            store.close()

    # -- one pass --------------------------------------------------------------

    def tick(self, store: Store, queue: Queue) -> None:
        """One pass over the self-test, the open jobs and the held ones (now and then a sweep of closed jobs' keys)."""
        test = self.selftest
        if test is not None:
            awaited = test.task
            test.tick(queue, lambda tid: self._failed(tid, queue.lease(tid), self.clock()))
            if awaited is not None and test.task != awaited:
                self._forget_watch(awaited)
        for job in records.open_jobs(store):
            if job["status"] == "received":
                if test is None or test.ready:  # the server hands out no job before its first self-test
                    self._start(store, queue, job, records.exercise_ids(job), 1)
                continue
            if self._collect(store, queue, job):
                continue
            self._watch(store, queue, job)
        if test is not None and test.ready:
            self.regrade_held(store, queue, test)
        if self.clock() - self.last_sweep >= SWEEP_S:
            self.sweep(store, queue)
            self.recover_taken(store, queue)

    def sweep(self, store: Store, queue: Queue) -> int:
        """Delete the queue-store keys of closed jobs (a late result, a stale lease or mark) and of self-tests
        no longer awaited (the late result of one sent again); how many."""
        self.last_sweep = self.clock()
        stored = queue.stored_keys()
        awaited = self.selftest.task if self.selftest is not None else None
        gone = [k for k in stored if k.split(":", 1)[-1].startswith("selftest-") and k.split(":", 1)[-1] != awaited]
        keys = [(k, job_of_key(k)) for k in stored]
        if any(j is not None for _, j in keys):
            open_ids = {int(j["id"]) for j in records.open_jobs(store)}
            gone += [k for k, j in keys if j is not None and j not in open_ids and records.job(store, j) is not None]
        for key in gone:
            queue.huey.delete(key)
        return len(gone)

    def recover_taken(self, store: Store, queue: Queue) -> list[int]:
        """Put back tries taken from the queue by a worker that died before writing its lease; their job ids.

        Such a try keeps its ``queued:`` mark but is no longer in the queue.
        Between taking a task and writing its lease a worker needs
        microseconds, so a try is put back only when two sweeps (SWEEP_S
        apart) both find it marked, not pending, with no lease and no result.
        """
        marked = [
            j
            for j in records.open_jobs(store)
            if j["status"] == "queued" and j["task_id"] and queue.waiting(j["task_id"])
        ]
        if not marked:
            self.suspects.clear()
            return []
        pending = queue.pending_ids()
        missing = {
            j["task_id"]: j
            for j in marked
            if j["task_id"] not in pending and queue.lease(j["task_id"]) is None and queue.result(j["task_id"]) is None
        }
        put_back = []
        for tid, job in missing.items():
            if tid in self.suspects:
                log.warning(
                    "job %s try %s was taken from the queue by a worker that stopped before it began; enqueued again",
                    job["id"],
                    job["tries"],
                )
                self._enqueue(store, queue, job, int(job["tries"]), None)
                put_back.append(int(job["id"]))
        self.suspects = {tid for tid, job in missing.items() if int(job["id"]) not in put_back}
        return put_back

    def regrade_held(self, store: Store, queue: Queue, test: SelfTest) -> list[int]:
        """Send again the held jobs whose every held kind the self-test passes and whose back-off is over; their ids."""
        sent = []
        now = self.now()
        for job in records.held_jobs(store):
            held = records.held_ids(job)
            if test.generation <= self.held_at_verdict.get(int(job["id"]), -1):
                continue  # no self-test since it was held
            if not held or not all(test.works(kind_of(i)) for i in held):
                continue
            if now < parse_time(job["held_at"]).timestamp() + regrade_backoff(int(job["regrades"] or 0)):
                continue
            log.warning("job %s: %d held exercise(s) graded again (the self-test passes)", job["id"], len(held))
            self.held_at_verdict.pop(int(job["id"]), None)
            self._start(store, queue, job, held, int(job["tries"] or 0) + 1)
            sent.append(int(job["id"]))
        return sent

    def _held(self, job_id: int) -> None:
        """Note that a job was held now: it waits for a newer self-test."""
        if self.selftest is not None:
            self.held_at_verdict[job_id] = self.selftest.generation

    def _start(self, store: Store, queue: Queue, job: dict[str, Any], ids: list[str], attempt: int) -> None:
        """A round of ``ids`` (an upload's first, or a held job's next): the kinds the self-test refuses stay held."""
        refused = self.selftest.refused() if self.selftest is not None else {}
        send = [i for i in ids if kind_of(i) not in refused]
        keep = [i for i in ids if kind_of(i) in refused]
        reason = None
        if keep:
            kind = kind_of(keep[0])
            reason = records.held_reason(f"{sentence(LABELS[kind])} are not being graded: {refused[kind]}")
        if not send:
            assert reason is not None
            records.hold(store, job, keep, reason)
            self._held(int(job["id"]))
            if self.on_closed is not None:
                self.on_closed(job["id"])
            return
        files = records.job_files(store, job["id"])
        tid = queue.enqueue(job["id"], attempt, job["student"], send, files)
        records.start_round(store, job, send, keep, reason, attempt, tid)

    def _enqueue(self, store: Store, queue: Queue, job: dict[str, Any], attempt: int, note: str | None) -> None:
        """Put the current round's try ``attempt`` on the queue (again: lost, or retried after a failed try)."""
        files = records.job_files(store, job["id"])
        tid = queue.enqueue(job["id"], attempt, job["student"], records.grading_ids(job), files)
        records.mark_queued(store, job["id"], attempt, tid, note)

    def _collect(self, store: Store, queue: Queue, job: dict[str, Any]) -> bool:
        """Record a result of any try of this job's round; True when the round is closed now."""
        for attempt in records.tries_in_round(job):
            tid = task_id(job["id"], attempt)
            result = queue.result(tid)
            if result is None:
                continue
            if job["status"] == "queued":  # begun and finished between two passes: still say which worker
                self._mark_running(store, queue, job, tid)
            if result.get("ok"):
                try:
                    self._record(store, job, result["report"])
                except Exception as exc:
                    if unreachable(exc):
                        raise  # the database is away: the tick fails and the next one records this result
                    self._unrecordable(store, job, exc)
            else:
                records.record_error(store, job["id"], str(result.get("error") or "grading failed"))
            self._close(queue, job)
            return True
        return False

    def _record(self, store: Store, job: dict[str, Any], doc: Any) -> None:
        """Record a worker's report of ``job`` (held exercises noted, a self-test asked for when some were not
        graded); an unreadable report is the job's error."""
        try:
            report = report_from_dict(doc)
        except (KeyError, TypeError, ValueError) as exc:
            records.record_error(store, job["id"], f"the worker returned an unreadable report ({exc})")
            return
        report.student = job["student"]  # the job says whose it is, not the worker
        recorded = records.record_done(store, job, report, self.grader_version)
        if recorded is not None:  # the named mistakes the student is told of go on their practice schedule
            at = parse_time(job["received_at"])
            practice_schedule.record_report(
                store, self.practice_view(report, at) if self.practice_view else report, at, origin="server"
            )
        if recorded is not None and recorded.held:
            self._held(int(job["id"]))
        if recorded is not None and report.not_graded:
            log.warning(
                "job %s: %d exercise(s) not graded, held (%s)", job["id"], len(report.not_graded), recorded.reason
            )
            if self.selftest is not None:
                self.selftest.want()  # the machine failed: test it again

    def _unrecordable(self, store: Store, job: dict[str, Any], exc: Exception) -> None:
        """A result that cannot be recorded (not an outage): that one job ends ``error`` with the reason, the
        failure is logged and counted for /health (``unrecorded``), and the queue goes on."""
        what = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        reason = (
            f"the grader could not record this result ({what}): please tell your instructor; "
            "submitting again will not help until it is fixed"
        )
        log.error("job %s: its result could not be recorded (%s); the job is an error", job["id"], what, exc_info=True)
        self.unrecorded += 1
        self.last_unrecorded = f"job {job['id']}: {what}"
        records.record_error(store, job["id"], reason)

    def _watch(self, store: Store, queue: Queue, job: dict[str, Any]) -> None:
        """Put back a try lost from the queue; mark a leased try running; retry or fail one whose lease expired."""
        tid = job["task_id"]
        now = self.clock()
        if job["status"] == "queued":
            if queue.waiting(tid):  # read before the lease: a worker writes its lease, then deletes the mark
                return
            if queue.lease(tid) is None:
                if queue.result(tid) is not None:
                    return  # finished since _collect looked: recorded at the next tick
                log.warning(
                    "job %s try %s was lost from the queue before a worker took it; enqueued again",
                    job["id"],
                    job["tries"],
                )
                self._enqueue(store, queue, job, int(job["tries"]), None)
                return
            self._mark_running(store, queue, job, tid)
        reason = self._failed(tid, queue.lease(tid), now)
        if reason is None:
            return
        self._forget_watch(tid)
        attempt = int(job["tries"])
        if attempt - int(job["first_try"] or 1) + 1 < MAX_TRIES:
            log.warning("job %s try %s failed (%s); retrying", job["id"], attempt, reason)
            self._enqueue(store, queue, job, attempt + 1, f"try {attempt}: {reason}")
        else:  # the grader's machine failed it on every try, not the student: held (not graded), never lost
            log.warning(
                "job %s try %s failed (%s), on each of %d tries; held until a self-test passes",
                job["id"],
                attempt,
                reason,
                MAX_TRIES,
            )
            records.hold(
                store,
                job,
                records.held_ids(job) + records.grading_ids(job),
                records.held_reason(f"{reason}, on each of {MAX_TRIES} tries"),
            )
            self._held(int(job["id"]))
            if self.selftest is not None:
                self.selftest.want()  # the machine failed: test it again, then the job is sent again
            self._close(queue, job)

    def _failed(self, tid: str, lease: dict[str, Any] | None, now: float) -> str | None:
        """Why a running try has failed (its lease expired or released, or it overran), or None while it holds."""
        beat = None if lease is None else (lease.get("beat"), lease.get("pid"))
        last = self.seen.get(tid)
        if last is None or last[0] != beat:
            self.seen[tid] = (beat, now)
            last = self.seen[tid]
        if lease is None:
            if now - last[1] > self.lease_timeout:
                return (
                    f"the grading worker's lease was lost (no word from it for {self.lease_timeout:g} s: "
                    "the queue restarted or the worker died)"
                )
            return None
        self.first_seen.setdefault(tid, now)
        pid, host = int(lease.get("pid", 0) or 0), str(lease.get("host", ""))
        if lease.get("released"):
            return str(lease["released"])
        if host == self.host and not process_alive(pid):
            return f"the grading worker (process {pid}) stopped in the middle of the job"
        if now - last[1] > self.lease_timeout:
            return (
                f"the grading worker (process {pid} on {host}) stopped renewing its lease for {self.lease_timeout:g} s"
            )
        elapsed = max(float(lease.get("elapsed", 0) or 0), now - self.first_seen[tid])
        if elapsed > self.job_timeout:
            return f"grading took longer than {self.job_timeout:g} s (worker {pid} on {host})"
        return None

    def _forget_watch(self, tid: str) -> None:
        self.seen.pop(tid, None)
        self.first_seen.pop(tid, None)

    def _close(self, queue: Queue, job: dict[str, Any]) -> None:
        """After a round is recorded (done, held or error): revoke its waiting tries, delete its keys, wake the
        waiters."""
        for other in records.tries_in_round(job):
            tid = task_id(job["id"], other)
            queue.cancel_if_waiting(tid)
            queue.forget(tid)
            self._forget_watch(tid)
        if self.on_closed is not None:
            self.on_closed(job["id"])

    @staticmethod
    def _mark_running(store: Store, queue: Queue, job: dict[str, Any], tid: str) -> None:
        """Record that the worker of try ``tid`` (``host:pid`` from its lease) began the job."""
        lease = queue.lease(tid)
        if lease is not None:
            records.mark_running(store, job["id"], f"{lease.get('host', '')}:{int(lease.get('pid', 0) or 0)}")
