"""The server's rows: upload jobs and their files, written only by the server process.

A job's life (column ``status``):

    received --enqueue--> queued --worker starts--> running --result--> done
                 (try 1)     ^                          |  \
                             +---- worker died, try 2 --+   +--> held (exercises not_graded)
                             |                          |          |
                             +---- held work sent again (a round) -+   error (after MAX_TRIES)

``create_job`` stores the files and the row in one transaction before the
server answers 202. ``record_done`` writes the attempt (``Store.record_report``)
and closes the round in one transaction, so a result is recorded exactly once.

**Held exercises.** An exercise the grader's machine could not grade
(``not_graded``: no OpenCL device that builds a kernel, a sandbox or worker
that cannot start) is not the student's: it is recorded nowhere and the job
keeps it in ``held`` (with ``held_reason``) instead of closing as ``done``;
so does an exercise of a kind the server's self-test refuses
(grader/queue/selftest.py), which is never sent. A held job is graded again
by the server itself (the collector starts a new *round*: only the held
exercises, ``grading``, the same upload), and what that round grades joins
the upload's one attempt, timed at the upload (``Store.record_report(into=)``);
a held round counts against no rate limit and gives no new submission
number. An upload none of whose exercises was graded in its first round is
``rate_free``: it counts against no rate limit either.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlite_utils

from grader.student.client.wire import where_of
from grader.student.course import Course, parse_time
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.store import Store, jobs, results, utc_now
from grader.student.store.clock import to_seconds

OPEN_STATES = jobs.OPEN  # a job not yet closed (done, held or error)
# An upload's receipt and report are stored to the millisecond: the estimate measures the gaps between them
# (grader/queue/estimate.py); whole seconds read 0 or 1 s for services under a second. Older rows, whole
# seconds, still read (and order among these: "10:00:05+00:00" < "10:00:05.300+00:00" as text and in time).
PRECISE = "milliseconds"
HELD = "held"  # closed for now: some exercises wait for the grader's machine (``held``); graded again by the server


class RateLimited(Exception):
    """The student has used up the course's uploads for the current window."""

    def __init__(self, retry_after: int, limit: int, minutes: float) -> None:
        super().__init__(f"rate limit: {limit} submissions per {minutes:g} minutes")
        self.retry_after = retry_after
        self.limit = limit
        self.minutes = minutes


class KeyReused(Exception):
    """An idempotency key was sent again with different files or exercises."""


@dataclass
class NewJob:
    """What create_job returns: the job row, and whether this request created it."""

    job: dict[str, Any]
    created: bool


def files_hash(files: dict[str, str], exercise_ids: list[str]) -> str:
    """sha256 over the sorted file names, contents and the exercise ids (the idempotency check)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        data = files[name].encode("utf-8")
        digest.update(name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    digest.update(json.dumps(exercise_ids).encode())
    return digest.hexdigest()


def create_job(
    store: Store, student: str, key: str, files: dict[str, str], exercise_ids: list[str], course: Course, now: datetime
) -> NewJob:
    """Store an upload (its row and files, one transaction) unless this key was seen; enforce the rate limit.

    Raises KeyReused (same key, different content) or RateLimited.
    """
    digest = files_hash(files, exercise_ids)
    with store.transaction() as db:
        existing = jobs.by_key(db, student, key)
        if existing:
            if existing["files_hash"] != digest:
                raise KeyReused(key)
            return NewJob(existing, False)
        since = (now - course.rate_window).isoformat(timespec=PRECISE)
        recent = jobs.rate_counted_since(db, student, since)  # an upload the grader's machine could not grade is free
        if len(recent) >= course.rate_submissions:
            frees_at = parse_time(recent[0]) + course.rate_window
            raise RateLimited(
                max(1, int((frees_at - now).total_seconds()) + 1), course.rate_submissions, course.rate_minutes
            )
        when = now.isoformat(timespec=PRECISE)
        job_id = jobs.insert(
            db,
            {
                "student": student,
                "idempotency_key": key,
                "files_hash": digest,
                "selectors": json.dumps(exercise_ids),
                "status": "received",
                "received_at": when,
                "tries": 0,
                "task_id": None,
                "worker": None,
                "attempt_id": None,
                "error": None,
                "finished_at": None,
            },
        )
        store_files(db, job_id, files)
        job = jobs.get(db, job_id)
    assert job is not None
    return NewJob(job, True)


def replayed_job(store: Store, student: str, key: str, files: dict[str, str]) -> dict[str, Any] | None:
    """The upload ``student`` already made with this Idempotency-Key and these files (a client's retry), else None;
    KeyReused when the key came with other files. A retry is answered whatever the chapters' state is now: the
    upload was taken when it came."""
    row = jobs.by_key(store.db, student, key)
    if row is None:
        return None
    if files_hash(files, exercise_ids(row)) != row["files_hash"]:
        raise KeyReused(key)
    return row


def job(store: Store, job_id: int) -> dict[str, Any] | None:
    """One job row, or None."""
    return jobs.get(store.db, job_id)


def jobs_of(store: Store, student: str | None, limit: int = 100) -> list[dict[str, Any]]:
    """The latest jobs of a student (all students: None), newest first."""
    return jobs.latest(store.db, student, limit)


def open_jobs(store: Store) -> list[dict[str, Any]]:
    """Jobs not yet done or failed, oldest first."""
    return jobs.open_jobs(store.db)


def store_files(db: sqlite_utils.Database, job_id: int, files: dict[str, str]) -> None:
    """A job's files, content-addressed: each distinct content once in ``blobs`` (by its sha256), the job's
    ``job_files`` rows naming it (store version 9)."""
    for name, text in sorted(files.items()):
        jobs.add_file(db, job_id, name, text.encode("utf-8"))


def job_files(store: Store, job_id: int) -> dict[str, str]:
    """The uploaded files of a job, name -> text."""
    return {name: data.decode("utf-8") for name, data in jobs.files(store.db, job_id).items()}


def keep_graded_upload(
    db: sqlite_utils.Database, student: str, files: dict[str, str], exercise_ids: list[str], attempt_id: int, when: str
) -> int:
    """Keep a hand-in graded outside the server (``grade batch``) as a closed upload: a ``jobs`` row done with its
    attempt, and its files (content-addressed), so ``grade rescore`` and ``grade similarity`` read it as they
    read the server's uploads. In the caller's transaction (the one recording the attempt); the job id."""
    digest = files_hash(files, exercise_ids)
    job_id = jobs.insert(
        db,
        {
            "student": student,
            "idempotency_key": f"batch:{digest}:{attempt_id}",
            "files_hash": digest,
            "selectors": json.dumps(exercise_ids),
            "status": "done",
            "received_at": when,
            "tries": 0,
            "task_id": None,
            "worker": "grade batch",
            "attempt_id": attempt_id,
            "error": None,
            "finished_at": when,
        },
    )
    store_files(db, job_id, files)
    return job_id


def exercise_ids(job_row: dict[str, Any]) -> list[str]:
    """The exercise ids of the upload (every one it asked for)."""
    return list(json.loads(job_row["selectors"]))


def _ids(text: str | None) -> list[str]:
    return list(json.loads(text)) if text else []


def held_ids(job_row: dict[str, Any]) -> list[str]:
    """The exercises of a job held for the grader's machine (none sent in the current round)."""
    return _ids(job_row.get("held"))


def grading_ids(job_row: dict[str, Any]) -> list[str]:
    """The exercises the job's current round grades (every one of the upload in its first round)."""
    return _ids(job_row.get("grading")) or exercise_ids(job_row)


def tries_in_round(job_row: dict[str, Any]) -> range:
    """The try numbers of the current round (their results count; an earlier round's never do)."""
    return range(int(job_row.get("first_try") or 1), int(job_row["tries"] or 0) + 1)


def mark_queued(store: Store, job_id: int, attempt: int, task: str, note: str | None = None) -> None:
    """Note that try ``attempt`` of a job's current round is on the queue as ``task``."""
    with store.transaction() as db:
        jobs.mark_queued(db, job_id, attempt, task, note)


def start_round(
    store: Store, job_row: dict[str, Any], send: list[str], keep: list[str], reason: str | None, attempt: int, task: str
) -> None:
    """A round is on the queue as ``task`` (try ``attempt``): it grades ``send``; ``keep`` stays held (``reason``).

    The upload's first round comes from ``received``; a held job's next round from ``held`` (one more regrade).
    """
    regrade = 1 if job_row["status"] == HELD else 0
    with store.transaction() as db:
        jobs.start_round(
            db,
            job_row["id"],
            attempt,
            task,
            json.dumps(send),
            json.dumps(keep) if keep else None,
            reason if keep else None,
            regrade,
        )


def hold(store: Store, job_row: dict[str, Any], held: list[str], reason: str) -> None:
    """Hold every exercise ``held`` of a job none of whose exercises goes to a worker now (its kinds refused).

    An upload held whole in its first round counts against no rate limit.
    """
    with store.transaction() as db:
        jobs.hold(db, job_row["id"], json.dumps(held), reason, utc_now())


def held_jobs(store: Store) -> list[dict[str, Any]]:
    """The jobs held now, oldest first."""
    return jobs.held(store.db)


def release_held(store: Store, job_id: int) -> None:
    """Close a held job for good as ``done`` (its ``held`` list kept): ``grade batch --queue`` grades those
    exercises in its next run, as new jobs, not this one."""
    with store.transaction() as db:
        jobs.release_held(db, job_id, utc_now())


def mark_running(store: Store, job_id: int, worker: str) -> None:
    """Note that a worker (``host:pid``) began the job's current try."""
    with store.transaction() as db:
        jobs.mark_running(db, job_id, worker)


MAX_REASON = 300  # characters of a held reason (the student reads it in one line)
DOCTOR = "`grade doctor` on the worker shows more"


def held_reason(message: str) -> str:
    """Why exercises are held, in one line of at most MAX_REASON characters, naming `grade doctor`."""
    line = " ".join(str(message or "the grader's machine could not grade them").split())
    if len(line) > MAX_REASON:
        line = line[: MAX_REASON - 3] + "..."
    return line if "grade doctor" in line else f"{line} ({DOCTOR})"


class _AlreadyRecorded(Exception):
    """Raised inside record_done's transaction to roll it back when the job was recorded before."""


@dataclass
class Recorded:
    """What record_done did: the upload's attempt (None while nothing of it is graded) and what stays held."""

    attempt_id: int | None
    held: list[str]
    reason: str | None


def record_done(store: Store, job_row: dict[str, Any], report: GradeReport, grader_version: str) -> Recorded | None:
    """Record a round's result and close the round, in one transaction; None when it was recorded already.

    The graded exercises join the upload's attempt (made by its first graded
    round), timed at the upload (deadlines judge the upload, not the queue). The
    job is ``done``, or ``held`` while any exercise is: one the round could not
    grade (``not_graded``) or one held back from it.
    """
    held = held_ids(job_row) + [e.id for e in report.not_graded]
    reason = held_reason(report.not_graded[0].message) if report.not_graded else job_row.get("held_reason")
    nothing = not report.graded_exercises

    def mark(db: sqlite_utils.Database, attempt_id: int | None) -> None:
        if held:
            closed = jobs.close_round_held(db, job_row["id"], attempt_id, json.dumps(held), reason, utc_now(), nothing)
        else:
            closed = jobs.close_round_done(db, job_row["id"], attempt_id, utc_now(PRECISE))
        if not closed:
            raise _AlreadyRecorded()

    into = job_row.get("attempt_id")
    try:
        if nothing:  # no row to write: the job alone changes (no empty attempt)
            with store.transaction() as db:
                mark(db, into)
            return Recorded(into, held, reason if held else None)
        attempt_id = store.record_report(
            report, grader_version, started_at=to_seconds(job_row["received_at"]), also=mark, into=into
        )
    except _AlreadyRecorded:
        return None
    return Recorded(attempt_id, held, reason if held else None)


def record_error(store: Store, job_id: int, reason: str) -> None:
    """Mark a job as failed for good, with the reason the student will read."""
    with store.transaction() as db:
        jobs.mark_error(db, job_id, reason, utc_now())


def position_in_queue(store: Store, job_row: dict[str, Any]) -> int:
    """How many open jobs were received before this one (0: next or grading)."""
    return jobs.waiting_before(store.db, job_row["id"])


def report_of(store: Store, job_row: dict[str, Any]) -> GradeReport | None:
    """The recorded report of a done (or held) job, rebuilt from its attempt's rows in force (None: not yet).

    After ``grade rescore`` that is the latest grading of the upload; the
    earlier rows stay in the store (``superseded_by``). A held exercise is in
    it as ``not_graded`` with the reason it is held, in the upload's order.
    What its student is served: the hidden checks' full pictures stay out."""
    if job_row["status"] not in ("done", HELD):
        return None
    held = held_ids(job_row)
    if job_row["attempt_id"] is None and not held:
        return None
    exercises = [] if job_row["attempt_id"] is None else _recorded_exercises(store, int(job_row["attempt_id"]))
    exercises += [held_exercise(i, job_row.get("held_reason") or "") for i in held]
    if held or job_row.get("regrades"):  # graded in rounds, or some not yet: shown in the upload's order
        order = {ex_id: n for n, ex_id in enumerate(exercise_ids(job_row))}
        exercises.sort(key=lambda e: order.get(e.id, len(order)))
    files = "" if job_row["attempt_id"] is None else results.files_hash_of(store.db, int(job_row["attempt_id"]))
    return GradeReport(job_row["student"], exercises, files or "")


def held_exercise(exercise_id: str, reason: str) -> ExerciseResult:
    """A held exercise as the report shows it: ``not_graded``, no score, the reason it waits."""
    from grader.student.engine.checks import CHECKS

    return ExerciseResult(
        exercise_id,
        "not_graded",
        0.0,
        float(CHECKS[exercise_id].max_score),
        [],
        f"held: the server grades it by itself once its machine is fixed ({reason})",
    )


def _recorded_exercises(store: Store, attempt_id: int) -> list[ExerciseResult]:
    """The exercises recorded in an attempt, from its rows in force."""
    rows = results.in_force_of_attempt(
        store.db, attempt_id
    )  # the rows in force (grade rescore: grader/term/rescore.py)
    return [exercise_of(store, row) for row in rows]


def rebuild_report(
    store: Store, student: str, rows: list[dict[str, Any]], files_hash: str, instructor: bool = False
) -> GradeReport:
    """The report of one upload from its recorded submission rows and their checks; ``instructor`` keeps the
    hidden checks' full pictures (``CheckResult.instructor_figure``: the dashboard's, never a student's)."""
    return GradeReport(student, [exercise_of(store, row, instructor) for row in rows], files_hash)


def exercise_of(store: Store, row: dict[str, Any], instructor: bool = False) -> ExerciseResult:
    """One recorded submission row and its checks as an exercise result (``instructor``: with the full
    pictures of hidden checks)."""
    checks = [
        CheckResult(
            c["name"],
            bool(c["passed"]),
            c["score"],
            c["max_score"],
            c["message"] or "",
            c["misconception"],
            c.get("figure"),
            c.get("also") or [],
            c.get("instructor_figure") if instructor else None,
            where_of(c),
        )
        for c in store.check_results(row["id"])
    ]
    return ExerciseResult(
        row["exercise"],
        row["status"],
        row["score"],
        row["max_score"],
        checks,
        row["message"] or "",
        row["duration"] or 0.0,
        row["output"] or "",
    )


MAX_ROW_ID = 2**63 - 1  # SQLite's largest integer: an id past it is refused before any query (OverflowError)


def row_id(value: Any) -> int | None:
    """A row id from a path segment or a JSON body: an integer from 1 to MAX_ROW_ID (digits only, at most 19 of
    them, when text), else None. Booleans, floats, 0, negatives and 2**63 are not ids."""
    if isinstance(value, str):
        if not (value.isascii() and value.isdigit() and len(value) <= 19):
            return None
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ROW_ID:
        return None
    return value


# --- what the estimate of an open upload reads (grader/queue/estimate.py) -------------------------------------


def recent_done(store: Store, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` uploads graded (newest first): id, selectors, worker, received_at, finished_at and their
    attempt's grading time (duration)."""
    return jobs.recent_done(store.db, limit)
