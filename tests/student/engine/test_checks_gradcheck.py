"""Hidden checks of numerical_gradient and rel_error."""

from __future__ import annotations

import numpy as np
import pytest

from checks_util import SEEDS, assert_full_marks, assert_named, by_name, failed, grade_in_process, variant_ns
from grader.mistakes import CATALOGUE
from grader.mistakes.gradcheck import central

EXERCISES = ["gradcheck.numerical_gradient", "gradcheck.rel_error"]
MISTAKES = [(m.exercise, m.id) for m in CATALOGUE.values() if m.exercise in EXERCISES]


def grade(exercise: str, fn):
    return grade_in_process(exercise, variant_ns("gradcheck", **{exercise.split(".")[1]: fn}))


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


def restore_by_subtraction(f, x, dout, h=1e-5):
    """Correct, but restores x[i] by adding and subtracting h (may differ from x by one ulp)."""
    grad = np.zeros(x.shape)
    for idx in np.ndindex(x.shape):
        x[idx] += h
        plus = np.sum(f(x) * dout)
        x[idx] -= 2 * h
        minus = np.sum(f(x) * dout)
        x[idx] += h
        grad[idx] = (plus - minus) / (2 * h)
    return grad


def test_correct_variants_pass() -> None:
    assert_full_marks(
        "gradcheck.numerical_gradient",
        variant_ns("gradcheck", numerical_gradient=lambda f, x, dout, h=1e-5: central(f, x, dout, h)),
    )
    assert_full_marks(
        "gradcheck.numerical_gradient", variant_ns("gradcheck", numerical_gradient=restore_by_subtraction)
    )


def test_one_sided_difference_fails_on_curved_functions() -> None:
    result = failed(grade_in_process("gradcheck.numerical_gradient", CATALOGUE["numgrad-one-sided"].namespace))
    assert {"curved", "curved_2", "coupled"} <= set(result)
    assert result["curved"].misconception == "numgrad-one-sided"


def test_x_restored_and_dout_and_h() -> None:
    x = failed(grade_in_process("gradcheck.numerical_gradient", CATALOGUE["numgrad-x-not-restored"].namespace))
    assert "x changed" in x["x_restored"].message
    dout = failed(grade_in_process("gradcheck.numerical_gradient", CATALOGUE["numgrad-ignores-dout"].namespace))
    assert "dout" in dout
    h = failed(grade_in_process("gradcheck.numerical_gradient", CATALOGUE["numgrad-h-ignored"].namespace))
    assert set(h) == {"h"}


def flat_result(f, x, dout, h=1e-5):
    return central(f, x, dout, h).ravel()


def test_shape_check_and_no_false_naming() -> None:
    result = failed(grade("gradcheck.numerical_gradient", flat_result))
    assert "shape_dtype" in result and "shape_1d" not in result
    assert all(r.misconception is None for r in result.values())


def test_rel_error_checks() -> None:
    no_floor = failed(grade_in_process("gradcheck.rel_error", CATALOGUE["rel-error-no-floor"].namespace))
    assert {"zeros", "floor"} <= set(no_floor) and "nan" in no_floor["zeros"].message.lower()
    elementwise = failed(grade_in_process("gradcheck.rel_error", CATALOGUE["rel-error-elementwise"].namespace))
    assert "one number" in elementwise["scalar"].message


def test_rel_error_not_implemented() -> None:
    def stub(a, b):
        raise NotImplementedError("gradcheck.rel_error")

    results = grade("gradcheck.rel_error", stub)
    assert sum(r.score for r in results) == 0 and "not implemented" in by_name(results)["pairs"].message


ODD_OUTPUTS = [
    lambda x: 0.0,
    lambda x: np.zeros(3),
    lambda x: np.asarray(x)[:1],
    lambda x: np.asarray(x).astype(int),
    lambda x: np.full(np.shape(x), np.nan),
    lambda x: np.asarray(x).T,
    lambda x: True,
]


@pytest.mark.parametrize("odd", range(len(ODD_OUTPUTS)))
def test_odd_outputs_fail_cleanly(odd: int) -> None:
    f = ODD_OUTPUTS[odd]
    numgrad = grade("gradcheck.numerical_gradient", lambda fn, x, dout, h=1e-5: f(x))
    assert sum(r.score for r in numgrad) <= 2.5  # at most: x left unchanged, shape and dtype of x
    rel = grade("gradcheck.rel_error", lambda a, b: f(a))
    assert sum(r.score for r in rel) <= 3.5  # a constant 1 happens to be right for opposite signs
    assert all(r.passed or r.message for r in numgrad + rel)
