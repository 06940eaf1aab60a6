"""Issue 33's content fixes: each item of the independent audit, checked where it was found (the leak
audit is tests/quiz/test_quiz_leaks.py, the misconceptions tests/quiz/test_quiz_misconceptions.py, the guessing
rules tests/quiz/test_quiz_guessing.py)."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest

from grader import quiz as quiz_lib
from grader.quiz import params as params_lib
from grader.quiz.model import Posed

ROOT = Path(__file__).resolve().parents[2]
QUIZ_DIR = ROOT / "quizzes"
SOURCES = [quiz_lib.load_source(p) for p in sorted((QUIZ_DIR / "source").glob("*.toml"))]
QUESTIONS = {q.id: q for s in SOURCES for q in s.questions}
ERRATA = (QUIZ_DIR / "errata.md").read_text(encoding="utf-8")


def _locked(chapter: str, question_id: str) -> quiz_lib.Question:
    return quiz_lib.load_quiz(QUIZ_DIR / f"{chapter}.json").question(question_id)


def _entry(number: int) -> str:
    start = ERRATA.index(f"\n{number}. **")
    return ERRATA[start : ERRATA.index(f"\n{number + 1}. **", start) if f"\n{number + 1}. **" in ERRATA else None]


# --- misleading and unclear keys ----------------------------------------------------------------------


def test_init_gelu_silu_asks_for_the_usual_start_and_says_the_signal_still_decays() -> None:
    import reference as ref

    q = QUESTIONS["init-gelu-silu"]
    assert "usual starting point" in q.data["prompt"] and q.answer == "b"
    text = q.data["explanation"]
    assert "keeps the scale" not in text and "does not keep the scale" in text
    assert "Without normalisation layers the signal still decays" in text
    z = np.linspace(-12, 12, 400_001)
    density = np.exp(-(z**2) / 2) / math.sqrt(2 * math.pi) * (z[1] - z[0])
    gelu = ref.activations.GELU().forward(z)
    silu = z / (1 + np.exp(-z))
    assert f"{np.sum(gelu**2 * density):.3f}" == "0.425" and "0.425·Var(z)" in text
    assert f"{np.sum(silu**2 * density):.3f}" == "0.356" and "SiLU: 0.356" in text


def test_groupnorm_choose_g_argues_both_sides_and_credits_the_ablation() -> None:
    q = QUESTIONS["groupnorm-choose-g"]
    text = q.data["explanation"]
    assert "argues for G = 1 as much as against G = C" in text
    assert "G = 1 (LayerNorm)" in text and "G = C (InstanceNorm)" in text
    assert "Wu & He's (2018) ablation" in text and "not derived" in text
    key = next(c["text"] for c in q.data["choices"] if c["id"] == q.answer)
    assert "G = C" in key and "G = 1" in key and "ablation" in key


# --- forms that were refused -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "L infinity",
        "L infinity norm",
        "Linfinity",
        "L∞-norm",
        "∞-norm",
        "L^∞",
        "Tchebychev norm",
        "Chebyshev norm",
        "sup norm",
    ],
)
def test_uat_norm_accepts_every_name_of_the_supremum_norm(answer: str) -> None:
    assert quiz_lib.check_answer(_locked("universal-approximation", "uat-norm"), answer).correct


@pytest.mark.parametrize("answer", ["L2", "L1 norm", "Euclidean norm", "L2-norm"])
def test_uat_norm_still_refuses_the_other_norms(answer: str) -> None:
    assert not quiz_lib.check_answer(_locked("universal-approximation", "uat-norm"), answer).correct


@pytest.mark.parametrize(
    "question_id,answer",
    [
        ("gelu-definition", "GELU(x) = x·Φ(x)"),
        ("gelu-definition", "gelu(x) = x*Phi(x)"),
        ("sigmoid-derivative", "σ'(z) = σ(z)(1 - σ(z))"),
        ("sigmoid-derivative", "sigmoid'(z) = sigmoid(z) - sigmoid(z)^2"),
        ("sigmoid-derivative", "σ′(z) = σ(1-σ)"),
        ("tanh-derivative", "tanh'(z) = 1 - tanh(z)^2"),
        ("tanh-derivative", "tanh'(x) = 1 - tanh²(x)"),
    ],
)
def test_a_formula_with_its_subject_is_read(question_id: str, answer: str) -> None:
    assert quiz_lib.check_answer(_locked("activations", question_id), answer).correct


@pytest.mark.parametrize(
    "question_id,answer",
    [
        ("gelu-definition", "GELU(x) = x·φ(x)"),
        ("sigmoid-derivative", "σ'(z) = 1 - σ(z)^2"),
        ("tanh-derivative", "tanh'(z) = 1 - tanh(z)"),
    ],
)
def test_a_wrong_formula_with_its_subject_is_still_wrong(question_id: str, answer: str) -> None:
    assert not quiz_lib.check_answer(_locked("activations", question_id), answer).correct


# --- text -------------------------------------------------------------------------------------------


def test_prelu_vs_leaky_says_when_max_holds() -> None:
    text = QUESTIONS["prelu-vs-leaky"].data["explanation"]
    assert "max(αz, z) only while α ≤ 1" in text and "Both are max" not in text


def test_the_one_pass_point_is_a_computational_fact_not_the_paper_s() -> None:
    rms = QUESTIONS["rmsnorm-why"].data["explanation"]
    assert "the paper disagrees" not in rms and "as a matter of computation both need one pass" in rms
    assert "neither the difference nor the paper's argument" in rms
    entry = _entry(5)
    assert "As a matter of computation both need one pass" in entry and "Welford" in entry
    assert "Source (for RMSNorm's design and benefit)" in entry


def test_batch_size_one_is_told_apart_in_training_and_generation() -> None:
    text = QUESTIONS["ln-transformers"].data["explanation"]
    assert "Batch size 1 at generation is not the problem" in text and "Batch size 1 is a problem in training" in text
    assert "Ba et al. (2016)" in text and "not generation" in text
    entry = _entry(6)
    assert "Batch size 1 is a problem in training" in entry and "dependence on the training mini-batch" in entry


BAD_RENDERING = re.compile(
    r"(?:[·×*/^]|[+\-] ) ?-\d|-0\.0+(?![0-9])|(?<![·×\d])\b1 (?:inputs|outputs|units|"
    r"biases|weights|layers)\b|\{\{"
)


def _instances(question: quiz_lib.Question) -> list[Posed]:
    specs = params_lib.parse_specs(question.params)
    if math.prod(len(spec.values) for spec in specs.values()) > 5000:
        return [quiz_lib.pose(question, f"student{i}") for i in range(300)]
    grid = (
        dict(zip(specs, combo, strict=True)) for combo in itertools.product(*(spec.values for spec in specs.values()))
    )
    return [Posed(question, values, params_lib.render(question.prompt, values), ()) for values in grid]


def test_no_rendered_prompt_or_explanation_writes_an_unbracketed_negative_a_minus_zero_or_1_plurals() -> None:
    bad = []
    for quiz in quiz_lib.load_all(QUIZ_DIR):
        for q in quiz.questions:
            if not q.parameterised:
                continue
            for posed in _instances(q):
                answer = quiz_lib.judge(posed, "0").expected
                for text in (posed.prompt, posed.explanation(answer)):
                    bad += [f"{q.id}: {m.group(0)!r} in {text[:70]}" for m in BAD_RENDERING.finditer(text)]
    assert not bad, bad[:10]


def test_the_rendering_filters() -> None:
    assert (
        params_lib.render("{{ a | decimals(4) }} {{ b | decimals(6) }}", {"a": -0.00001, "b": -0.25})
        == "0.0000 -0.250000"
    )
    assert params_lib.render("0.05·{{ w | paren }} + {{ v | paren }}", {"w": -2.0, "v": 1.5}) == "0.05·(-2.0) + 1.5"
    assert BAD_RENDERING.search("g' = 0.1 + 0.05·-2.0") and BAD_RENDERING.search("= -0.0000.")
    assert BAD_RENDERING.search("with 1 inputs") and not BAD_RENDERING.search("128·1 weights")


# --- parameter values that let a misconception through ------------------------------------------------


@pytest.mark.parametrize(
    "question_id,name,excluded",
    [
        ("bn-eval-output", "var", {1.0}),
        ("bn-eval-output", "gamma", {1.0}),
        ("bn-eval-output", "beta", {0.0}),
        ("dropout-kept-value", "p", {0.5}),
        ("dropout-variance", "p", {0.5}),
        ("elu-value", "alpha", {1.0}),
        ("swish-derivative", "beta", {1.0}),
        ("swish-derivative", "x", {1.0}),
        ("kaiming-uniform-b", "slope", {0.0}),
        ("adamw-first-step", "g", {-1.0, 1.0}),
    ],
)
def test_no_value_lets_a_named_misconception_through(question_id: str, name: str, excluded: set[float]) -> None:
    specs = params_lib.parse_specs(QUESTIONS[question_id].data["params"])
    assert not excluded & set(specs[name].values), f"{question_id}: {name} takes {excluded & set(specs[name].values)}"


def test_bn_eval_output_never_draws_x_at_the_running_mean() -> None:
    specs = params_lib.parse_specs(QUESTIONS["bn-eval-output"].data["params"])
    assert not set(specs["x"].values) & set(specs["mean"].values)
