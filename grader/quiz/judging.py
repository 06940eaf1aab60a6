"""Judging: a question posed for a student (their numbers, their choice order) and an answer
judged against the locked key or the reference (``pose``, ``judge``, ``grade_answers``)."""

from __future__ import annotations

import difflib
import hmac
import random
from collections.abc import Mapping
from typing import Any

from grader.quiz import params as params_lib
from grader.quiz.errors import AnswerFormatError
from grader.quiz.model import Choice, Posed, Question, Quiz, QuizResult, Verdict
from grader.student.answers import _choice_ids, canonical_answers, digest, formula_message, parse_number
from grader.student.errors import UsageError
from grader.student.model import exercise_seed

def recorded_form(question: Question, raw: Any, shown: tuple[Choice, ...] | None = None) -> str:
    """The answer as stored in the progress database: choice ids, or the text given."""
    if question.kind in ("single", "multiple"):
        try:
            return ",".join(_choice_ids(question, raw, shown))
        except AnswerFormatError:
            pass
    if isinstance(raw, (list, tuple)):
        return ",".join(str(r) for r in raw)
    return str(raw).strip()


def pose(question: Question, student: str) -> Posed:
    """The question as ``student`` sees it: drawn values, rendered prompt, shuffled choices.

    The same student always gets the same values and order (seeded by
    ``exercise_seed``); the prompt of a fixed question is shown as written.
    """
    values: dict[str, Any] = {}
    prompt = question.prompt
    if question.params is not None:
        specs = params_lib.parse_specs(question.params)
        values = params_lib.draw(specs, student, question.chapter, question.id)
        prompt = params_lib.render(question.prompt, values)
    choices = list(question.choices)
    random.Random(exercise_seed(student, f"quiz.{question.chapter}.{question.id}.choices")).shuffle(choices)
    return Posed(question, values, prompt, tuple(choices))


def judge(posed: Posed, raw: Any, shown: bool = False) -> Verdict:
    """Judge one answer to a posed question; AnswerFormatError when unreadable (costs no attempt).

    ``shown``: choice numbers refer to the order the student saw. A parameterised
    question runs the reference (ReferenceUnavailableError when it is not installed).
    """
    question = posed.question
    order = posed.choices if shown else None
    answer = recorded_form(question, raw, order)
    if question.parameterised:
        value = parse_number(raw, posed.values)
        call = params_lib.parse_reference(question.reference, set(posed.values))
        expected = params_lib.reference_answer(call, posed.values)
        correct = abs(value - expected) <= float(question.tolerance or 0) * (1 + 1e-9)
        return Verdict(question.id, answer, correct, values=dict(posed.values), expected=expected)
    candidates = canonical_answers(question, raw, order)
    if not _matches(question, candidates) and question.kind == "short" and question.symbols:
        candidates = [formula_message(question, raw, question.salt)]
    return Verdict(question.id, answer, _matches(question, candidates))


def _matches(question: Question, candidates: list[str]) -> bool:
    return any(hmac.compare_digest(digest(question.salt, c), d) for c in candidates for d in question.digests)


def check_answer(question: Question, raw: Any, student: str = "") -> Verdict:
    """Judge one answer as written in an answers file (choice ids or file-order numbers)."""
    return judge(pose(question, student), raw)


def grade_answer(question: Question, raw: Any, student: str = "") -> Verdict:
    """Like check_answer, but an unreadable answer is a wrong one carrying the reason."""
    try:
        return check_answer(question, raw, student)
    except AnswerFormatError as exc:
        return Verdict(question.id, recorded_form(question, raw), False, str(exc))


def grade_answers(quiz: Quiz, answers: Mapping[str, Any], source: str = "answers", student: str = "") -> QuizResult:
    """Grade a mapping question id -> answer for ``student`` (whose numbers parameterised questions use);
    unknown ids raise UsageError, missing ones stay unanswered."""
    known = {q.id for q in quiz.questions}
    unknown = [k for k in answers if k not in known]
    if unknown:
        guess = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        hint = f" Did you mean '{guess[0]}'?" if guess else ""
        raise UsageError(f"{source}: '{unknown[0]}' is not a question of chapter '{quiz.chapter}'.{hint}")
    result = QuizResult(quiz)
    for q in quiz.questions:
        if q.id in answers:
            result.posed[q.id] = pose(q, student)
            result.verdicts[q.id] = grade_answer(q, answers[q.id], student)
    return result

