"""Reference dropout: mask statistics with fixed seeds, scaling, edge values of p, eval mode, backward."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reference.dropout import Dropout

Z = 6.2  # two-sided normal quantile, P(|Z| > 6.2) = 5.6e-10 < 1e-9


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.9])
def test_zero_fraction_within_binomial_bound(p: float) -> None:
    x = np.random.default_rng(0).uniform(1.0, 2.0, size=(200, 500))
    y = Dropout(p, rng=np.random.default_rng(1)).forward(x)
    n = x.size
    zeros = int(np.sum(y == 0.0))
    assert abs(zeros - n * p) < Z * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("p", [0.2, 0.5, 0.75])
def test_outputs_are_zero_or_scaled_input(p: float) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 5))
    x_before = x.copy()
    y = Dropout(p, rng=rng).forward(x)
    assert y.dtype == np.float64
    assert np.all((y == 0.0) | (y == x / (1 - p)))
    np.testing.assert_array_equal(x, x_before)


def test_mask_is_u_greater_equal_p_from_rng() -> None:
    x = np.ones((3, 4))
    y = Dropout(0.4, rng=np.random.default_rng(7)).forward(x)
    keep = np.random.default_rng(7).random((3, 4)) >= 0.4
    np.testing.assert_array_equal(y != 0.0, keep)


def test_fresh_mask_every_call() -> None:
    layer = Dropout(0.5, rng=np.random.default_rng(3))
    x = np.ones((10, 10))
    assert not np.array_equal(layer.forward(x), layer.forward(x))


def test_p_zero_is_identity() -> None:
    x = np.random.default_rng(4).standard_normal((3, 4))
    np.testing.assert_array_equal(Dropout(0.0, rng=np.random.default_rng(0)).forward(x), x)


def test_p_one_gives_zeros_without_warning() -> None:
    layer = Dropout(1.0, rng=np.random.default_rng(0))
    x = np.random.default_rng(5).standard_normal((3, 4))
    with np.errstate(all="raise"):
        y = layer.forward(x)
        dx = layer.backward(np.ones_like(x))
    np.testing.assert_array_equal(y, np.zeros_like(x))
    np.testing.assert_array_equal(dx, np.zeros_like(x))


@pytest.mark.parametrize("p", [-0.1, 1.5, float("nan")])
def test_rejects_p_outside_unit_interval(p: float) -> None:
    with pytest.raises(ValueError, match=r"between 0 and 1.*" + str(p)):
        Dropout(p)


def test_eval_is_identity_forward_and_backward() -> None:
    layer = Dropout(0.5, rng=np.random.default_rng(0))
    x = np.random.default_rng(6).standard_normal((3, 4))
    layer.forward(x)
    layer.eval()
    np.testing.assert_array_equal(layer.forward(x), x)
    dout = np.random.default_rng(7).standard_normal((3, 4))
    np.testing.assert_array_equal(layer.backward(dout), dout)


def test_backward_uses_mask_of_last_forward() -> None:
    p = 0.3
    layer = Dropout(p, rng=np.random.default_rng(8))
    x = np.random.default_rng(9).uniform(1.0, 2.0, size=(5, 6))
    layer.forward(x)
    y = layer.forward(x)
    dout = np.random.default_rng(10).standard_normal((5, 6))
    dx = layer.backward(dout)
    np.testing.assert_array_equal(dx, np.where(y != 0.0, dout / (1 - p), 0.0))
    np.testing.assert_array_equal(layer.backward(dout), dx)


def test_default_rng_is_a_generator() -> None:
    layer = Dropout()
    assert layer.p == 0.5 and isinstance(layer.rng, np.random.Generator)
