"""The ``practice_schedule`` table: the spaced-retrieval schedule, one row per student and concept, and the
``practice_reviews`` table: the log of the reviews it is replayed from (:mod:`grader.student.practice_schedule`)."""

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
    return [
        {k: v for k, v in row.items() if k != "student"}
        for row in db.query("SELECT * FROM practice_schedule WHERE student = ? ORDER BY concept", [student])
    ]


REVIEW_COLUMNS = ("id", "concept", "question", "rating", "reviewed_at", "origin")


def add_reviews(db: sqlite_utils.Database, student: str, rows: list[dict[str, Any]]) -> None:
    """Append review rows to a student's log; a review id already there is skipped (inside the caller's
    transaction)."""
    db.table("practice_reviews").insert_all(
        ({"student": student, **{k: row[k] for k in REVIEW_COLUMNS}} for row in rows), ignore=True
    )


def reviews(db: sqlite_utils.Database, student: str, concept: str | None = None) -> list[dict[str, Any]]:
    """A student's review rows (of one ``concept``, or all), in time order (the id breaks a tie)."""
    where, params = (
        ("student = ?", [student]) if concept is None else ("student = ? AND concept = ?", [student, concept])
    )
    return list(
        db.query(
            f"SELECT {', '.join(REVIEW_COLUMNS)} FROM practice_reviews WHERE {where} ORDER BY reviewed_at, id", params
        )
    )
