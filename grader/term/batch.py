"""Grade a whole class: every student's folder, in parallel, into one progress database.

``run_batch(root, store, ...)`` finds the submissions (:func:`find_submissions`:
each subfolder of ``root`` is a student named after it, and is either the
student's ``exercises/`` folder or contains one), grades ``jobs`` students at
once with :func:`grader.course.grading.grade` (the same sandboxed children as ``grade
submit``: a student whose code hangs or crashes only costs that student's
exercise its marks), and records each student's attempt in its own transaction
as soon as it is graded. A run killed midway therefore leaves every finished
student recorded and nothing half-written; running it again resumes.

Each graded student's exercise files are kept with the attempt, as the course
server keeps an upload (a closed ``jobs`` row and its ``job_files``, each
distinct content stored once: :func:`grader.queue.records.keep_graded_upload`),
so ``grade rescore`` grades a batch-graded class again after a fix of the
grader, and ``grade similarity`` compares it.

A student is skipped (not regraded) when the student's latest recorded
attempts with the folder's files hash (:func:`grader.course.grading.files_hash`)
graded every selected exercise; otherwise only the exercises they lack are
graded (:func:`missing_exercises`); ``force`` regrades everyone, everything.

**Not graded.** An exercise the grader's machine could not grade
(``not_graded``: no OpenCL device that builds a kernel, a sandbox that cannot
start) is not recorded: the summary counts those exercises and says why, the
command exits 2, and the next run grades them (they are missing), as it does
for a student that could not be graded at all.

Grading happens in ``jobs`` spawned grading processes (see :func:`run_batch`);
the database is written only by the calling thread, one transaction per student.
"""

from __future__ import annotations

import dataclasses
import importlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import (
    FIRST_COMPLETED,
    BrokenExecutor,
    Executor,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.course import grading
from grader.student.engine import catalogue
from grader.student.errors import GraderError, SetupError
from grader.student.engine.model import ExerciseResult, GradeReport
from grader.student.feedback.report import first_reason
from grader.student.sandbox import spares
from grader.student.sandbox.runner import Limits
from grader.student.sanitize import clean_text
from grader.queue import records
from grader.student.store import Store, utc_now

EXERCISES_DIR = "exercises"
NO_SANDBOX_SUFFIX = "+no-sandbox"  # appended to the recorded grader version of a batch run with --no-sandbox

GradeFn = Callable[[Path, list[str] | None, str, Limits | None], GradeReport]


@dataclass(frozen=True)
class Submission:
    """One student's hand-in: the student's name (the subfolder's) and the exercises folder to grade."""

    student: str
    path: Path


@dataclass
class StudentOutcome:
    """What the batch did with one student.

    ``status``: ``graded`` (graded and recorded), ``skipped`` (unchanged since the
    recorded attempt), ``not_graded`` (the grader's machine graded none of its
    exercises: nothing recorded), ``error`` (could not be graded: an ``error``
    verdict on every exercise was recorded with ``message``, and the next run
    tries again) or ``failed`` (could not be recorded: ``message`` says why).
    Scores are those of the recorded attempt. ``not_graded``: the exercises the
    grader's machine could not grade (none recorded; ``message`` says why; the
    next run grades them).
    """

    student: str
    status: str
    score: float = 0.0
    max_score: float = 0.0
    message: str = ""
    duration: float = 0.0
    not_graded: list[str] = field(default_factory=list)


@dataclass
class BatchSummary:
    """Every student's outcome, in the order they finished, and the run's wall-clock time."""

    outcomes: list[StudentOutcome] = field(default_factory=list)
    wall_s: float = 0.0

    def count(self, status: str) -> int:
        """How many students ended with ``status``."""
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def ok(self) -> bool:
        """True when every student was graded or skipped."""
        return self.count("failed") == 0 and self.count("error") == 0

    @property
    def not_graded(self) -> list[StudentOutcome]:
        """The students with exercises the grader's machine could not grade."""
        return [o for o in self.outcomes if o.not_graded]

    @property
    def exit_status(self) -> int:
        """2 when any exercise was not graded (the grader's machine), else 1 when any student failed, else 0."""
        if self.not_graded:
            return 2
        return 0 if self.ok else 1

    def not_graded_line(self) -> str:
        """One line: how many exercises of how many students the grader's machine could not grade, and why."""
        held = self.not_graded
        exercises = sum(len(o.not_graded) for o in held)
        return (
            f"NOT_GRADED: {exercises} exercise(s) of {len(held)} student(s) were not graded: the grader's machine"
            f" is at fault, nothing was recorded for them; run `grade batch` again once `grade doctor` passes"
            f" and it grades them. {held[0].message if held else ''}"
        ).rstrip()

    def line(self) -> str:
        """The one-line summary: 'N students: G graded, S unchanged (skipped), F failed in T s'."""
        n = len(self.outcomes)
        graded = [o for o in self.outcomes if o.status == "graded"]
        exercises = sum(len(o.not_graded) for o in self.outcomes)
        text = (
            f"{n} student{'s' if n != 1 else ''}: {len(graded)} graded, "
            f"{self.count('skipped')} unchanged (skipped), "
            + (f"{self.count('error')} could not be graded (error recorded), " if self.count("error") else "")
            + (
                f"{exercises} exercise(s) of {len(self.not_graded)} student(s) not graded (the grader's machine), "
                if exercises
                else ""
            )
            + f"{self.count('failed')} failed "
            f"in {self.wall_s:.1f} s"
        )
        if graded and self.wall_s > 0:
            text += f" ({len(graded) / self.wall_s:.2f} submissions/s)"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "students": len(self.outcomes),
            "graded": self.count("graded"),
            "skipped": self.count("skipped"),
            "error": self.count("error"),
            "failed": self.count("failed"),
            "not_graded": sum(len(o.not_graded) for o in self.outcomes),
            "wall_s": round(self.wall_s, 3),
            "outcomes": [
                {
                    "student": o.student,
                    "status": o.status,
                    "score": round(o.score, 6),
                    "max_score": o.max_score,
                    "message": o.message,
                    "duration": round(o.duration, 3),
                    "not_graded": list(o.not_graded),
                }
                for o in sorted(self.outcomes, key=lambda o: o.student)
            ],
        }


def usable_cpus() -> int:
    """The number of CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def default_jobs() -> int:
    """Students graded at once by default: one per usable CPU.

    Measured with bench/batch.py on 2 cores (grading processes, 2 sandbox
    children each): 1.3 submissions/s with 2 students at once, 1.0 with 3,
    0.85 with 4 (more students only add contention).
    """
    return usable_cpus()


def find_submissions(root: Path | str) -> list[Submission]:
    """The students under ``root``, sorted by name: one per visible subfolder.

    A subfolder holding an ``exercises/`` folder is graded there, any other
    subfolder is taken as the exercises folder itself. Plain files and hidden
    folders (``.git``, ``.grade``) are ignored. Raises SetupError when ``root``
    is not a folder or has no subfolder.
    """
    root = Path(root)
    if not root.is_dir():
        raise SetupError(f"'{root}' is not a folder: pass the folder holding one subfolder per student")
    found: list[Submission] = []
    for entry in sorted(os.scandir(root), key=lambda p: p.name):
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        folder = root / entry.name
        nested = folder / EXERCISES_DIR
        # The student's name is the folder's, cleaned: a name that is not valid UTF-8 or holds
        # control characters is recorded with visible escapes rather than breaking the batch.
        found.append(Submission(clean_text(entry.name, 200), nested if nested.is_dir() else folder))
    if not found:
        raise SetupError(
            f"'{root}' has no student subfolders: expected one folder per student "
            f"(the student's {EXERCISES_DIR}/ folder, or a folder containing it)"
        )
    return found


def missing_exercises(store: Store, student: str, files_hash: str, exercise_ids: list[str]) -> list[str]:
    """The ids of ``exercise_ids`` not yet graded for these files: those the student's latest attempts with this
    files hash (the run of them since another hash) did not record (all when there are none).

    An exercise the grader's machine could not grade was never recorded: it is missing, so the next run grades
    it, and only it.
    """
    recent = []
    for attempt in reversed(store.attempts(student)):
        if attempt["files_hash"] != files_hash:
            break
        recent.append(attempt["id"])
    graded = {row["exercise"] for row in store.submissions(student=student) if row["attempt_id"] in recent}
    return [i for i in exercise_ids if i not in graded]


def is_unchanged(store: Store, student: str, files_hash: str, exercise_ids: list[str]) -> bool:
    """Whether every id in ``exercise_ids`` is graded for these files (:func:`missing_exercises` finds none)."""
    return not missing_exercises(store, student, files_hash, exercise_ids)


# --- where the grading runs ------------------------------------------------------------------


PARENT_POLL_S = 0.5


def _exit_with(parent: int) -> None:
    """End this grading process as soon as the batch process ``parent`` is gone (killed, say)."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def _worker_init(parent: int) -> None:
    """Start-up of a grading process: leave Ctrl-C to the batch process, die with it, load the checks once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with, args=(parent,), name="parent-watch", daemon=True).start()
    importlib.import_module("grader.student.engine.checks")


def _grade_in_worker(path: Path, selectors: list[str] | None, student: str, limits: Limits) -> GradeReport:
    """Grade one student in a grading process (grader.course.grading.grade), keeping its memory flat.

    The reference results cached for this student are dropped afterwards: the
    next student's seeds differ, so they could never be reused.
    """
    try:
        with spares.for_process(limits).one(catalogue.resolve(selectors)) as workspace:  # started before it came
            return grading.grade(path, selectors, student, limits, workspace)
    finally:
        grading.clear_reference_cache()


def _process_pool(jobs: int) -> Executor:
    """``jobs`` spawned grading processes (a fresh interpreter each: never a fork of this one)."""
    return ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_worker_init,
        initargs=(os.getpid(),),
    )


def _thread_pool(jobs: int) -> Executor:
    return ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="batch")


def run_batch(
    root: Path | str,
    store: Store,
    grader_version: str,
    selectors: list[str] | None = None,
    jobs: int | None = None,
    force: bool = False,
    limits: Limits | None = None,
    on_outcome: Callable[[StudentOutcome], None] | None = None,
    grade_fn: GradeFn | None = None,
) -> BatchSummary:
    """Grade every student under ``root`` (``jobs`` at once) and record each attempt in ``store``.

    ``selectors`` are exercise ids or topics (None: all exercises); an unknown
    one raises UsageError before anything runs. ``on_outcome`` is called in
    this thread after each student (for a progress bar). A student that cannot
    be graded (grade raised, its grading process died, or the store refused the
    attempt) is a ``failed`` outcome, never an exception; the others carry on.

    By default each student is graded by :func:`grader.course.grading.grade` in one of
    ``jobs`` spawned grading processes, one student at a time each (the
    parent-side work of grading, reference runs and evaluation, is Python:
    processes put every core to it; and CPython 3.11's ``ast.parse``, used by
    the import scan, is not safe in concurrent threads). A ``grade_fn`` given
    instead is called in ``jobs`` threads of this process (tests, embedding).
    """
    started = time.monotonic()
    exercise_ids = catalogue.resolve(list(selectors or []))
    submissions = find_submissions(root)
    limits = limits or Limits()
    if limits.sandbox is None:  # other people's code: the OS sandbox unless explicitly turned off
        limits = dataclasses.replace(limits, sandbox=True)
    if not limits.sandboxed():
        grader_version += NO_SANDBOX_SUFFIX
    jobs = max(1, jobs or default_jobs())
    summary = BatchSummary()

    def finish(outcome: StudentOutcome) -> None:
        summary.outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)

    queue: list[Submission] = []
    todo: dict[str, list[str]] = {}  # student -> the exercises to grade (those not graded for these files)
    for sub in submissions:
        try:
            digest = grading.files_hash(sub.path)
        except (GraderError, OSError) as exc:  # too many or too large files, unreadable folder
            reason = str(exc) if isinstance(exc, GraderError) else f"cannot read the folder ({exc.strerror})"
            finish(_record_error(store, sub, exercise_ids, reason, grader_version, 0.0))
            continue
        todo[sub.student] = exercise_ids if force else missing_exercises(store, sub.student, digest, exercise_ids)
        if not todo[sub.student]:
            latest = store.attempts(sub.student)[-1]
            finish(StudentOutcome(sub.student, "skipped", latest["score"], latest["max_score"]))
            continue
        queue.append(sub)
    if not queue:
        summary.wall_s = time.monotonic() - started
        return summary

    if grade_fn is None:
        task: Callable[..., GradeReport] = _grade_in_worker
        make_pool = _process_pool
    else:
        task = grade_fn
        make_pool = _thread_pool

    def start(pool: Executor, sub: Submission) -> Future[GradeReport]:
        return pool.submit(task, sub.path, todo[sub.student], sub.student, limits)

    def settle(sub: Submission, future: Future[GradeReport], t0: float) -> None:
        finish(_record(store, sub, future, todo[sub.student], grader_version, time.monotonic() - t0))

    suspects = _grade_queue(queue, min(jobs, len(queue)), make_pool, start, settle)
    # A grading process died (a grader bug: students' code runs in sandbox children), and
    # a broken pool fails every student it held. Grade each of those again, alone, so
    # that only a student whose grading really kills the process fails.
    for sub in suspects:
        for dead in _grade_queue([sub], 1, make_pool, start, settle):
            message = "its grading process died twice while grading this hand-in: a grader bug, please report it"
            finish(_record_error(store, dead, todo[dead.student], message, grader_version, 0.0))
    summary.wall_s = time.monotonic() - started
    return summary


def _grade_queue(
    queue: list[Submission],
    jobs: int,
    make_pool: Callable[[int], Executor],
    start: Callable[[Executor, Submission], Future[GradeReport]],
    settle: Callable[[Submission, Future[GradeReport], float], None],
) -> list[Submission]:
    """Grade ``queue`` with ``jobs`` students at once, settling each as it finishes.

    Returns the students whose pool broke under them (a grading process died),
    unsettled, in the order they were found; a fresh pool takes over the rest.
    """
    broken: list[Submission] = []
    running: dict[Future[GradeReport], tuple[Submission, float]] = {}
    pool = make_pool(jobs)
    try:
        while queue or running:
            while queue and len(running) < jobs:
                try:  # the pool may have broken since the last wait
                    future = start(pool, queue[0])
                except BrokenExecutor:
                    break
                running[future] = (queue.pop(0), time.monotonic())
            if not running:  # it broke before anything could start: take a fresh one
                pool.shutdown(wait=True, cancel_futures=True)
                pool = make_pool(jobs)
                continue
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            if any(_broke(f) for f in done):
                pool.shutdown(wait=True, cancel_futures=True)
                for future, (sub, t0) in sorted(running.items(), key=lambda item: item[1][0].student):
                    if future.cancelled():  # never started
                        queue.insert(0, sub)
                    elif _broke(future):
                        broken.append(sub)
                    else:
                        settle(sub, future, t0)
                running.clear()
                pool = make_pool(jobs)
                continue
            for future in sorted(done, key=lambda f: running[f][0].student):
                sub, t0 = running.pop(future)
                settle(sub, future, t0)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return broken


def _broke(future: Future[GradeReport]) -> bool:
    """Whether a finished future failed because its pool broke (its grading process died)."""
    return not future.cancelled() and isinstance(future.exception(), BrokenExecutor)


def _record(
    store: Store,
    sub: Submission,
    future: Future[GradeReport],
    exercise_ids: list[str],
    grader_version: str,
    duration: float,
) -> StudentOutcome:
    """Record a finished student's report (one transaction) and say how it went.

    A student whose grading failed in any way (a hand-in over the caps, a
    grader bug, MemoryError, RecursionError...) gets an ``error`` verdict on
    every exercise, recorded with the reason, and the batch goes on. An
    exercise the grader's machine could not grade is not recorded
    (:func:`graded_outcome`).
    """
    try:
        report = future.result()
    except GraderError as exc:
        return _record_error(store, sub, exercise_ids, str(exc), grader_version, duration)
    except BaseException as exc:  # a grader bug on one student must not stop the class
        message = (
            f"the grader failed on this hand-in: {type(exc).__name__}: {clean_text(exc, 500)}"
            " (a grader bug: please report it)"
        )
        return _record_error(store, sub, exercise_ids, message, grader_version, duration)
    files = graded_files(sub.path, report)
    graded = [e.id for e in report.graded_exercises]
    when = utc_now()

    def keep(db: Any, attempt_id: int) -> None:  # the hand-in, kept with its attempt (one transaction)
        if files is not None and graded:
            records.keep_graded_upload(db, report.student, files, graded, attempt_id, when)

    try:
        if report.graded_exercises:  # (all not graded: no empty attempt)
            store.record_report(report, grader_version, started_at=when, also=keep)
    except GraderError as exc:
        return StudentOutcome(sub.student, "failed", message=clean_text(exc), duration=duration)
    return graded_outcome(sub.student, report.score, report.max_score, report.not_graded, duration)


def graded_outcome(
    student: str, score: float, max_score: float, not_graded: list[ExerciseResult], duration: float = 0.0
) -> StudentOutcome:
    """A student graded (and recorded) but for the exercises the grader's machine could not grade: those are
    listed, with the first reason; ``not_graded`` when none was graded."""
    status = "not_graded" if not_graded and max_score <= 0 else "graded"
    return StudentOutcome(
        student,
        status,
        score,
        max_score,
        first_reason(not_graded) if not_graded else "",
        duration,
        [e.id for e in not_graded],
    )


def graded_files(path: Path, report: GradeReport) -> dict[str, str] | None:
    """The exercise files the report graded, read again from the folder (name -> text), kept with the attempt
    so that ``grade rescore`` can grade them again; None when the folder changed since (its files hash is not
    the report's) or a file is not UTF-8 text (the upload format of the server and the queue)."""
    from grader.student.sandbox.ingest import read_submission

    try:
        ingested = read_submission(path)
        if ingested.files_hash() != report.files_hash:
            return None
        return {name: data.decode("utf-8") for name, data in ingested.files.items()}
    except (GraderError, OSError, UnicodeDecodeError):
        return None


def _record_error(
    store: Store, sub: Submission, exercise_ids: list[str], reason: str, grader_version: str, duration: float
) -> StudentOutcome:
    """Record an ``error`` verdict on every exercise for a student that could not be graded."""
    report = grading.error_report(sub.student, exercise_ids, reason)
    try:
        store.record_report(report, grader_version)
    except GraderError as exc:
        return StudentOutcome(sub.student, "failed", message=clean_text(exc), duration=duration)
    return StudentOutcome(
        sub.student, "error", 0.0, report.max_score, message=clean_text(reason, 2000), duration=duration
    )


# --- past one machine: the course server's queue --------------------------------------------------


def run_batch_on_queue(
    root: Path | str,
    store: Store,
    grader_version: str,
    queue_url: str,
    selectors: list[str] | None = None,
    force: bool = False,
    job_timeout: float = 600.0,
    on_outcome: Callable[[StudentOutcome], None] | None = None,
) -> BatchSummary:
    """Grade every student under ``root`` on the workers of the course server's queue; record them here.

    The same queue, jobs and collector as ``grade serve`` (grader/server/):
    each hand-in is ingested (caps, links refused), stored as a job in this
    database (files and row in one transaction), put on the queue at
    ``queue_url`` (``sqlite:///PATH`` on one machine, ``redis://HOST:PORT/DB``
    for ``grade worker`` processes on any number of machines, each grading in
    its OS sandbox), and recorded by this process alone, exactly once, as each
    result comes back. A worker that dies mid-job is retried once, then the
    student gets a recorded ``error``. Unchanged students are skipped, and
    only missing exercises graded, as in :func:`run_batch`; exercises a worker
    could not grade (``not_graded``) are held by the job, which this run then
    closes (``records.release_held``): the next run grades them as new jobs.
    """
    import secrets
    import threading as _threading
    from datetime import datetime, timezone

    from grader.queue import records
    from grader.queue.collector import Collector
    from grader.student.course import DEFAULT_COURSE
    from grader.student.engine.grading import check_folder
    from grader.student.sandbox.ingest import read_submission

    started = time.monotonic()
    exercise_ids = catalogue.resolve(list(selectors or []))
    summary = BatchSummary()
    unlimited = dataclasses.replace(DEFAULT_COURSE, rate_submissions=10**9)  # the instructor's own run

    def finish(outcome: StudentOutcome) -> None:
        summary.outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)

    waiting: dict[int, Submission] = {}
    todo: dict[str, list[str]] = {}
    for sub in find_submissions(root):
        try:
            check_folder(sub.path)  # the same one-line reason as grading here
            ingested = read_submission(sub.path)
            files = {name: data.decode("utf-8") for name, data in ingested.files.items()}
        except (GraderError, OSError, UnicodeDecodeError) as exc:
            reason = str(exc) if isinstance(exc, GraderError) else f"cannot read the hand-in ({exc})"
            finish(_record_error(store, sub, exercise_ids, reason, grader_version, 0.0))
            continue
        todo[sub.student] = (
            exercise_ids if force else missing_exercises(store, sub.student, ingested.files_hash(), exercise_ids)
        )
        if not todo[sub.student]:
            latest = store.attempts(sub.student)[-1]
            finish(StudentOutcome(sub.student, "skipped", latest["score"], latest["max_score"]))
            continue
        key = f"batch:{ingested.files_hash()}:{secrets.token_hex(8)}"
        job = records.create_job(
            store, sub.student, key, files, todo[sub.student], unlimited, datetime.now(timezone.utc)
        ).job
        waiting[int(job["id"])] = sub
    if waiting:
        closed = _threading.Condition()
        done: set[int] = set()

        def on_closed(job_id: int) -> None:
            with closed:
                done.add(job_id)
                closed.notify_all()

        collector = Collector(store.path, queue_url, grader_version, job_timeout=job_timeout, on_closed=on_closed)
        collector.start()
        try:
            with closed:
                while not set(waiting) <= done and collector.is_alive():
                    closed.wait(0.5)
        finally:
            collector.stop()
            collector.join()
        for job_id, sub in sorted(waiting.items(), key=lambda item: item[1].student):
            finish(_queued_outcome(store, records.job(store, job_id), sub, todo[sub.student], grader_version))
    summary.wall_s = time.monotonic() - started
    return summary


def _queued_outcome(
    store: Store, job: dict[str, Any] | None, sub: Submission, exercise_ids: list[str], grader_version: str
) -> StudentOutcome:
    """How a queued student ended: graded (the attempt the collector recorded; held exercises listed, the job
    closed) or an error verdict."""
    from grader.queue import records

    if job is not None and job["status"] == records.HELD:
        report = records.report_of(store, job)
        assert report is not None
        records.release_held(store, int(job["id"]))
        return graded_outcome(sub.student, report.score, report.max_score, report.not_graded)
    if job is not None and job["status"] == "done" and job["attempt_id"] is not None:
        attempt = next(a for a in store.attempts(sub.student) if a["id"] == job["attempt_id"])
        return StudentOutcome(sub.student, "graded", attempt["score"], attempt["max_score"])
    reason = (job or {}).get("error") or "the queue did not grade this hand-in (no worker running?)"
    return _record_error(store, sub, exercise_ids, reason, grader_version, 0.0)
