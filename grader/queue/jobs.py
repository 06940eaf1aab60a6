"""The grading queue: Huey, with SQLite storage embedded (default) or Redis (scale-out).

The same task code runs on both. ``open_queue(url)`` returns a :class:`Queue`
for a queue URL:

- ``sqlite:///path/to/course-queue.db`` (or a bare path): ``huey.SqliteHuey``,
  one file beside the course database, no service to run;
- ``redis://host:port/db``: ``huey.RedisHuey``; any number of ``grade worker``
  processes on any number of machines consume the same jobs.

A task carries everything a worker needs (the student id, the exercise ids and
the uploaded files' contents), so a worker on another machine needs neither
the server's disk nor its database. The worker never writes the course
database. Three kinds of keys in the queue's own key/value store tell the
server's collector (grader/queue/collector.py) where a try is:

- ``queued:<task id>``: written by the server when it enqueues the try, and
  deleted by the worker that takes it (after writing its lease). A try that
  is ``queued`` in the database but has neither this mark, nor a lease, nor a
  result was lost from the queue (Redis restarted empty): it is enqueued again.
- ``lease:<task id>`` = ``{"host", "pid", "at", "elapsed", "beat"}``: the
  worker's lease on a running try, renewed every ``RENEW_S`` seconds by a
  thread of the grading process (``beat`` counts renewals, ``elapsed`` is the
  worker's own seconds since it began, so no clock is compared across
  machines). A lease the collector sees unchanged for ``--lease-timeout``
  seconds has expired: the worker died, or the queue lost it. A worker
  interrupted by SIGTERM writes ``"released"`` into its lease, so the try is
  put back at once.
- the task's result (Huey's result store, keyed by the task id):
  ``{"ok": true, "report": <grader.student.client.wire dict>}`` or ``{"ok": false, "error": "..."}``.

A second task, ``selftest`` (task ids ``selftest-...``, with the same mark and
lease), grades the reference solution (grader/queue/selftest.py) and returns
``{"ok": true, "selftest": {...}}``; every self-test is also published under
``selftest:latest`` and ``selftest:host:<host>``. A worker grades no exercise
of a kind its machine's last self-test failed, and none when the OS sandbox
cannot start: those come back ``not_graded`` (the server holds them).

The collector records results in the course database, exactly once. Task ids
are ``job-<id>-try-<n>``: a job enqueued twice for the same try (a server
killed between enqueueing and noting it) is recorded once all the same.

When the queue cannot be reached, a worker backs off (0.5 s doubling to 30 s)
and logs one line when it loses the queue, at most one a minute while it stays
away, and one when it is back (:class:`Outage`).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from huey import RedisHuey, SqliteHuey
from huey.api import Huey, TaskWrapper

from grader.course import grading
from grader.queue import selftest
from grader.student.engine.model import ExerciseResult, GradeReport
from grader.student.errors import GraderError, SetupError
from grader.student.sandbox.private_tmp import PrivateFolder
from grader.student.sandbox import spares
from grader.student.sandbox.runner import Limits
from grader.student.client.uploads import check_files
from grader.student.client.wire import report_to_dict

QUEUE_NAME = "normgrade"
TASK_NAME = "grade_upload"
SCORE_TASK_NAME = "post_score"  # an LTI score sent to the LMS (grader/server/lti_services/ags.py)
SELFTEST_TASK_NAME = "selftest"  # the reference solution graded here (grader/queue/selftest.py)

MAX_TRIES = 2  # a try whose lease expires is put back once more, then the job is recorded as an error
RENEW_S = 1.0  # how often a grading process renews its lease
DEFAULT_LEASE_TIMEOUT_S = 20.0  # a lease unchanged this long has expired (the server's --lease-timeout)
BACKOFF_FIRST_S, BACKOFF_MAX_S, OUTAGE_LOG_EVERY_S = 0.5, 30.0, 60.0

log = logging.getLogger("normgrade.queue")

# Other people's code: the OS sandbox is required (``grade worker --no-sandbox`` turns it off,
# set before the consumer forks its worker processes, which inherit it).
SANDBOX: bool = True


def task_id(job_id: int, attempt: int) -> str:
    """The queue's task id of try ``attempt`` (1, 2) of job ``job_id``."""
    return f"job-{job_id}-try-{attempt}"


def lease_key(task: str) -> str:
    """The key of the lease a worker holds (and renews) on a running try."""
    return f"lease:{task}"


def queued_key(task: str) -> str:
    """The key the server writes when it enqueues a try; the worker that takes the try deletes it."""
    return f"queued:{task}"


def job_of_key(key: str) -> int | None:
    """The job id a key of the queue's store belongs to (``job-7-try-1``, ``lease:...``, ``queued:...``), or None."""
    name = key.split(":", 1)[-1]
    parts = name.split("-")
    if len(parts) == 4 and parts[0] == "job" and parts[2] == "try" and parts[1].isdigit():
        return int(parts[1])
    return None


class Outage:
    """A bounded log and a back-off for a queue that cannot be reached.

    :meth:`failed` logs the first failure in one line, then at most one line
    every OUTAGE_LOG_EVERY_S while the queue stays away, and returns how long
    to wait (BACKOFF_FIRST_S doubling up to BACKOFF_MAX_S); :meth:`recovered`
    logs one line when it is back. An outage of any length writes a handful of
    lines, not one per try.
    """

    def __init__(self, what: str, logger: logging.Logger = log) -> None:
        self.what = what
        self.logger = logger
        self.since: float | None = None
        self.last_log = 0.0
        self.failures = 0
        self.delay = BACKOFF_FIRST_S

    def failed(self, exc: BaseException) -> float:
        """Note one failure; the seconds to wait before trying again."""
        now = time.monotonic()
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        self.failures += 1
        if self.since is None:
            self.since, self.last_log = now, now
            self.logger.warning("%s cannot reach the queue (%s); retrying with back-off", self.what, reason)
        elif now - self.last_log >= OUTAGE_LOG_EVERY_S:
            self.last_log = now
            self.logger.warning(
                "%s still cannot reach the queue after %.0f s (%d tries; %s)",
                self.what,
                now - self.since,
                self.failures,
                reason,
            )
        delay = self.delay
        self.delay = min(self.delay * 2, BACKOFF_MAX_S)
        return delay

    def recovered(self) -> None:
        """Note a success (one line if the queue was away)."""
        if self.since is not None:
            self.logger.warning("%s reached the queue again after %.1f s", self.what, time.monotonic() - self.since)
        self.since, self.failures, self.delay = None, 0, BACKOFF_FIRST_S


class Lease:
    """A worker's lease on a running try: written at the start, renewed by a thread, released on SIGTERM.

    Writing the lease comes before deleting the ``queued:`` mark, so the
    collector (which reads the mark, then the lease) never sees a taken try
    with neither. A renewal that fails (the queue away) is retried at the next
    beat; a queue restarted empty gets the lease back at the next renewal.
    """

    def __init__(self, huey: Huey, task: str) -> None:
        self.huey = huey
        self.task = task
        self.started = time.monotonic()
        self.note: dict[str, Any] = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "at": time.time(),
            "elapsed": 0.0,
            "beat": 0,
        }
        self.stop = threading.Event()
        self.outage = Outage(f"worker {os.getpid()} (lease of {task})")
        self.thread = threading.Thread(target=self._renew, name="normgrade-lease", daemon=True)

    def _put(self, **changes: Any) -> None:
        self.note.update(changes, elapsed=round(time.monotonic() - self.started, 3))
        try:
            self.huey.put(lease_key(self.task), dict(self.note))
        except Exception as exc:  # the queue away: the next beat tries again
            self.outage.failed(exc)
        else:
            self.outage.recovered()

    def _renew(self) -> None:
        while not self.stop.wait(RENEW_S):
            self._put(beat=int(self.note["beat"]) + 1)

    def __enter__(self) -> "Lease":
        self._put()
        try:
            self.huey.delete(queued_key(self.task))
        except Exception as exc:
            self.outage.failed(exc)
        self.thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        if kind is not None and issubclass(kind, KeyboardInterrupt):  # SIGTERM: give the try back at once
            self._put(released="the grading worker was stopped (SIGTERM)")


def write_files(folder: Path, files: dict[str, str]) -> None:
    """Write the uploaded files under ``folder``, checking their names again (uploads.py).

    The server checked them before storing the upload; the worker checks again
    because a task comes from the queue, which is only as private as its Redis.
    """
    for name, text in check_files(files).items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def without_folder(message: str, folder: Path) -> str:
    """A message with the worker's temporary folders taken out (the student never sees a server path).

    ``<tmp>/normgrade-.../exercises/activations.py`` (the job's folder) and
    ``<tmp>/normgrade-.../<hash>/submission/activations.py`` (a sandbox's copy)
    both become ``activations.py``, the folders themselves "your exercises folder"; any other path under a
    ``normgrade-`` temporary folder becomes ``<grading folder>``.
    """
    for root in {str(folder.parent), tempfile.gettempdir()}:
        base = re.escape(root.rstrip("/")) + r"/normgrade-[^\s'\"/]*"
        message = re.sub(base + r"(?:/[^\s'\"/]+)*?/(?:exercises|submission)/", "", message)
        message = re.sub(base + r"(?:/[^\s'\"/]+)*?/(?:exercises|submission)\b", "your exercises folder", message)
        message = re.sub(base + r"[^\s'\"]*", "<grading folder>", message)
    return message


def grade_upload(
    job_id: int, attempt: int, student: str, exercise_ids: list[str], files: dict[str, str], queue: Huey
) -> dict[str, Any]:
    """The task body: grade the uploaded files with ``grader.course.grading.grade`` and return the result.

    Runs on a worker, holding the try's lease (:class:`Lease`). Grading happens
    through the library entry point, which runs the student's code in the OS
    sandbox (grader/student/sandbox/runner.py). The result is always a dict: a grader
    error (or bug) becomes ``{"ok": false, "error"}`` with a one-line reason,
    so only a dead worker leaves no result. No message names the worker's
    temporary folder.
    """
    with Lease(queue, task_id(job_id, attempt)):
        with PrivateFolder(f"normgrade-job{job_id}-") as tmp:  # (a killed worker's is removed by the next one)
            folder = tmp / "exercises"
            folder.mkdir()
            try:
                write_files(folder, files)
                report = grade_here(folder, exercise_ids, student, queue)
            except GraderError as exc:
                return {"ok": False, "error": without_folder(str(exc), tmp)}
            except Exception as exc:  # a grader bug: the job is an error with the reason, the worker lives on
                last = traceback.format_exc().strip().splitlines()[-1]
                return {
                    "ok": False,
                    "error": without_folder(
                        f"the grader failed ({type(exc).__name__}: {exc}; {last}): please report it", tmp
                    ),
                }
            doc = report_to_dict(report, instructor=True)  # to the server's store; students get it without
            return {"ok": True, "report": scrub(doc, tmp)}


def grade_here(folder: Path, exercise_ids: list[str], student: str, queue: Huey) -> GradeReport:
    """``grading.grade`` on this worker, except what this machine cannot grade: ``not_graded``, never sent to it.

    That is every exercise of a kind its last self-test failed
    (:func:`grader.queue.selftest.refused_here`), and every exercise when the
    OS sandbox cannot start here. The server holds them and grades them again
    once a self-test passes.
    """
    refused = selftest.refused_here(queue)
    try:
        Limits(sandbox=SANDBOX).sandboxed()
    except SetupError as exc:  # bubblewrap broken on this machine: the grader's fault, never the student's
        refused = {kind: f"the OS sandbox cannot start on this worker: {exc}" for kind in selftest.PROBES}
    send = [i for i in exercise_ids if selftest.kind_of(i) not in refused]
    graded = None
    if send:
        limits = Limits(sandbox=SANDBOX)
        with spares.for_process(limits).one(send) as workspace:  # workers started before this job came
            graded = grading.grade(folder, send, student, limits, workspace)
    if not refused:
        assert graded is not None
        return graded
    from grader.student.engine.checks import CHECKS

    results = {e.id: e for e in graded.exercises} if graded is not None else {}
    for i in exercise_ids:
        if i not in results:
            reason = refused[selftest.kind_of(i)]
            results[i] = ExerciseResult(
                i,
                "not_graded",
                0.0,
                float(CHECKS[i].max_score),
                [],
                f"this worker's self-test fails for them: {reason}",
            )
    return GradeReport(
        student,
        [results[i] for i in exercise_ids],
        graded.files_hash if graded is not None else grading.files_hash(folder),
        graded.notices if graded is not None else [],
        graded.sandboxed if graded is not None else True,
    )


def run_selftest(tid: str, queue: Huey) -> dict[str, Any]:
    """The ``selftest`` task body: a self-test on this worker (published, and returned), holding the try's lease."""
    with Lease(queue, tid):
        doc = selftest.run(SANDBOX)
        selftest.publish(queue, doc)
        return {"ok": True, "selftest": doc}


def scrub(value: Any, folder: Path) -> Any:
    """Every string of a report document with the worker's temporary folder taken out."""
    if isinstance(value, str):
        return without_folder(value, folder) if "normgrade-" in value else value
    if isinstance(value, list):
        return [scrub(v, folder) for v in value]
    if isinstance(value, dict):
        return {k: scrub(v, folder) for k, v in value.items()}
    return value


class _Backoff:
    """Huey's dequeue and schedule reads with :class:`Outage`: a worker without its queue waits and logs little."""

    outage: Outage

    def dequeue(self) -> Any:
        try:
            task = super().dequeue()  # type: ignore[misc]
        except Exception as exc:
            time.sleep(self._outage().failed(exc))
            return None
        self._outage().recovered()
        return task

    def read_schedule(self, timestamp: Any) -> Any:
        try:
            tasks = super().read_schedule(timestamp)  # type: ignore[misc]
        except Exception as exc:
            self._outage().failed(exc)
            return []
        self._outage().recovered()
        return tasks

    def _outage(self) -> Outage:
        if getattr(self, "_outage_pid", None) != os.getpid():  # one per process (the consumer forks)
            self._outage_pid = os.getpid()
            self.outage = Outage(f"worker {os.getpid()}")
        return self.outage


class BackoffRedisHuey(_Backoff, RedisHuey):
    """RedisHuey whose worker backs off (bounded log) while Redis is away."""


class BackoffSqliteHuey(_Backoff, SqliteHuey):
    """SqliteHuey whose worker backs off (bounded log) while the file cannot be read."""


_HTTP: Any = None  # the worker process's HTTP client for score posts (kept: one connection pool, made once)


def _http_client() -> Any:
    global _HTTP
    if _HTTP is None:
        import httpx

        _HTTP = httpx.Client(timeout=15)
    return _HTTP


def post_score(url: str, token: str, score: dict[str, Any]) -> dict[str, Any]:
    """The LTI task body: POST one AGS score to ``url`` (a line item's ``/scores``) with the service token.

    Runs on a worker. The result is ``{"ok": true}`` on a 2xx, else
    ``{"ok": false, "error"}`` (with the LMS's ``status`` when it answered);
    the server keeps the score until a result says it was taken, and sends it
    again unless the answer was a final refusal (grader/server/lti_services/ags.py).
    """
    try:
        answer = _http_client().post(
            url,
            json=score,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/vnd.ims.lis.v1.score+json"},
        )
    except Exception as exc:  # httpx.HTTPError and the like: the server sends it again
        return {"ok": False, "error": f"the LMS cannot be reached at {url} ({type(exc).__name__})"}
    if answer.status_code >= 300:
        return {
            "ok": False,
            "status": answer.status_code,
            "error": f"the LMS answered {answer.status_code} at {url}: {' '.join(answer.text[:200].split())}",
        }
    return {"ok": True, "status": answer.status_code}


@dataclass
class Queue:
    """A Huey instance and the tasks registered on it (grading; LTI score posting)."""

    url: str
    huey: Huey
    task: TaskWrapper
    score_task: TaskWrapper | None = None
    selftest_task: TaskWrapper | None = None

    def enqueue(self, job_id: int, attempt: int, student: str, exercise_ids: list[str], files: dict[str, str]) -> str:
        """Put one grading try on the queue (its ``queued:`` mark first); return its task id."""
        tid = task_id(job_id, attempt)
        self.huey.put(queued_key(tid), {"at": time.time()})
        self.huey.enqueue(self.task.s(job_id, attempt, student, exercise_ids, files, id=tid))
        return tid

    def enqueue_selftest(self, tid: str) -> str:
        """Put one self-test on the queue as task ``tid`` (its ``queued:`` mark first)."""
        assert self.selftest_task is not None
        self.huey.put(queued_key(tid), {"at": time.time()})
        self.huey.enqueue(self.selftest_task.s(tid, id=tid))
        return tid

    def enqueue_score(self, tid: str, url: str, token: str, score: dict[str, Any]) -> str:
        """Put one LTI score post on the queue under task id ``tid``."""
        assert self.score_task is not None
        self.huey.enqueue(self.score_task.s(url, token, score, id=tid))
        return tid

    def result(self, tid: str) -> dict[str, Any] | None:
        """The result of a task (None while there is none), left in the store until :meth:`forget`."""
        value = self.huey.get(tid, peek=True)
        return value if isinstance(value, dict) else None

    def lease(self, tid: str) -> dict[str, Any] | None:
        """The worker's lease on ``tid`` (host, pid, at, elapsed, beat[, released]), or None."""
        value = self.huey.get(lease_key(tid), peek=True)
        return value if isinstance(value, dict) else None

    def waiting(self, tid: str) -> bool:
        """Whether ``tid`` is on the queue, not yet taken by a worker (its ``queued:`` mark)."""
        return self.huey.get(queued_key(tid), peek=True) is not None

    def forget(self, tid: str) -> None:
        """Delete a try's result, lease and queue mark (a closed job leaves nothing in the queue's store)."""
        for key in (tid, lease_key(tid), queued_key(tid)):
            self.huey.delete(key)

    def cancel_if_waiting(self, tid: str) -> None:
        """Revoke a task that has neither started nor finished (a worker that takes it skips it).

        A try enqueued because its predecessor overran may still wait in the
        queue when the predecessor's result closes the job.
        """
        if self.waiting(tid) and self.lease(tid) is None and self.result(tid) is None:
            self.huey.revoke_by_id(tid, revoke_once=True)

    def stored_keys(self) -> list[str]:
        """The keys of the queue's key/value store (results, leases, marks), revocations left out.

        A revocation (``r:<task id>``) is Huey's: it is deleted when a worker
        takes the revoked task, which may still wait in the queue.
        """
        keys = [k.decode() if isinstance(k, bytes) else str(k) for k in self.huey.all_results()]
        return [k for k in keys if not k.startswith("r:")]

    def pending(self) -> int:
        """Tasks waiting in the queue."""
        return int(self.huey.pending_count())

    def pending_ids(self) -> set[str]:
        """The ids of the tasks waiting in the queue (reads every waiting task: call it seldom)."""
        return {str(task.id) for task in self.huey.pending()}


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite queue URL (``sqlite:///PATH``, ``sqlite://relative/path`` or a bare path); None for
    any other scheme."""
    parsed = urlparse(url)
    if parsed.scheme not in ("sqlite", ""):
        return None
    if parsed.scheme and parsed.netloc:  # sqlite://relative/path
        return Path(parsed.netloc + parsed.path)
    return Path(parsed.path if parsed.scheme else url)


def open_queue(url: str) -> Queue:
    """The queue for ``url`` (``sqlite:///PATH``, a bare path, or ``redis://...``); SetupError when unusable."""
    parsed = urlparse(url)
    if parsed.scheme in ("redis", "rediss", "unix"):
        try:
            import redis

            # bounded waits: a Redis that stops answering is an error after seconds, not a hang
            pool = redis.ConnectionPool.from_url(
                url, socket_timeout=10, socket_connect_timeout=5, health_check_interval=5
            )
            huey: Huey = BackoffRedisHuey(QUEUE_NAME, connection_pool=pool, results=True, utc=True)
        except Exception as exc:  # redis.exceptions / ConfigurationError: one line, what to do
            raise SetupError(f"cannot use the Redis queue {url} ({exc}): check --queue") from exc
    elif (path := sqlite_path(url)) is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # owner-only from the start (its -wal, -shm take its mode); only when missing: closing a descriptor of
            # a file this process has open in SQLite would drop the process's locks on it
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            pass
        except OSError as exc:
            raise SetupError(f"cannot create the queue {path} ({exc.strerror}): check --queue") from exc
        huey = BackoffSqliteHuey(QUEUE_NAME, filename=str(path), results=True, utc=True, fsync=True)
    else:
        raise SetupError(f"'{url}' is not a queue URL: use sqlite:///PATH or redis://HOST:PORT/DB")

    def run(job_id: int, attempt: int, student: str, exercise_ids: list[str], files: dict[str, str]) -> dict[str, Any]:
        return grade_upload(job_id, attempt, student, exercise_ids, files, huey)

    def check(tid: str) -> dict[str, Any]:
        return run_selftest(tid, huey)

    task = huey.task(name=TASK_NAME)(run)
    score_task = huey.task(name=SCORE_TASK_NAME)(post_score)
    selftest_task = huey.task(name=SELFTEST_TASK_NAME)(check)
    return Queue(url, huey, task, score_task, selftest_task)


def default_queue_url(db_path: Path) -> str:
    """The embedded queue beside the course database: ``course.db`` -> ``sqlite:///.../course-queue.db``."""
    path = Path(db_path).resolve()
    return f"sqlite://{path.with_name(path.stem + '-queue.db')}"


PR_SET_PDEATHSIG = 1


def set_parent_death_signal(signum: int) -> None:
    """Linux: this process gets ``signum`` when its parent dies (even by SIGKILL); elsewhere nothing."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signum))
    except (OSError, AttributeError):
        pass


def _stop_on_sigterm() -> None:
    """In a grading process: SIGTERM ends it, idle or busy (Huey's own handler ignores it while idle).

    The KeyboardInterrupt it raises stops a running task (its lease is released,
    so the try is put back at once) or Huey's loop, and the process exits.
    """

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def _start_spares() -> None:
    """In a grading process: start its spare workers now, before the first job (grader/student/sandbox/spares.py)."""
    try:
        spares.for_process(Limits(sandbox=SANDBOX))
    except SetupError as exc:  # the jobs will say so, as not_graded
        log.warning("no spare workers: %s", exc)


def run_consumer(url: str, workers: int, self_test: bool = True) -> None:
    """``grade worker``: consume grading tasks with ``workers`` processes until SIGINT/SIGTERM.

    With ``self_test`` the reference solution is graded first (one NumPy and
    one kernel exercise, grader/queue/selftest.py): one log line per kind,
    the verdict published for the server, and a failing kind refused by this
    machine's grading processes until a self-test passes.

    Every process the consumer forks (its grading processes and Huey's
    scheduler) gets SIGKILL from the kernel when the consumer dies, however it
    dies, so no orphan grades beside a later consumer; a grading process ends
    on SIGTERM. Huey's consumer restarts a grading process that died (health
    check every second); the server notices the lease of the try it held
    expire and puts the try back.
    """
    logging.basicConfig(level=logging.WARNING, format="grade worker: %(name)s: %(message)s")
    queue = open_queue(url)
    Limits(sandbox=SANDBOX).sandboxed()  # no sandbox and no --no-sandbox: a one-line error before consuming
    if self_test:  # before taking jobs (its threads and children are gone before the consumer forks)
        doc = selftest.run(SANDBOX)
        selftest.publish(queue.huey, doc)
        selftest.log_verdict(doc, f"of this worker ({socket.gethostname()})")
    consumer_pid = os.getpid()

    def in_child() -> None:
        if os.getppid() == consumer_pid:
            set_parent_death_signal(signal.SIGKILL)
            if os.getppid() != consumer_pid:  # the consumer died before the line above
                os._exit(1)

    os.register_at_fork(after_in_child=in_child)
    queue.huey.on_startup()(_stop_on_sigterm)
    queue.huey.on_startup()(_start_spares)
    consumer = queue.huey.create_consumer(
        workers=workers,
        worker_type="process",
        check_worker_health=True,
        health_check_interval=1,
        periodic=False,
        initial_delay=0.05,
        max_delay=0.5,
        backoff=1.15,
    )
    consumer.run()
