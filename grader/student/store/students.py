"""The ``students`` table: everyone with anything recorded."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite_utils


def ensure(db: sqlite_utils.Database, student: str, when: str) -> None:
    """Add ``student`` (first seen ``when``) unless the table has them already."""
    db.execute("INSERT OR IGNORE INTO students (name, created_at) VALUES (?, ?)", [student, when])


def known(db: sqlite_utils.Database, student: str) -> bool:
    """Whether ``student`` is on the course server's roster or has anything recorded."""
    return bool(
        list(
            db.query(
                "SELECT 1 FROM roster WHERE student = ? UNION SELECT 1 FROM students WHERE name = ? LIMIT 1",
                [student, student],
            )
        )
    )


def names(db: sqlite_utils.Database) -> list[str]:
    """Every student with at least one recorded attempt or quiz answer, sorted."""
    return [r["name"] for r in db.query("SELECT name FROM students ORDER BY name")]
