"""A generated class for the instructor's dashboard: its browser tests, its bench and its screenshots.

``generate(store, students, now)`` writes a roster, tokens, graded uploads
(spread over the 30 days before ``now``, some after a chapter's due date),
quiz answers and one score override into ``store``, deterministically from
``seed``. The uploads are recorded with ``Store.record_report``, exactly as
the course server records a graded job; each grades the exercises of the
chapters a student has reached, with named mistakes (from the catalogue) and
unnamed failing checks. ``sample_course(now)`` is the course those dates
belong to. Nothing here is used while grading real students.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from grader.student.engine import catalogue
from grader.student.course import Course, parse_course
from grader.mistakes import CATALOGUE
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.quiz import Quiz
from grader.server import roster
from grader.student.store import Store

CHECKS = ("forward values", "backward gradient", "shapes and dtype", "hidden cases")
UNNAMED_MESSAGES = {
    "shapes and dtype": "the output has shape (4, 3), expected (4, 3, 1)",
    "hidden cases": "max abs difference 0.031 on the hidden inputs (tolerance 1e-06)",
}
#: (topic, due: days before ``now`` (negative: after), late penalty) of the sample course's chapters
CHAPTERS = (
    ("activations", 21, 0.25),
    ("linear", 14, 0.25),
    ("normalization", 4, 0.5),
    ("dropout", -5, 0.25),
    ("init", -12, 0.25),
    ("optim", -19, 0.25),
)
# The quiz chapter each chapter holds where it is not of its name, and the quiz held by a chapter of its own (no
# exercises, no date): `grade serve` refuses a quiz chapter that no chapter holds (docs/term.md).
QUIZ_OF = {"dropout": "dropout-weight-decay", "init": "initialisation"}
QUIZ_ONLY = "universal-approximation"
ODD_NAMES = ('=HYPERLINK("http://x.invalid","click")', '<b>Zoë</b> & "Ö\'Brien"')


COURSE_NAME = "Deep learning from scratch (generated class)"


def sample_course(now: datetime) -> Course:
    """The course of the generated class: six chapters, due dates around ``now``, the best score counts; every
    quiz chapter held by one of them (or, the last, by a chapter of its own)."""
    doc = {
        "name": COURSE_NAME,
        "chapter": [
            {"name": topic, "due": _due(now, days), "late_penalty": penalty, "quiz": QUIZ_OF.get(topic, topic)}
            for topic, days, penalty in CHAPTERS
        ]
        + [{"name": QUIZ_ONLY, "exercises": [], "quiz": QUIZ_ONLY}],
    }
    return parse_course(doc, Path("sample-course.toml"))


def _due(now: datetime, days_before: int) -> datetime:
    """A due date ``days_before`` days before ``now``, to the second (as a course.toml holds it)."""
    return (now - timedelta(days=days_before)).replace(microsecond=0)


def course_toml(now: datetime) -> str:
    """The text of the course.toml that :func:`sample_course` parses (for ``grade serve --course``)."""
    lines = [f'name = "{COURSE_NAME}"', ""]
    for topic, days, penalty in CHAPTERS:
        due = _due(now, days).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        lines += [
            "[[chapter]]",
            f'name = "{topic}"',
            f"due = {due}",
            f"late_penalty = {penalty}",
            f'quiz = "{QUIZ_OF.get(topic, topic)}"',
            "",
        ]
    lines += ["[[chapter]]", f'name = "{QUIZ_ONLY}"', "exercises = []", f'quiz = "{QUIZ_ONLY}"', ""]
    return "\n".join(lines)


@dataclass
class Generated:
    """What :func:`generate` made: the tokens (student -> token), the instructor's token, the course."""

    tokens: dict[str, str]
    instructor_token: str
    course: Course


def _exercise_result(rng: random.Random, exercise: str, quality: float) -> ExerciseResult:
    """One graded exercise out of 10 whose checks pass with probability ``quality``."""
    mistakes = [m.id for m in CATALOGUE.values() if m.exercise == exercise]
    checks = []
    for name in CHECKS:
        if rng.random() < quality:
            checks.append(CheckResult(name, True, 2.5, 2.5))
            continue
        mistake = rng.choice(mistakes) if mistakes and rng.random() < 0.6 else None
        message = "" if mistake else UNNAMED_MESSAGES.get(name, "differs from the reference")
        checks.append(CheckResult(name, False, 0.0, 2.5, message or "differs from the reference", mistake))
    score = sum(c.score for c in checks)
    draw = rng.random() if score == 0 else 1.0
    if draw < 0.3:
        return ExerciseResult(exercise, "not_implemented", 0.0, 10.0, [], "NotImplementedError: write forward")
    if draw < 0.45:  # a file that does not parse: a crash, not a wrong answer
        file = exercise.split(".")[0] + ".py"
        return ExerciseResult(exercise, "error", 0.0, 10.0, [], f"{file} line 12: SyntaxError: invalid syntax")
    return ExerciseResult(exercise, "passed" if score >= 10 else "failed", score, 10.0, checks)


def _record_uploads(store: Store, rng: random.Random, student: str, skill: float, now: datetime) -> None:
    """A student's uploads over the last 30 days (until a time of their own: some stop early), each grading
    the chapters reached by then (one more every 5 days), getting better with each try."""
    start = now - timedelta(days=30)
    uploads = rng.randint(0, 9) if skill > 0.2 else rng.randint(0, 2)
    active_days = min(30.0, 30 * rng.uniform(0.4, 1.3))
    times = sorted(start + timedelta(days=rng.uniform(0, active_days)) for _ in range(uploads))
    for k, when in enumerate(times):
        reached = min(len(CHAPTERS), int((when - start).days / 5) + 1)
        ids = [f"{topic}.{name}" for topic, _, _ in CHAPTERS[:reached] for name in catalogue.TOPIC_EXERCISES[topic]]
        quality = min(0.98, 0.3 + 0.5 * skill + 0.06 * k)
        exercises = [_exercise_result(rng, exercise, quality) for exercise in ids]
        store.record_report(
            GradeReport(student, exercises, f"hash-{student}-{k}"),
            "generated",
            started_at=when.isoformat(timespec="seconds"),
        )


def _record_quiz(
    store: Store, rng: random.Random, student: str, skill: float, quizzes: list[Quiz], now: datetime
) -> None:
    """Quiz answers: first answers right with a probability rising with skill and falling with difficulty."""
    rows = []
    when = now - timedelta(days=rng.uniform(1, 25))
    for quiz in quizzes:
        if rng.random() > 0.3 + 0.7 * skill:
            continue
        for index, question in enumerate(quiz.questions):
            difficulty = (index % 4) / 5
            for attempt in range(3):
                right = rng.random() < skill - difficulty + 0.25 * attempt
                if question.choices:  # the generated key: the first choice; one tempting wrong answer
                    ids = [c.id for c in question.choices]
                    wrong = ids[1:] or ["x"]
                    answer = ids[0] if right else (wrong[0] if rng.random() < 0.7 else rng.choice(wrong))
                else:
                    answer = "0.25" if right else rng.choice(["0.5", "1", "-1"])
                params = json.dumps({"x": round(rng.uniform(-2, 2), 2)}) if question.params is not None else ""
                rows.append(
                    {
                        "student": student,
                        "chapter": quiz.chapter,
                        "question": question.id,
                        "answer": answer,
                        "correct": int(right),
                        "params": params,
                        "first_try": int(attempt == 0),
                        "answered_at": (when + timedelta(minutes=index * 3 + attempt)).isoformat(timespec="seconds"),
                    }
                )
                if right:
                    break
    if rows:
        with store.transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO students (name, created_at) VALUES (?, ?)", [student, rows[0]["answered_at"]]
            )
            db.table("quiz_attempts").insert_all(rows)


def generate(
    store: Store, students: int, quizzes: list[Quiz], now: datetime | None = None, seed: int = 12
) -> Generated:
    """Write a generated class of ``students`` into ``store`` (see the module docstring)."""
    now = now or datetime.now(timezone.utc)
    rng = random.Random(seed)
    entries = []
    for k in range(students):
        sid = f"s{k + 1:04d}"
        name = ODD_NAMES[k - 1] if 1 <= k <= len(ODD_NAMES) else f"Student {k + 1:04d}"
        entries.append(roster.RosterEntry(sid, name, f"{sid}@example.org"))
    issued = roster.import_roster(store, entries)
    teacher = roster.issue_instructor_token(store)
    for entry in entries:
        skill = rng.betavariate(2.2, 1.4)
        _record_uploads(store, rng, entry.id, skill, now)
        _record_quiz(store, rng, entry.id, skill, quizzes, now)
    with store.transaction() as db:
        db.table("score_overrides").insert(
            {
                "student": entries[0].id,
                "exercise": "activations.GELU",
                "score": 10.0,
                "comment": "GELU graded by hand: the tanh approximation was allowed",
                "author": "instructor",
                "created_at": now.isoformat(timespec="seconds"),
            }
        )
    return Generated({entry.id: token for entry, token in issued}, teacher, sample_course(now))
