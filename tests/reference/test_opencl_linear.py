"""reference.opencl.Linear (tiled float32 matmul) against the CPU reference (float64).

Both layers hold the same weights (the GPU layer's float32 W and b, as float64
on the CPU). Tolerances: y and dx, float32 dot products of up to 130 terms,
rtol 1e-5, atol 1e-5; dW and db, sums over up to 70 rows of values up to ~10,
rtol 1e-4, atol 1e-4. No dimension below is a multiple of the tile (16).
"""

from __future__ import annotations

import numpy as np
import pytest

from reference import linear as cpu
from reference.opencl import linear as gpu

pytestmark = pytest.mark.opencl


def pair(in_features: int, out_features: int, bias: bool) -> tuple[gpu.Linear, cpu.Linear]:
    """A GPU layer and a CPU layer with the same float32 weights and a non-zero bias."""
    g = gpu.Linear(in_features, out_features, bias=bias, rng=np.random.default_rng(1))
    c = cpu.Linear(in_features, out_features, bias=bias, rng=np.random.default_rng(1))
    if bias:
        assert g.b is not None
        g.b[:] = np.linspace(-1.0, 1.0, out_features, dtype=np.float32)
        c.b = g.b.astype(np.float64)
    c.W = g.W.astype(np.float64)
    return g, c


@pytest.mark.parametrize(
    "x_shape,out_features,bias",
    [((37, 45), 19, True), ((2, 3, 45), 19, False), ((70, 130), 33, True), ((1, 1), 1, True), ((5, 3), 1, True)],
)
def test_forward_backward_match_cpu(x_shape: tuple[int, ...], out_features: int, bias: bool) -> None:
    g, c = pair(x_shape[-1], out_features, bias)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(x_shape).astype(np.float32)
    dy = rng.standard_normal(x_shape[:-1] + (out_features,)).astype(np.float32)
    y = g.forward(x)
    assert y.dtype == np.float32 and y.shape == x_shape[:-1] + (out_features,)
    np.testing.assert_allclose(y, c.forward(x.astype(np.float64)), rtol=1e-5, atol=1e-5)
    dx = g.backward(dy)
    assert dx.dtype == np.float32 and dx.shape == x_shape
    np.testing.assert_allclose(dx, c.backward(dy.astype(np.float64)), rtol=1e-5, atol=1e-5)
    assert g.dW is not None and c.dW is not None
    assert g.dW.shape == g.W.shape and g.dW.dtype == np.float32
    np.testing.assert_allclose(g.dW, c.dW, rtol=1e-4, atol=1e-4)
    if bias:
        assert g.db is not None and c.db is not None
        assert g.db.shape == (out_features,)
        np.testing.assert_allclose(g.db, c.db, rtol=1e-4, atol=1e-4)
    else:
        assert g.b is None and g.db is None


def test_weights_are_drawn_like_the_cpu_reference() -> None:
    g = gpu.Linear(45, 19, rng=np.random.default_rng(3))
    c = cpu.Linear(45, 19, rng=np.random.default_rng(3))
    assert g.W.dtype == np.float32 and g.W.shape == (19, 45)
    np.testing.assert_array_equal(g.W, c.W.astype(np.float32))
    np.testing.assert_array_equal(g.b, np.zeros(19, np.float32))


@pytest.mark.parametrize("tile", [1, 4, 8, 16])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (False, True), (True, False), (True, True)])
def test_matmul_tiled_every_tile_and_transpose(tile: int, trans_a: bool, trans_b: bool) -> None:
    import pyopencl as cl
    import pyopencl.array as cl_array

    from reference.opencl import get_context, get_queue, load_program

    device = get_context().devices[0]
    if tile * tile > device.max_work_group_size:
        pytest.skip(f"a {tile}x{tile} work-group exceeds this device's limit {device.max_work_group_size}")
    M, N, K = 23, 41, 37
    rng = np.random.default_rng(4)
    a = rng.standard_normal((K, M) if trans_a else (M, K)).astype(np.float32)
    b = rng.standard_normal((N, K) if trans_b else (K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    queue = get_queue()
    ad, bd, biasd = (cl_array.to_device(queue, v) for v in (a, b, bias))
    c = cl_array.to_device(queue, np.full((M, N), np.nan, np.float32))
    kernel = cl.Kernel(load_program("linear.cl", options=(f"-DTILE={tile}",)), "matmul_tiled")
    # pyopencl's stub types Array.data as any MemoryObjectHolder, set_args takes a Buffer (what to_device made)
    kernel.set_args(
        ad.data,  # type: ignore[arg-type]
        bd.data,  # type: ignore[arg-type]
        biasd.data,  # type: ignore[arg-type]
        c.data,  # type: ignore[arg-type]
        np.int32(M),
        np.int32(N),
        np.int32(K),
        np.int32(trans_a),
        np.int32(trans_b),
    )
    rounded = (-(-N // tile) * tile, -(-M // tile) * tile)
    cl.enqueue_nd_range_kernel(queue, kernel, rounded, (tile, tile))
    a64 = a.astype(np.float64).T if trans_a else a.astype(np.float64)
    b64 = b.astype(np.float64).T if trans_b else b.astype(np.float64)
    np.testing.assert_allclose(c.get(), a64 @ b64 + bias, rtol=1e-5, atol=1e-5)


def test_device_arrays_stay_on_the_device() -> None:
    import pyopencl.array as cl_array

    from reference.opencl import get_queue

    rng = np.random.default_rng(5)
    x = rng.standard_normal((9, 21)).astype(np.float32)
    dy = rng.standard_normal((9, 10)).astype(np.float32)
    host = gpu.Linear(21, 10, rng=np.random.default_rng(6))
    y_host, dx_host = host.forward(x), host.backward(dy)
    layer = gpu.Linear(21, 10, rng=np.random.default_rng(6))
    y = layer.forward(cl_array.to_device(get_queue(), x))
    dx = layer.backward(cl_array.to_device(get_queue(), dy))
    assert isinstance(y, cl_array.Array) and isinstance(dx, cl_array.Array)
    np.testing.assert_array_equal(y.get(), y_host)
    np.testing.assert_array_equal(dx.get(), dx_host)
    np.testing.assert_array_equal(layer.dW, host.dW)
    np.testing.assert_array_equal(layer.db, host.db)


def test_empty_batch_gives_zero_gradients() -> None:
    layer = gpu.Linear(5, 3, rng=np.random.default_rng(7))
    assert layer.forward(np.zeros((0, 5), np.float32)).shape == (0, 3)
    assert layer.backward(np.zeros((0, 3), np.float32)).shape == (0, 5)
    np.testing.assert_array_equal(layer.dW, np.zeros((3, 5), np.float32))
    np.testing.assert_array_equal(layer.db, np.zeros(3, np.float32))


def test_shape_errors() -> None:
    layer = gpu.Linear(5, 3, rng=np.random.default_rng(8))
    with pytest.raises(ValueError, match="expects input"):
        layer.forward(np.zeros((2, 4), np.float32))
    with pytest.raises(RuntimeError, match="before forward"):
        layer.backward(np.zeros((2, 3), np.float32))
    layer.forward(np.zeros((2, 5), np.float32))
    with pytest.raises(ValueError, match="dout has shape"):
        layer.backward(np.zeros((2, 4), np.float32))
