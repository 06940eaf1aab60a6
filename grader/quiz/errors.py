"""The quiz's errors: each is one line saying what was wrong and what to do."""

from __future__ import annotations

from pathlib import Path

from grader.student.quiz.answers import AnswerFormatError, QuizError  # noqa: F401  (defined beside the answer forms)
from grader.student.errors import UsageError


class QuizFileError(QuizError):
    """A quiz file (source or locked) is malformed: names the file, the question and the problem."""

    def __init__(self, file: str | Path, question_id: str | None, problem: str) -> None:
        self.file = str(file)
        self.question_id = question_id
        self.problem = problem
        where = f"question '{question_id}'" if question_id is not None else "quiz"
        super().__init__(f"{self.file}: {where}: {problem}")


class UnknownChapterError(UsageError):
    """A chapter name that is not a quiz (the message suggests the closest one)."""


class ReferenceUnavailableError(QuizError):
    """A parameterised question needs the reference implementation, which cannot be imported here."""
