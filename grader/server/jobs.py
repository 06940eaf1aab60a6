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
database: it writes two things into the queue's own key/value store,

- ``started:<task id>`` = ``{"host", "pid", "at"}`` when it begins (the server
  uses it to notice a worker killed mid-job), and
- the task's result (Huey's result store, keyed by the task id):
  ``{"ok": true, "report": <grader.student.wire dict>}`` or ``{"ok": false, "error": "..."}``,

and the server's collector thread (grader/server/collector.py) records results
in the course database, exactly once. Task ids are ``job-<id>-try-<n>``: a job
enqueued twice for the same try (a server killed between enqueueing and
noting it) is recorded once all the same.
"""

from __future__ import annotations

import os
import socket
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from huey import RedisHuey, SqliteHuey
from huey.api import Huey, TaskWrapper

from grader import grading
from grader.student.errors import GraderError, SetupError
from grader.student.private_tmp import PrivateFolder
from grader.student.sandbox import Limits
from grader.student.uploads import check_files
from grader.student.wire import report_to_dict

QUEUE_NAME = "normgrade"
TASK_NAME = "grade_upload"
SCORE_TASK_NAME = "post_score"  # an LTI score sent to the LMS (grader/server/lti_services.py)
MAX_TRIES = 2  # a job whose worker dies is tried once more, then recorded as an error

# Other people's code: the OS sandbox is required (``grade worker --no-sandbox`` turns it off,
# set before the consumer forks its worker processes, which inherit it).
SANDBOX: bool = True


def task_id(job_id: int, attempt: int) -> str:
    """The queue's task id of try ``attempt`` (1, 2) of job ``job_id``."""
    return f"job-{job_id}-try-{attempt}"


def started_key(task: str) -> str:
    """The key under which a worker notes that it began a task."""
    return f"started:{task}"


def write_files(folder: Path, files: dict[str, str]) -> None:
    """Write the uploaded files under ``folder``, checking their names again (uploads.py).

    The server checked them before storing the upload; the worker checks again
    because a task comes from the queue, which is only as private as its Redis.
    """
    for name, text in check_files(files).items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def grade_upload(job_id: int, attempt: int, student: str, exercise_ids: list[str], files: dict[str, str],
                 queue: Huey) -> dict[str, Any]:
    """The task body: grade the uploaded files with ``grader.grading.grade`` and return the result.

    Runs on a worker. Grading happens through the library entry point, which
    runs the student's code in the OS sandbox (grader/student/sandbox.py). The result
    is always a dict: a grader error (or bug) becomes ``{"ok": false, "error"}``
    with a one-line reason, so only a dead worker leaves no result.
    """
    queue.put(started_key(task_id(job_id, attempt)),
              {"host": socket.gethostname(), "pid": os.getpid(), "at": time.time()})
    with PrivateFolder(f"normgrade-job{job_id}-") as tmp:  # (a killed worker's is removed by the next one)
        folder = tmp / "exercises"
        folder.mkdir()
        try:
            write_files(folder, files)
            report = grading.grade(folder, exercise_ids, student, Limits(sandbox=SANDBOX))
        except GraderError as exc:
            return {"ok": False, "error": str(exc)}
        except Exception as exc:  # a grader bug: the job is an error with the reason, the worker lives on
            last = traceback.format_exc().strip().splitlines()[-1]
            return {"ok": False, "error": f"the grader failed ({type(exc).__name__}: {exc}; {last}): please report it"}
    return {"ok": True, "report": report_to_dict(report)}


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
    ``{"ok": false, "error"}``; the server keeps the score until a result says
    it was taken, and sends it again otherwise (grader/server/lti_services.py).
    """
    try:
        answer = _http_client().post(url, json=score, headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/vnd.ims.lis.v1.score+json"})
    except Exception as exc:  # httpx.HTTPError and the like: the server sends it again
        return {"ok": False, "error": f"the LMS cannot be reached at {url} ({type(exc).__name__})"}
    if answer.status_code >= 300:
        return {"ok": False, "error": f"the LMS answered {answer.status_code} at {url}: "
                                      f"{' '.join(answer.text[:200].split())}"}
    return {"ok": True, "status": answer.status_code}


@dataclass
class Queue:
    """A Huey instance and the tasks registered on it (grading; LTI score posting)."""

    url: str
    huey: Huey
    task: TaskWrapper
    score_task: TaskWrapper | None = None

    def enqueue(self, job_id: int, attempt: int, student: str, exercise_ids: list[str],
                files: dict[str, str]) -> str:
        """Put one grading try on the queue; return its task id."""
        tid = task_id(job_id, attempt)
        self.huey.enqueue(self.task.s(job_id, attempt, student, exercise_ids, files, id=tid))
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

    def started(self, tid: str) -> dict[str, Any] | None:
        """The worker's note that it began ``tid`` (host, pid, at), or None."""
        value = self.huey.get(started_key(tid), peek=True)
        return value if isinstance(value, dict) else None

    def forget(self, tid: str) -> None:
        """Delete a recorded task's result and start note."""
        self.huey.delete(tid)
        self.huey.delete(started_key(tid))

    def cancel_if_waiting(self, tid: str) -> None:
        """Revoke a task that has neither started nor finished (a worker that takes it skips it).

        A try enqueued because its predecessor overran may still wait in the
        queue when the predecessor's result closes the job.
        """
        if self.started(tid) is None and self.result(tid) is None:
            self.huey.revoke_by_id(tid, revoke_once=True)

    def waiting_ids(self) -> set[str]:
        """The ids of the tasks still waiting in the queue (reads the whole queue: call it rarely)."""
        return {str(task.id) for task in self.huey.pending()}

    def pending(self) -> int:
        """Tasks waiting in the queue."""
        return int(self.huey.pending_count())


def open_queue(url: str) -> Queue:
    """The queue for ``url`` (``sqlite:///PATH``, a bare path, or ``redis://...``); SetupError when unusable."""
    parsed = urlparse(url)
    if parsed.scheme in ("redis", "rediss", "unix"):
        try:
            huey: Huey = RedisHuey(QUEUE_NAME, url=url, results=True, utc=True)
        except Exception as exc:  # redis.exceptions / ConfigurationError: one line, what to do
            raise SetupError(f"cannot use the Redis queue {url} ({exc}): check --queue") from exc
    elif parsed.scheme in ("sqlite", ""):
        path = Path(parsed.path if parsed.scheme else url)
        if parsed.scheme and parsed.netloc:  # sqlite://relative/path
            path = Path(parsed.netloc + parsed.path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SetupError(f"cannot create the queue folder {path.parent} ({exc.strerror}): check --queue") from exc
        huey = SqliteHuey(QUEUE_NAME, filename=str(path), results=True, utc=True, fsync=True)
    else:
        raise SetupError(f"'{url}' is not a queue URL: use sqlite:///PATH or redis://HOST:PORT/DB")

    def run(job_id: int, attempt: int, student: str, exercise_ids: list[str], files: dict[str, str]) -> dict[str, Any]:
        return grade_upload(job_id, attempt, student, exercise_ids, files, huey)

    task = huey.task(name=TASK_NAME)(run)
    score_task = huey.task(name=SCORE_TASK_NAME)(post_score)
    return Queue(url, huey, task, score_task)


def default_queue_url(db_path: Path) -> str:
    """The embedded queue beside the course database: ``course.db`` -> ``sqlite:///.../course-queue.db``."""
    path = Path(db_path).resolve()
    return f"sqlite://{path.with_name(path.stem + '-queue.db')}"


def run_consumer(url: str, workers: int) -> None:
    """``grade worker``: consume grading tasks with ``workers`` processes until SIGINT/SIGTERM.

    Huey's consumer restarts a worker process that died (health check every
    second); the server notices the job it was grading and retries it once.
    """
    queue = open_queue(url)
    Limits(sandbox=SANDBOX).sandboxed()  # no sandbox and no --no-sandbox: a one-line error before consuming
    consumer = queue.huey.create_consumer(
        workers=workers, worker_type="process", check_worker_health=True, health_check_interval=1,
        periodic=False, initial_delay=0.05, max_delay=0.5, backoff=1.15,
    )
    consumer.run()
