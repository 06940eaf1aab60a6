"""The instructor's ``grade progress`` (and the server's record): the summary over the locked quizzes.

The summary itself (exercises per chapter, the counted score of each, quiz
completion, what next) and its text are :mod:`grader.student.feedback.progress`, which
the handout shares; this module adds what only this side has: the locked
quizzes, whose completion (``grader.quiz.chapter_progress``: complete when
every checkpoint question has a correct recorded answer) it computes from the
store.
"""

from __future__ import annotations

from grader import quiz as quiz_lib
from grader.term import regrade
from grader.quiz import Quiz
from grader.student.engine import catalogue
from grader.student.feedback import progress as student_progress
from grader.student.course import Course
from grader.student.feedback.progress import (  # noqa: F401  (re-exported: the summary and its text, shared with the handout)
    DEFAULT_MAX_SCORE,
    ChapterProgress,
    ExerciseProgress,
    Progress,
    format_progress,
    next_step,
)
from grader.student.store import Store


def course_exercises() -> list[str]:
    """The course's exercise ids in order (grader.student.engine.catalogue.EXERCISES)."""
    return list(catalogue.EXERCISES)


def course_quizzes() -> list[Quiz]:
    """The course's locked quizzes in order (grader.quiz; [] when there is no quiz folder)."""
    quiz_dir = quiz_lib.default_quiz_dir()
    if not quiz_dir.is_dir():
        return []
    return quiz_lib.load_all(quiz_dir)


def summarize(
    store: Store | None,
    student: str,
    exercise_ids: list[str],
    quizzes: list[Quiz],
    submit_hint: str = "grade submit",
    course: Course | None = None,
    source: str = "",
) -> Progress:
    """Build the progress summary of ``student`` from the store (None: nothing recorded yet).

    The score of each exercise is the one that counts under ``course``'s rule
    (``grader.student.course.counted_score``; default: the best ever). Quiz completion
    is ``grader.quiz.chapter_progress`` over the student's recorded answers:
    complete when every checkpoint question has a correct one.
    """
    answers = store.quiz_attempts(student) if store is not None else []
    standings = [quiz_lib.chapter_progress(quiz, answers) for quiz in quizzes]
    regrades = [regrade.public(r) for r in regrade.requests(store, student)] if store is not None else []
    return student_progress.summarize(
        store, student, exercise_ids, standings, submit_hint, course, source, regrades=regrades
    )
