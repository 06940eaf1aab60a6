"""Exam mode on the course server: what a student sees of an upload before a chapter's feedback release.

A chapter with ``release_feedback`` in course.toml (grader/student/course.py)
hides, until that time, everything a student could learn the hidden checks
from: the checks, their messages and named mistakes, the exercise's message
and what the code printed. The student sees that the upload was received and
graded: status ``graded`` with the score when the chapter says
``show_score = true``, else status ``received`` with no score (0 of 0, so no
total counts it). At the release the stored report is shown whole: nothing is
graded again, nothing is lost. The instructor (dashboard, exports, the API
with the instructor's token) always sees everything.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from grader.student.course import Course
from grader.student.engine.model import ExerciseResult, GradeReport


def _note(release: datetime, show_score: bool) -> str:
    when = release.isoformat(timespec="minutes")
    if show_score:
        return f"Received and graded (exam mode): the checks' messages and named mistakes appear at {when}."
    return f"Received and graded (exam mode): your score, the checks' messages and named mistakes appear at {when}."


def hidden_exercise(ex: ExerciseResult, release: datetime, show_score: bool) -> ExerciseResult:
    """An exercise's result as a student sees it before the release."""
    if show_score:
        return dataclasses.replace(ex, status="graded", checks=[], message=_note(release, True), output="")
    return dataclasses.replace(ex, status="received", score=0.0, max_score=0.0, checks=[],
                               message=_note(release, False), output="")


def student_report(report: GradeReport, course: Course, now: datetime) -> GradeReport:
    """The report with the exercises of chapters still under exam mode hidden (the rest unchanged)."""
    exercises = []
    for ex in report.exercises:
        chapter = course.chapter_of(ex.id, report.student)
        if chapter is not None and chapter.feedback_hidden(now):
            assert chapter.release_feedback is not None
            ex = hidden_exercise(ex, chapter.release_feedback, chapter.show_score)
        exercises.append(ex)
    return dataclasses.replace(report, exercises=exercises)


def student_progress(doc: dict[str, Any], course: Course, now: datetime) -> dict[str, Any]:
    """A progress document (grader.term.progress.Progress.to_json) with exam-mode exercises hidden the same way."""
    hidden = 0.0
    for chapter_doc in doc.get("chapters", []):
        for ex in chapter_doc.get("exercises", []):
            chapter = course.chapter_of(ex["id"], doc.get("student"))
            if chapter is None or not chapter.feedback_hidden(now) or not ex.get("attempts"):
                continue
            if chapter.show_score:
                ex["last_status"] = "graded"
            else:
                hidden += float(ex["best_score"])
                ex.update(last_status="received", best_score=0.0, latest_score=None, late=False)
    names = [ex["id"] for c in doc.get("chapters", []) for ex in c.get("exercises", [])
             if ex.get("last_status") in ("graded", "received")]
    if any(name in str(doc.get("next", "")) for name in names):
        doc["next"] = "work on the open chapters; the feedback of exam chapters appears at their release"
    if hidden:
        doc["score"] = round(float(doc["score"]) - hidden, 6)
        doc["percent"] = round(100.0 * doc["score"] / doc["max_score"], 2) if doc.get("max_score") else 0.0
    return doc
