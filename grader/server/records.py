"""The server's rows: upload jobs and their files, written only by the server process.

A job's life (column ``status``):

    received --enqueue--> queued --worker starts--> running --result--> done
                 (try 1)     ^                          |
                             +---- worker died, try 2 --+--> error (after MAX_TRIES)

``create_job`` stores the files and the row in one transaction before the
server answers 202. ``record_done`` writes the attempt (``Store.record_report``)
and marks the job done in one transaction, so a result is recorded exactly once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlite_utils

from grader.student.course import Course, parse_time
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.store import Store, utc_now

OPEN_STATES = ("received", "queued", "running")


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


def _job(db: sqlite_utils.Database, job_id: int) -> dict[str, Any] | None:
    rows = list(db.query("SELECT * FROM jobs WHERE id = ?", [job_id]))
    return rows[0] if rows else None


def create_job(store: Store, student: str, key: str, files: dict[str, str], exercise_ids: list[str],
               course: Course, now: datetime) -> NewJob:
    """Store an upload (its row and files, one transaction) unless this key was seen; enforce the rate limit.

    Raises KeyReused (same key, different content) or RateLimited.
    """
    digest = files_hash(files, exercise_ids)
    with store.transaction() as db:
        existing = list(db.query("SELECT * FROM jobs WHERE student = ? AND idempotency_key = ?", [student, key]))
        if existing:
            if existing[0]["files_hash"] != digest:
                raise KeyReused(key)
            return NewJob(existing[0], False)
        since = (now - course.rate_window).isoformat(timespec="seconds")
        recent = [r["received_at"] for r in db.query(
            "SELECT received_at FROM jobs WHERE student = ? AND received_at > ? ORDER BY received_at",
            [student, since])]
        if len(recent) >= course.rate_submissions:
            frees_at = parse_time(recent[0]) + course.rate_window
            raise RateLimited(max(1, int((frees_at - now).total_seconds()) + 1),
                              course.rate_submissions, course.rate_minutes)
        when = now.isoformat(timespec="seconds")
        db.execute("INSERT OR IGNORE INTO students (name, created_at) VALUES (?, ?)", [student, when])
        job_id = db["jobs"].insert({
            "student": student, "idempotency_key": key, "files_hash": digest,
            "selectors": json.dumps(exercise_ids), "status": "received", "received_at": when,
            "tries": 0, "task_id": None, "worker": None, "attempt_id": None, "error": None, "finished_at": None,
        }).last_pk
        store_files(db, int(job_id), files)
        job = _job(db, int(job_id))
    assert job is not None
    return NewJob(job, True)


def job(store: Store, job_id: int) -> dict[str, Any] | None:
    """One job row, or None."""
    return _job(store.db, job_id)


def jobs_of(store: Store, student: str | None, limit: int = 100) -> list[dict[str, Any]]:
    """The latest jobs of a student (all students: None), newest first."""
    where, params = ("WHERE student = ?", [student]) if student is not None else ("", [])
    return list(store.db.query(f"SELECT * FROM jobs {where} ORDER BY id DESC LIMIT ?", [*params, limit]))


def open_jobs(store: Store) -> list[dict[str, Any]]:
    """Jobs not yet done or failed, oldest first."""
    marks = ",".join("?" for _ in OPEN_STATES)
    return list(store.db.query(f"SELECT * FROM jobs WHERE status IN ({marks}) ORDER BY id", list(OPEN_STATES)))


def store_files(db: sqlite_utils.Database, job_id: int, files: dict[str, str]) -> None:
    """A job's files, content-addressed: each distinct content once in ``blobs`` (by its sha256), the job's
    ``job_files`` rows naming it (store version 8)."""
    for name, text in sorted(files.items()):
        data = text.encode("utf-8")
        digest = hashlib.sha256(data).hexdigest()
        db.execute("INSERT OR IGNORE INTO blobs (sha256, content) VALUES (?, ?)", [digest, data])
        db.execute("INSERT INTO job_files (job_id, name, sha256) VALUES (?, ?, ?)", [job_id, name, digest])


# A job_files row's content: its blob, or (rows written before store version 8) its own column.
FILE_CONTENT = "COALESCE(b.content, f.content)"
BLOB_OF_FILE = "LEFT JOIN blobs b ON b.sha256 = f.sha256"  # joined to job_files f


def job_files(store: Store, job_id: int) -> dict[str, str]:
    """The uploaded files of a job, name -> text."""
    rows = store.db.query(f"SELECT f.name, {FILE_CONTENT} AS content FROM job_files f {BLOB_OF_FILE} "
                          "WHERE f.job_id = ? ORDER BY f.name", [job_id])
    return {r["name"]: bytes(r["content"]).decode("utf-8") for r in rows}


def keep_graded_upload(db: sqlite_utils.Database, student: str, files: dict[str, str], exercise_ids: list[str],
                       attempt_id: int, when: str) -> int:
    """Keep a hand-in graded outside the server (``grade batch``) as a closed upload: a ``jobs`` row done with its
    attempt, and its files (content-addressed), so ``grade rescore`` and ``grade similarity`` read it as they
    read the server's uploads. In the caller's transaction (the one recording the attempt); the job id."""
    digest = files_hash(files, exercise_ids)
    job_id = int(db["jobs"].insert({
        "student": student, "idempotency_key": f"batch:{digest}:{attempt_id}", "files_hash": digest,
        "selectors": json.dumps(exercise_ids), "status": "done", "received_at": when, "tries": 0, "task_id": None,
        "worker": "grade batch", "attempt_id": attempt_id, "error": None, "finished_at": when,
    }).last_pk)
    store_files(db, job_id, files)
    return job_id


def exercise_ids(job_row: dict[str, Any]) -> list[str]:
    """The exercise ids a job grades."""
    return list(json.loads(job_row["selectors"]))


def mark_queued(store: Store, job_id: int, attempt: int, task: str, note: str | None = None) -> None:
    """Note that try ``attempt`` of a job is on the queue as ``task``."""
    with store.transaction() as db:
        db.execute(
            "UPDATE jobs SET status = 'queued', tries = ?, task_id = ?, error = COALESCE(?, error) "
            "WHERE id = ? AND status IN ('received', 'queued', 'running')",
            [attempt, task, note, job_id],
        )


def mark_running(store: Store, job_id: int, worker: str) -> None:
    """Note that a worker (``host:pid``) began the job's current try."""
    with store.transaction() as db:
        db.execute("UPDATE jobs SET status = 'running', worker = ? WHERE id = ? AND status = 'queued'",
                   [worker, job_id])


class _AlreadyRecorded(Exception):
    """Raised inside record_done's transaction to roll it back when the job was recorded before."""


def record_done(store: Store, job_row: dict[str, Any], report: GradeReport, grader_version: str) -> int | None:
    """Record the graded attempt and mark the job done, in one transaction; None when it was done already.

    The attempt's time is the upload time (deadlines judge the upload, not the queue).
    """

    def mark(db: sqlite_utils.Database, attempt_id: int) -> None:
        cursor = db.execute(
            "UPDATE jobs SET status = 'done', attempt_id = ?, finished_at = ? "
            "WHERE id = ? AND status IN ('received', 'queued', 'running')",
            [attempt_id, utc_now(), job_row["id"]],
        )
        if cursor.rowcount != 1:
            raise _AlreadyRecorded()

    try:
        return store.record_report(report, grader_version, started_at=job_row["received_at"], also=mark)
    except _AlreadyRecorded:
        return None


def record_error(store: Store, job_id: int, reason: str) -> None:
    """Mark a job as failed for good, with the reason the student will read."""
    with store.transaction() as db:
        db.execute(
            "UPDATE jobs SET status = 'error', error = ?, finished_at = ? "
            "WHERE id = ? AND status IN ('received', 'queued', 'running')",
            [reason, utc_now(), job_id],
        )


def position_in_queue(store: Store, job_row: dict[str, Any]) -> int:
    """How many open jobs were received before this one (0: next or grading)."""
    return int(next(iter(store.db.query(
        "SELECT COUNT(*) AS n FROM jobs WHERE status IN ('received', 'queued') AND id < ?", [job_row["id"]]
    )))["n"])



def report_of(store: Store, job_row: dict[str, Any]) -> GradeReport | None:
    """The recorded report of a done job, rebuilt from its attempt's rows in force (None: not done).

    After ``grade rescore`` that is the latest grading of the upload; the
    earlier rows stay in the store (``superseded_by``)."""
    if job_row["status"] != "done" or job_row["attempt_id"] is None:
        return None
    exercises = []
    for row in store.db.query("SELECT * FROM submissions WHERE attempt_id = ? AND superseded_by IS NULL ORDER BY "
                              "id", [job_row["attempt_id"]]):  # the rows in force (grade rescore: grader/term/rescore.py)
        checks = [
            CheckResult(c["name"], bool(c["passed"]), c["score"], c["max_score"], c["message"] or "",
                        c["misconception"], c.get("figure"), c.get("also") or [])
            for c in store.check_results(row["id"])
        ]
        exercises.append(ExerciseResult(
            row["exercise"], row["status"], row["score"], row["max_score"], checks,
            row["message"] or "", row["duration"] or 0.0, row["output"] or "",
        ))
    attempt = next(iter(store.db.query("SELECT files_hash FROM attempts WHERE id = ?", [job_row["attempt_id"]])))
    return GradeReport(job_row["student"], exercises, attempt["files_hash"] or "")


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
