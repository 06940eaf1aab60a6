"""Fixed numeric questions accept exactly the stated tolerance: |x - answer| <= t passes, anything
beyond fails (the locked key is the answer's own multiple of t/steps, never a coarse bin)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import quiz as quiz_lib
from grader.student.quiz.answers import parse_number

QUIZ_DIR = Path(__file__).resolve().parents[2] / "quizzes"
FIXED = [
    (s.chapter, q)
    for s in (quiz_lib.load_source(p) for p in sorted((QUIZ_DIR / "source").glob("*.toml")))
    for q in s.questions
    if q.kind == "numeric" and q.answer_range is None
]


@pytest.mark.parametrize("chapter,source", FIXED, ids=[q.id for _, q in FIXED])
def test_the_tolerance_is_exactly_as_stated(chapter: str, source: quiz_lib.SourceQuestion) -> None:
    question = quiz_lib.load_quiz(QUIZ_DIR / f"{chapter}.json").question(source.id)
    assert source.tolerance is not None  # (the questions parametrized here state one)
    answer, t = parse_number(source.answer), float(source.tolerance)
    for inside in (answer, answer + 0.999 * t, answer - 0.999 * t):
        assert quiz_lib.check_answer(question, repr(inside)).correct, (source.id, inside)
    for outside in (answer + 1.001 * t, answer - 1.001 * t, answer + 1.2 * t, answer - 1.2 * t):
        assert not quiz_lib.check_answer(question, repr(outside)).correct, (source.id, outside)


def test_xavier_std_refuses_what_the_old_bins_let_through() -> None:
    question = quiz_lib.load_quiz(QUIZ_DIR / "initialisation.json").question("xavier-std")
    assert not quiz_lib.check_answer(question, "0.0727").correct


@pytest.mark.parametrize("answer, tolerance", [(0.1234, 0.001), (-5.5, 0.001), (26.6667, 0.01), (695.9, 1.0)])
def test_the_practice_window_is_the_interval_the_seal_opens_for(answer: float, tolerance: float) -> None:
    """The handout's pages judge practice numbers with numeric_window; `grade quiz` opens a seal made under the
    answer's middle bin (grader/quiz/handout.py): both take the same numbers as right."""
    from types import SimpleNamespace

    from grader.student.quiz.answers import canonical_answers, numeric_window

    question = SimpleNamespace(kind="numeric", tolerance=tolerance)
    bins = canonical_answers(question, answer)
    key = bins[len(bins) // 2]
    low, high = numeric_window(answer, tolerance)
    eps = tolerance / 1000
    for inside in (answer, low + eps, high - eps):
        assert key in canonical_answers(question, repr(inside)), inside
    for outside in (low - eps, high + eps, answer + 2 * tolerance):
        assert key not in canonical_answers(question, repr(outside)), outside
