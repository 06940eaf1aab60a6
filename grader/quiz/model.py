"""The quiz's data: locked questions, a question as one student sees it (``Posed``), verdicts,
results and a chapter's standing, and the constants of the quiz files."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.quiz import params as params_lib
from grader.student.quiz.answers import symbol_table
from grader.student.quiz.quiz_text import (  # noqa: F401  (what a session shows: shared with the handout)
    KIND_HINTS,
    ChapterProgress,
)

KINDS = ("single", "multiple", "numeric", "short")
CHAPTER_ORDER = (
    "activations",
    "normalization",
    "dropout-weight-decay",
    "initialisation",
    "universal-approximation",
)
FORMAT = "normgrade-quiz-1"
SALT_BYTES = 16
QUIZ_DIR_ENV = "GRADE_QUIZ_DIR"
CHECKPOINT_ATTEMPTS = 2

_ID_RE = re.compile(r"[a-z][a-z0-9-]*")  # matched whole (fullmatch)
_COMMON_FIELDS = {
    "id",
    "kind",
    "prompt",
    "explanation",
    "choices",
    "tolerance",
    "points",
    "checkpoint",
    "ladder",
    "attempts",
    "symbols",
    "aliases",
    "subject",
    "params",
    "reference",
    "practice",
}
LOCKED_FIELDS = _COMMON_FIELDS | {"salt", "digests", "steps"}
SOURCE_FIELDS = _COMMON_FIELDS | {"answer", "wrong", "answer_range"}
_TEMPLATE_FIELD = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*(\|\s*signed\s*)?\}\}")


@dataclass(frozen=True)
class Choice:
    """One option of a choice question; ``id`` is stable, the display number is not."""

    id: str
    text: str


@dataclass
class Question:
    """A locked question: everything a student may read, the answer only as digests."""

    id: str
    kind: str
    prompt: str
    explanation: str
    salt: str
    digests: tuple[str, ...]
    choices: tuple[Choice, ...] = ()
    tolerance: float | None = None
    points: float = 1.0
    checkpoint: bool = False
    ladder: str | None = None
    chapter: str = ""
    attempts: int = 1
    symbols: dict[str, str] = field(default_factory=dict)
    subject: str | None = None
    params: dict[str, Any] | None = None
    practice: dict[str, Any] | None = None  # the practice instance (the handout's offline numbers)
    steps: int = 10  # a fixed numeric key's bins per tolerance (grader.quiz.locking.exact_steps)
    reference: str | None = None

    @property
    def parameterised(self) -> bool:
        """True when the answer is computed by the reference from the student's numbers."""
        return self.params is not None

    @property
    def display_prompt(self) -> str:
        """The prompt for the instructor's pages: each drawn number shown as its range, ``[x: -3.3 … 3.3]``
        (a short list as ``{0.1, 0.2}``), never a raw ``{{ x }}`` template; a fixed question's prompt as is."""
        if self.params is None:
            return self.prompt
        specs = params_lib.parse_specs(self.params)

        def shown(match: re.Match[str]) -> str:
            values = sorted(specs[match.group(1)].values)
            span = (
                "{" + ", ".join(f"{v:g}" for v in values) + "}"
                if len(values) <= 4
                else f"{values[0]:g} … {values[-1]:g}"
            )
            return f"{'± ' if match.group(2) else ''}[{match.group(1)}: {span}]"

        return _TEMPLATE_FIELD.sub(shown, self.prompt)


@dataclass
class Posed:
    """A question as one student sees it: drawn values, rendered prompt, choices in display order."""

    question: Question
    values: dict[str, Any]
    prompt: str
    choices: tuple[Choice, ...]

    def explanation(self, answer: float | None = None) -> str:
        """The explanation, rendered with the values (and ``answer`` for a parameterised question)."""
        if not self.question.parameterised:
            return self.question.explanation
        return params_lib.render(self.question.explanation, {**self.values, "answer": answer})


@dataclass
class Quiz:
    """A chapter's locked quiz."""

    chapter: str
    title: str
    questions: list[Question]
    path: Path

    @property
    def checkpoints(self) -> list[Question]:
        """The questions that must be answered correctly to complete the chapter."""
        return [q for q in self.questions if q.checkpoint]

    def question(self, question_id: str) -> Question:
        """The question with this id (KeyError when absent)."""
        for q in self.questions:
            if q.id == question_id:
                return q
        raise KeyError(question_id)


@dataclass
class SourceQuestion:
    """An author's question: the public fields plus ``answer`` and optional ``wrong`` samples."""

    data: dict[str, Any]
    answer: Any
    wrong: list[Any]
    answer_range: tuple[float, float] | None = None

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def kind(self) -> str:
        return str(self.data["kind"])

    @property
    def choices(self) -> tuple[Choice, ...]:
        return tuple(Choice(c["id"], c["text"]) for c in self.data.get("choices", []))

    @property
    def tolerance(self) -> float | None:
        return self.data.get("tolerance")

    @property
    def symbols(self) -> dict[str, str]:
        return symbol_table(self.data)

    @property
    def subject(self) -> str | None:
        return self.data.get("subject")


@dataclass
class SourceQuiz:
    """A chapter's author source (plaintext answers)."""

    chapter: str
    title: str
    questions: list[SourceQuestion]
    path: Path


@dataclass
class Verdict:
    """One graded answer: the form recorded in the store, correctness, or why it was unreadable."""

    question_id: str
    answer: str
    correct: bool
    error: str | None = None
    values: dict[str, Any] = field(default_factory=dict)
    expected: float | None = None  # a parameterised question's reference answer (shown after judging)


@dataclass
class QuizResult:
    """The verdicts of one pass through a chapter (unanswered questions have no verdict)."""

    quiz: Quiz
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    posed: dict[str, Posed] = field(default_factory=dict)

    def explanation(self, question: Question) -> str:
        """The explanation of an answered question, rendered with the student's numbers."""
        verdict = self.verdicts.get(question.id)
        posed = self.posed.get(question.id)
        if posed is None:
            return question.explanation
        return posed.explanation(verdict.expected if verdict else None)

    @property
    def score(self) -> float:
        return sum(q.points for q in self.quiz.questions if self._correct(q.id))

    @property
    def max_score(self) -> float:
        return sum(q.points for q in self.quiz.questions)

    @property
    def correct_count(self) -> int:
        return sum(1 for q in self.quiz.questions if self._correct(q.id))

    @property
    def all_correct(self) -> bool:
        """True when every question of the chapter was answered correctly in this pass."""
        return self.correct_count == len(self.quiz.questions)

    def _correct(self, question_id: str) -> bool:
        verdict = self.verdicts.get(question_id)
        return verdict is not None and verdict.correct

    def to_json(self, student: str, complete: bool) -> dict[str, Any]:
        """The ``--json`` document of a graded chapter."""
        questions = []
        for q in self.quiz.questions:
            v = self.verdicts.get(q.id)
            questions.append(
                {
                    "id": q.id,
                    "kind": q.kind,
                    "checkpoint": q.checkpoint,
                    "points": q.points,
                    "answered": v is not None,
                    "answer": v.answer if v else None,
                    "correct": bool(v and v.correct),
                    "error": v.error if v else None,
                    "params": (v.values or None) if v else None,
                    "explanation": self.explanation(q) if v else None,
                }
            )
        return {
            "student": student,
            "chapter": self.quiz.chapter,
            "score": self.score,
            "max_score": self.max_score,
            "correct": self.correct_count,
            "total": len(self.quiz.questions),
            "complete": complete,
            "questions": questions,
        }
