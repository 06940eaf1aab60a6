"""The ``practice_schedule`` table: the spaced-retrieval schedule, one row per student and concept
(:mod:`grader.student.practice_schedule`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite_utils


def save(db: sqlite_utils.Database, student: str, rows: list[dict[str, Any]]) -> None:
    """Write a student's rows, replacing each concept's row (inside the caller's transaction)."""
    for row in rows:
        db.table("practice_schedule").upsert({"student": student, **row}, pk=("student", "concept"))


def entries(db: sqlite_utils.Database, student: str) -> list[dict[str, Any]]:
    """A student's rows, by concept (without the ``student`` column)."""
    return [{k: v for k, v in row.items() if k != "student"} for row in db.query(
        "SELECT * FROM practice_schedule WHERE student = ? ORDER BY concept", [student])]
