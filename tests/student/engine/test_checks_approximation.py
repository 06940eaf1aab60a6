"""Hidden checks of approximation.fit_function: max error on a grid, partial credit, output shape."""

from __future__ import annotations

import numpy as np
import pytest

from checks_util import SEEDS, assert_full_marks, by_name, grade_in_process, variant_ns
from grader.student.engine.checks import CHECKS
from grader.student.engine.checks.approximation import partial_score
from reference.approximation import fit_function

EXERCISE = "approximation.fit_function"


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_reference_full_marks_and_stable(seed: int) -> None:
    first = assert_full_marks(EXERCISE, seed=seed)
    second = assert_full_marks(EXERCISE, seed=seed)
    assert [r.to_json() for r in first] == [r.to_json() for r in second]


def test_longer_timeout() -> None:
    assert CHECKS[EXERCISE].timeout == 60.0


def test_partial_credit() -> None:
    assert partial_score(0.01, 5.0) == 5.0
    assert partial_score(0.175, 4.0) == pytest.approx(2.0)
    assert partial_score(0.3, 5.0) == 0.0
    assert partial_score(float("nan"), 5.0) == 0.0


def short_training(f, n_hidden, rng, steps=2000):
    """Too few steps: a rough fit that earns partial credit at most."""
    return fit_function(f, n_hidden, rng, steps=40)


def test_rough_fit_gets_partial_or_no_credit() -> None:
    results = by_name(grade_in_process(EXERCISE, variant_ns("approximation", fit_function=short_training)))
    sin = results["sin_2pi"]
    assert not sin.passed and sin.score < sin.max_score
    assert "largest error" in sin.message
    assert results["output_shape"].passed


def flat_output(f, n_hidden, rng, steps=2000):
    """Returns a g that gives (N,) instead of (N, 1), but fits well."""
    g = fit_function(f, n_hidden, rng, steps=steps)
    return lambda x: g(x).ravel()


@pytest.mark.slow
def test_output_shape_checked() -> None:
    results = by_name(grade_in_process(EXERCISE, variant_ns("approximation", fit_function=flat_output)))
    assert results["sin_2pi"].passed and not results["output_shape"].passed
    assert "(1001, 1)" in results["output_shape"].message


def constant(f, n_hidden, rng, steps=2000):
    """g = mean of f: far off."""
    grid = np.linspace(0, 1, 101).reshape(-1, 1)
    c = float(np.mean(f(grid)))
    return lambda x: np.full((len(x), 1), c)


def test_bad_fit_scores_zero_on_fit_checks() -> None:
    results = by_name(grade_in_process(EXERCISE, variant_ns("approximation", fit_function=constant)))
    assert results["sin_2pi"].score == 0.0 and results["gauss_bump"].score == 0.0


ODD_FUNCTIONS = [lambda x: 0.0, lambda x: np.zeros(3), lambda x: [["a"]], lambda x: np.full(np.shape(x), np.nan)]


@pytest.mark.parametrize("odd", ODD_FUNCTIONS)
def test_odd_functions_fail_cleanly(odd) -> None:
    results = grade_in_process(EXERCISE, variant_ns("approximation", fit_function=lambda f, n, rng, steps=2000: odd))
    fits = [r for r in results if r.name != "output_shape"]
    assert sum(r.score for r in fits) == 0 and all(r.message for r in fits)
