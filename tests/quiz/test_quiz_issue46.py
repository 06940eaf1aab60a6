"""Issue 46's checkpoint findings (the independent audit of the quiz bank), each checked where it was found:
right answers that were refused, draws and texts that let a misconception or another question's answer
through. The misconceptions on every draw are tests/quiz/test_quiz_misconceptions.py, the leak audit
tests/quiz/test_quiz_leaks.py, a drawn answer being a number tests/quiz/test_quiz_params.py."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path
from typing import Any

import pytest

from grader import quiz as quiz_lib
from grader.quiz import params as params_lib

ROOT = Path(__file__).resolve().parents[2]
QUIZ_DIR = ROOT / "quizzes"
SOURCES = [quiz_lib.load_source(p) for p in sorted((QUIZ_DIR / "source").glob("*.toml"))]
QUESTIONS = {q.id: q for s in SOURCES for q in s.questions}


def _locked(chapter: str, question_id: str) -> quiz_lib.Question:
    return quiz_lib.load_quiz(QUIZ_DIR / f"{chapter}.json").question(question_id)


# --- right answers that were refused -----------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "the supremum norm",
        "the uniform norm",
        "L^inf",
        "‖·‖∞",
        "the sup norm",
        "the L∞ norm",
        "||·||_∞",
        "‖·‖_∞",
        "L_inf",
        "the maximum norm",
        "The Supremum Norm.",
        "the Chebyshev norm",
    ],
)
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


# --- draws ---------------------------------------------------------------------------------------------

ENUMERATED = 100_000  # a grid of at most this many instances is read whole, a larger one on SAMPLE students'
SAMPLE = 20_000
PARAMETERISED = [(quiz.chapter, q) for quiz in quiz_lib.load_all(QUIZ_DIR) for q in quiz.questions if q.parameterised]


def _grid(question: quiz_lib.Question) -> list[dict[str, Any]]:
    """Every graded instance (the practice one is nobody's), or SAMPLE students' when the grid is larger."""
    specs = params_lib.parse_specs(question.params)
    if math.prod(len(spec.values) for spec in specs.values()) > ENUMERATED:
        return [quiz_lib.pose(question, f"student{i}").values for i in range(SAMPLE)]
    grid = [
        dict(zip(specs, combo, strict=True)) for combo in itertools.product(*(spec.values for spec in specs.values()))
    ]
    return [values for values in grid if values != question.practice]


@pytest.mark.parametrize("chapter,question", PARAMETERISED, ids=[q.id for _, q in PARAMETERISED])
def test_no_graded_answer_lies_within_twice_the_tolerance_of_the_practice_answer(
    chapter: str, question: quiz_lib.Question
) -> None:
    call = params_lib.parse_reference(question.reference, set(question.params or {}))
    practice = params_lib.reference_answer(call, question.practice or {})
    near = [
        values
        for values in _grid(question)
        if abs(params_lib.reference_answer(call, values) - practice) <= 2 * float(question.tolerance or 0)
    ]
    assert not near, f"{question.id}: {len(near)} graded draws near the practice answer {practice}, e.g. {near[:3]}"


def test_swish_derivative_never_draws_the_tail_where_every_reading_is_near_zero() -> None:
    specs = params_lib.parse_specs(QUESTIONS["swish-derivative"].data["params"])
    assert min(x * beta for x in specs["x"].values for beta in specs["beta"].values) > -7


def test_relu_ramp_output_draws_x_on_the_plateau_and_never_h_1() -> None:
    specs = params_lib.parse_specs(QUESTIONS["relu-ramp-output"].data["params"])
    assert min(specs["x"].values) > max(specs["t"].values) and 1.0 not in specs["h"].values


def test_no_drawn_prompt_adds_or_subtracts_a_zero() -> None:
    bad = []
    for _, question in PARAMETERISED:
        for values in _grid(question)[:5000]:
            prompt = params_lib.render(question.prompt, values)
            bad += [f"{question.id}: {m.group(0)!r}" for m in re.finditer(r"[+\-−] 0(?![.\d])", prompt)]
    assert not bad, sorted(set(bad))[:5]


def test_scale_invariance_questions_say_epsilon_is_taken_as_zero() -> None:
    for question_id in ("bn-weight-scale", "rmsnorm-scale-invariance"):
        assert "ε ≈ 0" in QUESTIONS[question_id].data["prompt"], question_id
