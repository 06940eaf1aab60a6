"""The class's mistakes for the instructor: the most frequent named mistakes of a week, and who fixed them.

The input is the class's graded uploads (:class:`Upload`: student, exercise, when, the mistakes its report
named). For each (exercise, mistake) made in the window [since, until) (:func:`frequent_mistakes`):

- ``students``: how many students made it (an upload in the window naming it);
- ``fixed``: how many of them uploaded that exercise again and the *next* upload no longer named it;
- ``median_hours``: the median time from the upload that named it to that fixing upload, over those who fixed it;
- ``concept``: the concept it shows a gap in (:mod:`grader.student.quiz.concepts`).

Sorted by ``students``, the most frequent first (then by exercise and mistake id).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from grader.student.course import parse_time
from grader.student.quiz.concepts import concept_of


@dataclass(frozen=True)
class Upload:
    student: str
    exercise: str
    at: datetime
    mistakes: frozenset[str] = frozenset()
    upload_id: int | None = None


@dataclass
class ClassMistake:
    exercise: str
    mistake: str
    concept: str | None
    students: int
    fixed: int
    median_hours: float | None
    uploads: dict[str, list[int | None]] = field(default_factory=dict)  # student -> the uploads naming it


def frequent_mistakes(uploads: list[Upload], since: datetime, until: datetime) -> list[ClassMistake]:
    """The mistakes named in [since, until), most students first, with how many fixed it on their next upload."""
    by_student: dict[tuple[str, str], list[Upload]] = defaultdict(list)
    for upload in sorted(uploads, key=lambda u: u.at):
        by_student[(upload.student, upload.exercise)].append(upload)
    made: dict[tuple[str, str], dict[str, list[int | None]]] = defaultdict(dict)
    fix_hours: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for (student, exercise), history in by_student.items():
        for k, upload in enumerate(history):
            if not since <= upload.at < until:
                continue
            for mistake in upload.mistakes:
                key = (exercise, mistake)
                made[key].setdefault(student, []).append(upload.upload_id)
                later = history[k + 1] if k + 1 < len(history) else None
                if later is not None and mistake not in later.mistakes and student not in fix_hours[key]:
                    fix_hours[key][student] = (later.at - upload.at).total_seconds() / 3600
    out = []
    for (exercise, mistake), students in made.items():
        hours = list(fix_hours[(exercise, mistake)].values())
        concept = concept_of(mistake, exercise)
        out.append(
            ClassMistake(
                exercise,
                mistake,
                concept.id if concept else None,
                len(students),
                len(hours),
                statistics.median(hours) if hours else None,
                students,
            )
        )
    return sorted(out, key=lambda m: (-m.students, m.exercise, m.mistake))


def to_csv_rows(mistakes: list[ClassMistake]) -> list[list[str]]:
    """The CSV export: a header, then one row per mistake (median hours rounded to 0.1, empty when none fixed)."""
    rows = [["exercise", "mistake", "concept", "students", "fixed_next_upload", "median_hours_to_fix"]]
    for m in mistakes:
        rows.append(
            [
                m.exercise,
                m.mistake,
                m.concept or "",
                str(m.students),
                str(m.fixed),
                "" if m.median_hours is None else f"{m.median_hours:.1f}",
            ]
        )
    return rows


def uploads_of(submissions: list[dict[str, Any]], diagnosed: list[dict[str, Any]]) -> list[Upload]:
    """The graded uploads of the store's rows: ``Store.submission_rows`` (id, student, exercise, started_at) and
    ``Store.diagnosed_mistakes`` (submission_id, misconception), one :class:`Upload` per submission."""
    named: dict[int, set[str]] = defaultdict(set)
    for row in diagnosed:
        named[int(row["submission_id"])].add(str(row["misconception"]))
    return [
        Upload(
            row["student"],
            row["exercise"],
            parse_time(row["started_at"]),
            frozenset(named[int(row["id"])]),
            int(row["id"]),
        )
        for row in submissions
    ]
