"""Hidden checks of MLPBlock and fold_batchnorm."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from checks_util import SEEDS, assert_full_marks, assert_named, by_name, failed, grade_in_process, variant_ns
from grader.mistakes import CATALOGUE
from reference import blocks as ref

EXERCISES = ["blocks.MLPBlock", "blocks.fold_batchnorm"]
MISTAKES = [(m.exercise, m.id) for m in CATALOGUE.values() if m.exercise in EXERCISES]


@pytest.mark.parametrize("exercise", EXERCISES)
@pytest.mark.parametrize("seed", SEEDS)
def test_reference_full_marks_and_stable(exercise: str, seed: int) -> None:
    first = assert_full_marks(exercise, seed=seed)
    second = assert_full_marks(exercise, seed=seed)
    assert [r.to_json() for r in first] == [r.to_json() for r in second]


@pytest.mark.parametrize("exercise,mistake_id", MISTAKES)
def test_every_mistake_is_named(exercise: str, mistake_id: str) -> None:
    for seed in SEEDS:
        assert_named(exercise, mistake_id, seed)


def test_eval_not_propagated_is_explained() -> None:
    result = failed(grade_in_process("blocks.MLPBlock", CATALOGUE["mlp-eval-not-propagated"].namespace))
    assert set(result) == {"eval", "modes"}
    assert "still in training mode" in result["eval"].message


class NoDropoutScale(ref.MLPBlock):
    """Dropout output not rescaled (mask only): y is 0 or z, not z / (1 - p)."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        z = self.act.forward(self.bn.forward(self.linear.forward(x)))
        if not self.drop.training or self.drop.p == 0:
            self.keep = None
            return z
        self.keep = self.drop.rng.random(z.shape) >= self.drop.p
        return z * self.keep

    def backward(self, dout: np.ndarray) -> np.ndarray:
        d = dout if self.keep is None else dout * self.keep
        return self.linear.backward(self.bn.backward(self.act.backward(d)))


def test_dropout_structure_check() -> None:
    result = failed(grade_in_process("blocks.MLPBlock", variant_ns("blocks", MLPBlock=NoDropoutScale)))
    assert "dropout_train" in result and "must be 0 or GELU" in result["dropout_train"].message
    assert "backward_dropout" in result and result["backward_dropout"].misconception is None


def test_fold_checks() -> None:
    eps = failed(grade_in_process("blocks.fold_batchnorm", CATALOGUE["fold-bn-eps-missing"].namespace))
    assert "forward_biased" in eps and eps["forward_biased"].misconception == "fold-bn-eps-missing"
    bias = failed(grade_in_process("blocks.fold_batchnorm", CATALOGUE["fold-bn-ignores-bias"].namespace))
    assert "no_bias" not in bias and "forward_biased" in bias
    in_place = failed(grade_in_process("blocks.fold_batchnorm", CATALOGUE["fold-bn-in-place"].namespace))
    assert set(in_place) == {"arguments_unchanged"}


def fold_without_bias(linear, bn):
    """Returns a Linear without bias when the input has none."""
    folded = ref.fold_batchnorm(linear, bn)
    if linear.b is None:
        folded.b = None
    return folded


def test_no_bias_case_wants_a_bias() -> None:
    result = failed(grade_in_process("blocks.fold_batchnorm", variant_ns("blocks", fold_batchnorm=fold_without_bias)))
    assert set(result) == {"no_bias"}


def test_not_implemented() -> None:
    def stub(linear, bn):
        raise NotImplementedError("blocks.fold_batchnorm")

    results = grade_in_process("blocks.fold_batchnorm", variant_ns("blocks", fold_batchnorm=stub))
    assert sum(r.score for r in results) == 0
    assert "not implemented" in by_name(results)["forward_biased"].message


ODD_OUTPUTS: list[Callable[[Any], Any]] = [
    lambda x: 0.0,
    lambda x: np.zeros(3),
    lambda x: np.asarray(x)[:1],
    lambda x: np.asarray(x).astype(int),
    lambda x: np.full(np.shape(x), np.nan),
    lambda x: np.asarray(x).T,
]


@pytest.mark.parametrize("odd", range(len(ODD_OUTPUTS)))
def test_odd_outputs_fail_cleanly(odd: int) -> None:
    f = ODD_OUTPUTS[odd]

    class Odd(ref.MLPBlock):
        def forward(self, x: np.ndarray) -> np.ndarray:
            return f(x)

        def backward(self, dout: np.ndarray) -> np.ndarray:
            return f(dout)

    def fold(linear, bn):
        folded = ref.fold_batchnorm(linear, bn)
        folded.W, folded.b = f(folded.W), f(folded.b)
        return folded

    mlp = grade_in_process("blocks.MLPBlock", variant_ns("blocks", MLPBlock=Odd))
    folded = grade_in_process("blocks.fold_batchnorm", variant_ns("blocks", fold_batchnorm=fold))
    assert sum(r.score for r in mlp) <= 1.0 and all(r.passed or r.message for r in mlp + folded)
