"""Parameter ranges where each named misconception gives a different answer: for every drawn instance
(every instance of a question's grid when it is small, else a sample of students), the answer a
misconception produces is judged wrong. Every parameterised question names its misconceptions: the wrong
readings its prompt and explanation warn about and those the chapter's choice questions offer as distractors
(the keep probability read for p, a forgotten β or γ, the course text's own formula, ...).

A grid of at most ENUMERATED instances is checked whole, a larger one on SAMPLE students' draws; each misconception
is compared with the reference answer as the judge compares a typed number (|answer - key| <= tolerance), and the
judge itself confirms it on the first instances."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from grader import quiz as quiz_lib
from grader.quiz import params as params_lib
from grader.quiz.model import Posed

QUIZ_DIR = Path(__file__).resolve().parents[2] / "quizzes"
SAMPLE = 20_000  # students whose draws are checked when a grid is larger than ENUMERATED
ENUMERATED = 100_000  # a question with at most this many instances is checked in every one of them
JUDGED = 20  # instances on which the judge itself confirms the numeric comparison


def _sign(v: float) -> float:
    return math.copysign(1.0, v)


def _gelu_tanh(x: float) -> float:
    return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _running(v: dict[str, Any], keras: bool = False, biased: bool = False, start: float = 1.0) -> float:
    running, m = start, v["mom"]
    for p, q in ((v["p1"], v["q1"]), (v["p2"], v["q2"]), (v["p3"], v["q3"])):
        estimate = (q - p) ** 2 / (4 if biased else 2)
        running = m * running + (1 - m) * estimate if keras else (1 - m) * running + m * estimate
    return running


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def _cdf(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def _density(z: float) -> float:
    return math.exp(-z * z / 2) / math.sqrt(2 * math.pi)


def _layernorm(v: dict[str, Any], ddof: int = 0, centre: bool = True) -> float:
    x = [v["a"], v["b"], v["c"], v["d"]]
    mu = sum(x) / 4 if centre else 0.0
    var = sum((t - sum(x) / 4) ** 2 for t in x) / (4 - ddof)
    return (v["b"] - mu) / math.sqrt(var + 1e-5)


def _rms_inputs(v: dict[str, Any]) -> list[float]:
    return [v["a"], v["b"], v["c"]]


def _std(xs: list[float]) -> float:
    mu = sum(xs) / len(xs)
    return math.sqrt(sum((t - mu) ** 2 for t in xs) / len(xs))


def _mlp(v: dict[str, Any], biases: str = "both") -> float:
    weights = v["d"] * v["width"] + v["width"] * v["outputs"]
    return weights + {"both": v["width"] + v["outputs"], "hidden": v["width"], "none": 0}[biases]


Misconception = Callable[[dict[str, Any]], float]
MISCONCEPTIONS: dict[tuple[str, str], dict[str, Misconception]] = {
    ("dropout-weight-decay", "sgd-step"): {
        "no step at all (w unchanged)": lambda v: v["w"],
        "no weight decay": lambda v: v["w"] - v["lr"] * v["g"],
        "decay not scaled by lr": lambda v: v["w"] * (1 - v["wd"]) - v["lr"] * v["g"],
        "decay with the wrong sign": lambda v: v["w"] - v["lr"] * (v["g"] - v["wd"] * v["w"]),
    },
    ("dropout-weight-decay", "adamw-first-step"): {
        "no weight decay": lambda v: v["w"] - v["lr"] * _sign(v["g"]),
        "Adam with L2 (coupled)": lambda v: v["w"] - v["lr"] * _sign(v["g"] + v["wd"] * v["w"]),
        "an SGD step lr·g after the decay": lambda v: v["w"] * (1 - v["lr"] * v["wd"]) - v["lr"] * v["g"],
        "the decay applied after the Adam step": lambda v: (v["w"] - v["lr"] * _sign(v["g"])) * (1 - v["lr"] * v["wd"]),
    },
    ("initialisation", "kaiming-normal-std"): {
        "ignores negative_slope": lambda v: math.sqrt(2 / v["fan_in"]),
        "uses fan_out": lambda v: math.sqrt(2 / ((1 + v["slope"] ** 2) * v["fan_out"])),
        "gives the variance": lambda v: 2 / ((1 + v["slope"] ** 2) * v["fan_in"]),
        "Xavier": lambda v: math.sqrt(2 / (v["fan_in"] + v["fan_out"])),
    },
    ("normalization", "bn-running-var-batches"): {
        "Keras momentum convention": lambda v: _running(v, keras=True),
        "biased batch variance": lambda v: _running(v, biased=True),
        "running_var starting at 0": lambda v: _running(v, start=0.0),
    },
    ("normalization", "bn-running-mean-momentum"): {
        "Keras momentum convention": lambda v: (
            (1 - v["mom"]) * v["mom"] * 0
            + v["mom"] * (1 - v["mom"]) * (v["p1"] + v["q1"]) / 2
            + (1 - v["mom"]) * (v["p2"] + v["q2"]) / 2
        ),
        "a plain average of the batch means": lambda v: (v["p1"] + v["q1"] + v["p2"] + v["q2"]) / 4,
        "running_mean starting at the first batch's mean": lambda v: (
            (1 - v["mom"]) * (v["p1"] + v["q1"]) / 2 + v["mom"] * (v["p2"] + v["q2"]) / 2
        ),
    },
    ("dropout-weight-decay", "dropout-variance"): {
        "dropout preserves the variance": lambda v: 0.0,
        "no 1/(1 - p) scaling": lambda v: v["a"] ** 2 * v["p"] * (1 - v["p"]),
        "p read as the keep probability": lambda v: v["a"] ** 2 * (1 - v["p"]) / v["p"],
        "the Bernoulli variance p(1 - p) alone": lambda v: v["p"] * (1 - v["p"]),
        "a not squared": lambda v: v["a"] * v["p"] / (1 - v["p"]),
    },
    ("initialisation", "kaiming-fan-out-std"): {
        "uses fan_in": lambda v: math.sqrt(2 / ((1 + v["slope"] ** 2) * v["fan_in"])),
        "ignores negative_slope": lambda v: math.sqrt(2 / v["fan_out"]),
        "gives the variance": lambda v: 2 / ((1 + v["slope"] ** 2) * v["fan_out"]),
        "Xavier's std": lambda v: math.sqrt(2 / (v["fan_in"] + v["fan_out"])),
    },
    ("universal-approximation", "relu-ramp-output"): {
        "zero (a guess)": lambda v: 0.0,
        "the height h, whatever x": lambda v: v["h"],
        "no plateau (the first unit alone)": lambda v: v["h"] * max(0.0, v["x"] - v["s"]),
        "forgets the height h": lambda v: max(0.0, v["x"] - v["s"]) - max(0.0, v["x"] - v["t"]),
    },
    ("activations", "swish-derivative"): {
        "ignores β (SiLU's derivative)": lambda v: (
            _sigmoid(v["x"]) + v["x"] * _sigmoid(v["x"]) * (1 - _sigmoid(v["x"]))
        ),
        "the course text's formula βσ(βz) + σ(βz)(1 - βzσ(βz))": lambda v: (
            v["beta"] * _sigmoid(v["beta"] * v["x"])
            + _sigmoid(v["beta"] * v["x"]) * (1 - v["beta"] * v["x"] * _sigmoid(v["beta"] * v["x"]))
        ),
        "no product rule, σ(βx)": lambda v: _sigmoid(v["beta"] * v["x"]),
        "no inner β in the chain rule": lambda v: (
            _sigmoid(v["beta"] * v["x"]) + v["x"] * _sigmoid(v["beta"] * v["x"]) * (1 - _sigmoid(v["beta"] * v["x"]))
        ),
        "f(x) = x·σ(βx) itself, not its derivative": lambda v: v["x"] * _sigmoid(v["beta"] * v["x"]),
        "zero (the tail, where every reading is near 0)": lambda v: 0.0,
    },
    ("activations", "elu-value"): {
        "forgets α": lambda v: math.exp(v["x"]) - 1,
        "the slope α·e^x": lambda v: v["alpha"] * math.exp(v["x"]),
        "Leaky ReLU's αx": lambda v: v["alpha"] * v["x"],
        "ReLU's zero": lambda v: 0.0,
    },
    ("activations", "prelu-dalpha"): {
        "α times the negative inputs": lambda v: v["alpha"] * (v["a"] + v["c"]),
        "every input, not only the negative ones": lambda v: v["a"] + v["b"] + v["c"] + v["d"],
        "the positive inputs": lambda v: v["b"] + v["d"],
        "no gradient for α": lambda v: 0.0,
    },
    ("activations", "gelu-value"): {
        "tanh approximation": lambda v: _gelu_tanh(v["x"]),
        "sigmoid approximation": lambda v: v["x"] / (1 + math.exp(-1.702 * v["x"])),
        "x·φ(x), the density for the CDF": lambda v: v["x"] * _density(v["x"]),
        "Φ(x) without the factor x": lambda v: _cdf(v["x"]),
        "ReLU": lambda v: max(0.0, v["x"]),
    },
    ("normalization", "layernorm-output"): {
        "unbiased variance (1/(D - 1))": lambda v: _layernorm(v, ddof=1),
        "no centring": lambda v: _layernorm(v, centre=False),
        "RMSNorm's scale": lambda v: v["b"] / math.sqrt((v["a"] ** 2 + v["b"] ** 2 + v["c"] ** 2 + v["d"] ** 2) / 4),
    },
    ("normalization", "rmsnorm-output"): {
        "LayerNorm (centred)": lambda v: (
            (v["c"] - sum(_rms_inputs(v)) / 3) / math.sqrt(_std(_rms_inputs(v)) ** 2 + 1e-6)
        ),
        "the standard deviation for the RMS": lambda v: v["c"] / _std(_rms_inputs(v)),
        "the norm for the RMS (no 1/D)": lambda v: v["c"] / math.sqrt(sum(t * t for t in _rms_inputs(v))),
    },
    ("normalization", "bn-eval-output"): {
        "divides by the variance": lambda v: v["gamma"] * (v["x"] - v["mean"]) / (v["var"] + 1e-5) + v["beta"],
        "forgets γ": lambda v: (v["x"] - v["mean"]) / math.sqrt(v["var"] + 1e-5) + v["beta"],
        "forgets β": lambda v: v["gamma"] * (v["x"] - v["mean"]) / math.sqrt(v["var"] + 1e-5),
        "forgets the running mean": lambda v: v["gamma"] * v["x"] / math.sqrt(v["var"] + 1e-5) + v["beta"],
        "batch statistics of the one input (x̂ = 0)": lambda v: v["beta"],
        "γ and β swapped": lambda v: v["beta"] * (v["x"] - v["mean"]) / math.sqrt(v["var"] + 1e-5) + v["gamma"],
    },
    ("dropout-weight-decay", "dropout-kept-value"): {
        "no scaling": lambda v: v["a"],
        "multiplies by 1 - p": lambda v: v["a"] * (1 - v["p"]),
        "p read as the keep probability": lambda v: v["a"] / v["p"],
        "multiplies by p": lambda v: v["a"] * v["p"],
    },
    ("dropout-weight-decay", "rel-error-value"): {
        "the absolute error": lambda v: abs(v["a"] - v["b"]),
        "relative to the analytical gradient only": lambda v: abs(v["a"] - v["b"]) / abs(v["a"]),
    },
    ("initialisation", "xavier-uniform-a"): {
        "the standard deviation for the bound": lambda v: math.sqrt(2 / (v["fan_in"] + v["fan_out"])),
        "fan_in only": lambda v: math.sqrt(6 / v["fan_in"]),
        "no square root": lambda v: 6 / (v["fan_in"] + v["fan_out"]),
        "LeCun's uniform bound √(3/fan_in)": lambda v: math.sqrt(3 / v["fan_in"]),
        "√(3/fan_out)": lambda v: math.sqrt(3 / v["fan_out"]),
    },
    ("initialisation", "kaiming-uniform-b"): {
        "ignores negative_slope": lambda v: math.sqrt(6 / v["fan_in"]),
        "the standard deviation for the bound": lambda v: math.sqrt(2 / ((1 + v["slope"] ** 2) * v["fan_in"])),
        "1 + slope, not 1 + slope²": lambda v: math.sqrt(6 / ((1 + v["slope"]) * v["fan_in"])),
    },
    ("universal-approximation", "mlp-parameter-count"): {
        "weights only": lambda v: _mlp(v, "none"),
        "no output bias": lambda v: _mlp(v, "hidden"),
    },
    ("universal-approximation", "sigmoid-network-output"): {
        "adds the second unit": lambda v: (
            v["a1"] * _sigmoid(v["w1"] * v["x"] + v["b1"]) + v["a2"] * _sigmoid(v["w2"] * v["x"] + v["b2"])
        ),
        "the first unit alone": lambda v: v["a1"] * _sigmoid(v["w1"] * v["x"] + v["b1"]),
        "σ read as a step (0 or 1)": lambda v: (
            v["a1"] * (v["w1"] * v["x"] + v["b1"] > 0) - v["a2"] * (v["w2"] * v["x"] + v["b2"] > 0)
        ),
    },
}


def _instances(question: quiz_lib.Question) -> list[dict[str, Any]]:
    """Every instance of a grid of at most ENUMERATED (each parameter is drawn uniformly), else SAMPLE students'."""
    specs = params_lib.parse_specs(question.params)
    if math.prod(len(spec.values) for spec in specs.values()) > ENUMERATED:
        return [quiz_lib.pose(question, f"student{i}").values for i in range(SAMPLE)]
    return [
        dict(zip(specs, combo, strict=True)) for combo in itertools.product(*(spec.values for spec in specs.values()))
    ]


def test_every_parameterised_question_names_its_misconceptions() -> None:
    parameterised = {
        (quiz.chapter, q.id) for quiz in quiz_lib.load_all(QUIZ_DIR) for q in quiz.questions if q.parameterised
    }
    assert parameterised == set(MISCONCEPTIONS), sorted(parameterised ^ set(MISCONCEPTIONS))
    assert all(len(named) >= 2 for named in MISCONCEPTIONS.values()), "at least two named per question"


@pytest.mark.parametrize("chapter,question_id", sorted(MISCONCEPTIONS))
def test_every_named_misconception_is_judged_wrong(chapter: str, question_id: str) -> None:
    question = quiz_lib.load_quiz(QUIZ_DIR / f"{chapter}.json").question(question_id)
    call = params_lib.parse_reference(question.reference, set(question.params or {}))
    tolerance = float(question.tolerance or 0) * (1 + 1e-9)  # the judge's comparison (grader.quiz.judging.judge)
    passing: dict[str, list[dict[str, Any]]] = {}
    for index, values in enumerate(_instances(question)):
        key = params_lib.reference_answer(call, values)
        for name, wrong in MISCONCEPTIONS[(chapter, question_id)].items():
            accepted = abs(wrong(values) - key) <= tolerance
            if index < JUDGED:
                posed = Posed(question, values, params_lib.render(question.prompt, values), ())
                assert quiz_lib.judge(posed, repr(wrong(values))).correct == accepted
                assert quiz_lib.judge(posed, repr(key)).correct
            if accepted:
                passing.setdefault(name, []).append(values)
    assert not passing, {name: (len(found), found[:3]) for name, found in passing.items()}
