"""The ``rescorings`` table: one row per ``grade rescore`` (grader/term/rescore.py holds the rules)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite_utils


def start(db: sqlite_utils.Database, when: str, grader_version: str, exercises: str, uploads: int, errors: str) -> int:
    """A rescoring begins (``exercises`` and ``errors``: JSON lists); its id."""
    rescoring_id = (
        db.table("rescorings")
        .insert(
            {
                "started_at": when,
                "finished_at": None,
                "grader_version": grader_version,
                "exercises": exercises,
                "uploads": uploads,
                "changes": "[]",
                "errors": errors,
            }
        )
        .last_pk
    )
    assert rescoring_id is not None  # an insert sets last_pk
    return int(rescoring_id)


def finish(db: sqlite_utils.Database, rescoring_id: int, when: str, changes: str, errors: str) -> None:
    """A rescoring ends with its changes and errors (JSON lists)."""
    db.execute(
        "UPDATE rescorings SET finished_at = ?, changes = ?, errors = ? WHERE id = ?",
        [when, changes, errors, rescoring_id],
    )


def latest(db: sqlite_utils.Database) -> dict[str, Any] | None:
    """The latest rescoring's row (None: never rescored)."""
    rows = list(db.query("SELECT * FROM rescorings ORDER BY id DESC LIMIT 1"))
    return rows[0] if rows else None
