"""Extensions granted on the course server (the dashboard's form and ``POST /api/v1/extensions``).

The course file's ``[[extension]]`` tables are read with the course
(grader/student/course.py); these are the ones granted during the term. Each
is appended to the store's ``extensions`` log with its reason, author and
time (``Store.add_extension``), and :meth:`Store.effective_course` puts them
after the course file's, so the one counted-score rule applies them
everywhere at once. Nothing is deleted: a withdrawal is one more row.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from grader.student.course import EXTENSION_VIAS as VIAS, Course, CourseError, Extension, check_extension, logged_by
from grader.student.errors import GraderError
from grader.student.store import Store

REASON_MAX = 500


class ExtensionError(GraderError):
    """An extension that cannot be granted (one line: what was wrong, what to do)."""


def parse_when(text: str, field: str) -> datetime:
    """An ISO 8601 date-time; without a time zone it is UTC (the dashboard's form says so)."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ExtensionError(
            f"{field} '{text[:40]}' is not a date-time: write it like 2026-12-04T23:59 (UTC)"
        ) from None
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def grant(
    store: Store,
    course: Course,
    student: str,
    group: str,
    chapter: str,
    due: str,
    reason: str,
    author: str,
    late_penalty: str = "",
    late_until: str = "",
    via: str = "dashboard",
) -> dict[str, Any]:
    """Validate and log one extension (``due`` empty: withdraw theirs for the chapter); the row written.

    Exactly one of ``student`` (a student of the course: on the roster or with
    anything recorded) and ``group`` (a group of course.toml's ``[groups]``).
    The reason is required. ``via`` is where it was granted (``dashboard`` or
    ``API``), logged with the author as ``"API, instructor"``. ExtensionError
    (one line) on anything wrong.
    """
    if via not in VIAS:
        raise ValueError(f"via must be one of {VIAS}")
    author = f"{via}, {author}"
    student, group, chapter = student.strip(), group.strip(), chapter.strip()
    reason = " ".join(reason.split())
    if bool(student) == bool(group):
        raise ExtensionError("name either a student or a group (of the course file's [groups])")
    if student and student not in set(store.students()) | set(store.roster_entries()):
        raise ExtensionError(f"'{student[:40]}' is not a student of this course: pick one from the overview")
    if len(reason) > REASON_MAX:
        raise ExtensionError(f"the reason is {len(reason)} characters; keep it under {REASON_MAX}")
    if not reason:
        raise ExtensionError("an extension needs a reason (it is logged): write one and submit again")
    penalty: float | None = None
    if late_penalty.strip():
        try:
            penalty = float(late_penalty)
        except ValueError:
            raise ExtensionError(f"late_penalty '{late_penalty[:20]}' is not a number from 0 to 1") from None
        if not math.isfinite(penalty) or not 0 <= penalty <= 1:
            raise ExtensionError("late_penalty must be a number from 0 to 1 (the fraction lost)")
    chapters = {c.name: c for c in course.chapters}
    if not due.strip():  # a withdrawal
        if chapter not in chapters:
            raise ExtensionError(f"chapter '{chapter[:40]}' is not a chapter of the course")
        effective = store.effective_course(course)
        if not any(
            e.chapter == chapter and e.student == (student or None) and e.group == (group or None)
            for e in effective.extensions
        ):
            raise ExtensionError(f"{student or group} has no extension of chapter '{chapter}' to withdraw")
        row_id = store.add_extension(student or None, group or None, chapter, None, reason, author)
        return {
            "id": row_id,
            "student": student or None,
            "group": group or None,
            "chapter": chapter,
            "due": None,
            "reason": reason,
            "author": author,
        }
    until = parse_when(late_until, "late_until") if late_until.strip() else None
    extension = Extension(
        chapter, parse_when(due, "due"), reason, student or None, group or None, penalty, until, source=author
    )
    try:
        check_extension(extension, chapters, course.groups, "extension")
    except CourseError as exc:
        raise ExtensionError(str(exc)) from exc
    row_id = store.add_extension(
        extension.student, extension.group, chapter, extension.due, reason, author, penalty, until
    )
    return {"id": row_id, **extension.to_json(), "author": author}


def listing(store: Store, course: Course) -> list[dict[str, Any]]:
    """Every extension, the course file's then the log's, each with where it comes from (withdrawals included)."""
    rows: list[dict[str, Any]] = [{**e.to_json(), "withdrawn": False} for e in course.extensions]
    for row in store.extension_log():
        rows.append(
            {
                "chapter": row["chapter"],
                "student": row["student"],
                "group": row["grp"],
                "due": row["due"],
                "late_penalty": row["late_penalty"],
                "late_until": row["late_until"],
                "reason": row["reason"],
                "source": f"{logged_by(row['author'])} at {row['created_at']}",
                "withdrawn": row["due"] is None,
            }
        )
    return rows
