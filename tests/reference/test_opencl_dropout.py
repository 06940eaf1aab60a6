"""reference.opencl.Dropout: a Philox mask keyed by the seed, counted by (call, element).

The device mask is recomputed on the host with the NumPy Philox of
test_opencl_philox (exact: the draw is 24 integer bits). Kept values equal
x / (1 - p) within rtol 1e-6 (one float32 division). Statistical bounds are
7 standard deviations of the binomial count: a false failure has probability
below 1e-11 (and the seeds are fixed, so the outcome never changes).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from reference.opencl import dropout as gpu
from reference.opencl import load_program, run_exercise_kernel
from test_opencl_philox import block_words, unit_float

pytestmark = pytest.mark.opencl


def host_uniform(n: int, seed: int, call: int) -> np.ndarray:
    """The draws u of call ``call``: word i % 4 of philox((i // 4, call, 0, DROPOUT_STREAM), seed)."""
    return unit_float(block_words(n, (call, 0, gpu.DROPOUT_STREAM), seed))


def nonzero_inputs(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """float32 values without zeros, so that y != 0 marks exactly the kept elements."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    x[x == 0] = 1.0
    return x


@pytest.mark.parametrize("seed", [0, 12345, 2**32 + 7, 2**64 - 1])
def test_mask_matches_host_philox(seed: int) -> None:
    p = 0.3
    x = nonzero_inputs((13, 77), 1)
    layer = gpu.Dropout(p, seed=seed)
    for call in range(2):
        y = layer.forward(x)
        keep = host_uniform(x.size, seed, call).reshape(x.shape) >= np.float32(p)
        np.testing.assert_array_equal(y != 0, keep)
        np.testing.assert_allclose(y[keep], x[keep] / (np.float32(1) - np.float32(p)), rtol=1e-6)


@pytest.mark.parametrize("n", [1, 5, 1003])
def test_mask_is_the_same_for_every_local_size(n: int) -> None:
    import pyopencl.array as cl_array

    from reference.opencl import get_context, get_queue

    limit = get_context().devices[0].max_work_group_size
    x = cl_array.to_device(get_queue(), nonzero_inputs((n,), 2))
    outputs = []
    for local in [size for size in (1, 3, 32, 64, 256) if size <= limit]:
        y = cl_array.to_device(get_queue(), np.full(n, np.nan, np.float32))
        lo, hi = gpu.philox_key(99)
        gpu.launch_blocks("dropout_philox_forward", n, x, y, 0.5, lo, hi, gpu.counter_word(4), local_size=local)
        outputs.append(y.get())
        np.testing.assert_array_equal(gpu.dropout_uniform(n, 99, 4, local_size=local), host_uniform(n, 99, 4))
    assert not np.isnan(outputs[0]).any()
    for other in outputs[1:]:
        np.testing.assert_array_equal(other, outputs[0])


def test_backward_regenerates_the_mask_of_the_last_forward() -> None:
    x, dy = nonzero_inputs((31, 40), 3), nonzero_inputs((31, 40), 4)
    layer = gpu.Dropout(0.4, seed=5)
    layer.forward(x)
    y = layer.forward(x)  # the second call: backward must use this mask, not the first
    dx = layer.backward(dy)
    np.testing.assert_array_equal(dx != 0, y != 0)
    kept = y != 0
    np.testing.assert_allclose(dx[kept], dy[kept] / np.float32(0.6), rtol=1e-6)
    np.testing.assert_array_equal(layer.backward(dy), dx)  # backward changes no state


def test_fresh_mask_for_each_call_and_same_for_same_seed() -> None:
    x = nonzero_inputs((200, 250), 6)
    p = 0.5
    a, b = gpu.Dropout(p, seed=11), gpu.Dropout(p, seed=11)
    first, second = a.forward(x) != 0, a.forward(x) != 0
    np.testing.assert_array_equal(b.forward(x) != 0, first)
    n = x.size
    # masks of two calls agree on a Binomial(n, p^2 + (1-p)^2) count of elements
    agree = int((first == second).sum())
    q = p * p + (1 - p) * (1 - p)
    assert abs(agree - n * q) < 7 * math.sqrt(n * q * (1 - q))
    other = gpu.Dropout(p, seed=12).forward(x) != 0
    assert abs(int((other == first).sum()) - n * q) < 7 * math.sqrt(n * q * (1 - q))
    high = gpu.Dropout(p, seed=11 + 2**32).forward(x) != 0  # the high key word counts too
    assert not np.array_equal(high, first)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_zero_fraction_within_binomial_bounds(p: float) -> None:
    x = nonzero_inputs((400, 501), 7)
    y = gpu.Dropout(p, seed=2024).forward(x)
    n = x.size
    zeros = int((y == 0).sum())
    assert abs(zeros - n * p) < 7 * math.sqrt(n * p * (1 - p)), f"{zeros} zeros of {n} for p={p}"


def test_p_zero_is_identity_and_p_one_gives_zeros() -> None:
    x = nonzero_inputs((7, 9), 8)
    np.testing.assert_array_equal(gpu.Dropout(0.0, seed=1).forward(x), x)
    layer = gpu.Dropout(1.0, seed=1)
    y = layer.forward(x)
    dx = layer.backward(x)
    assert np.all(y == 0) and np.all(dx == 0)


def test_eval_is_identity_forward_and_backward() -> None:
    x, dy = nonzero_inputs((6, 70), 9), nonzero_inputs((6, 70), 10)
    layer = gpu.Dropout(0.5, seed=3)
    layer.eval()
    np.testing.assert_array_equal(layer.forward(x), x)
    np.testing.assert_array_equal(layer.backward(dy), dy)
    assert layer.calls == 0  # eval draws nothing


def test_agrees_with_the_exercise_kernel_given_the_same_draws() -> None:
    x = nonzero_inputs((1001,), 11)
    p = 0.35
    u = gpu.dropout_uniform(x.size, seed=8, call=0)
    expected = run_exercise_kernel(load_program("dropout.cl"), "dropout_forward", {"x": x, "u": u}, {"p": p})["y"]
    np.testing.assert_array_equal(gpu.Dropout(p, seed=8).forward(x), expected)


def test_device_arrays_stay_on_the_device() -> None:
    import pyopencl.array as cl_array

    from reference.opencl import get_queue

    x = nonzero_inputs((3, 5, 11), 12)
    host = gpu.Dropout(0.2, seed=4)
    y_host, dx_host = host.forward(x), host.backward(x)
    layer = gpu.Dropout(0.2, seed=4)
    y = layer.forward(cl_array.to_device(get_queue(), x))
    dx = layer.backward(cl_array.to_device(get_queue(), x))
    assert isinstance(y, cl_array.Array) and isinstance(dx, cl_array.Array)
    np.testing.assert_array_equal(y.get(), y_host)
    np.testing.assert_array_equal(dx.get(), dx_host)


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, True, "0"])
def test_rejects_bad_seeds(seed: Any) -> None:
    with pytest.raises(gpu.SeedError, match="seed must be an int"):
        gpu.Dropout(0.5, seed=seed)


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_rejects_bad_probability(p: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        gpu.Dropout(p)


def test_backward_checks_shape_and_order() -> None:
    with pytest.raises(RuntimeError, match="before forward"):
        gpu.Dropout(0.5).backward(np.zeros(3, np.float32))
    layer = gpu.Dropout(0.5)
    layer.forward(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="dout has shape"):
        layer.backward(np.zeros(6, np.float32))
