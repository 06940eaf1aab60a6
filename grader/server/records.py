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
        db["job_files"].insert_all(
            {"job_id": job_id, "name": name, "content": text.encode("utf-8")} for name, text in files.items()
        )
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


def job_files(store: Store, job_id: int) -> dict[str, str]:
    """The uploaded files of a job, name -> text."""
    rows = store.db.query("SELECT name, content FROM job_files WHERE job_id = ? ORDER BY name", [job_id])
    return {r["name"]: bytes(r["content"]).decode("utf-8") for r in rows}


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
    earlier rows stay in the store (``superseded_by``). What its student is
    served: the hidden checks' full pictures stay out."""
    if job_row["status"] != "done" or job_row["attempt_id"] is None:
        return None
    rows = store.db.query("SELECT * FROM submissions WHERE attempt_id = ? AND superseded_by IS NULL ORDER BY "
                          "id", [job_row["attempt_id"]])  # the rows in force (grade rescore: grader/term/rescore.py)
    attempt = next(iter(store.db.query("SELECT files_hash FROM attempts WHERE id = ?", [job_row["attempt_id"]])))
    return rebuild_report(store, job_row["student"], list(rows), attempt["files_hash"] or "")


def rebuild_report(store: Store, student: str, rows: list[dict[str, Any]], files_hash: str,
                   instructor: bool = False) -> GradeReport:
    """The report of one upload from its recorded submission rows and their checks; ``instructor`` keeps the
    hidden checks' full pictures (``CheckResult.instructor_figure``: the dashboard's, never a student's)."""
    exercises = []
    for row in rows:
        checks = [
            CheckResult(c["name"], bool(c["passed"]), c["score"], c["max_score"], c["message"] or "",
                        c["misconception"], c.get("figure"), c.get("also") or [],
                        c.get("instructor_figure") if instructor else None)
            for c in store.check_results(row["id"])
        ]
        exercises.append(ExerciseResult(
            row["exercise"], row["status"], row["score"], row["max_score"], checks,
            row["message"] or "", row["duration"] or 0.0, row["output"] or "",
        ))
    return GradeReport(student, exercises, files_hash)
