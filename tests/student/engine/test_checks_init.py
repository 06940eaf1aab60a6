"""Hidden checks of the initialisers: statistics with fixed seeds, and the known mistakes named."""

from __future__ import annotations

import math

import numpy as np
import pytest

from checks_util import SEEDS, assert_full_marks, assert_named, by_name, failed, grade_in_process, total, variant_ns
from grader.student.engine.checks import CHECKS
from grader.student.engine.checks.init import chi2_ratio_bounds, excess_kurtosis
from grader.mistakes import CATALOGUE

EXERCISES = ["init.xavier_uniform", "init.xavier_normal", "init.kaiming_uniform", "init.kaiming_normal"]
MISTAKES = [(m.exercise, m.id) for m in CATALOGUE.values() if m.exercise in EXERCISES]


def grade(exercise: str, fn, seed: int = SEEDS[0]):
    return grade_in_process(exercise, variant_ns("init", **{exercise.split(".")[1]: fn}), seed)


@pytest.mark.parametrize("exercise", EXERCISES)
@pytest.mark.parametrize("seed", SEEDS)
def test_reference_full_marks_and_stable(exercise: str, seed: int) -> None:
    first = assert_full_marks(exercise, seed=seed)
    second = assert_full_marks(exercise, seed=seed)
    assert [r.to_json() for r in first] == [r.to_json() for r in second]


@pytest.mark.parametrize("exercise", EXERCISES)
def test_reference_passes_many_seeds(exercise: str) -> None:
    for seed in range(10):
        assert_full_marks(exercise, seed=seed)


def test_enough_samples_and_distinct_fans() -> None:
    for seed in range(20):
        case = CHECKS["init.kaiming_normal"].plan(seed).cases[0]
        fan_in, fan_out = case.script[0]["args"][:2]
        assert fan_in * fan_out >= 36000 and fan_in / fan_out >= 1.6


def test_statistics_helpers() -> None:
    lo, hi = chi2_ratio_bounds(40000)
    assert 0.95 < lo < 1 < hi < 1.05
    rng = np.random.default_rng(0)
    assert abs(excess_kurtosis(rng.standard_normal(50000))) < 0.1
    assert excess_kurtosis(rng.uniform(-1, 1, 50000)) == pytest.approx(-1.2, abs=0.05)


@pytest.mark.parametrize("exercise,mistake_id", MISTAKES)
def test_every_mistake_is_named(exercise: str, mistake_id: str) -> None:
    for seed in SEEDS:
        assert_named(exercise, mistake_id, seed)


def test_xavier_variance_where_kaiming_is_asked() -> None:
    result = failed(grade_in_process("init.kaiming_normal", CATALOGUE["init-xavier-for-kaiming"].namespace))
    assert result["variance"].misconception == "init-xavier-for-kaiming"
    assert "too small" in result["variance"].message and "sqrt(2 / fan_in)" in result["variance"].message


def test_normal_where_uniform_is_asked_fails_the_shape_check() -> None:
    result = failed(grade_in_process("init.xavier_uniform", CATALOGUE["init-normal-for-uniform"].namespace))
    assert set(result) == {"distribution"}
    assert "outside [-a, a]" in result["distribution"].message


def test_uniform_where_normal_is_asked_fails_the_kurtosis_check() -> None:
    result = failed(grade_in_process("init.xavier_normal", CATALOGUE["init-uniform-for-normal"].namespace))
    assert set(result) == {"distribution"} and "kurtosis" in result["distribution"].message


def test_each_hyper_parameter_is_checked() -> None:
    # mode ignored altogether: nor does it raise ValueError for an unknown mode
    assert set(
        failed(grade_in_process("init.kaiming_normal", CATALOGUE["init-kaiming-fan-out-ignored"].namespace))
    ) == {"mode", "mode_value_error"}
    assert set(failed(grade_in_process("init.kaiming_normal", CATALOGUE["init-leaky-slope-ignored"].namespace))) == {
        "negative_slope"
    }
    assert set(failed(grade_in_process("init.xavier_normal", CATALOGUE["init-gain-ignored"].namespace))) == {"gain"}


def test_shape_and_rng_checks() -> None:
    shape = failed(grade_in_process("init.xavier_normal", CATALOGUE["init-transposed-shape"].namespace))
    assert "(fan_out, fan_in)" in shape["shape_dtype"].message
    rng = failed(grade_in_process("init.xavier_uniform", CATALOGUE["init-ignores-rng"].namespace))
    assert set(rng) == {"uses_rng"} and "rng argument" in rng["uses_rng"].message


def float32_kaiming(fan_in, fan_out, rng, mode="fan_in", negative_slope=0.0):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(mode)
    std = math.sqrt(2.0 / ((1.0 + negative_slope**2) * (fan_in if mode == "fan_in" else fan_out)))
    return rng.normal(0.0, std, size=(fan_out, fan_in)).astype(np.float32)


def test_dtype_is_checked() -> None:
    result = failed(grade("init.kaiming_normal", float32_kaiming))
    assert set(result) == {"shape_dtype"} and "float64" in result["shape_dtype"].message


def shifted_normal(fan_in, fan_out, rng, gain=1.0):
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    return rng.normal(std, std, size=(fan_out, fan_in))


def test_mean_check_and_no_false_naming() -> None:
    result = failed(grade("init.xavier_normal", shifted_normal))
    assert "mean" in result and "centre" in result["mean"].message
    assert all(r.misconception is None for r in result.values())


def test_not_implemented() -> None:
    def stub(fan_in, fan_out, rng, gain=1.0):
        raise NotImplementedError("init.xavier_uniform")

    results = grade("init.xavier_uniform", stub)
    assert sum(r.score for r in results) == 0
    assert "not implemented" in by_name(results)["variance"].message


ODD_OUTPUTS = [
    lambda w: 0.0,
    lambda w: np.zeros(3),
    lambda w: w[:1],
    lambda w: np.zeros((2, 2, 2)),
    lambda w: np.full(w.shape, np.nan),
    lambda w: np.zeros_like(w),
]


@pytest.mark.parametrize("odd", range(len(ODD_OUTPUTS)))
def test_odd_outputs_fail_cleanly(odd: int) -> None:
    f = ODD_OUTPUTS[odd]

    def initialiser(fan_in, fan_out, rng, *args, **kwargs):
        return f(rng.normal(size=(fan_out, fan_in)))

    results = grade("init.kaiming_uniform", initialiser)
    assert not by_name(results)["variance"].passed and not by_name(results)["distribution"].passed
    assert all(r.passed or r.message for r in results)


def test_kaiming_must_raise_value_error_for_an_unknown_mode() -> None:
    """A kaiming_normal that is right in every value but never checks mode loses the docstring's requirement."""
    import reference.init as ref

    def quiet(fan_in, fan_out, rng, mode="fan_in", negative_slope=0.0):
        fan = fan_out if mode == "fan_out" else fan_in
        return rng.normal(0.0, math.sqrt(2.0 / ((1.0 + negative_slope**2) * fan)), size=(fan_out, fan_in))

    results = grade_in_process("init.kaiming_normal", variant_ns("init", kaiming_normal=quiet))
    bad = failed(results)
    assert set(bad) == {"mode_value_error"}
    assert "mode='fan_avg') must raise ValueError" in bad["mode_value_error"].message
    assert "nothing was raised" in bad["mode_value_error"].message
    assert bad["mode_value_error"].misconception is None
    assert total(results) == 9.5
    assert ref.kaiming_normal is not quiet
    assert_full_marks("init.kaiming_uniform")
