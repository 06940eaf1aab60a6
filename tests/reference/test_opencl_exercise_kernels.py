"""The reference OpenCL exercise kernels (spec section 5) against NumPy float64.

Tolerances (float32 kernels, float64 truth):
- relu forward/backward and dropout: exact (one float32 operation, or none);
- gelu forward/backward: rtol 1e-5, atol 1e-6 (erf and exp in float32);
- rmsnorm/layernorm: rtol 1e-4, atol 1e-5 on y, rtol 1e-5 on mean/rstd
  (float32 sums of up to 4096 terms, tree-reduced).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from reference.opencl import build_program, load_program, run_exercise_kernel
from reference.opencl.exercise import ExerciseKernelError

pytestmark = pytest.mark.opencl

ERF = np.vectorize(math.erf)


def inputs(n: int, seed: int, scale: float = 3.0) -> np.ndarray:
    """float32 values with exact zeros and both signs."""
    x = (np.random.default_rng(seed).standard_normal(n) * scale).astype(np.float32)
    x[::7] = 0.0
    return x


@pytest.mark.parametrize("n", [1, 63, 1000, 4099])
def test_relu_forward_backward(n: int) -> None:
    x = inputs(n, 1)
    dy = inputs(n, 2)
    program = load_program("activations.cl")
    y = run_exercise_kernel(program, "relu_forward", {"x": x})["y"]
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    dx = run_exercise_kernel(program, "relu_backward", {"x": x, "dy": dy})["dx"]
    np.testing.assert_array_equal(dx, np.where(x > 0, dy, 0))
    assert np.all(dx[x == 0] == 0)  # derivative at 0 is 0


@pytest.mark.parametrize("n", [1, 1000, 4099])
def test_gelu_forward_backward_exact_erf(n: int) -> None:
    x = inputs(n, 3)
    if n >= 4:
        x[:4] = [0.0, -12.0, 12.0, 1e-3]  # zero, both tails, near zero
    dy = inputs(n, 4)
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    cdf = 0.5 * (1.0 + ERF(x64 / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * x64**2) / math.sqrt(2.0 * math.pi)
    program = load_program("activations.cl")
    y = run_exercise_kernel(program, "gelu_forward", {"x": x})["y"]
    np.testing.assert_allclose(y, x64 * cdf, rtol=1e-5, atol=1e-6)
    dx = run_exercise_kernel(program, "gelu_backward", {"x": x, "dy": dy})["dx"]
    np.testing.assert_allclose(dx, dy64 * (cdf + x64 * pdf), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("p", [0.0, 0.3, 0.5, 1.0])
def test_dropout_forward_keeps_where_u_at_least_p(p: float) -> None:
    n = 1001
    x = inputs(n, 5)
    u = np.random.default_rng(6).random(n).astype(np.float32)
    u[:3] = np.float32(p) if p < 1.0 else 0.5  # u == p is kept
    y = run_exercise_kernel(load_program("dropout.cl"), "dropout_forward", {"x": x, "u": u}, {"p": p})["y"]
    assert np.all(np.isfinite(y))
    if p == 1.0:
        np.testing.assert_array_equal(y, np.zeros(n, np.float32))
        return
    keep = u >= np.float32(p)
    expected = np.where(keep, x.astype(np.float64) / (1.0 - p), 0.0)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=0)
    assert np.all(y[~keep] == 0)


def rms_reference(x: np.ndarray, gamma: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    x64 = x.astype(np.float64)
    rstd = 1.0 / np.sqrt((x64**2).mean(axis=-1) + eps)
    return x64 * rstd[:, None] * gamma.astype(np.float64), rstd


def layer_reference(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=-1)
    rstd = 1.0 / np.sqrt(x64.var(axis=-1) + eps)
    y = (x64 - mean[:, None]) * rstd[:, None] * gamma + beta
    return y, mean, rstd


ROW_CASES = [
    (5, 1000, 64),
    (3, 10, 64),  # D < L
    (4, 1000, 1),
    (6, 4096, 256),
    (20, 300, 256),  # D % 4 == 0 (float4 path), D < L
    (2, 1003, 128),  # scalar path
    (3, 64, 16),
]
# Both element layouts: strided (default, GPUs) and one chunk per work-item (CPU devices).
LAYOUTS = [(), ("-DROW_CHUNKS=1",)]


@pytest.mark.parametrize("options", LAYOUTS)
@pytest.mark.parametrize("rows,D,L", ROW_CASES)
def test_rmsnorm_forward(rows: int, D: int, L: int, options: tuple[str, ...]) -> None:
    rng = np.random.default_rng(D + L)
    x = (rng.standard_normal((rows, D)) * 2 + 0.5).astype(np.float32)
    x[0] = 0.0  # an all-zero row: rstd = 1/sqrt(eps), y = 0, finite
    x[1, ::3] = 0.0
    gamma = rng.standard_normal(D).astype(np.float32)
    eps = 1e-6
    out = run_exercise_kernel(
        load_program("rmsnorm.cl", options), "rmsnorm_forward", {"x": x, "gamma": gamma}, {"eps": eps}, L=L
    )
    y, rstd = rms_reference(x, gamma, eps)
    assert np.all(np.isfinite(out["y"])) and np.all(np.isfinite(out["rstd"]))
    np.testing.assert_allclose(out["rstd"], rstd, rtol=1e-5)
    np.testing.assert_allclose(out["y"], y, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(out["y"][0], np.zeros(D, np.float32))


@pytest.mark.parametrize("options", LAYOUTS)
@pytest.mark.parametrize("rows,D,L", ROW_CASES)
def test_layernorm_forward(rows: int, D: int, L: int, options: tuple[str, ...]) -> None:
    rng = np.random.default_rng(2 * D + L)
    x = (rng.standard_normal((rows, D)) * 3 + 10.0).astype(np.float32)  # mean far from 0
    x[0] = 0.0  # constant row: var 0, y = beta
    x[1, ::3] = 0.0
    x[-1, 0] = 60.0  # a first value ~17 std from the mean (the kernel's shift)
    gamma = rng.standard_normal(D).astype(np.float32)
    beta = rng.standard_normal(D).astype(np.float32)
    eps = 1e-5
    out = run_exercise_kernel(
        load_program("layernorm.cl", options),
        "layernorm_forward",
        {"x": x, "gamma": gamma, "beta": beta},
        {"eps": eps},
        L=L,
    )
    y, mean, rstd = layer_reference(x, gamma, beta, eps)
    np.testing.assert_allclose(out["mean"], mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["rstd"], rstd, rtol=1e-4)
    np.testing.assert_allclose(out["y"], y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["y"][0], beta, rtol=1e-6, atol=1e-6)


def test_row_kernels_default_local_size_and_leading_dims() -> None:
    x = np.random.default_rng(9).standard_normal((2, 3, 77)).astype(np.float32)
    gamma = np.ones(77, np.float32)
    out = run_exercise_kernel(load_program("rmsnorm.cl"), "rmsnorm_forward", {"x": x, "gamma": gamma}, {"eps": 1e-6})
    y, rstd = rms_reference(x.reshape(6, 77), gamma, 1e-6)
    assert out["y"].shape == (2, 3, 77) and out["rstd"].shape == (6,)
    np.testing.assert_allclose(out["y"].reshape(6, 77), y, rtol=1e-4, atol=1e-5)


def test_unwritten_outputs_stay_nan() -> None:
    half = """//CL//
    __kernel void relu_forward(__global const float *x, __global float *y, const int n)
    {
        const int i = get_global_id(0);
        if (i < n && i % 2 == 0) y[i] = fmax(x[i], 0.0f);
    }
    """
    y = run_exercise_kernel(build_program(half, "half.cl"), "relu_forward", {"x": np.ones(10, np.float32)})["y"]
    assert np.all(y[::2] == 1.0) and np.all(np.isnan(y[1::2]))


def test_unknown_kernel_and_missing_scalar_are_named_errors() -> None:
    program = load_program("dropout.cl")
    x = np.ones(4, np.float32)
    with pytest.raises(ExerciseKernelError, match="not an exercise kernel"):
        run_exercise_kernel(program, "softmax_forward", {"x": x})
    with pytest.raises(ExerciseKernelError, match="'p'"):
        run_exercise_kernel(program, "dropout_forward", {"x": x, "u": x})
    with pytest.raises(ExerciseKernelError, match="u has 2 values"):
        run_exercise_kernel(program, "dropout_forward", {"x": x, "u": x[:2]}, {"p": 0.5})
    with pytest.raises(ExerciseKernelError, match="need 12 values"):
        run_exercise_kernel(load_program("rmsnorm.cl"), "rmsnorm_forward", {"x": x, "gamma": x}, {"eps": 1e-6}, rows=3)
