"""Kernel benchmark: NumPy reference vs OpenCL reference vs a plain device copy of the same bytes.

For each operation and size, three timings are taken in the same run (the
median of ``repeats`` runs after a warm-up; the OpenCL op and the copy
alternate, so both see the same machine load; the NumPy timings come after
all device timings of a size, since NumPy's large temporary arrays slowed
the device runs that followed them):

- ``numpy``: the CPU reference (``reference.normalization``/``reference.activations``)
  called on a float32 array (it computes in float64, as the grader's reference does);
- ``opencl``: the OpenCL reference (``reference.opencl.normalization`` wrappers on
  device arrays, or the exercise kernels of ``activations.cl``), wall time up to
  ``queue.finish()``;
- ``copy``: ``cl.enqueue_copy`` buffer to buffer of half the op's bytes (a copy
  reads and writes each byte), the device's practical memory bandwidth limit.

GB/s = bytes moved / time, with the bytes each op's kernels read and write in
memory (the row kernels read a row again for the output after one pass for
its statistics; a row of D = 4096 floats is 16 KiB and comes from cache then,
so it is counted once):

- rmsnorm/layernorm/groupnorm forward: read x (+ gamma, beta), write y (+ per-row stats);
- batchnorm forward (training): statistics read x, then read x and write y;
- every backward: the row/elementwise kernel reads x and dy and writes dx, and
  the dgamma/dbeta column reduction reads x and dy again (5 passes);
- relu/gelu forward: read x, write y.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .runtime import get_context, get_queue

DEFAULT_SIZES: tuple[tuple[int, int], ...] = ((1024, 1024), (4096, 4096))
GROUPNORM_CHANNELS = 64
GROUPNORM_GROUPS = 32
GROUPNORM_HW = 64


@dataclass(frozen=True)
class Row:
    """One measured operation: its bytes and the median time of each implementation (seconds)."""

    op: str
    shape: tuple[int, ...]
    bytes_moved: int
    numpy_s: float
    opencl_s: float
    copy_s: float

    @property
    def numpy_gbs(self) -> float:
        return self.bytes_moved / self.numpy_s / 1e9

    @property
    def opencl_gbs(self) -> float:
        return self.bytes_moved / self.opencl_s / 1e9

    @property
    def copy_gbs(self) -> float:
        return self.bytes_moved / self.copy_s / 1e9

    @property
    def speedup(self) -> float:
        """OpenCL vs NumPy: numpy time / opencl time."""
        return self.numpy_s / self.opencl_s

    @property
    def pct_of_copy(self) -> float:
        """OpenCL bandwidth as a percentage of the copy's, for the same bytes."""
        return 100.0 * self.copy_s / self.opencl_s


@dataclass
class _Case:
    op: str
    shape: tuple[int, ...]
    bytes_moved: int
    numpy_fn: Callable[[], Any]
    opencl_fn: Callable[[], Any]


def _median_times(fns: list[Callable[[], Any]], repeats: int) -> list[float]:
    """Median wall time of each fn, after one warm-up, the fns interleaved in every repeat."""
    queue = get_queue()
    for fn in fns:
        fn()
        queue.finish()
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, out in zip(fns, samples):
            t0 = time.perf_counter()
            fn()
            queue.finish()
            out.append(time.perf_counter() - t0)
    return [statistics.median(s) for s in samples]


def _copier(nbytes: int) -> Callable[[], Any]:
    """A buffer-to-buffer device copy of ``nbytes`` bytes (both buffers touched once)."""
    import pyopencl as cl

    ctx, queue = get_context(), get_queue()
    nbytes = max(4, nbytes - nbytes % 4)
    src = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, nbytes)
    dst = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, nbytes)
    cl.enqueue_fill_buffer(queue, src, np.float32(1.0), 0, nbytes)
    cl.enqueue_fill_buffer(queue, dst, np.float32(0.0), 0, nbytes)
    return lambda: cl.enqueue_copy(queue, dst, src)


def _norm_cases(R: int, D: int, rng: np.random.Generator) -> list[_Case]:
    """Forward and backward of RMSNorm, LayerNorm, BatchNorm1d, GroupNorm on R x D float32 values."""
    import pyopencl.array as cl_array

    from .. import normalization as cpu
    from . import normalization as gpu

    queue = get_queue()
    f = 4  # bytes per float32
    cases: list[_Case] = []
    nd = R * D
    x = rng.standard_normal((R, D)).astype(np.float32)
    dy = rng.standard_normal((R, D)).astype(np.float32)
    hw = GROUPNORM_HW * GROUPNORM_HW
    gn_shape = (max(1, nd // (GROUPNORM_CHANNELS * hw)), GROUPNORM_CHANNELS, GROUPNORM_HW, GROUPNORM_HW)

    layers = [
        ("rmsnorm", cpu.RMSNorm(D), gpu.RMSNorm(D), (R, D),
         f * (2 * nd + D + R), f * (5 * nd + 2 * D + R)),
        ("layernorm", cpu.LayerNorm(D), gpu.LayerNorm(D), (R, D),
         f * (2 * nd + 2 * D + 2 * R), f * (5 * nd + 3 * D + 2 * R)),
        ("batchnorm1d", cpu.BatchNorm1d(D), gpu.BatchNorm1d(D), (R, D),
         f * (3 * nd + 8 * D), f * (5 * nd + 6 * D)),
        ("groupnorm", cpu.GroupNorm(GROUPNORM_GROUPS, GROUPNORM_CHANNELS),
         gpu.GroupNorm(GROUPNORM_GROUPS, GROUPNORM_CHANNELS), gn_shape, None, None),
    ]
    for name, c, g, shape, fwd_bytes, bwd_bytes in layers:
        n = int(np.prod(shape))
        xs = x.reshape(-1)[:n].reshape(shape) if n <= nd else rng.standard_normal(shape).astype(np.float32)
        ds = dy.reshape(-1)[:n].reshape(shape) if n <= nd else rng.standard_normal(shape).astype(np.float32)
        if fwd_bytes is None:  # groupnorm: x + y, stats per (sample, group)
            rows = shape[0] * GROUPNORM_GROUPS
            fwd_bytes = f * (2 * n + 2 * shape[1] + 2 * rows)
            bwd_bytes = f * (5 * n + 3 * shape[1] + 2 * rows)
        xd = cl_array.to_device(queue, np.ascontiguousarray(xs))
        dd = cl_array.to_device(queue, np.ascontiguousarray(ds))
        cases.append(_Case(f"{name} forward", shape, fwd_bytes,
                           lambda c=c, xs=xs: c.forward(xs), lambda g=g, xd=xd: g.forward(xd)))
        c.forward(xs)  # backward refers to the last forward: same x in both
        g.forward(xd)
        cases.append(_Case(f"{name} backward", shape, bwd_bytes,
                           lambda c=c, ds=ds: c.backward(ds), lambda g=g, dd=dd: g.backward(dd)))
    return cases


def _activation_cases(R: int, D: int, rng: np.random.Generator) -> list[_Case]:
    """relu_forward and gelu_forward exercise kernels (activations.cl) on R x D float32 values."""
    import pyopencl as cl
    import pyopencl.array as cl_array

    from .. import activations as cpu_act
    from .runtime import load_program

    queue = get_queue()
    n = R * D
    x = rng.standard_normal((R, D)).astype(np.float32)
    xd = cl_array.to_device(queue, x)
    yd = cl_array.empty_like(xd)
    program = load_program("activations.cl")
    local = 64
    global_size = (-(-n // local) * local,)
    cases = []
    for name, cpu_layer in (("relu", cpu_act.ReLU()), ("gelu", cpu_act.GELU())):
        kernel = cl.Kernel(program, f"{name}_forward")

        def launch(kernel: "cl.Kernel" = kernel) -> None:
            # set_args holds no reference to the buffers: the closure keeps xd, yd alive
            kernel.set_args(xd.data, yd.data, np.int32(n))
            cl.enqueue_nd_range_kernel(queue, kernel, global_size, (local,))

        cases.append(_Case(f"{name} forward", (R, D), 8 * n, lambda layer=cpu_layer: layer.forward(x), launch))
    return cases


def run_bench(sizes: tuple[tuple[int, int], ...] = DEFAULT_SIZES, repeats: int = 7, seed: int = 0) -> list[Row]:
    """Measure every operation at every size (R, D); returns one Row per (op, size)."""
    rng = np.random.default_rng(seed)
    rows: list[Row] = []
    for R, D in sizes:
        cases = _norm_cases(R, D, rng) + _activation_cases(R, D, rng)
        device_times = []
        for case in cases:  # every device measurement first: NumPy's big temporaries disturb the timings after them
            device_times.append(_median_times([case.opencl_fn, _copier(case.bytes_moved // 2)], repeats))
        for case, (opencl_s, copy_s) in zip(cases, device_times):
            (numpy_s,) = _median_times([case.numpy_fn], repeats)
            rows.append(Row(case.op, case.shape, case.bytes_moved, numpy_s, opencl_s, copy_s))
    return rows


def device_description() -> str:
    """'<device> (<platform>, <n> compute units)' of the benchmark's context."""
    device = get_context().devices[0]
    return f"{device.name.strip()} ({device.platform.name.strip()}, {device.max_compute_units} compute units)"


def format_table(rows: list[Row]) -> str:
    """A fixed-width text table with the device in the header and the ratios in the last columns."""
    header = (
        f"Device: {device_description()}\n"
        "Times are medians of wall time to queue.finish(); GB/s = bytes moved / time.\n"
        "numpy = CPU reference on float32 input (computes in float64); copy = enqueue_copy of the same bytes.\n"
    )
    cols = (
        f"{'op':<20} {'shape':<18} {'MB':>7} {'numpy ms':>9} {'GB/s':>6} {'opencl ms':>9} {'GB/s':>6}"
        f" {'copy ms':>8} {'GB/s':>6} {'speed-up':>8} {'% copy':>7}"
    )
    lines = [header, cols, "-" * len(cols)]
    for r in rows:
        shape = "x".join(str(d) for d in r.shape)
        lines.append(
            f"{r.op:<20} {shape:<18} {r.bytes_moved / 1e6:>7.1f} {r.numpy_s * 1e3:>9.2f} {r.numpy_gbs:>6.1f}"
            f" {r.opencl_s * 1e3:>9.2f} {r.opencl_gbs:>6.1f} {r.copy_s * 1e3:>8.2f} {r.copy_gbs:>6.1f}"
            f" {r.speedup:>7.1f}x {r.pct_of_copy:>6.0f}%"
        )
    return "\n".join(lines)
