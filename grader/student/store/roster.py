"""The ``roster`` table: the course server's students (id, name, email)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grader.student.store import students

if TYPE_CHECKING:
    import sqlite_utils


def add_or_update(db: sqlite_utils.Database, student: str, name: str, email: str, when: str) -> bool:
    """Add the student (and their ``students`` row) or update their name and email; whether they were on the
    roster before."""
    known = listed(db, student)
    students.ensure(db, student, when)
    db.table("roster").upsert({"student": student, "name": name, "email": email, "created_at": when}, pk="student")
    return known


def listed(db: sqlite_utils.Database, student: str) -> bool:
    """Whether ``student`` is on the roster."""
    return bool(list(db.query("SELECT 1 FROM roster WHERE student = ?", [student])))


def add_if_missing(db: sqlite_utils.Database, student: str, name: str, email: str, when: str) -> None:
    """Add the student (and their ``students`` row) unless the roster has them already."""
    students.ensure(db, student, when)
    db.execute(
        "INSERT OR IGNORE INTO roster (student, name, email, created_at) VALUES (?, ?, ?, ?)",
        [student, name, email, when],
    )


def ids(db: sqlite_utils.Database) -> set[str]:
    """The roster's ids."""
    return {r["student"] for r in db.query("SELECT student FROM roster")}


def rows(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """The roster rows (student, name, email), sorted by id."""
    return list(db.query("SELECT student, name, email FROM roster ORDER BY student"))


def entries(db: sqlite_utils.Database) -> dict[str, dict[str, Any]]:
    """id -> {student, name, email} (empty without a roster)."""
    return {r["student"]: r for r in db.query("SELECT student, name, email FROM roster")}
