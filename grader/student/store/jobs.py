"""The course server's uploads: ``jobs`` (one per upload, its grading's state), ``job_files`` and ``blobs`` (each
distinct file content once). The rules of a job's life are grader/queue/records.py's; its queries are here."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from grader.student.store import students

if TYPE_CHECKING:
    import sqlite_utils


def submission_numbers(db: sqlite_utils.Database, student: str) -> dict[int, int]:
    """attempt id -> the id of the job (the server submission) that recorded it, for one student."""
    return {
        int(r["attempt_id"]): int(r["id"])
        for r in db.query("SELECT id, attempt_id FROM jobs WHERE student = ? AND attempt_id IS NOT NULL", [student])
    }


OPEN = ("received", "queued", "running")  # a job not yet closed (done, held or error)


def get(db: sqlite_utils.Database, job_id: int) -> dict[str, Any] | None:
    """One job row, or None."""
    rows = list(db.query("SELECT * FROM jobs WHERE id = ?", [job_id]))
    return rows[0] if rows else None


def by_key(db: sqlite_utils.Database, student: str, key: str) -> dict[str, Any] | None:
    """The job a student sent with this idempotency key, or None."""
    rows = list(db.query("SELECT * FROM jobs WHERE student = ? AND idempotency_key = ?", [student, key]))
    return rows[0] if rows else None


def rate_counted_since(db: sqlite_utils.Database, student: str, since: str) -> list[str]:
    """The upload times after ``since`` of a student's uploads that count against the rate limit (not
    ``rate_free``), oldest first."""
    return [
        r["received_at"]
        for r in db.query(
            "SELECT received_at FROM jobs WHERE student = ? AND received_at > ? AND rate_free = 0 ORDER BY received_at",
            [student, since],
        )
    ]


def insert(db: sqlite_utils.Database, row: dict[str, Any]) -> int:
    """Insert a job row (its student's ``students`` row first: a job's student is a foreign key); its id."""
    students.ensure(db, row["student"], row["received_at"])
    job_id = db.table("jobs").insert(row).last_pk
    assert job_id is not None  # an insert sets last_pk
    return int(job_id)


def add_file(db: sqlite_utils.Database, job_id: int, name: str, data: bytes) -> None:
    """One file of a job, content-addressed: its content once in ``blobs`` (by its sha256), the job's
    ``job_files`` row naming it (store version 9)."""
    digest = hashlib.sha256(data).hexdigest()
    db.execute("INSERT OR IGNORE INTO blobs (sha256, content) VALUES (?, ?)", [digest, data])
    db.execute("INSERT INTO job_files (job_id, name, sha256) VALUES (?, ?, ?)", [job_id, name, digest])


# A job_files row's content: its blob, or (rows written before store version 9) its own column.
FILE_CONTENT = "COALESCE(b.content, f.content)"
BLOB_OF_FILE = "LEFT JOIN blobs b ON b.sha256 = f.sha256"  # joined to job_files f


def files(db: sqlite_utils.Database, job_id: int) -> dict[str, bytes]:
    """The uploaded files of a job, name -> content."""
    rows = db.query(
        f"SELECT f.name, {FILE_CONTENT} AS content FROM job_files f {BLOB_OF_FILE} WHERE f.job_id = ? ORDER BY f.name",
        [job_id],
    )
    return {r["name"]: bytes(r["content"]) for r in rows}


def uploads_of_file(db: sqlite_utils.Database, name: str) -> list[dict[str, Any]]:
    """Every upload holding a file called ``name``, oldest first: student, id (the job's), content (bytes)."""
    return list(
        db.query(
            f"SELECT j.student, j.id, {FILE_CONTENT} AS content FROM jobs j JOIN job_files f ON f.job_id = j.id "
            f"{BLOB_OF_FILE} WHERE f.name = ? ORDER BY j.id",
            [name],
        )
    )


def latest(db: sqlite_utils.Database, student: str | None, limit: int) -> list[dict[str, Any]]:
    """The latest jobs of a student (all students: None), newest first."""
    where, params = ("WHERE student = ?", [student]) if student is not None else ("", [])
    return list(db.query(f"SELECT * FROM jobs {where} ORDER BY id DESC LIMIT ?", [*params, limit]))


def open_jobs(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """Jobs not yet closed (:data:`OPEN`), oldest first."""
    marks = ",".join("?" for _ in OPEN)
    return list(db.query(f"SELECT * FROM jobs WHERE status IN ({marks}) ORDER BY id", list(OPEN)))


def held(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """The jobs held now, oldest first."""
    return list(db.query("SELECT * FROM jobs WHERE status = 'held' ORDER BY id"))


def mark_queued(db: sqlite_utils.Database, job_id: int, attempt: int, task: str, note: str | None) -> None:
    """An open job's try ``attempt`` is on the queue as ``task`` (``note``, when given, replaces its error)."""
    db.execute(
        "UPDATE jobs SET status = 'queued', tries = ?, task_id = ?, error = COALESCE(?, error) "
        "WHERE id = ? AND status IN ('received', 'queued', 'running')",
        [attempt, task, note, job_id],
    )


def start_round(
    db: sqlite_utils.Database,
    job_id: int,
    attempt: int,
    task: str,
    grading: str,
    held: str | None,
    reason: str | None,
    regrade: int,
) -> None:
    """A received or held job's round is on the queue as ``task`` from try ``attempt`` (grading and held: JSON
    lists; ``regrade`` 1 counts one more round started again)."""
    db.execute(
        "UPDATE jobs SET status = 'queued', tries = ?, first_try = ?, task_id = ?, grading = ?, held = ?, "
        "held_reason = ?, regrades = regrades + ?, error = NULL WHERE id = ? AND status IN ('received', 'held')",
        [attempt, attempt, task, grading, held, reason, regrade, job_id],
    )


def hold(db: sqlite_utils.Database, job_id: int, held: str, reason: str, when: str) -> None:
    """Hold a job's exercises (``held``, a JSON list) for ``reason``; an upload held whole in its first round
    becomes ``rate_free``."""
    db.execute(
        "UPDATE jobs SET status = 'held', held = ?, held_reason = ?, held_at = ?, grading = NULL, "
        "rate_free = CASE WHEN attempt_id IS NULL AND regrades = 0 THEN 1 ELSE rate_free END "
        "WHERE id = ? AND status IN ('received', 'queued', 'running', 'held')",
        [held, reason, when, job_id],
    )


def release_held(db: sqlite_utils.Database, job_id: int, when: str) -> None:
    """Close a held job as ``done`` (its ``held`` list kept)."""
    db.execute("UPDATE jobs SET status = 'done', finished_at = ? WHERE id = ? AND status = 'held'", [when, job_id])


def mark_running(db: sqlite_utils.Database, job_id: int, worker: str) -> None:
    """A queued job's current try is running on ``worker`` (``host:pid``)."""
    db.execute("UPDATE jobs SET status = 'running', worker = ? WHERE id = ? AND status = 'queued'", [worker, job_id])


def close_round_held(
    db: sqlite_utils.Database,
    job_id: int,
    attempt_id: int | None,
    held: str,
    reason: str | None,
    when: str,
    nothing_graded: bool,
) -> bool:
    """Close an open job's round as ``held`` (``held`` a JSON list); an upload none of whose exercises was ever
    graded becomes ``rate_free``. Whether the job was open (False: closed before, nothing changed)."""
    cursor = db.execute(
        "UPDATE jobs SET status = 'held', attempt_id = ?, held = ?, held_reason = ?, held_at = ?, "
        "grading = NULL, rate_free = CASE WHEN ? AND attempt_id IS NULL AND regrades = 0 THEN 1 "
        "ELSE rate_free END WHERE id = ? AND status IN ('received', 'queued', 'running')",
        [attempt_id, held, reason, when, int(nothing_graded), job_id],
    )
    return cursor.rowcount == 1


def close_round_done(db: sqlite_utils.Database, job_id: int, attempt_id: int | None, when: str) -> bool:
    """Close an open job as ``done`` with its attempt. Whether the job was open (False: nothing changed)."""
    cursor = db.execute(
        "UPDATE jobs SET status = 'done', attempt_id = ?, held = NULL, held_reason = NULL, grading = NULL, "
        "finished_at = ? WHERE id = ? AND status IN ('received', 'queued', 'running')",
        [attempt_id, when, job_id],
    )
    return cursor.rowcount == 1


def mark_error(db: sqlite_utils.Database, job_id: int, reason: str, when: str) -> None:
    """Close an open job as failed for good, with the reason."""
    db.execute(
        "UPDATE jobs SET status = 'error', error = ?, finished_at = ? "
        "WHERE id = ? AND status IN ('received', 'queued', 'running')",
        [reason, when, job_id],
    )


def waiting_before(db: sqlite_utils.Database, job_id: int) -> int:
    """How many jobs received or queued (not yet running) came before job ``job_id``."""
    return int(
        next(
            iter(db.query("SELECT COUNT(*) AS n FROM jobs WHERE status IN ('received', 'queued') AND id < ?", [job_id]))
        )["n"]
    )


def recent_done(db: sqlite_utils.Database, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` uploads graded (newest first): id, selectors, worker, received_at, finished_at and their
    attempt's grading time (duration)."""
    return list(
        db.query(
            "SELECT jobs.id AS id, jobs.selectors AS selectors, jobs.worker AS worker, jobs.received_at AS received_at, "
            "jobs.finished_at AS finished_at, attempts.duration AS duration FROM jobs "
            "JOIN attempts ON attempts.id = jobs.attempt_id WHERE jobs.status = 'done' "
            "ORDER BY jobs.finished_at DESC, jobs.id DESC LIMIT ?",
            [limit],
        )
    )


def done_of(db: sqlite_utils.Database, student: str, job_id: int | None = None) -> list[dict[str, Any]]:
    """A student's graded (done) jobs, newest first; only job ``job_id`` when given."""
    params: list[Any] = [student]
    where = "student = ? AND status = 'done'"
    if job_id is not None:
        where += " AND id = ?"
        params.append(job_id)
    return list(db.query(f"SELECT * FROM jobs WHERE {where} ORDER BY id DESC", params))


def graded(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """Every graded upload (done, with its attempt), oldest first."""
    return list(db.query("SELECT * FROM jobs WHERE status = 'done' AND attempt_id IS NOT NULL ORDER BY id"))
