"""The instructor's override of an exercise score (the dashboard's form): checked, then appended to the log.

The score must be a number from 0 to the exercise's max score (``regrade.instructor_score``, the rule the
regrade answers share), the comment is required (whitespace folded, at most COMMENT_MAX characters), and an
empty score withdraws the override in force. Each is one more row of the ``score_overrides`` log
(grader/student/store/overrides.py); nothing is deleted, and the class report applies the one in force.
"""

from __future__ import annotations

from typing import Any

from grader.student.errors import GraderError
from grader.student.store import Store, utc_now
from grader.student.store import overrides as override_log
from grader.term.class_report import ClassReport
from grader.term.regrade import instructor_score

COMMENT_MAX = 500


class OverrideError(GraderError):
    """An override the dashboard cannot record (one line: what was wrong and what to do)."""


def record_override(
    store: Store, report: ClassReport, student: str, exercise: str, score: str, comment: str, author: str = "instructor"
) -> dict[str, Any]:
    """Append an override to the log (an empty ``score`` withdraws the one in force); the row written.

    OverrideError (one line) for an unknown student or exercise, a score that
    is not a number from 0 to the exercise's max score, or a missing comment.
    """
    row = report.student(student)
    if row is None:
        raise OverrideError(f"'{student}' is not a student of this course: pick one from the overview")
    if exercise not in row.exercises:
        raise OverrideError(f"'{exercise}' is not an exercise of this course: pick one from the list")
    comment = " ".join(comment.split())
    if not comment:
        raise OverrideError("an override needs a comment saying why: write one and submit again")
    if len(comment) > COMMENT_MAX:
        raise OverrideError(f"the comment is {len(comment)} characters; keep it under {COMMENT_MAX}")
    max_score = row.exercises[exercise].max_score
    value: float | None = None
    if score.strip():
        try:
            value = instructor_score(score, max_score, "withdraw the override")
        except ValueError as exc:
            raise OverrideError(str(exc)) from None
    elif row.exercises[exercise].override is None:
        raise OverrideError(f"{exercise} has no override to withdraw: give a score")
    when = utc_now()
    entry = {
        "student": student,
        "exercise": exercise,
        "score": value,
        "comment": comment,
        "author": author,
        "created_at": when,
    }
    with store.transaction() as db:
        entry["id"] = override_log.add(db, student, exercise, value, comment, author, when)
    return entry
