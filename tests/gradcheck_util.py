"""Shared helper for the reference tests: compare a layer's backward with central differences."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from reference.gradcheck import numerical_gradient, rel_error

TOLERANCE = 1e-7  # CS231n standard for float64 central differences


class Affine(Protocol):
    """A layer with a learnable scale (and maybe a shift, ``beta``)."""

    gamma: np.ndarray

    def forward(self, x: np.ndarray) -> np.ndarray: ...


class Layer(Protocol):
    """What the check calls: a layer's forward and backward (its parameters are read by name)."""

    def forward(self, x: np.ndarray) -> np.ndarray: ...

    def backward(self, dout: np.ndarray) -> np.ndarray: ...


def assert_layer_gradients(
    layer: Layer,
    x: np.ndarray,
    rng: np.random.Generator,
    params: Sequence[str] = (),
    tol: float = TOLERANCE,
) -> None:
    """Check dx and every d<param> of ``layer`` against central differences of sum(forward(x) * dout).

    Also checks the contract around backward: x is not mutated, d<param> has the
    parameter's shape, and a second backward gives the same result without
    changing the parameters (backward must not change state).
    """
    x_before = x.copy()
    y = layer.forward(x)
    assert y.dtype == np.float64
    dout = random_dout(y.shape, rng)
    state_before = array_state(layer)
    dx = layer.backward(dout)
    assert_same_state(state_before, array_state(layer))
    assert dx.shape == x.shape
    np.testing.assert_array_equal(x, x_before, err_msg="forward/backward mutated the input")
    analytic = {name: np.array(getattr(layer, "d" + name)) for name in params}
    saved = {name: getattr(layer, name).copy() for name in params}

    dx_again = layer.backward(dout)
    np.testing.assert_array_equal(dx_again, dx, err_msg="a second backward gave a different dx")
    for name in params:
        np.testing.assert_array_equal(getattr(layer, name), saved[name], err_msg=f"backward changed {name}")
        np.testing.assert_array_equal(getattr(layer, "d" + name), analytic[name])

    x_num = x.copy()
    numeric_dx = numerical_gradient(layer.forward, x_num, dout)
    err = rel_error(dx, numeric_dx)
    assert err < tol, f"dx relative error {err:.3e} for input shape {x.shape}"

    for name in params:
        value = getattr(layer, name)
        numeric = numerical_gradient(lambda _: layer.forward(x), value, dout)
        assert analytic[name].shape == value.shape, f"d{name} shape {analytic[name].shape} != {value.shape}"
        err = rel_error(analytic[name], numeric)
        assert err < tol, f"d{name} relative error {err:.3e} for input shape {x.shape}"


def array_state(layer: object, prefix: str = "") -> dict[str, np.ndarray]:
    """Copies of the layer's arrays (parameters, buffers, caches in dicts, sub-layers), gradients d<name> excluded."""
    attrs = vars(layer)
    state = {}
    for name, value in attrs.items():
        if name.startswith("d") and name[1:] in attrs:
            continue
        if isinstance(value, np.ndarray):
            state[prefix + name] = value.copy()
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, np.ndarray):
                    state[f"{prefix}{name}[{key!r}]"] = item.copy()
        elif hasattr(value, "forward") and hasattr(value, "__dict__"):
            state.update(array_state(value, prefix=f"{prefix}{name}."))
    return state


def assert_same_state(before: dict[str, np.ndarray], after: dict[str, np.ndarray]) -> None:
    """backward must not change parameters, running statistics or the cached forward state."""
    assert before.keys() == after.keys()
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=f"backward changed {name}")


def random_dout(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random upstream gradient of magnitude in [0.5, 1.5] and random sign.

    Bounded away from 0 so that no element of the analytic gradient is tiny by
    accident: central differences carry an absolute round-off error near 1e-10
    (the whole sum is differenced), which a relative error cannot absorb when
    the true element is near 0.
    """
    return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.5, 1.5, size=shape)


def away_from_zero(x: np.ndarray, margin: float = 0.05) -> np.ndarray:
    """x pushed at least ``margin`` away from 0 (kinks of ReLU-like layers lie beyond the difference step)."""
    return x + margin * np.sign(x) + margin * (x == 0)
