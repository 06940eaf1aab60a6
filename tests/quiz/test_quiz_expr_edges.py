"""The answer reader refuses, in one line and before SymPy sees them, the shapes the leak audit found
SymPy's reader crashing on: brackets closed before they open, empty brackets, and commas (a pair is never
a value). Each is an unreadable answer, which costs no attempt."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import quiz as quiz_lib
from grader.student.quiz import expr
from grader.student.quiz.answers import AnswerFormatError, parse_number

QUIZ_DIR = Path(__file__).resolve().parents[2] / "quizzes"


@pytest.mark.parametrize(
    "text,reason",
    [
        ("x)(x", "unbalanced parentheses"),
        ("z) - (z", "unbalanced parentheses"),
        ("g( )", "empty parentheses"),
        ("sqrt()", "empty parentheses"),
        ("x(1, x)", "without commas"),
        ("1,024", "without commas"),
    ],
)
def test_the_reader_refuses_in_one_line(text: str, reason: str) -> None:
    with pytest.raises(expr.ExpressionError, match=reason) as caught:
        expr.fingerprint(text, {"x": "x", "z": "z", "g": "g"}, "00" * 16)
    assert "\n" not in str(caught.value)
    numeric = text.replace("x", "2").replace("z", "3").replace("g", "4")
    with pytest.raises(AnswerFormatError, match=reason):
        parse_number(numeric)


@pytest.mark.parametrize(
    "chapter,question_id,answer",
    [
        ("dropout-weight-decay", "sgd-l2-update", "g( )"),
        ("activations", "gelu-definition", "x)(Phi(x)"),
        ("dropout-weight-decay", "dropout-subnetworks", "1,024"),
    ],
)
def test_such_an_answer_is_unreadable_not_a_crash(chapter: str, question_id: str, answer: str) -> None:
    question = quiz_lib.load_quiz(QUIZ_DIR / f"{chapter}.json").question(question_id)
    verdict = quiz_lib.grade_answer(question, answer)
    assert not verdict.correct and verdict.error


def test_what_was_read_before_still_is() -> None:
    assert parse_number("2*sqrt(3/2)") == pytest.approx(2.449489742783178)
    assert parse_number("(1/2 - 1/(2π))") == pytest.approx(0.3408450569)
    salt = "00" * 16
    assert expr.fingerprint("σ(z)(1 - σ(z))", {"z": "z"}, salt) == expr.fingerprint(
        "sigmoid(z)-sigmoid(z)^2", {"z": "z"}, salt
    )
