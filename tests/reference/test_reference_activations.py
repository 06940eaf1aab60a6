"""Reference activations: formulas, derivatives against central differences, extremes, GELU's minimum."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gradcheck_util import assert_layer_gradients, away_from_zero
from reference.activations import ELU, GELU, PReLU, ReLU, LeakyReLU, Sigmoid, SiLU, Tanh

SHAPES = [(7,), (4, 5), (2, 3, 4), (2, 3, 4, 5)]

LAYERS = {
    "Sigmoid": Sigmoid,
    "Tanh": Tanh,
    "ReLU": ReLU,
    "LeakyReLU": lambda: LeakyReLU(0.1),
    "PReLU": lambda: PReLU(init=0.3),
    "ELU": lambda: ELU(1.3),
    "GELU": GELU,
    "GELU-tanh": lambda: GELU("tanh"),
    "SiLU": SiLU,
    "Swish-1.7": lambda: SiLU(1.7),
}


def scalar_erf_phi(v: float) -> float:
    return 0.5 * (1.0 + math.erf(v / math.sqrt(2.0)))


def expected_forward(name: str, x: np.ndarray) -> np.ndarray:
    """The formulas of the course table, written elementwise in plain Python."""

    def one(v: float) -> float:
        if name == "Sigmoid":
            return 1.0 / (1.0 + math.exp(-v))
        if name == "Tanh":
            return math.tanh(v)
        if name == "ReLU":
            return max(0.0, v)
        if name == "LeakyReLU":
            return v if v > 0 else 0.1 * v
        if name == "PReLU":
            return v if v > 0 else 0.3 * v
        if name == "ELU":
            return v if v > 0 else 1.3 * (math.exp(v) - 1.0)
        if name == "GELU":
            return v * scalar_erf_phi(v)
        if name == "GELU-tanh":
            return 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3)))
        if name == "SiLU":
            return v / (1.0 + math.exp(-v))
        if name == "Swish-1.7":
            return v / (1.0 + math.exp(-1.7 * v))
        raise AssertionError(name)

    return np.array([one(float(v)) for v in x.ravel()]).reshape(x.shape)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_forward_matches_formula(name: str) -> None:
    rng = np.random.default_rng(0)
    x = 3.0 * rng.standard_normal((3, 4))
    x_before = x.copy()
    y = LAYERS[name]().forward(x)
    assert y.dtype == np.float64 and y.shape == x.shape
    np.testing.assert_allclose(y, expected_forward(name, x), rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(x, x_before)


# Where f'(x) crosses 0 (GELU near -0.75, SiLU near -1.28 / beta), an elementwise
# relative error compares two tiny numbers; gradient checks sample around those points.
DERIVATIVE_ROOTS = {"GELU": (-1.5, -0.5), "GELU-tanh": (-1.5, -0.5), "SiLU": (-1.8, -0.8), "Swish-1.7": (-1.5, -0.5)}


def gradcheck_inputs(name: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """abs(x) in [0.1, 2.5] (off the kink at 0, off saturation), outside the derivative's root interval."""
    x = rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.1, 2.5, size=shape)
    low, high = DERIVATIVE_ROOTS.get(name, (0.0, 0.0))
    inside = (x > low) & (x < high)
    return np.where(inside, np.where(x < 0.5 * (low + high), low - 0.2, high + 0.2), x)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_backward_matches_central_differences(name: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(1)
    x = gradcheck_inputs(name, shape, rng)
    layer = LAYERS[name]()
    params = ("alpha",) if name == "PReLU" else ()
    assert_layer_gradients(layer, x, rng, params=params)


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 5)], ids=str)
def test_prelu_per_channel(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(2)
    layer = PReLU(num_parameters=3)
    layer.alpha = np.array([0.1, -0.2, 0.5])
    x = away_from_zero(rng.standard_normal(shape))
    y = layer.forward(x)
    alpha = layer.alpha.reshape((1, 3) + (1,) * (len(shape) - 2))
    np.testing.assert_array_equal(y, np.where(x > 0, x, alpha * x))
    assert_layer_gradients(layer, x, rng, params=("alpha",))
    assert layer.dalpha is not None and layer.dalpha.shape == (3,)


def test_prelu_single_parameter_gradient_shape() -> None:
    layer = PReLU()
    assert layer.alpha.shape == (1,) and layer.alpha[0] == 0.25
    x = np.array([[-1.0, 2.0], [-3.0, 4.0]])
    layer.forward(x)
    layer.backward(np.ones_like(x))
    np.testing.assert_array_equal(layer.dalpha, [-4.0])


def test_prelu_per_channel_rejects_wrong_channels() -> None:
    with pytest.raises(ValueError, match="num_parameters=3"):
        PReLU(num_parameters=3).forward(np.zeros((2, 4)))


def test_relu_and_leaky_derivative_at_zero() -> None:
    x = np.array([-1.0, 0.0, 1.0])
    relu = ReLU()
    relu.forward(x)
    np.testing.assert_array_equal(relu.backward(np.ones(3)), [0.0, 0.0, 1.0])
    leaky = LeakyReLU(0.2)
    leaky.forward(x)
    np.testing.assert_array_equal(leaky.backward(np.ones(3)), [0.2, 0.2, 1.0])


def test_gelu_rejects_unknown_approximation() -> None:
    with pytest.raises(ValueError, match="approximate"):
        GELU("erf")


def test_gelu_minimum_near_minus_0_75() -> None:
    """Course text: GELU is non-monotonic with a minimum near x = -0.75 of value about -0.17."""
    grid = np.linspace(-3.0, 0.0, 30001)
    y = GELU().forward(grid)
    x_min = grid[np.argmin(y)]
    assert abs(x_min - (-0.7518)) < 0.01
    assert abs(y.min() - (-0.1700)) < 0.001


def test_gelu_derivative_is_phi_plus_x_pdf() -> None:
    x = np.array([-2.0, -0.5, 0.0, 0.7, 3.0])
    layer = GELU()
    layer.forward(x)
    expected = [scalar_erf_phi(v) + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi) for v in x]
    np.testing.assert_allclose(layer.backward(np.ones_like(x)), expected, rtol=1e-14)


EXTREME = np.array([-1e4, -1e3, -40.0, 0.0, 40.0, 1e3, 1e4])


@pytest.mark.parametrize(
    "name, low, high, dlow, dhigh",
    [
        ("Sigmoid", 0.0, 1.0, 0.0, 0.0),
        ("SiLU", 0.0, 1e4, 0.0, 1.0),
        ("ELU", -1.3, 1e4, 0.0, 1.0),
        ("GELU", 0.0, 1e4, 0.0, 1.0),
        ("GELU-tanh", 0.0, 1e4, 0.0, 1.0),
        ("Tanh", -1.0, 1.0, 0.0, 0.0),
    ],
)
def test_extreme_inputs_are_finite_and_silent(name: str, low: float, high: float, dlow: float, dhigh: float) -> None:
    """abs(x) = 1e4: no overflow, no warning (warnings are errors here), correct limits."""
    layer = LAYERS[name]()
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        y = layer.forward(EXTREME)
        dx = layer.backward(np.ones_like(EXTREME))
    assert np.all(np.isfinite(y)) and np.all(np.isfinite(dx))
    assert y[0] == pytest.approx(low, abs=1e-12)
    assert y[-1] == pytest.approx(high, rel=1e-12)
    assert dx[0] == pytest.approx(dlow, abs=1e-12)
    assert dx[-1] == pytest.approx(dhigh, abs=1e-12)


def test_sigmoid_is_symmetric_and_accurate_for_large_negative() -> None:
    x = np.array([-30.0, -5.0, 0.0, 5.0, 30.0])
    y = Sigmoid().forward(x)
    np.testing.assert_allclose(y + y[::-1], 1.0, rtol=1e-15)
    assert y[0] == pytest.approx(math.exp(-30.0) / (1.0 + math.exp(-30.0)), rel=1e-14)
