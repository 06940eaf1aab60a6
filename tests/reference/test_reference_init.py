"""Reference initialisers: shapes, the draws from rng, variances within bounds of false-failure probability < 1e-9."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from reference.init import kaiming_normal, kaiming_uniform, xavier_normal, xavier_uniform

# Two-sided normal quantile: P(|Z| > 6.2) = erfc(6.2 / sqrt 2) = 5.6e-10 < 1e-9.
Z = 6.2
FAILURE_PROBABILITY = 1e-9
FAN_IN, FAN_OUT = 300, 200


def test_z_gives_the_stated_false_failure_probability() -> None:
    assert math.erfc(Z / math.sqrt(2.0)) < FAILURE_PROBABILITY


def chi_square_bounds(n: int) -> tuple[float, float]:
    """Wilson-Hilferty normal approximation of the chi-square(n) quantiles at -Z and +Z."""
    c = 2.0 / (9.0 * n)
    return n * (1 - c - Z * math.sqrt(c)) ** 3, n * (1 - c + Z * math.sqrt(c)) ** 3


def assert_normal_variance(w: np.ndarray, variance: float) -> None:
    """sum(w^2) / variance ~ chi-square(n) for w ~ N(0, variance)."""
    low, high = chi_square_bounds(w.size)
    statistic = float(np.sum(w**2) / variance)
    assert low < statistic < high, f"sum(w^2)/var = {statistic:.1f} outside [{low:.1f}, {high:.1f}]"


def assert_uniform_variance(w: np.ndarray, bound: float) -> None:
    """w ~ U(-a, a): all within a, and sum(w^2) within Hoeffding's bound of n a^2 / 3.

    Each w^2 lies in [0, a^2], so P(|sum - n a^2/3| >= t) <= 2 exp(-2 t^2 / (n a^4)) = 1e-9
    for t = a^2 sqrt(n ln(2e9) / 2).
    """
    assert np.abs(w).max() <= bound
    assert np.abs(w).max() > 0.999 * bound
    n = w.size
    t = bound**2 * math.sqrt(n * math.log(2.0 / FAILURE_PROBABILITY) / 2.0)
    assert abs(float(np.sum(w**2)) - n * bound**2 / 3.0) < t


def test_shapes_dtype_and_fresh_arrays() -> None:
    rng = np.random.default_rng(0)
    for fn in (xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal):
        a = fn(4, 3, rng)
        b = fn(4, 3, rng)
        assert a.shape == (3, 4) and a.dtype == np.float64
        assert a is not b and not np.array_equal(a, b)


def test_draws_come_from_rng() -> None:
    std = math.sqrt(2.0 / 4)
    np.testing.assert_array_equal(
        kaiming_normal(4, 3, np.random.default_rng(5)), np.random.default_rng(5).normal(0.0, std, size=(3, 4))
    )
    a = math.sqrt(6.0 / 7)
    np.testing.assert_array_equal(
        xavier_uniform(4, 3, np.random.default_rng(5)), np.random.default_rng(5).uniform(-a, a, size=(3, 4))
    )


def test_he_normal_variance_is_2_over_fan_in() -> None:
    """Course text 7.2: W ~ N(0, 2 / n_in)."""
    w = kaiming_normal(FAN_IN, FAN_OUT, np.random.default_rng(1))
    assert_normal_variance(w, 2.0 / FAN_IN)


def test_he_uniform_bound_is_sqrt_6_over_fan_in() -> None:
    """Course text 7.2: W ~ U(-sqrt(6 / n_in), sqrt(6 / n_in))."""
    w = kaiming_uniform(FAN_IN, FAN_OUT, np.random.default_rng(2))
    assert_uniform_variance(w, math.sqrt(6.0 / FAN_IN))


def test_xavier_normal_variance_is_2_over_fan_sum() -> None:
    """Course text 7.1: Var W = 2 / (n_in + n_out)."""
    w = xavier_normal(FAN_IN, FAN_OUT, np.random.default_rng(3))
    assert_normal_variance(w, 2.0 / (FAN_IN + FAN_OUT))
    w = xavier_normal(FAN_IN, FAN_OUT, np.random.default_rng(4), gain=2.5)
    assert_normal_variance(w, 2.5**2 * 2.0 / (FAN_IN + FAN_OUT))


def test_xavier_uniform_bound() -> None:
    w = xavier_uniform(FAN_IN, FAN_OUT, np.random.default_rng(5))
    assert_uniform_variance(w, math.sqrt(6.0 / (FAN_IN + FAN_OUT)))
    w = xavier_uniform(FAN_IN, FAN_OUT, np.random.default_rng(6), gain=0.5)
    assert_uniform_variance(w, 0.5 * math.sqrt(6.0 / (FAN_IN + FAN_OUT)))


def test_kaiming_mode_and_negative_slope() -> None:
    w = kaiming_normal(FAN_IN, FAN_OUT, np.random.default_rng(7), mode="fan_out", negative_slope=0.5)
    assert_normal_variance(w, 2.0 / ((1 + 0.25) * FAN_OUT))
    w = kaiming_uniform(FAN_IN, FAN_OUT, np.random.default_rng(8), mode="fan_out", negative_slope=0.2)
    assert_uniform_variance(w, math.sqrt(3.0) * math.sqrt(2.0 / ((1 + 0.04) * FAN_OUT)))


def test_wrong_variance_is_rejected_by_the_bounds() -> None:
    """The bounds are tight enough to catch the classic mistakes (1/n_in instead of 2/n_in)."""
    w = kaiming_normal(FAN_IN, FAN_OUT, np.random.default_rng(1))
    with pytest.raises(AssertionError):
        assert_normal_variance(w, 1.0 / FAN_IN)
    with pytest.raises(AssertionError):
        assert_normal_variance(w, 2.0 / (FAN_IN + FAN_OUT))


@pytest.mark.parametrize("fn", [kaiming_normal, kaiming_uniform])
def test_kaiming_rejects_unknown_mode(fn: Callable[..., np.ndarray]) -> None:
    with pytest.raises(ValueError, match="fan_avg"):
        fn(3, 2, np.random.default_rng(0), mode="fan_avg")
