"""Weight initialisers drawn on the OpenCL device with Philox4x32-10 (float32).

Same signatures as ``reference.init``; each returns a new float32 array of
shape (fan_out, fan_in), NumPy by default or a ``pyopencl.array.Array`` with
``on_device=True``. ``rng`` is an int seed in [0, 2^64) (the Philox key), or a
``np.random.Generator`` from which one 64-bit seed is drawn. The same seed
gives the same weights on every device (W is a function of the seed and the
element index only), so two layers need two seeds.

Draws (``init.cl``), element i from word i % 4 of philox4x32_10(counter =
(i // 4, 0, 0, UNIFORM_STREAM or NORMAL_STREAM), key = (seed mod 2^32, seed // 2^32)):
- uniform: u = (word >> 8) * 2^-24 in [0, 1), w = bound * (2u - 1);
- normal: Box-Muller, u1 = ((word0 >> 8) + 1) * 2^-24 in (0, 1],
  u2 = (word1 >> 8) * 2^-24, w = std * sqrt(-2 ln u1) * (cos, sin)(2 pi u2).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..init import _kaiming_std  # std = sqrt(2 / ((1 + negative_slope^2) * fan))
from .dropout import BLOCK_LOCAL, SEED_LIMIT, launch_blocks, philox_key
from .host import empty, kernel, round_up, run

UNIFORM_STREAM = 0x756E6966  # "unif": last counter word of the uniform draws (init.cl)
NORMAL_STREAM = 0x6E6F726D  # "norm": last counter word of the normal draws (init.cl)


def _seed(rng: int | np.random.Generator) -> int:
    """An int seed as given, or one 64-bit seed drawn from a Generator."""
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(0, SEED_LIMIT, dtype=np.uint64))
    return rng  # philox_key checks type and range


def _draw(
    kernel_name: str, scale: float, fan_in: int, fan_out: int, rng: int | np.random.Generator, on_device: bool
) -> Any:
    """init.cl:<kernel_name>(w, scale, seed words, n) over a new (fan_out, fan_in) float32 array."""
    lo, hi = philox_key(_seed(rng))
    w = empty((fan_out, fan_in))
    launch_blocks(kernel_name, fan_out * fan_in, w, float(scale), lo, hi, filename="init.cl")
    return w if on_device else w.get()


def xavier_uniform(
    fan_in: int, fan_out: int, rng: int | np.random.Generator, gain: float = 1.0, *, on_device: bool = False
) -> Any:
    """W ~ U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)) (Var W = gain^2 * 2 / (fan_in + fan_out))."""
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return _draw("init_uniform", a, fan_in, fan_out, rng, on_device)


def xavier_normal(
    fan_in: int, fan_out: int, rng: int | np.random.Generator, gain: float = 1.0, *, on_device: bool = False
) -> Any:
    """W ~ N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))."""
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    return _draw("init_normal", std, fan_in, fan_out, rng, on_device)


def kaiming_uniform(
    fan_in: int,
    fan_out: int,
    rng: int | np.random.Generator,
    mode: str = "fan_in",
    negative_slope: float = 0.0,
    *,
    on_device: bool = False,
) -> Any:
    """W ~ U(-b, b), b = sqrt(3) * std, std = sqrt(2 / ((1 + negative_slope^2) * fan))."""
    bound = math.sqrt(3.0) * _kaiming_std(fan_in, fan_out, mode, negative_slope)
    return _draw("init_uniform", bound, fan_in, fan_out, rng, on_device)


def kaiming_normal(
    fan_in: int,
    fan_out: int,
    rng: int | np.random.Generator,
    mode: str = "fan_in",
    negative_slope: float = 0.0,
    *,
    on_device: bool = False,
) -> Any:
    """W ~ N(0, std^2), std = sqrt(2 / ((1 + negative_slope^2) * fan)) (He: Var W = 2 / fan_in)."""
    std = _kaiming_std(fan_in, fan_out, mode, negative_slope)
    return _draw("init_normal", std, fan_in, fan_out, rng, on_device)


def philox4x32_10(counters: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The raw generator on the device: counters (m, 4) and keys (m, 2) uint32 -> outputs (m, 4) uint32."""
    import pyopencl.array as cl_array

    from .runtime import get_queue

    counters = np.ascontiguousarray(counters, dtype=np.uint32).reshape(-1, 4)
    keys = np.ascontiguousarray(keys, dtype=np.uint32).reshape(-1, 2)
    if len(counters) != len(keys):
        raise ValueError(f"{len(counters)} counters but {len(keys)} keys; give one key per counter")
    m = len(counters)
    out = np.zeros((m, 4), dtype=np.uint32)
    if m:
        queue = get_queue()
        c, k = cl_array.to_device(queue, counters), cl_array.to_device(queue, keys)
        o = cl_array.empty(queue, (m, 4), np.uint32)
        run(kernel("init.cl", "philox4x32_10"), (round_up(m, BLOCK_LOCAL),), (BLOCK_LOCAL,), c, k, o, m)
        out = o.get()
    return out
