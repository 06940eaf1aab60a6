"""reference.opencl.normalization against the CPU reference (reference.normalization, float64).

Tolerance (float32 device, float64 truth): every output, gradient and running
statistic must satisfy max|gpu - cpu| <= 1e-4 * max(1, max|cpu|). Correct
float32 kernels are near 1e-6 here; the classic mistakes (biased running
variance, eps outside the root, missing mean term in dx, wrong axis) are
off by 1e-2 or more on these inputs. Row lengths are not multiples of the
work-group size (1000, 77, 65, 35, ...).
"""

from __future__ import annotations

import numpy as np
import pytest

import reference.normalization as cpu
from gradcheck_util import Affine
from reference.opencl import host
from reference.opencl import normalization as gpu

pytestmark = pytest.mark.opencl

TOL = 1e-4


def assert_close(actual, expected, what: str) -> None:
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, expected {expected.shape}"
    scale = max(1.0, float(np.abs(expected).max(initial=0.0)))
    err = float(np.abs(actual - expected).max(initial=0.0))
    assert err <= TOL * scale, f"{what}: max abs error {err:.3g} > {TOL} * {scale:.3g}"


def f32(a: np.ndarray) -> np.ndarray:
    """float64 values exactly representable in float32, so both sides see the same input."""
    return a.astype(np.float32).astype(np.float64)


def pair(cls: str, args: tuple, rng: np.random.Generator):
    """The CPU and GPU layer with the same random gamma (and beta)."""
    c, g = getattr(cpu, cls)(*args), getattr(gpu, cls)(*args)
    c.gamma = f32(rng.standard_normal(c.gamma.shape) + 1.0)
    g.gamma = c.gamma.astype(np.float32)
    if hasattr(c, "beta"):
        c.beta = f32(rng.standard_normal(c.beta.shape))
        g.beta = c.beta.astype(np.float32)
    return c, g


def check_layer(c, g, x: np.ndarray, dout: np.ndarray, what: str) -> None:
    """forward, backward and every parameter gradient, GPU against CPU."""
    x_before = x.copy()
    y = g.forward(x)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    assert_close(y, c.forward(x), f"{what} y")
    assert_close(g.backward(dout), c.backward(dout), f"{what} dx")
    assert_close(g.dgamma, c.dgamma, f"{what} dgamma")
    if hasattr(c, "beta"):
        assert_close(g.dbeta, c.dbeta, f"{what} dbeta")
    np.testing.assert_array_equal(x, x_before)  # the input is not mutated


CASES = [
    ("RMSNorm", (1000,), (6, 1000)),
    ("RMSNorm", (77,), (2, 3, 77)),
    ("RMSNorm", (4096,), (3, 4096)),
    ("LayerNorm", (1000,), (5, 1000)),
    ("LayerNorm", ((5, 13),), (4, 3, 5, 13)),
    ("LayerNorm", (3,), (7, 3)),
    ("GroupNorm", (3, 12), (4, 12, 5, 7)),
    ("GroupNorm", (2, 6), (5, 6)),
    ("GroupNorm", (4, 8), (3, 8, 65)),
    ("GroupNorm", (1, 5), (2, 5, 9, 9)),
    ("InstanceNorm2d", (5,), (3, 5, 6, 11)),
    ("InstanceNorm2d", (2,), (2, 2, 33, 31)),
    ("InstanceNorm2d", (3,), (2, 3, 16, 12)),  # S % 4 == 0: float4
    ("GroupNorm", (2, 4), (3, 4, 8, 8)),
]


@pytest.mark.parametrize("cls,args,shape", CASES)
def test_row_normalisations_match_cpu(cls: str, args: tuple, shape: tuple) -> None:
    rng = np.random.default_rng(sum(shape))
    c, g = pair(cls, args, rng)
    x = f32(rng.standard_normal(shape) * 2.0 + 3.0)
    dout = f32(rng.standard_normal(shape))
    check_layer(c, g, x, dout, f"{cls}{args} train")
    c.eval(), g.eval()  # same behaviour in eval
    check_layer(c, g, x, dout, f"{cls}{args} eval")


BN_CASES = [
    ("BatchNorm1d", (70,), (33, 70)),
    ("BatchNorm1d", (7,), (9, 7, 13)),
    ("BatchNorm1d", (3,), (2, 3)),
    ("BatchNorm1d", (8,), (70, 8)),  # float4 column kernels, three row blocks
    ("BatchNorm2d", (6,), (5, 6, 7, 9)),
    ("BatchNorm2d", (2,), (3, 2, 17, 15)),
    ("BatchNorm2d", (3,), (3, 3, 8, 6)),  # S % 4 == 0: float4 planes
    ("BatchNorm1d", (5,), (4, 5, 12)),
    ("BatchNorm1d", (64,), (130, 64)),  # float4 row blocks: 64 + 64 + 2 rows
]


@pytest.mark.parametrize("cls,args,shape", BN_CASES)
def test_batchnorm_train_eval_and_running_statistics(cls: str, args: tuple, shape: tuple) -> None:
    rng = np.random.default_rng(sum(shape))
    c, g = pair(cls, args, rng)
    c.momentum = g.momentum = 0.3
    for step in range(2):  # two updates of the running statistics
        x = f32(rng.standard_normal(shape) * 2.0 + 3.0 + step)
        dout = f32(rng.standard_normal(shape))
        check_layer(c, g, x, dout, f"{cls} train step {step}")
        assert_close(g.running_mean, c.running_mean, f"{cls} running_mean")
        assert_close(g.running_var, c.running_var, f"{cls} running_var")
    running = (g.running_mean.copy(), g.running_var.copy())
    c.eval(), g.eval()
    x = f32(rng.standard_normal(shape) * 2.0 + 3.0)
    dout = f32(rng.standard_normal(shape))
    check_layer(c, g, x, dout, f"{cls} eval")
    np.testing.assert_array_equal(g.running_mean, running[0])  # eval updates nothing
    np.testing.assert_array_equal(g.running_var, running[1])


def test_batchnorm_large_mean_small_spread() -> None:
    """A mean of 100 and a std of 0.5: E[x^2] - E[x]^2 in float32 would be off by ~1e-3 in var.

    (A float32 mean of 1000 itself carries a rounding of 3e-5, i.e. 1e-4 of a
    std of 0.5: beyond any float32 layer, so 100 is the largest fair mean here.)
    """
    rng = np.random.default_rng(7)
    c, g = pair("BatchNorm1d", (40,), rng)
    x = f32(rng.standard_normal((300, 40)) * 0.5 + 100.0)
    dout = f32(rng.standard_normal((300, 40)))
    check_layer(c, g, x, dout, "BatchNorm1d large mean")
    assert_close(g.running_var, c.running_var, "running_var")


def test_layernorm_large_mean_small_spread() -> None:
    rng = np.random.default_rng(8)
    c, g = pair("LayerNorm", (300,), rng)
    x = f32(rng.standard_normal((20, 300)) * 0.5 + 100.0)
    check_layer(c, g, x, f32(rng.standard_normal((20, 300))), "LayerNorm large mean")


def test_backward_changes_no_running_statistics_or_parameters() -> None:
    rng = np.random.default_rng(9)
    g = gpu.BatchNorm1d(5)
    x = rng.standard_normal((10, 5))
    g.forward(x)
    state = [a.copy() for a in (g.running_mean, g.running_var, g.gamma, g.beta)]
    g.backward(rng.standard_normal((10, 5)))
    for before, after in zip(state, (g.running_mean, g.running_var, g.gamma, g.beta), strict=True):
        np.testing.assert_array_equal(before, after)


def test_device_arrays_in_device_arrays_out() -> None:
    import pyopencl.array as cl_array

    from reference.opencl import get_queue

    rng = np.random.default_rng(10)
    x = rng.standard_normal((4, 6, 5, 3)).astype(np.float32)
    dout = rng.standard_normal(x.shape).astype(np.float32)
    for layer in (
        gpu.GroupNorm(3, 6),
        gpu.BatchNorm2d(6),
        gpu.InstanceNorm2d(6),
        gpu.LayerNorm((5, 3)),
        gpu.RMSNorm(3),
    ):
        host_y = layer.forward(x)
        host_dx = layer.backward(dout)
        y = layer.forward(cl_array.to_device(get_queue(), x))
        dx = layer.backward(cl_array.to_device(get_queue(), dout))
        assert isinstance(y, cl_array.Array) and isinstance(dx, cl_array.Array)
        assert isinstance(layer.dgamma, np.ndarray)
        if isinstance(layer, gpu.BatchNorm2d):
            continue  # its running statistics moved between the two calls; values checked above
        np.testing.assert_allclose(y.get(), host_y, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(dx.get(), host_dx, rtol=1e-6, atol=1e-6)


def test_constructor_contract_and_errors() -> None:
    bn = gpu.BatchNorm1d(4)
    assert bn.gamma.shape == bn.beta.shape == bn.running_mean.shape == (4,)
    np.testing.assert_array_equal(bn.running_var, np.ones(4))
    assert (bn.eps, bn.momentum) == (1e-5, 0.1)
    assert gpu.RMSNorm(8).eps == 1e-6 and not hasattr(gpu.RMSNorm(8), "beta")
    assert gpu.LayerNorm((2, 3)).gamma.shape == (2, 3)
    assert gpu.InstanceNorm2d(3).gamma.shape == (3,)
    assert bn.eval() is bn and not bn.training and bn.train().training
    with pytest.raises(ValueError, match="divisible"):
        gpu.GroupNorm(4, 6)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        gpu.BatchNorm1d(4).forward(np.ones((1, 4)))
    with pytest.raises(ValueError, match="expects input"):
        gpu.BatchNorm2d(4).forward(np.ones((2, 4)))
    with pytest.raises(ValueError, match="expects input"):
        gpu.RMSNorm(4).forward(np.ones((2, 5)))


GPU_LAYOUT_CASES = [
    ("RMSNorm", (300,), (5, 300)),
    ("LayerNorm", (1003,), (3, 1003)),
    ("BatchNorm1d", (64,), (130, 64)),
    ("BatchNorm2d", (3,), (3, 3, 8, 6)),
    ("GroupNorm", (3, 12), (4, 12, 5, 7)),
    ("InstanceNorm2d", (3,), (2, 3, 16, 12)),
]


@pytest.mark.parametrize("cls,args,shape", GPU_LAYOUT_CASES)
def test_gpu_layout_matches_cpu(monkeypatch: pytest.MonkeyPatch, cls: str, args: tuple, shape: tuple) -> None:
    """The strided element layout and L up to 256 (what a GPU gets) on this device too."""
    monkeypatch.setattr(host, "on_cpu", lambda: False)
    assert host.build_options() == () and host.row_local_size(1000) == 256
    rng = np.random.default_rng(sum(shape) + 1)
    c, g = pair(cls, args, rng)
    x = f32(rng.standard_normal(shape) * 2.0 + 3.0)
    check_layer(c, g, x, f32(rng.standard_normal(shape)), f"{cls}{args} gpu layout")
    if hasattr(c, "running_var"):
        assert_close(g.running_var, c.running_var, f"{cls} running_var")


def test_parameters_edited_in_place_are_uploaded_again() -> None:
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    batch_norm = gpu.BatchNorm1d(8)
    batch_norm.eval()
    layers: tuple[Affine, ...] = (gpu.LayerNorm(8), batch_norm, gpu.GroupNorm(2, 8), gpu.RMSNorm(8))
    for layer in layers:
        first = layer.forward(x)
        layer.gamma *= 2.0  # in place: same array object
        if hasattr(layer, "beta"):
            layer.beta += 1.0
        second = layer.forward(x)
        expected = 2.0 * first + (1.0 if hasattr(layer, "beta") else 0.0)
        np.testing.assert_allclose(second, expected, rtol=1e-6, atol=1e-6)
