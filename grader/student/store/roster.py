"""The ``roster`` table: the course server's students (id, name, email)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grader.student.store import students

if TYPE_CHECKING:
    import sqlite_utils


def add_or_update(db: sqlite_utils.Database, student: str, name: str, email: str, when: str) -> bool:
    """Add the student (and their ``students`` row) or update their name and email; whether they were on the
    roster before."""
    known = bool(list(db.query("SELECT 1 FROM roster WHERE student = ?", [student])))
    students.ensure(db, student, when)
    db.table("roster").upsert({"student": student, "name": name, "email": email, "created_at": when}, pk="student")
    return known


def rows(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """The roster rows (student, name, email), sorted by id."""
    return list(db.query("SELECT student, name, email FROM roster ORDER BY student"))


def entries(db: sqlite_utils.Database) -> dict[str, dict[str, Any]]:
    """id -> {student, name, email} (empty without a roster)."""
    return {r["student"]: r for r in db.query("SELECT student, name, email FROM roster")}
