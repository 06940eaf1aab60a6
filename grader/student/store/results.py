"""The graded attempts: ``attempts`` (one per grading), ``submissions`` (one per graded exercise) and
``check_results`` (one per check), written together by :func:`record` and read back here."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from grader.student import jsonsafe
from grader.student.engine.model import ExerciseResult, GradeReport, exercise_seed
from grader.student.store import students

if TYPE_CHECKING:
    import sqlite_utils


def figure_text(figure: dict[str, Any] | None) -> str | None:
    """A figure as the compact JSON stored in ``check_results.figure`` (None stays NULL); inf and NaN are kept in
    the marked form of :mod:`grader.student.jsonsafe`."""
    return None if figure is None else jsonsafe.dumps(figure, separators=(",", ":"))


def also_of_text(text: str | None) -> list[str]:
    """The stored further mistakes of a check back ([] for NULL or anything that is not a list of ids)."""
    try:
        ids = json.loads(text) if text else []
    except ValueError:
        return []
    return [str(i) for i in ids] if isinstance(ids, list) else []


def figure_of_text(text: str | None) -> dict[str, Any] | None:
    """The stored figure back; None for NULL or anything that is not a JSON object (never an exception)."""
    if not text:
        return None
    try:
        figure = jsonsafe.loads(text)
    except (ValueError, RecursionError):
        return None
    return figure if isinstance(figure, dict) else None


def record(
    db: sqlite_utils.Database,
    report: GradeReport,
    grader_version: str,
    when: str,
    also: Callable[[sqlite_utils.Database, int], None] | None = None,
    into: int | None = None,
) -> int:
    """Record a whole graded attempt inside the caller's transaction; return the attempt id (see
    :meth:`grader.student.store.Store.record_report`)."""
    duration = sum(e.duration for e in report.exercises)
    students.ensure(db, report.student, when)
    if into is None:
        attempt_id = (
            db.table("attempts")
            .insert(
                {
                    "student": report.student,
                    "started_at": when,
                    "duration": duration,
                    "grader_version": grader_version,
                    "files_hash": report.files_hash,
                    "score": report.score,
                    "max_score": report.max_score,
                }
            )
            .last_pk
        )
    else:
        attempt_id = into
        db.execute(
            "UPDATE attempts SET score = score + ?, max_score = max_score + ?, duration = duration + ? WHERE id = ?",
            [report.score, report.max_score, duration, into],
        )
    assert attempt_id is not None  # an insert sets last_pk
    for ex in report.graded_exercises:
        submission_id = (
            db.table("submissions")
            .insert(
                {
                    "attempt_id": attempt_id,
                    "student": report.student,
                    "exercise": ex.id,
                    "score": ex.score,
                    "max_score": ex.max_score,
                    "status": ex.status,
                    "started_at": when,
                    "duration": ex.duration,
                    "grader_version": grader_version,
                    "files_hash": report.files_hash,
                    "seed": str(exercise_seed(report.student, ex.id)),
                    "message": ex.message,
                    "output": ex.output,
                }
            )
            .last_pk
        )
        db.table("check_results").insert_all(
            {
                "submission_id": submission_id,
                "name": c.name,
                "passed": int(c.passed),
                "score": c.score,
                "max_score": c.max_score,
                "message": c.message,
                "misconception": c.misconception,
                # the column exists from version 7 on; a report without pictures never names it
                **({"figure": figure_text(c.figure)} if c.figure is not None else {}),
                **({"instructor_figure": figure_text(c.instructor_figure)} if c.instructor_figure is not None else {}),
                **({"also": json.dumps(list(c.also))} if c.also else {}),
                **({"location": json.dumps(c.to_json()["where"])} if c.where else {}),
            }
            for c in ex.checks
        )
    if also is not None:
        also(db, int(attempt_id))
    return int(attempt_id)


def attempts(db: sqlite_utils.Database, student: str | None = None) -> list[dict[str, Any]]:
    """Attempt rows (id, student, started_at, duration, grader_version, files_hash, score, max_score), oldest
    first."""
    where, params = ("WHERE student = ?", [student]) if student is not None else ("", [])
    return list(db.query(f"SELECT * FROM attempts {where} ORDER BY id", params))


def submissions(
    db: sqlite_utils.Database, student: str | None = None, exercise: str | None = None, superseded: bool = False
) -> list[dict[str, Any]]:
    """Submission rows, oldest upload first (then in the order recorded), optionally for one student and/or
    exercise. (A server's held exercise is recorded later, timed at its upload: it takes the upload's place.)

    Rows graded again by ``grade rescore`` are left out (their successor is
    in force) unless ``superseded``.
    """
    clauses: list[str] = [] if superseded else ["superseded_by IS NULL"]
    params: list[Any] = []
    if student is not None:
        clauses.append("student = ?")
        params.append(student)
    if exercise is not None:
        clauses.append("exercise = ?")
        params.append(exercise)
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    return list(db.query(f"SELECT * FROM submissions {where} ORDER BY started_at, id", params))


def check_results(db: sqlite_utils.Database, submission_id: int) -> list[dict[str, Any]]:
    """The check rows of a submission in grading order; ``passed`` as bool, ``figure``, ``instructor_figure`` and
    ``where`` (the stored ``location``) parsed dicts (None when none or unreadable), ``also`` a list."""
    rows = db.query("SELECT * FROM check_results WHERE submission_id = ? ORDER BY id", [submission_id])
    return [
        dict(
            row,
            passed=bool(row["passed"]),
            figure=figure_of_text(row.get("figure")),
            also=also_of_text(row.get("also")),
            instructor_figure=figure_of_text(row.get("instructor_figure")),
            where=figure_of_text(row.get("location")),
        )
        for row in rows
    ]


def current_mistakes(db: sqlite_utils.Database, student: str) -> list[dict[str, Any]]:
    """(exercise, misconception) named by the failing checks of a student's current (unsuperseded, not passed)
    submissions, in check order: what "practice this" offers."""
    return list(
        db.query(
            "SELECT s.exercise, c.misconception FROM check_results c JOIN submissions s ON s.id = c.submission_id "
            "WHERE s.student = ? AND c.passed = 0 AND c.misconception IS NOT NULL AND c.misconception != '' "
            "AND s.status != 'passed' AND s.superseded_by IS NULL ORDER BY c.id",
            [student],
        )
    )


def submission_rows(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """Every submission's scoring columns (no output), oldest upload first: one query for a whole class."""
    return list(
        db.query(
            "SELECT id, attempt_id, student, exercise, score, max_score, status, started_at, message, rescoring_id "
            "FROM submissions WHERE superseded_by IS NULL ORDER BY started_at, id"
        )
    )


def diagnosed_mistakes(
    db: sqlite_utils.Database, student: str | None = None, exercise: str | None = None
) -> list[dict[str, Any]]:
    """(submission_id, misconception) of every failing check with a named mistake, in check order
    (of one student and/or one exercise when given)."""
    where, params = "", list[str]()
    if student is not None:
        where, params = where + " AND s.student = ?", params + [student]
    if exercise is not None:
        where, params = where + " AND s.exercise = ?", params + [exercise]
    return list(
        db.query(
            "SELECT c.submission_id, c.misconception FROM check_results c JOIN submissions s "
            "ON s.id = c.submission_id WHERE c.passed = 0 AND c.misconception IS NOT NULL "
            f"AND c.misconception != '' AND s.status != 'passed' AND s.superseded_by IS NULL{where} ORDER BY c.id",
            params,
        )
    )


def failing_checks(db: sqlite_utils.Database, exercise: str) -> list[dict[str, Any]]:
    """Every failing check of one exercise: student, submission id, name, misconception, message."""
    return list(
        db.query(
            "SELECT s.student, c.submission_id, c.name, c.misconception, c.message FROM check_results c "
            "JOIN submissions s ON s.id = c.submission_id WHERE s.exercise = ? AND c.passed = 0 "
            "AND s.superseded_by IS NULL ORDER BY c.id",
            [exercise],
        )
    )


def files_hash_of(db: sqlite_utils.Database, attempt_id: int) -> str | None:
    """The files hash of one attempt (None when it has none)."""
    rows = list(db.query("SELECT files_hash FROM attempts WHERE id = ?", [attempt_id]))
    return rows[0]["files_hash"] if rows else None


def in_force_of_attempt(db: sqlite_utils.Database, attempt_id: int) -> list[dict[str, Any]]:
    """The submission rows of one attempt in force (not superseded by ``grade rescore``), in the order recorded."""
    return list(
        db.query("SELECT * FROM submissions WHERE attempt_id = ? AND superseded_by IS NULL ORDER BY id", [attempt_id])
    )


def in_force_id(db: sqlite_utils.Database, attempt_id: int, exercise: str) -> int | None:
    """The id of the submission row in force of one exercise of an attempt, or None (the attempt did not grade it)."""
    rows = list(
        db.query(
            "SELECT id FROM submissions WHERE attempt_id = ? AND exercise = ? AND superseded_by IS NULL",
            [attempt_id, exercise],
        )
    )
    return int(rows[0]["id"]) if rows else None


def max_score_of(db: sqlite_utils.Database, submission_id: int) -> float:
    """The max score of one submission row."""
    return float(next(iter(db.query("SELECT max_score FROM submissions WHERE id = ?", [submission_id])))["max_score"])


def submission(db: sqlite_utils.Database, submission_id: int) -> dict[str, Any]:
    """One submission row (its id one read from the table)."""
    return next(iter(db.query("SELECT * FROM submissions WHERE id = ?", [submission_id])))


def supersede(
    db: sqlite_utils.Database, old_row: dict[str, Any], new: ExerciseResult, grader_version: str, rescoring_id: int
) -> bool:
    """Record ``new`` (an exercise graded again by rescoring ``rescoring_id``) beside ``old_row``, same attempt and
    upload time, and point the old row at it; False (and the caller rolls back) when the old row was superseded
    meanwhile."""
    new_id = (
        db.table("submissions")
        .insert(
            {
                "attempt_id": old_row["attempt_id"],
                "student": old_row["student"],
                "exercise": new.id,
                "score": new.score,
                "max_score": new.max_score,
                "status": new.status,
                "started_at": old_row["started_at"],
                "duration": new.duration,
                "grader_version": grader_version,
                "files_hash": old_row["files_hash"],
                "seed": str(exercise_seed(old_row["student"], new.id)),
                "message": new.message,
                "output": new.output,
                "superseded_by": None,
                "rescoring_id": rescoring_id,
            }
        )
        .last_pk
    )
    db.table("check_results").insert_all(
        {
            "submission_id": new_id,
            "name": c.name,
            "passed": int(c.passed),
            "score": c.score,
            "max_score": c.max_score,
            "message": c.message,
            "misconception": c.misconception,
        }
        for c in new.checks
    )
    cursor = db.execute(
        "UPDATE submissions SET superseded_by = ? WHERE id = ? AND superseded_by IS NULL", [new_id, old_row["id"]]
    )
    return cursor.rowcount == 1
