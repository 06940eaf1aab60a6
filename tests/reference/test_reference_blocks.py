"""Reference MLPBlock (Linear -> BatchNorm1d -> GELU -> Dropout) and BatchNorm folding."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gradcheck_util import assert_layer_gradients
from reference.activations import GELU
from reference.blocks import MLPBlock, fold_batchnorm
from reference.dropout import Dropout
from reference.linear import Linear
from reference.normalization import BatchNorm1d


def test_structure() -> None:
    block = MLPBlock(4, 3, p=0.3, rng=np.random.default_rng(0))
    assert isinstance(block.linear, Linear) and block.linear.b is None and block.linear.W.shape == (3, 4)
    assert isinstance(block.bn, BatchNorm1d) and block.bn.gamma.shape == (3,)
    assert isinstance(block.act, GELU) and block.act.approximate == "none"
    assert isinstance(block.drop, Dropout) and block.drop.p == 0.3
    assert MLPBlock(4, 3).drop.p == 0.2


def test_train_and_eval_reach_every_layer() -> None:
    block = MLPBlock(4, 3)
    layers = (block, block.linear, block.bn, block.act, block.drop)
    assert block.eval() is block
    assert all(layer.training is False for layer in layers)
    assert block.train() is block
    assert all(layer.training is True for layer in layers)


def test_eval_forward_is_the_chain() -> None:
    rng = np.random.default_rng(1)
    block = MLPBlock(4, 3, p=0.5, rng=rng)
    block.bn.running_mean = rng.standard_normal(3)
    block.bn.running_var = rng.uniform(0.5, 2.0, size=3)
    block.eval()
    x = rng.standard_normal((5, 4))
    z = (x @ block.linear.W.T - block.bn.running_mean) / np.sqrt(block.bn.running_var + 1e-5)
    expected = np.vectorize(lambda v: v * 0.5 * (1 + math.erf(v / math.sqrt(2))))(z)
    np.testing.assert_allclose(block.forward(x), expected, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_block_gradients(training: bool) -> None:
    rng = np.random.default_rng(2)
    block = MLPBlock(4, 3, p=0.0, rng=rng)
    block.bn.gamma = rng.uniform(0.5, 1.5, size=3)
    block.bn.beta = rng.standard_normal(3)
    block.bn.running_var = rng.uniform(0.5, 2.0, size=3)
    if not training:
        block.eval()
    assert_layer_gradients(block, rng.standard_normal((6, 4)), rng)
    x = rng.standard_normal((6, 4))
    block.forward(x)
    block.backward(rng.standard_normal((6, 3)))
    assert block.linear.dW is not None and block.bn.dgamma is not None
    assert block.linear.dW.shape == (3, 4) and block.bn.dgamma.shape == (3,)


class FixedMaskBlock:
    """An MLPBlock whose dropout draws the same mask on every forward (for central differences)."""

    def __init__(self, block: MLPBlock) -> None:
        self.block = block

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.block.drop.rng = np.random.default_rng(42)
        return self.block.forward(x)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return self.block.backward(dout)


def test_block_gradients_with_dropout_mask() -> None:
    rng = np.random.default_rng(5)
    block = MLPBlock(4, 3, p=0.3, rng=rng)
    block.bn.gamma = rng.uniform(0.5, 1.5, size=3)
    assert_layer_gradients(FixedMaskBlock(block), rng.standard_normal((6, 4)), rng)
    assert np.any(block.drop.keep == 0)


def test_block_backward_goes_through_the_dropout_mask() -> None:
    rng = np.random.default_rng(3)
    block = MLPBlock(4, 3, p=0.5, rng=rng)
    x = rng.standard_normal((8, 4))
    y = block.forward(x)
    dout = rng.standard_normal(y.shape)
    dropped = np.where(y == 0.0)
    assert dropped[0].size > 0
    # dropped units pass no gradient: zeroing dout there changes nothing
    dout_zeroed = dout.copy()
    dout_zeroed[dropped] = 0.0
    dx_a = block.backward(dout)
    dx_b = block.backward(dout_zeroed)
    np.testing.assert_array_equal(dx_a, dx_b)


@pytest.mark.parametrize("bias", [True, False])
def test_fold_batchnorm_equals_linear_then_eval_batchnorm(bias: bool) -> None:
    rng = np.random.default_rng(4)
    linear = Linear(5, 3, bias=bias, rng=rng)
    if bias:
        linear.b = rng.standard_normal(3)
    bn = BatchNorm1d(3, eps=1e-3)
    bn.gamma = rng.uniform(0.5, 1.5, size=3)
    bn.beta = rng.standard_normal(3)
    bn.running_mean = rng.standard_normal(3)
    bn.running_var = rng.uniform(0.5, 2.0, size=3)
    saved = {
        "W": linear.W.copy(),
        "gamma": bn.gamma.copy(),
        "beta": bn.beta.copy(),
        "mean": bn.running_mean.copy(),
        "var": bn.running_var.copy(),
    }
    folded = fold_batchnorm(linear, bn)
    assert isinstance(folded, Linear) and folded.b is not None and folded.W.shape == (3, 5)
    assert folded.W is not linear.W
    x = rng.standard_normal((7, 5))
    expected = bn.eval().forward(linear.forward(x))
    np.testing.assert_allclose(folded.forward(x), expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(linear.W, saved["W"])
    np.testing.assert_array_equal(bn.gamma, saved["gamma"])
    np.testing.assert_array_equal(bn.beta, saved["beta"])
    np.testing.assert_array_equal(bn.running_mean, saved["mean"])
    np.testing.assert_array_equal(bn.running_var, saved["var"])
