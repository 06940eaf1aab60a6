"""Kernel benchmark: NumPy reference vs OpenCL reference vs a plain device copy of the same bytes.

For each operation and size, three timings are taken in the same run (the
median of ``repeats`` runs after a warm-up; the OpenCL op and the copy
alternate, so both see the same machine load; the NumPy timings come after
all device timings of a size, since NumPy's large temporary arrays slowed
the device runs that followed them):

- ``numpy``: the CPU reference (``reference.normalization``/``reference.activations``)
  called on a float32 array (it computes in float64, as the grader's reference does);
- ``opencl``: the OpenCL reference (``reference.opencl.normalization`` wrappers on
  device arrays, or an exercise kernel launched as the grader launches it:
  ``reference.opencl.exercise.run_exercise_kernel``'s geometry and build, on
  device-resident buffers), wall time up to ``queue.finish()``;
- ``copy``: ``cl.enqueue_copy`` buffer to buffer of half the op's DRAM bytes (a
  copy reads and writes each byte), the device's practical memory bandwidth limit.

Bytes are counted two ways (float32, N = R * D values, per-row/per-column
vectors included):

- DRAM bytes: compulsory traffic, each byte of a kernel's inputs read once and
  of its outputs written once; a row kernel that reads its row again for the
  output is counted once (a row of D = 4096 floats is 16 KiB and stays in a
  CPU core's cache), separate kernels over the whole tensor (BatchNorm
  statistics, dgamma/dbeta column reductions) count again. GB/s, speed-up and
  % of copy use these bytes, so % of copy stays at or below about 100%.
- row-pass bytes: every pass over x (and dy) reads it from memory, plus the
  writes: the traffic when a row does not stay in cache, the GPU HBM view of
  the course (many rows in flight per multiprocessor). "reductions" counts the
  reduction passes over x, "x passes" every read of x (reductions + output pass,
  + column reductions in backward).

The forward normalisation rows:

- ``rmsnorm forward``, ``layernorm forward``: the wrappers (``rmsnorm.cl``,
  ``layernorm.cl``); RMSNorm's sum of squares is 1 reduction pass; the
  LayerNorm reference also takes 1, since it computes mean and variance from
  shifted sums in the same pass;
- ``rmsnorm_forward kernel``, ``layernorm_forward kernel``: the same exercise
  reference kernels, launched as the grader launches a student's kernel;
- ``layernorm two-pass kernel``: ``layernorm_forward`` written as the exercise
  hints ask (sum of x for the mean, then sum of (x - mean)^2 for the variance:
  2 reduction passes), ``LAYERNORM_TWO_PASS_SOURCE`` below, launched the same
  way. This is the LayerNorm the course compares RMSNorm with.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .exercise import EXERCISE_KERNELS
from .host import round_up
from .runtime import build_program, get_context, get_queue, load_program, reduction_local_size

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pyopencl as cl
    import pyopencl.array as cl_array

DEFAULT_SIZES: tuple[tuple[int, int], ...] = ((1024, 1024), (4096, 4096))
QUICK_SIZES: tuple[tuple[int, int], ...] = ((256, 1024),)  # --quick: a smoke test, seconds
GROUPNORM_CHANNELS = 64
GROUPNORM_GROUPS = 32
GROUPNORM_HW = 64
EPS = 1e-5

LAYERNORM_TWO_PASS_SOURCE = """//CL//
// layernorm_forward as the exercise's hints ask (exercises/kernels/layernorm.cl):
// two reductions over the row, then the output pass (3 reads of x):
//   mean = sum(x) / D,  var = sum((x - mean)^2) / D,  rstd = 1 / sqrt(var + eps),
//   y = (x - mean) * rstd * gamma + beta.
// Otherwise written as reference/opencl/layernorm.cl (float4 rows when D % 4 == 0,
// strided work-items, barriers outside the D % 4 branches).

float block_sum(float v, __local float *scratch)
{
    const int lid = get_local_id(0);
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (lid < s) scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float total = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
}

float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

__kernel void layernorm_forward(__global const float *x, __global const float *gamma,
                                __global const float *beta, __global float *y,
                                __global float *mean, __global float *rstd,
                                const int D, const float eps, __local float *scratch)
{
    const int row = get_group_id(0);
    const int lid = get_local_id(0);
    const int L = get_local_size(0);
    const int vec = (D & 3) == 0;
    __global const float *xr = x + (size_t)row * D;
    __global float *yr = y + (size_t)row * D;
    __global const float4 *x4 = (__global const float4 *)xr;

    float s1 = 0.0f;                                   // pass 1: sum(x)
    if (vec) {
        float4 acc = 0.0f;
        for (int j = lid; j < D / 4; j += L) acc += x4[j];
        s1 = sum4(acc);
    } else {
        for (int j = lid; j < D; j += L) s1 += xr[j];
    }
    const float mu = block_sum(s1, scratch) / (float)D;

    float s2 = 0.0f;                                   // pass 2: sum((x - mean)^2)
    if (vec) {
        float4 acc = 0.0f;
        for (int j = lid; j < D / 4; j += L) {
            const float4 d = x4[j] - mu;
            acc += d * d;
        }
        s2 = sum4(acc);
    } else {
        for (int j = lid; j < D; j += L) {
            const float d = xr[j] - mu;
            s2 += d * d;
        }
    }
    const float r = rsqrt(block_sum(s2, scratch) / (float)D + eps);
    if (lid == 0) {
        mean[row] = mu;
        rstd[row] = r;
    }

    if (vec) {                                         // pass 3: the output
        __global const float4 *g4 = (__global const float4 *)gamma;
        __global const float4 *b4 = (__global const float4 *)beta;
        __global float4 *y4 = (__global float4 *)yr;
        for (int j = lid; j < D / 4; j += L) y4[j] = (x4[j] - mu) * r * g4[j] + b4[j];
    } else {
        for (int j = lid; j < D; j += L) yr[j] = (xr[j] - mu) * r * gamma[j] + beta[j];
    }
}
"""


@dataclass(frozen=True)
class Row:
    """One measured operation: its bytes, its passes over x and the median time of each implementation (seconds).

    ``bytes_moved``: compulsory DRAM bytes (each byte once per kernel);
    ``row_pass_bytes``: bytes when every pass over x (and dy) reads it from memory;
    ``reductions``: reduction passes over x; ``x_passes``: every read of x (reductions + output pass).
    """

    op: str
    shape: tuple[int, ...]
    bytes_moved: int
    numpy_s: float
    opencl_s: float
    copy_s: float
    reductions: int
    x_passes: int
    row_pass_bytes: int

    @property
    def numpy_gbs(self) -> float:
        """DRAM bytes / NumPy time, in GB/s."""
        return self.bytes_moved / self.numpy_s / 1e9

    @property
    def opencl_gbs(self) -> float:
        """DRAM bytes / OpenCL time, in GB/s."""
        return self.bytes_moved / self.opencl_s / 1e9

    @property
    def copy_gbs(self) -> float:
        """DRAM bytes / copy time, in GB/s (the copy moves the same bytes)."""
        return self.bytes_moved / self.copy_s / 1e9

    @property
    def speedup(self) -> float:
        """OpenCL vs NumPy: numpy time / opencl time."""
        return self.numpy_s / self.opencl_s

    @property
    def pct_of_copy(self) -> float:
        """OpenCL bandwidth as a percentage of the copy's, for the same DRAM bytes: 100 copy time / opencl time."""
        return 100.0 * self.copy_s / self.opencl_s


@dataclass
class _Case:
    op: str
    shape: tuple[int, ...]
    bytes_moved: int
    row_pass_bytes: int
    reductions: int
    x_passes: int
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
        for fn, out in zip(fns, samples, strict=True):
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
    cl.enqueue_fill_buffer(queue, src, np.ones(1, np.float32), 0, nbytes)
    cl.enqueue_fill_buffer(queue, dst, np.zeros(1, np.float32), 0, nbytes)
    return lambda: cl.enqueue_copy(queue, dst, src)


def layernorm_two_pass_program() -> "cl.Program":
    """The two-reduction ``layernorm_forward`` (``LAYERNORM_TWO_PASS_SOURCE``), built like an exercise file."""
    return build_program(LAYERNORM_TWO_PASS_SOURCE, filename="bench.py:LAYERNORM_TWO_PASS_SOURCE")


def _exercise_launcher(
    program: "cl.Program", name: str, arrays: dict[str, "cl_array.Array"], rows: int, D: int
) -> Callable[[], None]:
    """Launch row kernel ``name`` as run_exercise_kernel does (global rows L, local L = reduction_local_size(D)), on
    device arrays."""
    import pyopencl as cl

    queue = get_queue()
    L = reduction_local_size(D)
    kernel = cl.Kernel(program, name)
    values: list[Any] = []
    for arg in EXERCISE_KERNELS[name].args:
        if arg in arrays:
            values.append(arrays[arg].data)
        elif arg == "D":
            values.append(np.int32(D))
        elif arg == "eps":
            values.append(np.float32(EPS))
        else:  # scratch, the only other argument of the row kernels
            values.append(cl.LocalMemory(4 * L))

    def launch() -> None:
        # set_args holds no reference to the buffers: the closure keeps ``arrays`` alive
        kernel.set_args(*values)
        cl.enqueue_nd_range_kernel(queue, kernel, (rows * L,), (L,))

    return launch


def _norm_cases(R: int, D: int, rng: np.random.Generator) -> list[_Case]:
    """Forward and backward of RMSNorm, LayerNorm, BatchNorm1d, GroupNorm on R x D float32 values,
    and the forward exercise kernels (rmsnorm_forward, layernorm_forward, the two-pass layernorm_forward).
    """
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

    # (name, cpu layer, gpu layer, shape, forward (dram, row-pass, reductions, x passes), backward (...))
    # Row kernels read the row once per reduction pass and once for the output; every backward
    # also reads x and dy once more in the dgamma/dbeta column reduction (a separate kernel).
    Costs = tuple[int, int, int, int]
    layers: list[tuple[str, Any, Any, tuple[int, ...], Costs | None, Costs | None]] = [
        (
            "rmsnorm",
            cpu.RMSNorm(D),
            gpu.RMSNorm(D),
            (R, D),
            (f * (2 * nd + D + R), f * (3 * nd + D + R), 1, 2),
            (f * (5 * nd + 2 * D + R), f * (7 * nd + 2 * D + R), 2, 3),
        ),
        (
            "layernorm",
            cpu.LayerNorm(D),
            gpu.LayerNorm(D),
            (R, D),
            (f * (2 * nd + 2 * D + 2 * R), f * (3 * nd + 2 * D + 2 * R), 1, 2),
            (f * (5 * nd + 3 * D + 2 * R), f * (7 * nd + 3 * D + 2 * R), 2, 3),
        ),
        # BatchNorm: statistics and elementwise pass are separate kernels over the whole tensor
        (
            "batchnorm1d",
            cpu.BatchNorm1d(D),
            gpu.BatchNorm1d(D),
            (R, D),
            (f * (3 * nd + 8 * D), f * (3 * nd + 8 * D), 1, 2),
            (f * (5 * nd + 6 * D), f * (5 * nd + 6 * D), 1, 2),
        ),
        (
            "groupnorm",
            cpu.GroupNorm(GROUPNORM_GROUPS, GROUPNORM_CHANNELS),
            gpu.GroupNorm(GROUPNORM_GROUPS, GROUPNORM_CHANNELS),
            gn_shape,
            None,
            None,
        ),
    ]
    for name, c, g, shape, fwd, bwd in layers:
        n = int(np.prod(shape))
        xs = x.reshape(-1)[:n].reshape(shape) if n <= nd else rng.standard_normal(shape).astype(np.float32)
        ds = dy.reshape(-1)[:n].reshape(shape) if n <= nd else rng.standard_normal(shape).astype(np.float32)
        if fwd is None or bwd is None:  # groupnorm: rows of (C / G) H W values, stats per (sample, group)
            stats = 2 * shape[0] * GROUPNORM_GROUPS
            fwd = (f * (2 * n + 2 * shape[1] + stats), f * (3 * n + 2 * shape[1] + stats), 1, 2)
            bwd = (f * (5 * n + 3 * shape[1] + stats), f * (7 * n + 3 * shape[1] + stats), 2, 3)
        xd = cl_array.to_device(queue, np.ascontiguousarray(xs))
        dd = cl_array.to_device(queue, np.ascontiguousarray(ds))
        cases.append(_Case(f"{name} forward", shape, *fwd, partial(c.forward, xs), partial(g.forward, xd)))
        c.forward(xs)  # backward refers to the last forward: same x in both
        g.forward(xd)
        cases.append(_Case(f"{name} backward", shape, *bwd, partial(c.backward, ds), partial(g.backward, dd)))
        if name in ("rmsnorm", "layernorm"):
            cases.extend(_exercise_cases(name, c, x, R, D))
    return cases


def _exercise_cases(name: str, cpu_layer: Any, x: np.ndarray, R: int, D: int) -> list[_Case]:
    """The forward exercise kernels of ``name``, launched as the grader launches them, on x (R x D)."""
    import pyopencl.array as cl_array

    queue = get_queue()
    f, nd = 4, R * D
    arrays = {
        "x": cl_array.to_device(queue, x),
        "gamma": cl_array.to_device(queue, np.ones(D, np.float32)),
        "beta": cl_array.to_device(queue, np.zeros(D, np.float32)),
        "y": cl_array.empty(queue, (R, D), np.float32),
        "mean": cl_array.empty(queue, (R,), np.float32),
        "rstd": cl_array.empty(queue, (R,), np.float32),
    }
    numpy_fn = partial(cpu_layer.forward, x)
    if name == "rmsnorm":
        kernels = [("rmsnorm_forward kernel", load_program("rmsnorm.cl"), "rmsnorm_forward", 1)]
        dram, vectors = f * (2 * nd + D + R), f * (D + R)
    else:
        kernels = [
            ("layernorm_forward kernel", load_program("layernorm.cl"), "layernorm_forward", 1),
            ("layernorm two-pass kernel", layernorm_two_pass_program(), "layernorm_forward", 2),
        ]
        dram, vectors = f * (2 * nd + 2 * D + 2 * R), f * (2 * D + 2 * R)
    cases = []
    for op, program, kernel_name, reductions in kernels:
        x_passes = reductions + 1
        row_pass = f * (x_passes + 1) * nd + vectors  # every pass reads x, the output pass writes y
        launch = _exercise_launcher(program, kernel_name, arrays, R, D)
        cases.append(_Case(op, (R, D), dram, row_pass, reductions, x_passes, numpy_fn, launch))
    return cases


def _activation_cases(R: int, D: int, rng: np.random.Generator) -> list[_Case]:
    """relu_forward and gelu_forward exercise kernels (activations.cl) on R x D float32 values."""
    import pyopencl as cl
    import pyopencl.array as cl_array

    from .. import activations as cpu_act

    queue = get_queue()
    n = R * D
    x = rng.standard_normal((R, D)).astype(np.float32)
    xd = cl_array.to_device(queue, x)
    yd = cl_array.empty_like(xd)
    program = load_program("activations.cl")
    local = 64
    global_size = (round_up(n, local),)
    cases = []
    for name, cpu_layer in (("relu", cpu_act.ReLU()), ("gelu", cpu_act.GELU())):
        kernel = cl.Kernel(program, f"{name}_forward")

        def launch(kernel: "cl.Kernel" = kernel) -> None:
            # set_args holds no reference to the buffers: the closure keeps xd, yd alive
            kernel.set_args(xd.data, yd.data, np.int32(n))  # type: ignore[arg-type]  # (stubs: .data may be None; not here)
            cl.enqueue_nd_range_kernel(queue, kernel, global_size, (local,))

        cases.append(_Case(f"{name} forward", (R, D), 8 * n, 8 * n, 0, 1, partial(cpu_layer.forward, x), launch))
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
        for case, (opencl_s, copy_s) in zip(cases, device_times, strict=True):
            (numpy_s,) = _median_times([case.numpy_fn], repeats)
            rows.append(
                Row(
                    case.op,
                    case.shape,
                    case.bytes_moved,
                    numpy_s,
                    opencl_s,
                    copy_s,
                    case.reductions,
                    case.x_passes,
                    case.row_pass_bytes,
                )
            )
    return rows


def device_description() -> str:
    """'<device> (<platform>, <n> compute units)' of the benchmark's context."""
    device = get_context().devices[0]
    return f"{device.name.strip()} ({device.platform.name.strip()}, {device.max_compute_units} compute units)"


LEGEND = """\
reductions, x passes: reduction passes over x; every read of x (reductions + the output pass, + the
  dgamma/dbeta column reduction in backward, which also reads dy again).
DRAM MB: compulsory traffic, each input byte read once and each output written once per kernel (a
  16 KiB row re-read from cache is not counted). GB/s, speed-up and % copy use these bytes.
row-pass MB: every pass over x (and dy) read from memory, plus the writes: the traffic when rows do not
  stay in cache (GPU HBM, many rows in flight), the view of "RMSNorm saves a pass".
*_forward kernel: the exercise reference kernel (rmsnorm.cl, layernorm.cl), launched as the grader
  launches a student's kernel; the LayerNorm reference computes mean and variance from shifted sums
  in 1 pass. layernorm two-pass kernel: layernorm_forward as the exercise hints ask (sum(x), then
  sum((x - mean)^2)), the LayerNorm the course compares RMSNorm with (bench.py).
speed-up = numpy ms / opencl ms; % copy = copy ms / opencl ms for the same DRAM bytes."""


NOP_KERNEL = "__kernel void nop(__global float *x) { }"


def launch_latency_s(repeats: int = 51) -> float:
    """Median wall time to enqueue an empty kernel on one work-item and wait for it: the floor of any launch."""
    import pyopencl as cl

    kernel = cl.Kernel(build_program(NOP_KERNEL, filename="bench.py:NOP_KERNEL"), "nop")
    buffer = cl.Buffer(get_context(), cl.mem_flags.READ_WRITE, 4)  # kept alive while the kernel runs
    kernel.set_arg(0, buffer)
    queue = get_queue()
    (latency,) = _median_times([lambda: cl.enqueue_nd_range_kernel(queue, kernel, (1,), None)], repeats)
    del buffer
    return latency


def size_limits(rows: list[Row], latency_s: float) -> list[str]:
    """One line per size below the largest: what limits it on this device, from the measurements.

    Launch latency when an empty kernel takes a quarter or more of the median
    kernel time; fixed costs per kernel and work-group when the kernels reach
    a much smaller share of the copy than at the largest size; otherwise the
    copy's GB/s against the largest size tells whether transfers are too small
    to reach DRAM bandwidth, or fit in cache.
    """
    rows = [r for r in rows if len(r.shape) == 2]  # the (R, D) rows; GroupNorm's 4-D shapes aside
    sizes = sorted({r.shape for r in rows}, key=lambda s: s[0] * s[1])
    if len(sizes) < 2:
        return []
    largest = [r for r in rows if r.shape == sizes[-1]]
    big_copy = statistics.median(r.copy_gbs for r in largest)
    big_share = statistics.median(r.pct_of_copy for r in largest)
    lines = []
    for size in sizes[:-1]:
        small = [r for r in rows if r.shape == size]
        kernel = statistics.median(r.opencl_s for r in small)
        copy = statistics.median(r.copy_gbs for r in small)
        share_of_copy = statistics.median(r.pct_of_copy for r in small)
        share = latency_s / kernel
        if share >= 0.25:
            cause = "launch latency: an empty kernel already takes a large part of each kernel's time"
        elif share_of_copy < 0.6 * big_share:
            cause = (
                f"fixed costs per kernel and per work-group (scheduling, barriers), not bandwidth: the "
                f"kernels reach {share_of_copy:.0f}% of the copy here against {big_share:.0f}% at the largest size"
            )
        elif copy < 0.6 * big_copy:
            cause = "transfers too small to reach DRAM bandwidth: memory latency is not hidden"
        elif copy > 1.5 * big_copy:
            cause = "nothing DRAM-bound: the data fits in cache, so copy and kernels run faster than DRAM"
        else:
            cause = "DRAM bandwidth, as at the largest size"
        shape = "x".join(str(d) for d in size)
        lines.append(
            f"{shape}: median kernel {kernel * 1e3:.2f} ms, empty-kernel launch {latency_s * 1e3:.3f} ms "
            f"({100 * share:.0f}%), copy {copy:.1f} GB/s against {big_copy:.1f} GB/s at "
            f"{'x'.join(str(d) for d in sizes[-1])}: limited by {cause}."
        )
    return lines


def format_table(rows: list[Row], latency_s: float | None = None) -> str:
    """A fixed-width text table with the device in the header, the ratios in the last columns and a legend.

    With ``latency_s`` (see :func:`launch_latency_s`), a line per smaller size says what limits it.
    """
    header = (
        f"Device: {device_description()}\n"
        "Times are medians of wall time to queue.finish(); GB/s = DRAM bytes / time.\n"
        "numpy = CPU reference on float32 input (computes in float64); copy = enqueue_copy of the same DRAM bytes.\n"
    )
    cols = (
        f"{'op':<26} {'shape':<14} {'reductions':>10} {'x passes':>8} {'DRAM MB':>8} {'row-pass MB':>11}"
        f" {'numpy ms':>9} {'GB/s':>6} {'opencl ms':>9} {'GB/s':>6}"
        f" {'copy ms':>8} {'GB/s':>6} {'speed-up':>8} {'% copy':>7}"
    )
    lines = [header, cols, "-" * len(cols)]
    for r in rows:
        shape = "x".join(str(d) for d in r.shape)
        lines.append(
            f"{r.op:<26} {shape:<14} {r.reductions:>10} {r.x_passes:>8} {r.bytes_moved / 1e6:>8.1f}"
            f" {r.row_pass_bytes / 1e6:>11.1f} {r.numpy_s * 1e3:>9.2f} {r.numpy_gbs:>6.1f}"
            f" {r.opencl_s * 1e3:>9.2f} {r.opencl_gbs:>6.1f} {r.copy_s * 1e3:>8.2f} {r.copy_gbs:>6.1f}"
            f" {r.speedup:>7.1f}x {r.pct_of_copy:>6.0f}%"
        )
    limits = size_limits(rows, latency_s) if latency_s is not None else []
    if limits:
        lines += ["", "What limits the smaller sizes on this device:"] + ["  " + line for line in limits]
    lines += ["", LEGEND]
    return "\n".join(lines)
