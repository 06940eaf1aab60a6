"""A student's progress as shown by `grade progress`: per chapter, each exercise's counted score and last status,
quiz completion, what to do next; and its JSON form (the course server sends it so).

Both `grade progress` commands print with :func:`format_progress`: the
instructor's (:mod:`grader.term.progress`, which also reads the locked quizzes), and
the handout's, from the course server's record or from the local database of
public-check attempts (:func:`summarize` with the standings it has: none offline,
where quizzes are practice). Chapters are the exercise topics in the
catalogue's order followed by the quiz chapters that are not topics. The overall
percentage is the exercise points counted over the points available.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import click

from grader.student.engine import catalogue
from grader.student.engine.model import at_full_marks
from grader.student.course import DEFAULT_COURSE, Course, parse_time
from grader.student.standing import format_time
from grader.student.quiz.quiz_text import ChapterProgress as QuizStanding
from grader.student.feedback.report import format_score, status_style
from grader.student.store import Store


DEFAULT_MAX_SCORE = 10.0  # every exercise is graded out of 10 (docs/design/engine.md, check definitions)


@dataclass
class ExerciseProgress:
    """One exercise: best score so far, the status of the latest attempt (None: never graded)."""

    id: str
    best_score: float = 0.0
    max_score: float = DEFAULT_MAX_SCORE
    last_status: str | None = None
    attempts: int = 0
    latest_score: float | None = None  # the latest attempt's score (None: never graded)
    late: bool = False  # the counted attempt was late (penalised)

    @property
    def done(self) -> bool:
        return self.attempts > 0 and at_full_marks(self.best_score, self.max_score)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "best_score": round(self.best_score, 6),
            "max_score": self.max_score,
            "last_status": self.last_status,
            "attempts": self.attempts,
            "latest_score": None if self.latest_score is None else round(self.latest_score, 6),
            "late": self.late,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "ExerciseProgress":
        """The inverse of to_json (the remote ``grade progress`` reads the server's record)."""
        latest = doc.get("latest_score")
        return cls(
            str(doc["id"]),
            float(doc["best_score"]),
            float(doc["max_score"]),
            doc.get("last_status"),
            int(doc["attempts"]),
            None if latest is None else float(latest),
            bool(doc.get("late", False)),
        )


@dataclass
class ChapterProgress:
    """A chapter: its exercises (possibly none) and its quiz (possibly none)."""

    name: str
    exercises: list[ExerciseProgress] = field(default_factory=list)
    quiz: QuizStanding | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "exercises": [e.to_json() for e in self.exercises],
            "quiz": self.quiz.to_json() if self.quiz else None,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "ChapterProgress":
        """The inverse of to_json."""
        quiz = doc.get("quiz")
        standing = None
        if quiz is not None:
            fields = (
                "chapter",
                "title",
                "questions",
                "checkpoints",
                "checkpoints_correct",
                "questions_correct",
                "attempts",
            )
            standing = QuizStanding(**{k: quiz[k] for k in fields})
        return cls(str(doc["name"]), [ExerciseProgress.from_json(e) for e in doc["exercises"]], standing)


@dataclass
class Progress:
    """The whole summary for one student."""

    student: str
    chapters: list[ChapterProgress]
    next_step: str
    rule: str = "best"  # which score counts (grader.student.course): "best" or "latest"
    source: str = ""  # where the record comes from, shown in the title ("" : this machine's database)
    dates: list[dict[str, Any]] = field(default_factory=list)  # the student's own chapter dates (Course.student_dates)
    regrades: list[dict[str, Any]] = field(default_factory=list)  # their regrade requests (grader.term.regrade.public)

    @property
    def score(self) -> float:
        return sum(e.best_score for c in self.chapters for e in c.exercises)

    @property
    def max_score(self) -> float:
        """The exercises' points, but those of exercises exam mode holds (``received``: in no total, as in a
        report: grader/student/standing.py)."""
        return sum(e.max_score for c in self.chapters for e in c.exercises if e.last_status != "received")

    @property
    def percent(self) -> float:
        """100 * exercise points earned / exercise points available."""
        return 100.0 * self.score / self.max_score if self.max_score else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "student": self.student,
            "score": round(self.score, 6),
            "max_score": self.max_score,
            "percent": round(self.percent, 2),
            "chapters": [c.to_json() for c in self.chapters],
            "next": self.next_step,
            "score_rule": self.rule,
            "source": self.source,
            "dates": self.dates,
            "regrades": self.regrades,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "Progress":
        """The inverse of to_json."""
        return cls(
            str(doc["student"]),
            [ChapterProgress.from_json(c) for c in doc["chapters"]],
            str(doc["next"]),
            str(doc.get("score_rule", "best")),
            str(doc.get("source") or ""),
            list(doc.get("dates") or []),
            list(doc.get("regrades") or []),
        )


def summarize(
    store: Store | None,
    student: str,
    exercise_ids: list[str],
    standings: list[QuizStanding],
    submit_hint: str = "grade submit",
    course: Course | None = None,
    source: str = "",
    regrades: list[dict[str, Any]] | None = None,
) -> Progress:
    """The progress summary of ``student`` from the store (None: nothing recorded yet) and quiz ``standings``.

    The score of each exercise is the one that counts under ``course``'s rule
    (``grader.student.course.counted_score``; default: the best ever).
    ``source`` says where the record comes from (printed in the title). An
    instructor's override in force replaces the graded score (as in ``grade
    report``); the dashboard's extensions count (``Store.effective_course``);
    ``regrades`` are the student's regrade requests, shown with their answers.
    """
    course = course or DEFAULT_COURSE
    if store is not None:
        course = store.effective_course(course)  # the dashboard's extensions too
    best = store.best_scores(student, course) if store is not None else {}
    overrides: dict[str, Any] = {}
    for entry in store.score_overrides(student) if store is not None else []:
        overrides[entry["exercise"]] = entry["score"]
    chapters: dict[str, ChapterProgress] = {}
    exercises: list[ExerciseProgress] = []
    for ex_id in exercise_ids:
        row = best.get(ex_id)
        if row is None:
            item = ExerciseProgress(ex_id)
        else:
            counted = row["best_score"] if overrides.get(ex_id) is None else float(overrides[ex_id])
            item = ExerciseProgress(
                ex_id,
                counted,
                row["max_score"],
                row["last_status"],
                row["attempts"],
                row["latest_score"],
                row["late"],
            )
        exercises.append(item)
        topic = catalogue.topic_of(ex_id)
        chapters.setdefault(topic, ChapterProgress(topic)).exercises.append(item)
    for standing in standings:
        chapters.setdefault(standing.chapter, ChapterProgress(standing.chapter)).quiz = standing
    closed = course.closed_exercises(exercise_ids, datetime.now(timezone.utc))
    return Progress(
        student,
        list(chapters.values()),
        next_step(exercises, standings, submit_hint, closed),
        course.rule,
        source,
        course.student_dates(student),
        list(regrades or []),
    )


def next_step(
    exercises: list[ExerciseProgress], quizzes: list[QuizStanding], submit_hint: str, closed: Collection[str] = ()
) -> str:
    """The first exercise that can still gain points (with its command), else the first incomplete quiz.

    Left out: exercises at full marks, those of ``closed`` chapters (no upload is taken), and those whose
    latest attempt had full marks after the due date (a new attempt would be as late).
    """
    for ex in exercises:
        late_full = ex.late and ex.latest_score is not None and at_full_marks(ex.latest_score, ex.max_score)
        if not ex.done and ex.id not in closed and not late_full:
            if ex.last_status is None:
                why = "not graded yet"
            else:
                why = f"{ex.last_status}, best {format_score(ex.best_score)}/{format_score(ex.max_score)}"
            return f"{ex.id} ({why}): run `{submit_hint} {ex.id}`"
    for quiz in quizzes:
        if not quiz.complete:
            done = f"{quiz.checkpoints_correct}/{quiz.checkpoints} checkpoints"
            return f"the {quiz.chapter} quiz ({done}): run `grade quiz {quiz.chapter}`"
    if any(not ex.done for ex in exercises):
        return "nothing more to gain: what is left is closed or counted as late; every quiz is complete"
    return "nothing: every exercise has full marks and every quiz is complete"


def format_progress(progress: Progress, color: bool = False) -> str:
    """The human progress summary: a block per chapter, the overall percentage, the next step."""

    def style(text: str, **kwargs: Any) -> str:
        return click.style(text, **kwargs) if color else text

    ids = [e.id for c in progress.chapters for e in c.exercises]
    width = max((len(i) for i in ids), default=0)
    counted_word = "best" if progress.rule == "best" else "counts"
    lines = [f"Progress of {progress.student}" + (f" ({progress.source})" if progress.source else "")]
    for chapter in progress.chapters:
        lines.append(style(chapter.name, bold=True))
        for ex in chapter.exercises:
            label, colour = status_style(ex.last_status)
            score = f"{format_score(ex.best_score)}/{format_score(ex.max_score)}"
            if ex.last_status == "received":  # exam mode: the score is not shown before the feedback release
                score = "received"
            tries = f"{ex.attempts} attempt{'s' if ex.attempts != 1 else ''}"
            notes = []
            if ex.late:
                notes.append("late: penalised")
            if ex.latest_score is not None and abs(ex.latest_score - ex.best_score) > 1e-9:
                notes.append(f"latest attempt {format_score(ex.latest_score)}")
            note = f"  ({', '.join(notes)})" if notes else ""
            lines.append(
                f"  {ex.id.ljust(width)}  {counted_word} {score:>7}"
                f"  last {style(label.ljust(8), fg=colour)} {tries}{note}"
            )
        if chapter.quiz is not None:
            q = chapter.quiz
            state = style("complete", fg="green") if q.complete else "incomplete"
            lines.append(
                f"  quiz: {q.checkpoints_correct}/{q.checkpoints} checkpoints, "
                f"{q.questions_correct}/{q.questions} questions correct ({state})"
            )
    hidden = sum(ex.last_status == "received" for c in progress.chapters for ex in c.exercises)
    counted = sum(ex.last_status != "received" for c in progress.chapters for ex in c.exercises)
    lines.append(
        style(  # the course's total, told apart from a report's ("This upload: ...", one upload)
            f"Course: {format_score(progress.score)}/{format_score(progress.max_score)} "
            f"exercise points ({progress.percent:.1f}%) over all {counted} exercises, each with the score that counts"
            + (
                f", not counting {hidden} exercise{'s' if hidden != 1 else ''} whose score is hidden until the "
                "feedback release (exam mode)"
                if hidden
                else ""
            ),
            bold=True,
        )
    )
    quizzes = [c.quiz for c in progress.chapters if c.quiz is not None]
    if quizzes:
        lines.append(f"Quizzes: {sum(q.complete for q in quizzes)} of {len(quizzes)} complete")
    lines.extend(format_dates(progress.dates))
    lines.extend(format_regrades(progress.regrades))
    lines.append(f"Next: {progress.next_step}")
    return "\n".join(lines)


def format_regrades(rows: list[dict[str, Any]]) -> list[str]:
    """The student's regrade requests: open ones, and the instructor's answers (reply, and the score set)."""
    lines = []
    for row in rows:
        asked = f"  #{row['id']} {row['exercise']} (submission {row['job_id']}): "
        if row["status"] == "open":
            lines.append(asked + "open, waiting for the instructor")
        else:
            score = "" if row.get("override") is None else f" Score set to {format_score(float(row['override']))}."
            lines.append(asked + f"answered: {row['reply']}{score}")
    return ["Regrade requests:", *lines] if lines else []


def shown_time(text: str) -> str:
    """An ISO time of the course's dates as every view shows it (standing.format_time); the text itself if it is
    not one."""
    try:
        return format_time(parse_time(text))
    except ValueError:
        return text


def format_dates(dates: list[dict[str, Any]]) -> list[str]:
    """The student's own deadlines, one line per chapter with a due date or exam times (an extension says so,
    with its reason); times in the one format of grader/student/standing.py, an exam chapter named as one."""
    lines = []
    for date in dates:
        exam = []
        if date.get("opens"):
            exam.append(f"uploads open {shown_time(date['opens'])}")
        if date.get("release_feedback"):
            exam.append(f"exam: feedback at {shown_time(date['release_feedback'])}")
        if not date.get("due"):
            if exam:
                lines.append(f"  {date['name']}: {', '.join(exam)}")
            continue
        penalty = float(date.get("late_penalty", 1.0))
        late = "late work counts nothing" if penalty >= 1 else f"late work loses {penalty:.0%}"
        closes = f", uploads close {shown_time(date['closes'])}" if date.get("closes") else ""
        own = f"  (your extension: {date['extension']})" if date.get("extension") else ""
        extra = "".join(f", {e}" for e in exam)
        lines.append(f"  {date['name']}: due {shown_time(date['due'])}, {late}{closes}{extra}{own}")
    return ["Deadlines:", *lines] if lines else []
