"""Issue 46's checkpoint findings (the independent audit of the quiz bank), each checked where it was found:
right answers that were refused, draws and texts that let a misconception or another question's answer
through. The misconceptions on every draw are tests/quiz/test_quiz_misconceptions.py, the leak audit
tests/quiz/test_quiz_leaks.py, a drawn answer being a number tests/quiz/test_quiz_params.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import quiz as quiz_lib

ROOT = Path(__file__).resolve().parents[2]
QUIZ_DIR = ROOT / "quizzes"
SOURCES = [quiz_lib.load_source(p) for p in sorted((QUIZ_DIR / "source").glob("*.toml"))]
QUESTIONS = {q.id: q for s in SOURCES for q in s.questions}


def _locked(chapter: str, question_id: str) -> quiz_lib.Question:
    return quiz_lib.load_quiz(QUIZ_DIR / f"{chapter}.json").question(question_id)


# --- right answers that were refused -----------------------------------------------------------------


@pytest.mark.parametrize("answer", ["the supremum norm", "the uniform norm", "L^inf", "‖·‖∞", "the sup norm",
                                    "the L∞ norm", "||·||_∞", "‖·‖_∞", "L_inf", "the maximum norm",
                                    "The Supremum Norm.", "the Chebyshev norm"])
def test_uat_norm_accepts_the_supremum_norm_however_it_is_written(answer: str) -> None:
    assert quiz_lib.check_answer(_locked("universal-approximation", "uat-norm"), answer).correct


@pytest.mark.parametrize("answer", ["the L2 norm", "the Euclidean norm", "L^1", "‖·‖₂", "the mean square"])
def test_uat_norm_still_refuses_the_other_norms(answer: str) -> None:
    assert not quiz_lib.check_answer(_locked("universal-approximation", "uat-norm"), answer).correct


@pytest.mark.parametrize("answer", ["x/2*erfc(-x/sqrt(2))", "GELU(x) = ½x·erfc(-x/√2)", "0.5*x*erfc(-x/sqrt(2))"])
def test_gelu_definition_reads_erfc(answer: str) -> None:
    assert quiz_lib.check_answer(_locked("activations", "gelu-definition"), answer).correct


def test_erfc_is_not_a_way_around_the_density() -> None:
    assert not quiz_lib.check_answer(_locked("activations", "gelu-definition"), "x/2*erfc(x/sqrt(2))").correct
