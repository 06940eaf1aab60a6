"""Hidden checks of dropout.Dropout: the reference passes, each check catches its bug, mistakes are named."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from checks_util import SEEDS, assert_full_marks, assert_named, by_name, failed, grade_in_process, variant_ns
from grader.student.engine.checks import CHECKS
from grader.student.engine.checks.init import hoeffding_halfwidth
from grader.mistakes import CATALOGUE
from grader.mistakes.dropout import Inverted

EXERCISE = "dropout.Dropout"
MISTAKE_IDS = [m.id for m in CATALOGUE.values() if m.exercise == EXERCISE]


def grade(cls: type, seed: int = SEEDS[0]):
    return grade_in_process(EXERCISE, variant_ns("dropout", Dropout=cls), seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_reference_full_marks_and_stable(seed: int) -> None:
    first = assert_full_marks(EXERCISE, seed=seed)
    second = assert_full_marks(EXERCISE, seed=seed)
    assert [r.to_json() for r in first] == [r.to_json() for r in second]


def test_points_add_up_and_p_is_never_half() -> None:
    for seed in range(20):
        plan = CHECKS[EXERCISE].plan(seed)
        assert sum(c.points for c in plan.checks) == 10
        p = plan.cases[0].script[0]["kwargs"]["p"]
        assert p != 0.5 and 0 < p < 1


def test_hoeffding_halfwidth_bound() -> None:
    t = hoeffding_halfwidth(40000)
    assert 2 * np.exp(-2 * 40000 * t * t) == pytest.approx(1e-9)


def test_a_correct_variant_written_differently_passes() -> None:
    assert_full_marks(EXERCISE, variant_ns("dropout", Dropout=Inverted))


@pytest.mark.parametrize("mistake_id", MISTAKE_IDS)
def test_every_mistake_is_named(mistake_id: str) -> None:
    for seed in SEEDS:
        assert_named(EXERCISE, mistake_id, seed)


def test_values_check_reports_the_scale() -> None:
    result = by_name(grade(CATALOGUE["dropout-no-rescale"].namespace.dropout.Dropout))["values"]
    assert not result.passed
    assert "x / (1 - p)" in result.message and "y / x = 1" in result.message


def test_zero_fraction_reports_the_fraction() -> None:
    result = failed(grade(CATALOGUE["dropout-keep-prob-swapped"].namespace.dropout.Dropout))["zero_fraction"]
    assert "outputs are zero; expected p" in result.message
    assert result.misconception == "dropout-keep-prob-swapped"


def test_fresh_mask_and_per_element_mask() -> None:
    reused = failed(grade(CATALOGUE["dropout-mask-reused"].namespace.dropout.Dropout))
    assert "fresh mask" in reused["fresh_mask"].message
    per_feature = failed(grade(CATALOGUE["dropout-mask-per-feature"].namespace.dropout.Dropout))
    assert "full shape of x" in per_feature["fresh_mask"].message


def test_backward_kinds_are_told_apart() -> None:
    messages = {
        mid: failed(grade(CATALOGUE[mid].namespace.dropout.Dropout))["backward"].message
        for mid in ("dropout-backward-ignores-mask", "dropout-backward-unscaled", "dropout-backward-new-mask")
    }
    assert "returned dout unchanged" in messages["dropout-backward-ignores-mask"]
    assert "without the 1/(1 - p) scale" in messages["dropout-backward-unscaled"]
    assert "a new mask" in messages["dropout-backward-new-mask"]


def test_eval_and_edges() -> None:
    active = failed(grade(CATALOGUE["dropout-eval-active"].namespace.dropout.Dropout))["eval"]
    assert "eval mode forward must return x" in active.message
    nan = failed(grade(CATALOGUE["dropout-p1-nan"].namespace.dropout.Dropout))["p_edges"]
    assert "NaN" in nan.message and nan.misconception == "dropout-p1-nan"


class NoValidation(Inverted):
    """Accepts any p."""

    def __init__(self, p: float = 0.5, rng=None) -> None:
        self.p = p
        self.rng = np.random.default_rng() if rng is None else rng


def test_value_error_check() -> None:
    result = failed(grade(NoValidation))["value_error"]
    assert "must raise ValueError" in result.message and "nothing was raised" in result.message
    assert result.misconception is None


class Garbage(Inverted):
    """Returns x * 3 in training: no known mistake."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.mask = np.full(np.shape(x), 3.0) if self.training else None
        return np.asarray(x, dtype=np.float64) * (3.0 if self.training else 1.0)


def test_unrelated_wrong_output_names_no_mistake() -> None:
    bad = failed(grade(Garbage))
    assert "values" in bad and "zero_fraction" in bad
    assert all(r.misconception is None for r in bad.values())


class NotImplementedDropout(Inverted):
    def forward(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError("dropout.Dropout.forward")


def test_not_implemented_scores_nothing() -> None:
    results = grade(NotImplementedDropout)
    assert sum(r.score for r in results) == 0
    assert "not implemented" in by_name(results)["values"].message
    assert "implement forward first" in by_name(results)["value_error"].message


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

    class Odd(Inverted):
        def forward(self, x: np.ndarray) -> np.ndarray:
            return f(x)

        def backward(self, dout: np.ndarray) -> np.ndarray:
            return f(dout)

    results = grade(Odd)
    assert sum(r.score for r in results) <= 1.5  # at most: the constructor's ValueError, input not mutated
    assert all(r.passed or r.message for r in results)


def test_backward_of_zeros_is_not_the_mask() -> None:
    """Found by bench/mutants.py (issue 31): a backward returning zeros for every p < 1 was named
    dropout-backward-returns-mask (an all-zero dx looked like "one constant where kept": the constant 0). The mask
    is the scale where kept; zeros hold no mask."""
    from reference import dropout as ref

    class ZerosBackward(ref.Dropout):
        def backward(self, dout):
            return np.zeros_like(np.asarray(dout, dtype=np.float64))

    results = by_name(grade(ZerosBackward))
    assert not results["backward"].passed
    assert results["backward"].misconception != "dropout-backward-returns-mask"
    assert "backward returned zeros everywhere" in results["backward"].message
    assert assert_named("dropout.Dropout", "dropout-backward-returns-mask").name == "backward"
