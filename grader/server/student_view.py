"""What the student's own pages show (grader/server/student_pages.py renders them), built from what the API
gives the same student: their progress (``app.own_progress``), their submissions as ``GET
/submissions/{id}`` shows them (``app.job_json`` then ``app.for_student``), their quiz standings and their
regrade requests. No rule is decided here: scores, late shares, exam mode, attempts and what a student may
read come from those documents; this module only arranges them by chapter.

**Chapters in the course's order** (:func:`chapter_plan`): the chapters of course.toml as written, each
with its exercises (``Course.by_exercise``) and its quiz (``Chapter.quiz_chapter``: its ``quiz = "..."``, else
the quiz chapter of its name, as ``Course.quiz_due`` matches them); then the exercises no chapter names, one chapter per topic in
the catalogue's order, and the quizzes no chapter took. Without a course file: the topics in the
catalogue's order, each with the quiz of its name, then the other quizzes (as ``grade progress``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from grader.quiz import Quiz
from grader.student.course import Course
from grader.student.engine import catalogue
from grader.student.client.connection import estimate_words
from grader.student.client.wire import report_from_dict
from grader.student.client.remote import server_late_shares
from grader.student.standing import totals
from grader.student.engine.model import GradeReport
from grader.student.feedback.progress import DEFAULT_MAX_SCORE
from grader.student.feedback.report import format_score
from grader.student.quiz.quiz_text import ChapterProgress as QuizStanding

PHASES = {  # a job's phase (app.phase) in the words of the page
    "queued": "Queued",
    "running": "Running",
    "retried": "Retried",
    "done": "Graded",
    "error": "Not graded",
}


@dataclass
class PlannedChapter:
    """A chapter of the student's page: its name, its exercises in the catalogue's order, its quiz."""

    name: str
    exercises: list[str]
    quiz: Quiz | None = None


def chapter_plan(course: Course, quizzes: list[Quiz]) -> list[PlannedChapter]:
    """The chapters in the course's order (module docstring)."""
    planned: list[PlannedChapter] = []
    taken_quizzes: set[str] = set()
    for chapter in course.chapters:
        ids = [
            e for e in catalogue.EXERCISES if (c := course.by_exercise.get(e)) is not None and c.name == chapter.name
        ]
        quiz = next((q for q in quizzes if q.chapter not in taken_quizzes and q.chapter == chapter.quiz_chapter), None)
        if quiz is not None:
            taken_quizzes.add(quiz.chapter)
        planned.append(PlannedChapter(chapter.name, ids, quiz))
    named = {e for c in planned for e in c.exercises}
    by_name = {c.name: c for c in planned}
    for exercise in catalogue.EXERCISES:
        if exercise in named:
            continue
        topic = catalogue.topic_of(exercise)
        if topic not in by_name:
            by_name[topic] = PlannedChapter(topic, [])
            planned.append(by_name[topic])
        by_name[topic].exercises.append(exercise)
    for quiz in quizzes:
        if quiz.chapter in taken_quizzes:
            continue
        place = by_name.get(quiz.chapter)
        if place is None or place.quiz is not None:
            place = by_name[quiz.chapter] = PlannedChapter(quiz.chapter, [])
            planned.append(place)
        place.quiz = quiz
        taken_quizzes.add(quiz.chapter)
    return planned


@dataclass
class ExerciseLine:
    """One exercise as its chapter page shows it: the score that counts, how it came about."""

    id: str
    counted: float  # under the course's rule, late penalties applied, or the override in force
    max_score: float
    attempts: int
    last_status: str | None
    latest: float | None
    late: bool  # the counted upload was late (penalised)
    late_note: str = ""  # what late work counts in this chapter, for the student
    override: dict[str, Any] | None = None  # the instructor's override in force: score, graded, comment
    held: str = ""  # exam mode: "received, feedback at T" in place of the score (term/standing.py)


@dataclass
class ChapterView:
    """A chapter of the student's page."""

    name: str
    exercises: list[ExerciseLine]
    dates: dict[str, Any] | None  # the student's own dates (Course.student_dates), None without any
    quiz: Quiz | None
    standing: QuizStanding | None
    submissions: list["SubmissionView"] = field(default_factory=list)
    state: str = ""  # its state now, in the model's words (grader.student.standing.ChapterState)

    @property
    def url(self) -> str:
        return chapter_url(self.name)

    @property
    def score(self) -> float:
        return sum(e.counted for e in self.exercises)

    @property
    def max_score(self) -> float:
        return sum(e.max_score for e in self.exercises)


def chapter_url(name: str) -> str:
    return "/student/chapters/" + quote(name, safe="")


def quiz_url(chapter: str) -> str:
    return "/student/quizzes/" + quote(chapter, safe="")


def late_share(dates: dict[str, Any] | None) -> str:
    """What an upload after the due date counts, in words ("" when the chapter has no due date)."""
    if not dates or not dates.get("due"):
        return ""
    penalty = float(dates.get("late_penalty", 1.0))
    return "late work counts nothing" if penalty >= 1 else f"late work counts {1 - penalty:.0%}"


def chapter_views(
    plan: list[PlannedChapter], progress: dict[str, Any], standings: dict[str, QuizStanding]
) -> list[ChapterView]:
    """Each planned chapter with the student's counted scores (from their progress document, exam mode and
    overrides applied), their own dates and their quiz standing."""
    exercises = {e["id"]: e for c in progress.get("chapters", []) for e in c.get("exercises", [])}
    overrides = progress.get("overrides", {})
    dates = {d["name"]: d for d in progress.get("dates", [])}
    views = []
    for chapter in plan:
        own = dates.get(chapter.name)
        if own is not None and not any(own.get(k) for k in ("due", "closes", "opens", "release_feedback")):
            own = None
        lines = []
        for exercise in chapter.exercises:
            doc = exercises.get(exercise, {"best_score": 0.0, "max_score": DEFAULT_MAX_SCORE, "attempts": 0})
            lines.append(
                ExerciseLine(
                    exercise,
                    float(doc["best_score"]),
                    float(doc["max_score"]),
                    int(doc.get("attempts", 0)),
                    doc.get("last_status"),
                    doc.get("latest_score"),
                    bool(doc.get("late")),
                    late_share(own) if doc.get("late") else "",
                    overrides.get(exercise),
                    str(doc.get("held") or "") if doc.get("last_status") == "received" else "",
                )
            )
        standing = standings.get(chapter.quiz.chapter) if chapter.quiz is not None else None
        views.append(ChapterView(chapter.name, lines, own, chapter.quiz, standing))
    return views


@dataclass
class SubmissionView:
    """One upload as the student's page shows it: "Submission N", its state while it waits, its report."""

    id: int
    received_at: str
    phase: str  # queued, running, retried, done, error (app.phase)
    status: str  # the job's row: received, queued, running, done, error
    where: str  # the API's one line for it (app.where): shown for a phase not known here
    exercises: list[str]
    report: GradeReport | None  # as the student may see it (exam mode applied); None until graded
    late: list[dict[str, Any]]  # app.late_exercises: the late ones with the share that counts
    error: str | None  # why it was not graded (phase error)
    ahead: int = 0  # uploads received before it and not yet taken (queued)
    tries: int = 0
    max_tries: int = 0
    retry_reason: str | None = None  # what failed the try before this one (retried)
    worker: str | None = None  # the worker grading it (running)
    estimate_s: float | None = None  # the server's estimate of the time to the report (grader/queue/estimate.py)

    @property
    def label(self) -> str:
        return f"Submission {self.id}"

    @property
    def url(self) -> str:
        return f"/student/submissions/{self.id}"

    @property
    def phase_label(self) -> str:
        return PHASES.get(self.phase, self.phase.capitalize())

    @property
    def waiting(self) -> bool:
        """Not graded yet, and not closed as not graded: the page says where it is and to check again."""
        return self.phase not in ("done", "error")

    @property
    def state(self) -> str:
        """What follows the phase's label: where a waiting upload is, why it was not graded, or what of a graded
        one is still to come ("" for a plain graded upload)."""
        if self.phase == "done":
            if self.report is not None and self.report.not_graded:
                return (
                    f"except {len(self.report.not_graded)} exercise(s) the grader's machine could not grade "
                    "(not_graded: no fault of your work and nothing counted; the report says why)"
                )
            if self.report is not None and any(e.status in ("graded", "received") for e in self.report.exercises):
                return "the feedback of exam-mode chapters is held until their release time"
            return ""
        estimate = estimate_words(self.estimate_s)
        queue = f"{self.ahead} upload(s) ahead of it in the queue" if self.ahead else "next in the queue"
        running = f"being graded now (worker {self.worker or '?'})"
        if estimate:
            queue, running = f"{queue}; {estimate}", f"{running}; {estimate}"
        if self.phase == "queued":
            return queue
        if self.phase == "running":
            return running
        if self.phase == "retried":
            after = f", after {self.retry_reason}" if self.retry_reason else ""
            where = running if self.status == "running" else queue
            return f"try {self.tries} of {self.max_tries}{after}; {where}"
        if self.phase == "error":
            return f"{self.error or 'the grader failed'}; no attempt was recorded: submit again"
        return self.where  # a phase this page has no words of its own for: the API's line

    @property
    def late_shares(self) -> dict[str, float]:
        """Exercise id -> the share of its score that counts, for the exercises uploaded late (the API's ``late``)."""
        return server_late_shares({"late": self.late}) or {}

    @property
    def score_text(self) -> str:
        """ "7.5 / 10": the counted total of the report (late shares applied, held exercises out: the one
        definition of grader/student/standing.py), "" while it waits, when it has none, or when exam mode holds
        every score (never "0 / 0": the state says they are held)."""
        if self.report is None or not self.report.graded_exercises:
            return ""
        t = totals(self.report, self.late_shares)
        if not t.shown:
            return ""
        return f"{format_score(t.counted)} / {format_score(t.maximum)}"


def submission_view(doc: dict[str, Any]) -> SubmissionView:
    """A submission document as the API gives it to its student (``app.for_student(app.job_json(...))``)."""
    report = report_from_dict(doc["report"]) if doc.get("report") is not None else None
    return SubmissionView(
        int(doc["id"]),
        str(doc["received_at"]),
        str(doc["phase"]),
        str(doc["status"]),
        str(doc.get("where") or ""),
        list(doc.get("exercises") or []),
        report,
        list(doc.get("late") or []),
        doc.get("error"),
        int(doc.get("queue_position") or 0),
        int(doc.get("tries") or 0),
        int(doc.get("max_tries") or 0),
        doc.get("retry_reason"),
        doc.get("worker"),
        doc.get("estimate_s"),
    )
