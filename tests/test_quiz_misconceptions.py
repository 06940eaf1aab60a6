"""Parameter ranges where each named misconception gives a different answer: for every drawn instance
(a sample of students), the answer a misconception produces is judged wrong."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from grader import quiz as quiz_lib

QUIZ_DIR = Path(__file__).resolve().parent.parent / "quizzes"
STUDENTS = 600


def _sign(v: float) -> float:
    return math.copysign(1.0, v)


def _gelu_tanh(x: float) -> float:
    return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _running(v: dict[str, Any], keras: bool = False, biased: bool = False) -> float:
    running, m = 1.0, v["mom"]
    for p, q in ((v["p1"], v["q1"]), (v["p2"], v["q2"]), (v["p3"], v["q3"])):
        estimate = (q - p) ** 2 / (4 if biased else 2)
        running = m * running + (1 - m) * estimate if keras else (1 - m) * running + m * estimate
    return running


Misconception = Callable[[dict[str, Any]], float]
MISCONCEPTIONS: dict[tuple[str, str], dict[str, Misconception]] = {
    ("dropout-weight-decay", "sgd-step"): {
        "no weight decay": lambda v: v["w"] - v["lr"] * v["g"],
    },
    ("dropout-weight-decay", "adamw-first-step"): {
        "no weight decay": lambda v: v["w"] - v["lr"] * _sign(v["g"]),
        "Adam with L2 (coupled)": lambda v: v["w"] - v["lr"] * _sign(v["g"] + v["wd"] * v["w"]),
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
    },
    ("activations", "gelu-value"): {
        "tanh approximation": lambda v: _gelu_tanh(v["x"]),
        "sigmoid approximation": lambda v: v["x"] / (1 + math.exp(-1.702 * v["x"])),
    },
    ("normalization", "bn-running-mean-momentum"): {
        "Keras momentum convention": lambda v: (1 - v["mom"]) * v["mom"] * 0 + v["mom"] * (1 - v["mom"])
        * (v["p1"] + v["q1"]) / 2 + (1 - v["mom"]) * (v["p2"] + v["q2"]) / 2,
        "a plain average of the batch means": lambda v: (v["p1"] + v["q1"] + v["p2"] + v["q2"]) / 4,
    },
    ("dropout-weight-decay", "dropout-variance"): {
        "dropout preserves the variance": lambda v: 0.0,
        "no 1/(1 - p) scaling": lambda v: v["a"] ** 2 * v["p"] * (1 - v["p"]),
    },
    ("initialisation", "kaiming-fan-out-std"): {
        "uses fan_in": lambda v: math.sqrt(2 / ((1 + v["slope"] ** 2) * v["fan_in"])),
        "ignores negative_slope": lambda v: math.sqrt(2 / v["fan_out"]),
    },
    ("universal-approximation", "relu-ramp-output"): {
        "zero (a guess)": lambda v: 0.0,
    },
}


@pytest.mark.parametrize("chapter,question_id", sorted(MISCONCEPTIONS))
def test_every_named_misconception_is_judged_wrong(chapter: str, question_id: str) -> None:
    question = quiz_lib.load_quiz(QUIZ_DIR / f"{chapter}.json").question(question_id)
    for i in range(STUDENTS):
        posed = quiz_lib.pose(question, f"student{i}")
        for name, wrong in MISCONCEPTIONS[(chapter, question_id)].items():
            verdict = quiz_lib.judge(posed, repr(wrong(posed.values)))
            assert not verdict.correct, f"{question_id}: '{name}' passes for {posed.values}"
        assert quiz_lib.judge(posed, repr(verdict.expected)).correct
