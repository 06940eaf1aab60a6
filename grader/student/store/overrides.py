"""The ``score_overrides`` table: the instructor's manual score overrides, an append-only log (the latest row of a
(student, exercise) is in force; a NULL score withdraws it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite_utils


def log(db: sqlite_utils.Database, student: str | None = None) -> list[dict[str, Any]]:
    """The override log (all students, or one), oldest first."""
    where, params = ("WHERE student = ?", [student]) if student is not None else ("", [])
    return list(db.query(f"SELECT * FROM score_overrides {where} ORDER BY id", params))


def add(
    db: sqlite_utils.Database, student: str, exercise: str, score: float | None, comment: str, author: str, when: str
) -> int:
    """Append an override of a student's exercise (``score`` None withdraws it) with its comment; its id."""
    override_id = (
        db.table("score_overrides")
        .insert(
            {
                "student": student,
                "exercise": exercise,
                "score": score,
                "comment": comment,
                "author": author,
                "created_at": when,
            }
        )
        .last_pk
    )
    assert override_id is not None  # an insert sets last_pk
    return int(override_id)
