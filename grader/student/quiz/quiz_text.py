"""What a quiz session shows the student, shared by every `grade quiz`: the instructor's (local, locked
quizzes), the handout's against the course server, and the server's own standings.

Nothing here knows an answer: it prints questions as posed, the answer hints, the
feedback after a verdict given elsewhere, the summary of a pass, the listing of
chapters with a student's standing (:class:`ChapterProgress`), and reads an answers
file. :mod:`grader.quiz` (keys, posing, judging) re-exports these names.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from grader.student.quiz.answers import QuizError

KIND_HINTS = {
    "single": "the number of one choice",
    "multiple": "the numbers of every correct choice, separated by commas",
    "numeric": "a number; fractions, e-notation, ^ and sqrt() are fine",
    "short": "a short answer or formula",
}


@dataclass
class ChapterProgress:
    """A student's standing on one chapter, from the recorded attempts."""

    chapter: str
    title: str
    questions: int
    checkpoints: int
    checkpoints_correct: int
    questions_correct: int
    attempts: int

    @property
    def complete(self) -> bool:
        return self.checkpoints_correct == self.checkpoints

    @property
    def state(self) -> str:
        """'complete', else 'in progress' or 'not started' (no recorded answer)."""
        if self.complete:
            return "complete"
        return "in progress" if self.attempts else "not started"

    @property
    def completion_line(self) -> str:
        """What ``grade quiz CHAPTER`` says at the end: complete, or how far and how to go on."""
        if self.complete:
            return f"Chapter {self.chapter} complete: every checkpoint answered correctly."
        return (
            f"Chapter {self.chapter} not complete yet: {self.checkpoints_correct}/{self.checkpoints} "
            f"checkpoints answered correctly. Try again: grade quiz {self.chapter}"
        )

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "ChapterProgress":
        """The inverse of ``to_json`` (the course server sends standings so)."""
        return cls(**{name: doc[name] for name in cls.__dataclass_fields__})

    def to_json(self) -> dict[str, Any]:
        return {
            "chapter": self.chapter,
            "title": self.title,
            "questions": self.questions,
            "questions_correct": self.questions_correct,
            "checkpoints": self.checkpoints,
            "checkpoints_correct": self.checkpoints_correct,
            "attempts": self.attempts,
            "complete": self.complete,
        }


def load_answers(path: str | Path) -> dict[str, Any]:
    """Read an answers file: TOML (``.toml``) or JSON (anything else), a mapping question id -> answer.

    Answers are strings, numbers, or lists of choice ids for multiple-select questions.
    """
    path = Path(path)
    try:
        if path.suffix == ".toml":
            with open(path, "rb") as fh:
                doc = tomllib.load(fh)
        else:
            doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise QuizError(f"cannot read the answers file {path} ({exc.strerror})") from exc
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise QuizError(f"{path} is not a valid answers file ({exc}): expected TOML or JSON") from exc
    if not isinstance(doc, dict):
        raise QuizError(f"{path} must map question ids to answers")
    return doc


def answers_for(doc: Mapping[str, Any], chapter: str, student: str, source: str) -> tuple[dict[str, Any], bool]:
    """One chapter's answers from an answers file, and whether choice numbers count as shown to the student.

    Two forms: flat (question id -> answer; choice ids, or numbers in file order), or Gradescope's, which
    ``grade quiz --student ID --save-answers`` writes: ``student = "ID"`` and one ``[chapter]`` table each,
    choice numbers as that student saw them. QuizError (one line) when the file is someone else's or has
    no table for the chapter."""
    tables = {k: v for k, v in doc.items() if isinstance(v, dict)}
    if "student" not in doc and not tables:
        return dict(doc), False
    named = doc.get("student")
    if named is not None and str(named).strip().casefold() != student.strip().casefold():
        raise QuizError(
            f"{source} holds the answers of '{named}', not of '{student}': "
            "answer as yourself (grade quiz CHAPTER --student YOU --save-answers FILE)"
        )
    if chapter not in tables:
        found = ", ".join(sorted(tables)) or "none"
        raise QuizError(f"{source} has no [{chapter}] table (its chapters: {found})")
    return dict(tables[chapter]), named is not None


def format_listing(student: str, standings: list[ChapterProgress]) -> str:
    """``grade quiz`` without a chapter: one line per chapter with the student's completion."""
    width = max((len(s.chapter) for s in standings), default=0)
    lines = [f"Quizzes of {student}"]
    for s in standings:
        lines.append(
            f"  {s.chapter.ljust(width)}  {s.questions:>2} questions  "
            f"checkpoints {s.checkpoints_correct}/{s.checkpoints}  {s.state}"
        )
    lines.append(f"{sum(s.complete for s in standings)} of {len(standings)} complete. Take one: grade quiz CHAPTER")
    return "\n".join(lines)


def answer_hint(kind: str, tolerance: float | None, names: Iterable[str] = ()) -> str:
    """What the answer prompt says to type: the kind's form, the tolerance, the names one may use."""
    hint = KIND_HINTS[kind]
    if kind == "numeric":
        hint += f"; within ±{tolerance or 0:g}"
    names = list(names)
    if names:
        hint += f"; you may use {', '.join(names)}"
    return hint


def show_question(
    number: int, total: int, question_id: str, prompt: str, choices: Iterable[str], checkpoint: bool
) -> None:
    """Print a posed question: ``Qn/N ID [checkpoint]: prompt`` (the id is what an answers file names) and its
    choices numbered as shown."""
    tag = " [checkpoint]" if checkpoint else ""
    click.echo("")
    click.echo(f"Q{number}/{total} {question_id}{tag}: {prompt}")
    for index, text in enumerate(choices, 1):
        click.echo(f"  {index}. {text}")


def attempt_label(attempt: int, attempts: int, hint: str) -> str:
    """The prompt of an attempt: the hint on the first, ``Attempt k of n`` after a wrong one."""
    return f"Your answer ({hint})" if attempt == 1 else f"Attempt {attempt} of {attempts}"


def feedback_line(correct: bool, left: int) -> str:
    """What follows a judged answer: ``Correct.``, or ``Not this one.`` (the words of the graded rules,
    grader/quiz/graded.py, and of the handout's README) with the attempts left."""
    if correct:
        return "Correct."
    return f"Not this one. {left} attempt{'s' if left != 1 else ''} left." if left else "Not this one."


def session_intro(title: str, questions: int, checkpoints: int, done: int) -> None:
    """The first lines of a session: the chapter, and how many questions are skipped as already right."""
    click.echo(
        f"{title}: {questions} questions, {checkpoints} checkpoint(s). "
        "Answer every checkpoint correctly to complete the chapter."
    )
    if done:
        click.echo(f"{done} already answered correctly; asking the other {questions - done}.")


def summary_text(
    chapter: str, correct: int, total: int, score: float, max_score: float, checkpoints_right: int, checkpoints: int
) -> str:
    """The summary of a pass from its counts (``grade quiz`` locally and against the server)."""
    return (
        f"{chapter}: {correct}/{total} correct ({score:g}/{max_score:g} points), "
        f"checkpoints {checkpoints_right}/{checkpoints}."
    )
