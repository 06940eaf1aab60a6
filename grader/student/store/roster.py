"""The ``roster`` table: the course server's students (id, name, email)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite_utils


def entries(db: sqlite_utils.Database) -> dict[str, dict[str, Any]]:
    """id -> {student, name, email} (empty without a roster)."""
    return {r["student"]: r for r in db.query("SELECT student, name, email FROM roster")}
