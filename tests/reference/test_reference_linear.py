"""Reference Linear: PyTorch's initialisation drawn from rng, forward, gradients."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck_util import assert_layer_gradients
from reference.linear import Linear


def test_weights_drawn_from_rng_uniform() -> None:
    layer = Linear(5, 3, rng=np.random.default_rng(0))
    k = 1 / np.sqrt(5)
    np.testing.assert_array_equal(layer.W, np.random.default_rng(0).uniform(-k, k, size=(3, 5)))
    np.testing.assert_array_equal(layer.b, np.zeros(3))
    assert Linear(5, 3, bias=False).b is None
    big = Linear(400, 300, rng=np.random.default_rng(1)).W
    assert np.abs(big).max() <= 1 / np.sqrt(400)
    assert np.abs(big).max() > 0.99 / np.sqrt(400)


def test_forward() -> None:
    rng = np.random.default_rng(2)
    layer = Linear(4, 3, rng=rng)
    layer.b = rng.standard_normal(3)
    x = rng.standard_normal((6, 4))
    y = layer.forward(x)
    assert y.shape == (6, 3) and y.dtype == np.float64
    np.testing.assert_allclose(y, x @ layer.W.T + layer.b, rtol=1e-14)


@pytest.mark.parametrize("shape", [(6, 4), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("bias", [True, False])
def test_gradients(shape: tuple[int, ...], bias: bool) -> None:
    rng = np.random.default_rng(3)
    layer = Linear(4, 5, bias=bias, rng=rng)
    if bias:
        layer.b = rng.standard_normal(5)
    params = ("W", "b") if bias else ("W",)
    assert_layer_gradients(layer, rng.standard_normal(shape), rng, params=params)
    assert layer.dW is not None and layer.dW.shape == (5, 4)


def test_rejects_wrong_in_features() -> None:
    with pytest.raises(ValueError, match="Linear expects input"):
        Linear(4, 2).forward(np.zeros((3, 5)))
