"""The ``extensions`` table: the dashboard's log of extensions (docs/term.md), append-only; a row with a NULL due
withdraws the student's earlier ones of that chapter. Read after the course file's own."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from grader.student.course import DEFAULT_COURSE, Course, Extension, logged_by, parse_time

if TYPE_CHECKING:
    import sqlite_utils


def log(db: sqlite_utils.Database, student: str | None = None) -> list[dict[str, Any]]:
    """The dashboard's extension log (all students, or one), oldest first."""
    if not db["extensions"].exists():
        return []
    where, params = ("WHERE student = ?", [student]) if student is not None else ("", [])
    return list(db.query(f"SELECT * FROM extensions {where} ORDER BY id", params))


def effective_course(db: sqlite_utils.Database, course: Course | None = None) -> Course:
    """The course with the dashboard's extensions after the course file's (``Course.with_extensions``)."""
    course = course or DEFAULT_COURSE
    if course.log_applied:
        return course
    rows = log(db)
    if not rows:
        return course
    items: list[Extension | tuple[str | None, str | None, str]] = []
    for row in rows:
        if row["due"] is None:
            items.append((row["student"], row["grp"], row["chapter"]))
            continue
        items.append(
            Extension(
                chapter=row["chapter"],
                due=parse_time(row["due"]),
                reason=row["reason"] or "",
                student=row["student"],
                group=row["grp"],
                late_penalty=row["late_penalty"],
                late_until=None if row["late_until"] is None else parse_time(row["late_until"]),
                source=f"{logged_by(row['author'])} at {row['created_at']}",
            )
        )
    return replace(course.with_extensions(items), log_applied=True)


def add(
    db: sqlite_utils.Database,
    student: str | None,
    group: str | None,
    chapter: str,
    due: datetime | None,
    reason: str,
    author: str,
    late_penalty: float | None,
    late_until: datetime | None,
    when: str,
) -> int:
    """Append one extension of a student or a group (``due`` None: withdraw theirs for that chapter); its id."""
    row = {
        "student": student,
        "grp": group,
        "chapter": chapter,
        "due": None if due is None else due.isoformat(timespec="seconds"),
        "late_penalty": late_penalty,
        "late_until": None if late_until is None else late_until.isoformat(timespec="seconds"),
        "reason": reason,
        "author": author,
        "created_at": when,
    }
    extension_id = db.table("extensions").insert(row).last_pk
    assert extension_id is not None  # an insert sets last_pk
    return int(extension_id)
