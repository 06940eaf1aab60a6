"""reference.opencl activations (float32 kernels) against the CPU reference (float64).

Inputs are float32; the CPU reference gets the same values as float64.
Tolerances: y and dx within rtol 1e-5, atol 5e-6 (a few float32 roundings in
exp, erf, tanh); PReLU's dalpha, a float32 sum of up to ~1000 terms, within
rtol 1e-4, atol 1e-4. Sizes are not multiples of the work-group size (64).
"""

from __future__ import annotations

import numpy as np
import pytest

from reference import activations as cpu
from reference.opencl import activations as gpu

pytestmark = pytest.mark.opencl

CASES = [
    ("Sigmoid", ()),
    ("Tanh", ()),
    ("ReLU", ()),
    ("LeakyReLU", ()),
    ("LeakyReLU", (0.2,)),
    ("PReLU", ()),
    ("ELU", ()),
    ("ELU", (0.7,)),
    ("GELU", ()),
    ("GELU", ("tanh",)),
    ("SiLU", ()),
    ("SiLU", (1.702,)),
]
SHAPES = [(1,), (3, 5, 67), (7, 130)]
RTOL, ATOL = 1e-5, 5e-6


def inputs(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """float32 values in about [-9, 9] with exact zeros."""
    x = (np.random.default_rng(seed).standard_normal(shape) * 3.0).astype(np.float32)
    x.reshape(-1)[::11] = 0.0
    return x


def run_both(name: str, args: tuple, x: np.ndarray, dy: np.ndarray) -> tuple:
    """(GPU layer, CPU layer, GPU y, CPU y, GPU dx, CPU dx)."""
    g, c = getattr(gpu, name)(*args), getattr(cpu, name)(*args)
    y_g, y_c = g.forward(x), c.forward(x.astype(np.float64))
    dx_g, dx_c = g.backward(dy), c.backward(dy.astype(np.float64))
    return g, c, y_g, y_c, dx_g, dx_c


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name,args", CASES)
def test_forward_backward_match_cpu(name: str, args: tuple, shape: tuple[int, ...]) -> None:
    x, dy = inputs(shape, 1), inputs(shape, 2)
    _, _, y_g, y_c, dx_g, dx_c = run_both(name, args, x, dy)
    assert isinstance(y_g, np.ndarray) and y_g.dtype == np.float32 and y_g.shape == shape
    assert isinstance(dx_g, np.ndarray) and dx_g.dtype == np.float32 and dx_g.shape == shape
    np.testing.assert_allclose(y_g, y_c, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(dx_g, dx_c, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("shape", [(4, 3), (5, 3, 67), (2, 3, 4, 9)])
def test_prelu_per_channel_and_dalpha(shape: tuple[int, ...]) -> None:
    x, dy = inputs(shape, 3), inputs(shape, 4)
    g, c = gpu.PReLU(3, 0.1), cpu.PReLU(3, 0.1)
    g.alpha[:] = c.alpha[:] = [0.1, -0.3, 0.7]  # distinct per channel: a wrong channel index shows
    y_g, y_c = g.forward(x), c.forward(x.astype(np.float64))
    dx_g, dx_c = g.backward(dy), c.backward(dy.astype(np.float64))
    np.testing.assert_allclose(y_g, y_c, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(dx_g, dx_c, rtol=RTOL, atol=ATOL)
    assert g.dalpha is not None and c.dalpha is not None
    assert g.dalpha.shape == (3,) and g.dalpha.dtype == np.float32
    np.testing.assert_allclose(g.dalpha, c.dalpha, rtol=1e-4, atol=1e-4)


def test_prelu_shared_alpha_dalpha() -> None:
    x, dy = inputs((9, 130), 5), inputs((9, 130), 6)
    g, c, *_ = run_both("PReLU", (), x, dy)
    assert g.dalpha.shape == (1,)
    np.testing.assert_allclose(g.dalpha, c.dalpha, rtol=1e-4, atol=1e-4)


def test_prelu_rejects_wrong_channel_count() -> None:
    with pytest.raises(ValueError, match="expects input"):
        gpu.PReLU(3).forward(np.zeros((2, 4), np.float32))


@pytest.mark.parametrize("name", ["Sigmoid", "SiLU", "ELU", "GELU"])
def test_large_inputs_stay_finite(name: str) -> None:
    x = np.array([-1e4, -100.0, -30.0, 30.0, 100.0, 1e4], dtype=np.float32)
    g, c = getattr(gpu, name)(), getattr(cpu, name)()
    y = g.forward(x)
    dx = g.backward(np.ones_like(x))
    assert np.all(np.isfinite(y)) and np.all(np.isfinite(dx))
    np.testing.assert_allclose(y, c.forward(x.astype(np.float64)), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(dx, c.backward(np.ones(6)), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name,args", [("Tanh", ()), ("PReLU", (3,)), ("GELU", ("tanh",))])
def test_device_arrays_stay_on_the_device(name: str, args: tuple) -> None:
    import pyopencl.array as cl_array

    from reference.opencl import get_queue

    x, dy = inputs((4, 3, 17), 7), inputs((4, 3, 17), 8)
    host = getattr(gpu, name)(*args)
    y_host, dx_host = host.forward(x), host.backward(dy)
    layer = getattr(gpu, name)(*args)
    queue = get_queue()
    y = layer.forward(cl_array.to_device(queue, x))
    dx = layer.backward(cl_array.to_device(queue, dy))
    assert isinstance(y, cl_array.Array) and isinstance(dx, cl_array.Array)
    np.testing.assert_array_equal(y.get(), y_host)
    np.testing.assert_array_equal(dx.get(), dx_host)


def test_input_is_not_modified_and_float64_is_accepted() -> None:
    x = inputs((5, 70), 9).astype(np.float64)
    before = x.copy()
    y = gpu.ELU().forward(x)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(x, before)


def test_empty_input() -> None:
    layer = gpu.SiLU()
    assert layer.forward(np.zeros((0, 4), np.float32)).shape == (0, 4)
    assert layer.backward(np.zeros((0, 4), np.float32)).shape == (0, 4)


def test_backward_checks_dout_shape_and_order() -> None:
    with pytest.raises(RuntimeError, match="before forward"):
        gpu.ReLU().backward(np.zeros(3, np.float32))
    layer = gpu.ReLU()
    layer.forward(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="dout has shape"):
        layer.backward(np.zeros((3, 2), np.float32))


def test_gelu_rejects_unknown_approximation() -> None:
    with pytest.raises(ValueError, match="approximate"):
        gpu.GELU("erf")
