"""Inverted dropout on the OpenCL device (float32) with a stateless Philox4x32-10 mask.

``Dropout(p=0.5, seed=0)``: the mask of element i on the c-th training forward
(c = 0, 1, 2, ... counted by the layer) is decided by word i % 4 of
philox4x32_10(counter = (i // 4, c, 0, DROPOUT_STREAM), key = (seed mod 2^32, seed // 2^32)),
as u = (word >> 8) * 2^-24, kept where u >= p (``dropout.cl``). Nothing is
stored between forward and backward: backward regenerates the mask of the
last forward from the same key and counter. The mask depends only on
(seed, c, i): the same on every device, local size and thread count.
c counts modulo 2^32; n is at most 2^31 - 1 elements.

``forward``/``backward`` take NumPy arrays (returning NumPy float32) or
``pyopencl.array.Array`` (returning device arrays); eval mode is the identity.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import Module
from .host import empty, kernel, result, round_up, run, to_device

BLOCK_LOCAL = 64  # work-group size of the Philox kernels (each work-item does a block of 4 elements)
SEED_LIMIT = 2**64
DROPOUT_STREAM = 0x64726F70  # "drop": the last counter word, as DROPOUT_STREAM in dropout.cl


class SeedError(ValueError):
    """A Philox seed must be an int in [0, 2^64)."""


def philox_key(seed: int) -> tuple[np.int32, np.int32]:
    """The Philox key words (seed mod 2^32, seed // 2^32) as int32 bit patterns (the kernels read uint)."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise SeedError(f"seed must be an int in [0, 2**64), got {seed!r}")
    seed = int(seed)
    if not 0 <= seed < SEED_LIMIT:
        raise SeedError(f"seed must be an int in [0, 2**64), got {seed}")
    words = np.array([seed & 0xFFFFFFFF, seed >> 32], dtype=np.uint32).view(np.int32)
    return words[0], words[1]


def counter_word(value: int) -> np.int32:
    """A uint32 counter word as its int32 bit pattern."""
    return np.array([value & 0xFFFFFFFF], dtype=np.uint32).view(np.int32)[0]


def launch_blocks(name: str, n: int, *args: Any, local_size: int = BLOCK_LOCAL, filename: str = "dropout.cl") -> None:
    """Launch ``<filename>:name(*args, n)`` with one work-item per block of four elements (the Philox kernels)."""
    if n == 0:
        return
    blocks = -(-n // 4)
    run(kernel(filename, name), (round_up(blocks, local_size),), (local_size,), *args, n)


class Dropout(Module):
    """Training: y = x [u >= p] / (1 - p), u from Philox keyed by ``seed``, counter (call, i); eval: y = x.

    Every training forward uses the next call counter (``self.calls``), so the
    mask is fresh on every call and reproducible from (seed, call).
    backward: dx = dout [u >= p] / (1 - p) with the mask of the last forward
    regenerated on the device (identity after an eval forward); p = 1 gives zeros.
    """

    def __init__(self, p: float = 0.5, seed: int = 0) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        philox_key(seed)  # validate now, not on the first forward
        self.p = p
        self.seed = seed
        self.calls = 0  # training forwards so far: the next call counter
        self.last_call: int | None = None  # counter of the last forward (None after an eval forward)
        self.shape: tuple[int, ...] | None = None

    def forward(self, x: Any) -> Any:
        """y = x * mask / (1 - p) in training (a fresh call counter each time), y = x in eval."""
        xd, on_device = to_device(x)
        self.shape = tuple(xd.shape)
        if not self.training:
            self.last_call = None
            return result(xd.copy(), on_device)
        self.last_call = self.calls
        self.calls += 1
        y = empty(xd.shape)
        lo, hi = philox_key(self.seed)
        launch_blocks("dropout_philox_forward", xd.size, xd, y, float(self.p), lo, hi, counter_word(self.last_call))
        return result(y, on_device)

    def backward(self, dout: Any) -> Any:
        """dx = dout * mask / (1 - p), the mask regenerated from (seed, last call); dout after an eval forward."""
        dy, on_device = to_device(dout)
        if self.shape is None:
            raise RuntimeError("backward called before forward")
        if tuple(dy.shape) != self.shape:
            raise ValueError(f"dout has shape {tuple(dy.shape)}, expected {self.shape} (the forward input's)")
        if self.last_call is None:
            return result(dy.copy(), on_device)
        dx = empty(dy.shape)
        lo, hi = philox_key(self.seed)
        launch_blocks("dropout_philox_backward", dy.size, dy, dx, float(self.p), lo, hi, counter_word(self.last_call))
        return result(dx, on_device)


def dropout_uniform(n: int, seed: int, call: int, local_size: int = BLOCK_LOCAL) -> np.ndarray:
    """The n uniform draws u in [0, 1) that decide the mask of call ``call`` (kept where u >= p)."""
    u = empty((n,))
    lo, hi = philox_key(seed)
    launch_blocks("dropout_philox_uniform", n, u, lo, hi, counter_word(call), local_size=local_size)
    return u.get()
