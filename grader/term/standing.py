"""A student's standing on the course server: what they may see of a report or of their progress, now.

The rules themselves are grader/student/standing.py (shared with the handout:
chapter states, totals, held exercises, scaffolding); this module applies them
with the course's file (course.toml: chapters, extensions, exam mode,
scaffolding levels) to what the server stored. Every view a student reads (the
API's answers, a replayed upload included, their pages, the regrade view) and
every score that leaves the server (the LMS passback) goes through here.

Exam mode: a chapter with ``release_feedback`` hides, until that time,
everything a student could learn the hidden checks from: the checks, their
messages and named mistakes, the exercise's message and what the code printed.
A held exercise reads "received, feedback at T" (status ``received``, counted
in no total and never as full) or, with ``show_score = true``, its score with
that line (status ``graded``); the report's total line says once that they are held. At
the release the stored report is shown whole: nothing is graded again. The
instructor (dashboard, exports, the API with the instructor's token) always
sees everything.

Scaffolding: the server knows each exercise's level from the course
(``[scaffolding]``, as ``grade release`` writes the handout's
scaffolding.json), and a student's report is said at that level (no fix below
``guided``) whatever level it was graded at.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from grader.student import standing
from grader.student.course import Chapter, Course
from grader.student.engine.model import GradeReport


def student_chapter(course: Course, chapter: Chapter, student: str | None) -> Chapter:
    """``chapter`` with ``student``'s extension applied (their own dates)."""
    extension = course.extension_for(chapter.name, student) if student else None
    return chapter.extended(extension) if extension is not None else chapter


def chapter_states(course: Course, now: datetime, student: str | None = None) -> list[standing.ChapterState]:
    """Every chapter's state at ``now`` for ``student`` (their extensions), in the course's order."""
    return [standing.chapter_state(student_chapter(course, c, student), now) for c in course.chapters]


def scaffolding_levels(course: Course) -> dict[str, str]:
    """Each exercise's scaffolding level as the course releases it (the handout's scaffolding.json); the known
    mistakes' hints are registered, so a mistake below ``guided`` is said with its hint."""
    import grader.mistakes  # noqa: F401  (registers the known mistakes: grader.student.engine.diagnosis.KNOWN)

    return course.scaffolding_levels()


def student_report(report: GradeReport, course: Course, now: datetime) -> GradeReport:
    """The report as its student may see it at ``now`` (:func:`grader.student.standing.as_seen`): exercises of
    chapters under exam mode held, every message said at its exercise's scaffolding level."""
    return standing.as_seen(report, course, now, scaffolding_levels(course))


def student_progress(doc: dict[str, Any], course: Course, now: datetime) -> dict[str, Any]:
    """A progress document (grader.term.progress.Progress.to_json) as its student may see it: exam-mode exercises
    held the same way (no score, out of the total and its maximum, "received, feedback at T")."""
    hidden = hidden_max = 0.0
    for chapter_doc in doc.get("chapters", []):
        for ex in chapter_doc.get("exercises", []):
            chapter = course.chapter_of(ex["id"], doc.get("student"))
            if chapter is None or not chapter.feedback_hidden(now) or not ex.get("attempts"):
                continue
            ex["held"] = standing.held_label(chapter.release_feedback)
            if chapter.show_score:
                ex["last_status"] = "graded"
            else:
                hidden += float(ex["best_score"])
                hidden_max += float(ex.get("max_score") or 0.0)
                ex.update(last_status="received", best_score=0.0, latest_score=None, late=False)
    names = [
        ex["id"]
        for c in doc.get("chapters", [])
        for ex in c.get("exercises", [])
        if ex.get("last_status") in ("graded", "received")
    ]
    if any(name in str(doc.get("next", "")) for name in names):
        doc["next"] = "work on the open chapters; the feedback of exam chapters appears at their release"
    if hidden or hidden_max:
        doc["score"] = round(float(doc["score"]) - hidden, 6)
        doc["max_score"] = round(float(doc["max_score"]) - hidden_max, 6)
        doc["percent"] = round(100.0 * doc["score"] / doc["max_score"], 2) if doc.get("max_score") else 0.0
    return doc


def cell_marks(
    course: Course,
    exercise: str,
    student: str,
    now: datetime,
    *,
    late: bool = False,
    regrade_accepted: bool = False,
    rescored: bool = False,
) -> tuple[str, ...]:
    """What the instructor's dashboard says beside ``student``'s counted score of ``exercise`` at ``now``, in the
    words the student reads, so the instructor sees what the student sees:

    - "held from the student until T" (exam mode: the student sees "received, feedback at T"; "feedback held ..."
      when the chapter shows the score);
    - "late: counts S%" (the counted upload was late; the chapter's late rule, :func:`standing.late_work`);
    - "extension: due T" (the student's own dates, :meth:`Course.extension_for`);
    - "regrade accepted" (an answered regrade request's score is in force), "rescored" (the counted result is a
      rescoring's)."""
    chapter = course.chapter_of(exercise, student)
    marks: list[str] = []
    if chapter is not None:
        if chapter.feedback_hidden(now):
            marks.append(standing.held_from_student(chapter.release_feedback, chapter.show_score))
        if late:
            marks.append(f"late: {standing.late_work(chapter)}")
        if course.extension_for(chapter.name, student) is not None:
            marks.append(f"extension: due {standing.format_time(chapter.due or chapter.closes_at())}")
    if regrade_accepted:
        marks.append("regrade accepted")
    if rescored:
        marks.append("rescored")
    return tuple(marks)


def visible_chapters(course: Course, now: datetime) -> set[str]:
    """The chapters whose scores a student may see at ``now`` (and so the LMS may receive): every chapter but
    those whose exam feedback is held without ``show_score``."""
    return {c.name for c in course.chapters if not c.feedback_hidden(now) or c.show_score}
