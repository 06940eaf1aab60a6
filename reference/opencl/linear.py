"""Fully connected layer on the OpenCL device (float32), same contract as ``reference.linear``.

``Linear(in_features, out_features, bias=True, rng=None)`` draws ``W`` exactly
as the CPU reference does (U(-k, k), k = 1 / sqrt(in_features), from ``rng``)
and keeps ``W``, ``b``, ``dW``, ``db`` as NumPy float32 arrays. ``forward`` and
``backward`` take NumPy arrays (returning NumPy float32) or
``pyopencl.array.Array`` (returning device arrays), shape (*, in_features).

The kernels are in ``linear.cl``: one tiled matrix product with local memory
(``matmul_tiled``, work-groups of TILE x TILE) computes y = x W^T + b,
dx = dout W and dW = dout^T x; ``column_sum`` gives db.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import Module
from .host import COLUMN_LOCAL, empty, param, result, round_up, run, to_device
from .runtime import get_context, load_program

_tile_kernels: dict[tuple[int, int, str], Any] = {}


def matmul_tile() -> int:
    """TILE of ``matmul_tiled`` for this device: 16, or less where a 16 x 16 work-group does not fit."""
    device = get_context().devices[0]
    tile = 16
    while tile > 1 and (
        tile * tile > device.max_work_group_size
        or tile > min(device.max_work_item_sizes[:2])
        or 2 * tile * tile * 4 > device.local_mem_size
    ):
        tile //= 2
    return tile


def _linear_kernel(name: str) -> tuple[Any, int]:
    """(kernel ``name`` of linear.cl built with -DTILE=<matmul_tile()>, TILE), built once per context."""
    import pyopencl as cl

    ctx = get_context()
    tile = matmul_tile()
    key = (id(ctx), tile, name)
    kernel = _tile_kernels.get(key)
    if kernel is None:
        kernel = cl.Kernel(load_program("linear.cl", options=(f"-DTILE={tile}",), ctx=ctx), name)
        _tile_kernels[key] = kernel
    return kernel, tile


def matmul(a: Any, b: Any, M: int, N: int, K: int, trans_a: bool, trans_b: bool, bias: Any = None) -> Any:
    """C (M, N) = op(a) op(b) (+ bias on every row) on the device; a, b, bias are device arrays.

    bias None is passed to the kernel as a NULL pointer.
    op(a) is a (M, K), or a stored (K, M) read transposed when trans_a; op(b) is
    b (K, N), or b stored (N, K) read transposed when trans_b.
    """
    kernel, tile = _linear_kernel("matmul_tiled")
    c = empty((M, N))
    if M and N:
        run(
            kernel,
            (round_up(N, tile), round_up(M, tile)),
            (tile, tile),
            a,
            b,
            bias,
            c,
            M,
            N,
            K,
            int(trans_a),
            int(trans_b),
        )
    return c


class Linear(Module):
    """y = x W^T + b, W (out_features, in_features) ~ U(-k, k), k = 1 / sqrt(in_features).

    Backward: dx = dout W, dW = dout^T x, db = sum of dout over the batch
    (x may have any leading dims (*, in_features), as in PyTorch).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        rng: np.random.Generator | None = None,
    ) -> None:
        rng = np.random.default_rng() if rng is None else rng
        k = 1.0 / np.sqrt(in_features)
        self.in_features = in_features
        self.out_features = out_features
        self.W = rng.uniform(-k, k, size=(out_features, in_features)).astype(np.float32)
        self.b = np.zeros(out_features, dtype=np.float32) if bias else None
        self.dW: np.ndarray | None = None
        self.db: np.ndarray | None = None
        self.cache: dict | None = None

    def forward(self, x: Any) -> Any:
        """y = x W^T + b: matmul_tiled(x, W, transB) with the bias added as each value is stored."""
        if len(x.shape) < 1 or x.shape[-1] != self.in_features:
            raise ValueError(f"Linear expects input (N, {self.in_features}), got shape {tuple(x.shape)}")
        xd, on_device = to_device(x)
        M = int(np.prod(x.shape[:-1], dtype=np.int64))  # rows of the (M, in_features) view
        W = param(self.W)
        bias = None if self.b is None else param(self.b)
        y = matmul(xd, W, M, self.out_features, self.in_features, False, True, bias)
        self.cache = {"x": xd, "W": W, "M": M}
        return result(y.reshape(tuple(x.shape[:-1]) + (self.out_features,)), on_device)

    def backward(self, dout: Any) -> Any:
        """dx = dout W; dW = dout^T x; db = column sums of dout (all leading axes)."""
        if self.cache is None:
            raise RuntimeError("backward called before forward")
        xd, W, M = self.cache["x"], self.cache["W"], self.cache["M"]
        expected = tuple(xd.shape[:-1]) + (self.out_features,)
        dy, on_device = to_device(dout)
        if tuple(dy.shape) != expected:
            raise ValueError(f"dout has shape {tuple(dy.shape)}, expected {expected}")
        dx = matmul(dy, W, M, self.in_features, self.out_features, False, False)
        dW = matmul(dy, xd, self.out_features, self.in_features, M, True, False)
        self.dW = dW.get()
        if self.b is not None:
            db = empty((self.out_features,))
            kernel, _ = _linear_kernel("column_sum")
            run(
                kernel,
                (round_up(self.out_features, COLUMN_LOCAL),),
                (COLUMN_LOCAL,),
                dy,
                db,
                M,
                self.out_features,
            )
            self.db = db.get()
        return result(dx.reshape(tuple(xd.shape)), on_device)
