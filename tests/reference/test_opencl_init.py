"""reference.opencl.init: initialisers drawn on the device with Philox.

The device draws are recomputed on the host with the NumPy Philox of
test_opencl_philox: uniform values within rtol 1e-6 (one float32 product),
Box-Muller normals within rtol 1e-5, atol 2e-6 * std (float32 log, sqrt,
cospi/sinpi against float64). The statistical checks (mean, variance, range)
use bounds of 7 standard errors (false failure below 1e-11, fixed seeds) and
the spec's formulas for the scale.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from reference.opencl import init as gpu
from reference.opencl.dropout import SeedError
from test_opencl_philox import block_words

pytestmark = pytest.mark.opencl

FAN_IN, FAN_OUT = 301, 203  # 61103 elements: not a multiple of 4 or of the work-group size


def host_words(n: int, stream: int, seed: int) -> np.ndarray:
    """Word i % 4 of philox((i // 4, 0, 0, stream), seed) for i < n."""
    return block_words(n, (0, 0, stream), seed)


def host_uniform(fan_in: int, fan_out: int, bound: float, seed: int) -> np.ndarray:
    """bound * (2u - 1), u = (word >> 8) * 2^-24, in float64."""
    u = (host_words(fan_in * fan_out, gpu.UNIFORM_STREAM, seed) >> np.uint32(8)) * 2.0**-24
    return (bound * (2.0 * u - 1.0)).reshape(fan_out, fan_in)


def host_normal(fan_in: int, fan_out: int, std: float, seed: int) -> np.ndarray:
    """Box-Muller on word pairs (0, 1) and (2, 3) of every block, in float64."""
    n = fan_in * fan_out
    blocks = -(-n // 4)
    words = host_words(4 * blocks, gpu.NORMAL_STREAM, seed).reshape(blocks, 2, 2).astype(np.uint64)
    u1 = ((words[:, :, 0] >> np.uint64(8)) + 1) * 2.0**-24
    u2 = (words[:, :, 1] >> np.uint64(8)) * 2.0**-24
    radius = np.sqrt(-2.0 * np.log(u1))
    z = np.stack([radius * np.cos(2 * np.pi * u2), radius * np.sin(2 * np.pi * u2)], axis=2)
    return (std * z.reshape(-1)[:n]).reshape(fan_out, fan_in)


def kaiming_std(fan: int, negative_slope: float) -> float:
    return math.sqrt(2.0 / ((1.0 + negative_slope**2) * fan))


UNIFORM_CASES = [
    ("xavier_uniform", {}, math.sqrt(6.0 / (FAN_IN + FAN_OUT))),
    ("xavier_uniform", {"gain": 2.0}, 2.0 * math.sqrt(6.0 / (FAN_IN + FAN_OUT))),
    ("kaiming_uniform", {}, math.sqrt(3.0) * kaiming_std(FAN_IN, 0.0)),
    ("kaiming_uniform", {"mode": "fan_out", "negative_slope": 0.2}, math.sqrt(3.0) * kaiming_std(FAN_OUT, 0.2)),
]
NORMAL_CASES = [
    ("xavier_normal", {}, math.sqrt(2.0 / (FAN_IN + FAN_OUT))),
    ("xavier_normal", {"gain": 0.5}, 0.5 * math.sqrt(2.0 / (FAN_IN + FAN_OUT))),
    ("kaiming_normal", {}, kaiming_std(FAN_IN, 0.0)),
    ("kaiming_normal", {"mode": "fan_out", "negative_slope": 0.2}, kaiming_std(FAN_OUT, 0.2)),
]


@pytest.mark.parametrize("name,kwargs,bound", UNIFORM_CASES)
def test_uniform_draws_match_host_philox_and_bounds(name: str, kwargs: dict, bound: float) -> None:
    w = getattr(gpu, name)(FAN_IN, FAN_OUT, 17, **kwargs)
    assert isinstance(w, np.ndarray) and w.dtype == np.float32 and w.shape == (FAN_OUT, FAN_IN)
    np.testing.assert_allclose(w, host_uniform(FAN_IN, FAN_OUT, float(np.float32(bound)), 17), rtol=1e-6, atol=0)
    assert w.min() >= -bound * (1 + 1e-6) and w.max() < bound * (1 + 1e-6)
    n = w.size
    var = bound**2 / 3.0  # Var U(-b, b)
    assert abs(w.mean(dtype=np.float64)) < 7 * math.sqrt(var / n)
    fourth = bound**4 / 5.0  # E w^4, so Var(w^2) = b^4/5 - (b^2/3)^2
    assert abs(np.mean(w.astype(np.float64) ** 2) - var) < 7 * math.sqrt((fourth - var**2) / n)


@pytest.mark.parametrize("name,kwargs,std", NORMAL_CASES)
def test_normal_draws_match_host_box_muller_and_moments(name: str, kwargs: dict, std: float) -> None:
    w = getattr(gpu, name)(FAN_IN, FAN_OUT, 23, **kwargs)
    assert isinstance(w, np.ndarray) and w.dtype == np.float32 and w.shape == (FAN_OUT, FAN_IN)
    np.testing.assert_allclose(w, host_normal(FAN_IN, FAN_OUT, std, 23), rtol=1e-5, atol=2e-6 * std)
    n = w.size
    w64 = w.astype(np.float64)
    assert abs(w64.mean()) < 7 * std / math.sqrt(n)
    assert abs(np.mean(w64**2) - std**2) < 7 * math.sqrt(2.0 / n) * std**2  # Var(w^2) = 2 std^4
    assert np.abs(w64).max() < 6.0 * std  # Box-Muller with 24-bit u1 never exceeds sqrt(2 ln 2^24) = 5.77


def test_same_seed_same_weights_new_seed_new_weights() -> None:
    a = gpu.kaiming_uniform(33, 17, 5)
    np.testing.assert_array_equal(gpu.kaiming_uniform(33, 17, 5), a)
    assert not np.array_equal(gpu.kaiming_uniform(33, 17, 6), a)
    assert not np.array_equal(gpu.kaiming_uniform(33, 17, 5 + 2**32), a)  # the high key word counts


def test_generator_draws_a_fresh_seed_each_call() -> None:
    first = gpu.xavier_normal(9, 7, np.random.default_rng(3))
    rng = np.random.default_rng(3)
    np.testing.assert_array_equal(gpu.xavier_normal(9, 7, rng), first)
    assert not np.array_equal(gpu.xavier_normal(9, 7, rng), first)


def test_on_device_returns_a_device_array() -> None:
    import pyopencl.array as cl_array

    w = gpu.xavier_uniform(5, 3, 1, on_device=True)
    assert isinstance(w, cl_array.Array) and w.shape == (3, 5) and w.dtype == np.float32
    np.testing.assert_array_equal(w.get(), gpu.xavier_uniform(5, 3, 1))


@pytest.mark.parametrize("fan_in,fan_out", [(1, 1), (3, 1), (1, 6)])
def test_tiny_shapes(fan_in: int, fan_out: int) -> None:
    w = gpu.kaiming_normal(fan_in, fan_out, 2)
    assert w.shape == (fan_out, fan_in)
    np.testing.assert_allclose(w, host_normal(fan_in, fan_out, kaiming_std(fan_in, 0.0), 2), rtol=1e-5, atol=1e-6)


def test_bad_mode_and_bad_seed() -> None:
    with pytest.raises(ValueError, match="mode must be"):
        gpu.kaiming_uniform(4, 4, 0, mode="fan_avg")
    with pytest.raises(SeedError):
        gpu.xavier_uniform(4, 4, -3)
