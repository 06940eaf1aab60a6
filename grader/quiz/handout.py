"""The handout's quiz files (``grade release``): what a student may hold, and nothing that buys a grade.

Every question keeps its prompt, choices, tolerance and formula names. What
else it carries depends on whether it can be practised offline without giving
away a graded answer:

- a parameterised question keeps its prompt template and each parameter's
  possible values, so ``grade quiz --student ID`` shows the student their own
  numbers (``grader.student.quiz.posing``); its practice prompt uses the practice
  instance (``PRACTICE_STUDENT``'s numbers, which no graded student is ever
  drawn), and its explanation is sealed under that instance's answer only:
  cracking the seal yields a number no graded student is asked for;
- a fixed question (one key for everyone) carries no seal at all: any seal
  over a small answer space opens to a search (every choice, every subset, a
  list of formulas, a numeric scan), so its key stays with the graders and it
  is judged only where the quizzes are graded (server or Gradescope).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grader.quiz import params as params_lib
from grader.quiz.model import SourceQuestion, SourceQuiz
from grader.student.quiz.answers import canonical_answers
from grader.student.quiz.posing import PRACTICE_STUDENT
from grader.student.quiz.practice import Choice, PracticeQuestion, PracticeQuiz, new_salt, seal


def handout_question(question: SourceQuestion, chapter: str, practice: bool = True) -> PracticeQuestion:
    """One source question as the handout holds it (see the module docstring)."""
    data = question.data
    out = PracticeQuestion(
        id=question.id,
        kind=question.kind,
        prompt=str(data["prompt"]).strip(),
        choices=tuple(Choice(c.id, c.text) for c in question.choices),
        tolerance=question.tolerance,
        points=float(data.get("points", 1.0)),
        symbols=question.symbols,
        subject=question.subject,
    )
    instance = practice_instance(question, chapter)
    if instance is None:
        return out
    specs = params_lib.parse_specs(data["params"])
    out.template = out.prompt
    out.params = {name: list(spec.values) for name, spec in specs.items()}
    out.practice = instance.values
    out.prompt = instance.prompt
    if practice:
        out.salt = new_salt()
        bins = canonical_answers(out, instance.answer)
        out.sealed = seal(instance.explanation, [bins[len(bins) // 2]], out.salt)
    return out


@dataclass(frozen=True)
class PracticeInstance:
    """A parameterised question posed with the practice numbers (which no graded student is drawn): its prompt,
    its answer (a practice answer, never a graded one) and its explanation with those numbers."""

    values: dict[str, Any]
    prompt: str
    answer: float
    explanation: str


def practice_instance(question: SourceQuestion, chapter: str) -> PracticeInstance | None:
    """The practice instance of a parameterised question; None for a question with one key for everyone."""
    data = question.data
    if "params" not in data:
        return None
    specs = params_lib.parse_specs(data["params"])
    values = params_lib.draw(specs, PRACTICE_STUDENT, chapter, question.id, data.get("practice"))
    answer = params_lib.reference_answer(params_lib.parse_reference(data["reference"], set(values)), values)
    return PracticeInstance(
        values,
        params_lib.render(str(data["prompt"]).strip(), values),
        answer,
        params_lib.render(str(data["explanation"]).strip(), {**values, "answer": answer}),
    )


def handout_quiz(source: SourceQuiz, practice: bool = True) -> PracticeQuiz:
    """A chapter's handout quiz from its author source."""
    return PracticeQuiz(
        source.chapter, source.title, [handout_question(q, source.chapter, practice) for q in source.questions]
    )
