"""Reference normalisation layers: worked numbers, running statistics, gradients against central differences."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck_util import Affine, assert_layer_gradients
from reference.base import Module
from reference.normalization import BatchNorm1d, BatchNorm2d, GroupNorm, InstanceNorm2d, LayerNorm, RMSNorm

TRIO_X = np.array([[2.0, 4.0, 6.0], [4.0, 2.0, 0.0]])


def randomise_affine(layer: Affine, rng: np.random.Generator) -> None:
    """gamma, beta away from their defaults so that a backward ignoring them fails."""
    layer.gamma = rng.uniform(0.5, 1.5, size=layer.gamma.shape) * rng.choice([-1.0, 1.0], size=layer.gamma.shape)
    if hasattr(layer, "beta"):
        layer.beta = rng.standard_normal(layer.beta.shape)


# ---------------------------------------------------------------- worked numbers


def test_normalization_trio_token_0() -> None:
    """Course text, "The Normalization Trio": X = [[2,4,6],[4,2,0]], eps = 0, token 0."""
    layer_norm = LayerNorm(3, eps=0.0).forward(TRIO_X)
    rms_norm = RMSNorm(3, eps=0.0).forward(TRIO_X)
    batch_norm = BatchNorm1d(3, eps=0.0).forward(TRIO_X)
    np.testing.assert_allclose(np.round(layer_norm[0], 4), [-1.2247, 0.0, 1.2247])
    np.testing.assert_allclose(np.round(rms_norm[0], 4), [0.4629, 0.9258, 1.3887])
    np.testing.assert_allclose(np.round(batch_norm[0], 4), [-1.0, 1.0, 1.0])
    np.testing.assert_allclose(layer_norm[0], [-np.sqrt(1.5), 0.0, np.sqrt(1.5)], rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(rms_norm[0], np.array([2.0, 4.0, 6.0]) / np.sqrt(56.0 / 3.0), rtol=1e-14)


def seed_rmsnorm_scratch(x: np.ndarray, dout: np.ndarray, eps: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """The course text's RMSNormScratch (gamma = 1), formula for formula."""
    gamma = np.ones(x.shape[-1])
    rms = np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + eps)
    out = x / rms * gamma
    D = x.shape[-1]
    sum_term = np.sum(dout * gamma * x, axis=-1, keepdims=True)
    dx = (dout * gamma / rms) - (x / (D * rms**3)) * sum_term
    return out, dx


def test_rmsnorm_matches_course_scratch_example() -> None:
    x = np.array([[1.0, 2.0, 3.0, 4.0]])
    layer = RMSNorm(4)
    out = layer.forward(x)
    dx = layer.backward(np.ones_like(out))
    expected_out, expected_dx = seed_rmsnorm_scratch(x, np.ones_like(x))
    np.testing.assert_allclose(out, expected_out, rtol=1e-14)
    np.testing.assert_allclose(dx, expected_dx, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.round(out, 4), [[0.3651, 0.7303, 1.0954, 1.4606]])
    assert layer.dgamma is not None
    np.testing.assert_allclose(layer.dgamma, out[0], rtol=1e-14)


def test_rmsnorm_dgamma_sums_over_all_leading_axes() -> None:
    """The course's scratch code sums dgamma over axis 0 only: wrong for (B, T, D) input."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4))
    dout = rng.standard_normal((2, 3, 4))
    layer = RMSNorm(4)
    layer.forward(x)
    layer.backward(dout)
    x_norm = x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + 1e-6)
    assert layer.dgamma is not None and layer.dgamma.shape == (4,)
    np.testing.assert_allclose(layer.dgamma, (dout * x_norm).sum(axis=(0, 1)), rtol=1e-13)


# ---------------------------------------------------------------- forward formulas


def test_layernorm_forward_formula_and_eps_inside_sqrt() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4)) * 1e-3
    layer = LayerNorm((3, 4), eps=1e-5)
    randomise_affine(layer, rng)
    mean = x.mean(axis=(1, 2), keepdims=True)
    var = ((x - mean) ** 2).mean(axis=(1, 2), keepdims=True)
    expected = (x - mean) / np.sqrt(var + 1e-5) * layer.gamma + layer.beta
    np.testing.assert_allclose(layer.forward(x), expected, rtol=1e-13, atol=1e-15)
    assert layer.gamma.shape == (3, 4) and LayerNorm(5).gamma.shape == (5,)


def test_layernorm_rejects_wrong_trailing_shape() -> None:
    with pytest.raises(ValueError):
        LayerNorm(4).forward(np.zeros((2, 5)))


def test_batchnorm_training_output_is_standardised_per_channel() -> None:
    rng = np.random.default_rng(5)
    x = 3.0 + 2.0 * rng.standard_normal((6, 3, 4, 5))
    y = BatchNorm2d(3, eps=0.0).forward(x)
    np.testing.assert_allclose(y.mean(axis=(0, 2, 3)), 0.0, atol=1e-13)
    np.testing.assert_allclose(y.var(axis=(0, 2, 3)), 1.0, rtol=1e-12)


def test_groupnorm_forward_formula() -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 6, 4, 5))
    layer = GroupNorm(3, 6)
    randomise_affine(layer, rng)
    groups = x.reshape(2, 3, 2, 4, 5)
    mean = groups.mean(axis=(2, 3, 4), keepdims=True)
    var = groups.var(axis=(2, 3, 4), keepdims=True)
    x_hat = ((groups - mean) / np.sqrt(var + 1e-5)).reshape(x.shape)
    expected = x_hat * layer.gamma[None, :, None, None] + layer.beta[None, :, None, None]
    np.testing.assert_allclose(layer.forward(x), expected, rtol=1e-13, atol=1e-14)


def test_groupnorm_with_one_channel_per_group_is_instancenorm() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 4, 5))
    np.testing.assert_allclose(GroupNorm(3, 3).forward(x), InstanceNorm2d(3).forward(x), rtol=1e-13, atol=1e-14)


def test_groupnorm_rejects_indivisible_channels() -> None:
    with pytest.raises(ValueError, match="divisible"):
        GroupNorm(4, 6)


def test_instancenorm_keeps_affine_parameters() -> None:
    layer = InstanceNorm2d(3)
    np.testing.assert_array_equal(layer.gamma, np.ones(3))
    np.testing.assert_array_equal(layer.beta, np.zeros(3))


# ---------------------------------------------------------------- BatchNorm running statistics


@pytest.mark.parametrize(
    "cls, shape, axes",
    [(BatchNorm1d, (5, 3), (0,)), (BatchNorm1d, (4, 3, 6), (0, 2)), (BatchNorm2d, (2, 3, 4, 5), (0, 2, 3))],
)
def test_batchnorm_running_statistics(cls: type, shape: tuple[int, ...], axes: tuple[int, ...]) -> None:
    rng = np.random.default_rng(8)
    layer = cls(3, momentum=0.1)
    np.testing.assert_array_equal(layer.running_mean, np.zeros(3))
    np.testing.assert_array_equal(layer.running_var, np.ones(3))
    running_mean, running_var = np.zeros(3), np.ones(3)
    m = int(np.prod([shape[a] for a in axes]))
    for _ in range(4):
        x = 2.0 + 3.0 * rng.standard_normal(shape)
        layer.forward(x)
        batch_mean = x.mean(axis=axes)
        unbiased_var = ((x - np.expand_dims(batch_mean, axes)) ** 2).sum(axis=axes) / (m - 1)
        running_mean = 0.9 * running_mean + 0.1 * batch_mean
        running_var = 0.9 * running_var + 0.1 * unbiased_var
        np.testing.assert_allclose(layer.running_mean, running_mean, rtol=1e-13)
        np.testing.assert_allclose(layer.running_var, running_var, rtol=1e-13)

    layer.eval()
    x = rng.standard_normal(shape)
    y = layer.forward(x)
    layer.backward(rng.standard_normal(shape))
    np.testing.assert_array_equal(layer.running_mean, running_mean)
    np.testing.assert_array_equal(layer.running_var, running_var)
    view = (1, 3) + (1,) * (len(shape) - 2)
    expected = (x - running_mean.reshape(view)) / np.sqrt(running_var.reshape(view) + 1e-5)
    np.testing.assert_allclose(y, expected, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("cls, shape", [(BatchNorm1d, (1, 3)), (BatchNorm1d, (1, 3, 1)), (BatchNorm2d, (1, 3, 1, 1))])
def test_batchnorm_one_value_per_channel_raises_in_training(cls: type, shape: tuple[int, ...]) -> None:
    layer = cls(3)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        layer.forward(np.ones(shape))
    np.testing.assert_array_equal(layer.running_mean, np.zeros(3))
    layer.eval()
    assert layer.forward(np.ones(shape)).shape == shape


def test_batchnorm_rejects_wrong_shapes() -> None:
    with pytest.raises(ValueError):
        BatchNorm1d(3).forward(np.zeros((4, 3, 2, 2)))
    with pytest.raises(ValueError):
        BatchNorm2d(3).forward(np.zeros((4, 3)))
    with pytest.raises(ValueError):
        BatchNorm1d(3).forward(np.zeros((4, 2)))


# ---------------------------------------------------------------- gradients


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize(
    "cls, shape", [(BatchNorm1d, (5, 3)), (BatchNorm1d, (4, 3, 6)), (BatchNorm2d, (2, 3, 4, 5))], ids=str
)
def test_batchnorm_gradients(cls: type, shape: tuple[int, ...], training: bool) -> None:
    rng = np.random.default_rng(9)
    layer = cls(3)
    randomise_affine(layer, rng)
    layer.running_mean = rng.standard_normal(3)
    layer.running_var = rng.uniform(0.5, 2.0, size=3)
    if not training:
        layer.eval()
    x = 1.0 + 2.0 * rng.standard_normal(shape)
    assert_layer_gradients(layer, x, rng, params=("gamma", "beta"))
    assert layer.dgamma.shape == (3,) and layer.dbeta.shape == (3,)


@pytest.mark.parametrize(
    "normalized_shape, shape",
    [(5, (4, 5)), (4, (2, 3, 4)), ((3, 4), (2, 3, 4)), ((4, 5), (2, 3, 4, 5)), ((3, 4, 5), (2, 3, 4, 5))],
    ids=str,
)
def test_layernorm_gradients(normalized_shape: int | tuple[int, ...], shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(10)
    layer = LayerNorm(normalized_shape)
    randomise_affine(layer, rng)
    assert_layer_gradients(layer, rng.standard_normal(shape), rng, params=("gamma", "beta"))


@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4), (2, 3, 4, 5)], ids=str)
def test_rmsnorm_gradients(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(11)
    layer = RMSNorm(shape[-1])
    randomise_affine(layer, rng)
    assert_layer_gradients(layer, rng.standard_normal(shape), rng, params=("gamma",))


@pytest.mark.parametrize(
    "groups, shape", [(3, (4, 12)), (2, (2, 6, 5)), (2, (2, 4, 3, 5)), (1, (2, 3, 4, 5)), (3, (2, 3, 4, 5))], ids=str
)
def test_groupnorm_gradients(groups: int, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(12)
    layer = GroupNorm(groups, shape[1])
    randomise_affine(layer, rng)
    assert_layer_gradients(layer, rng.standard_normal(shape), rng, params=("gamma", "beta"))


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 2, 5, 4)], ids=str)
def test_instancenorm_gradients(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(13)
    layer = InstanceNorm2d(shape[1])
    randomise_affine(layer, rng)
    assert_layer_gradients(layer, rng.standard_normal(shape), rng, params=("gamma", "beta"))


@pytest.mark.parametrize("layer", [LayerNorm(4), RMSNorm(4), GroupNorm(2, 4), InstanceNorm2d(4)], ids=type)
def test_same_output_in_train_and_eval(layer: Module) -> None:
    x = np.random.default_rng(14).standard_normal((2, 4, 3, 4))
    y_train = layer.train().forward(x)
    np.testing.assert_array_equal(layer.eval().forward(x), y_train)
