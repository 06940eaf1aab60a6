"""Run one OpenCL exercise kernel (spec section 5) on NumPy inputs.

``run_exercise_kernel(program, "rmsnorm_forward", {"x": x, "gamma": g}, {"eps": 1e-6}, L=64)``
returns ``{"y": ..., "rstd": ...}``. The same function runs the reference
kernels (``load_program("rmsnorm.cl")``) and a student's file
(``build_program(text, filename)``), so both are launched identically:

- elementwise kernels: global n rounded up to a multiple of ``local_size``
  (64), so a kernel that does not guard its index writes out of range;
- row kernels: one work-group of L threads per row, global rows * L,
  ``scratch`` of L floats; rows = x.size // D with D = x.shape[-1].

Outputs start as NaN, so an element a kernel never writes shows up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .host import round_up
from .runtime import get_context, get_queue, reduction_local_size

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pyopencl as cl


@dataclass(frozen=True)
class KernelSpec:
    """One exercise kernel: its file, its arguments in order and how it is launched."""

    filename: str
    args: tuple[str, ...]  # names in the kernel's argument order
    inputs: tuple[str, ...]  # __global const float * arguments
    outputs: tuple[str, ...]  # __global float * arguments
    per_row: tuple[str, ...]  # outputs with one value per row (the rest are shaped like x)
    rowwise: bool  # one work-group per row (else one work-item per element)


EXERCISE_KERNELS: dict[str, KernelSpec] = {
    "relu_forward": KernelSpec("activations.cl", ("x", "y", "n"), ("x",), ("y",), (), False),
    "relu_backward": KernelSpec("activations.cl", ("x", "dy", "dx", "n"), ("x", "dy"), ("dx",), (), False),
    "gelu_forward": KernelSpec("activations.cl", ("x", "y", "n"), ("x",), ("y",), (), False),
    "gelu_backward": KernelSpec("activations.cl", ("x", "dy", "dx", "n"), ("x", "dy"), ("dx",), (), False),
    "dropout_forward": KernelSpec("dropout.cl", ("x", "u", "y", "p", "n"), ("x", "u"), ("y",), (), False),
    "rmsnorm_forward": KernelSpec(
        "rmsnorm.cl",
        ("x", "gamma", "y", "rstd", "D", "eps", "scratch"),
        ("x", "gamma"),
        ("y", "rstd"),
        ("rstd",),
        True,
    ),
    "layernorm_forward": KernelSpec(
        "layernorm.cl",
        ("x", "gamma", "beta", "y", "mean", "rstd", "D", "eps", "scratch"),
        ("x", "gamma", "beta"),
        ("y", "mean", "rstd"),
        ("mean", "rstd"),
        True,
    ),
}

FLOAT_SCALARS = ("eps", "p")


class ExerciseKernelError(ValueError):
    """The kernel name, inputs or scalars do not match spec section 5."""


def run_exercise_kernel(
    program: "cl.Program",
    name: str,
    arrays: dict[str, np.ndarray],
    scalars: dict[str, float] | None = None,
    rows: int | None = None,
    L: int | None = None,
    local_size: int = 64,
    ctx: "cl.Context | None" = None,
) -> dict[str, np.ndarray]:
    """Launch kernel ``name`` of ``program`` on float32 copies of ``arrays``; return its outputs.

    ``scalars`` gives ``eps`` (row kernels) or ``p`` (dropout); ``n`` and ``D``
    come from ``x``. ``rows`` defaults to x.size // D; ``L`` to
    ``reduction_local_size(D)``. Outputs are float32, shaped like ``x`` or (rows,).
    """
    import pyopencl as cl

    if name not in EXERCISE_KERNELS:
        raise ExerciseKernelError(f"{name!r} is not an exercise kernel; expected one of {sorted(EXERCISE_KERNELS)}")
    spec = EXERCISE_KERNELS[name]
    scalars = dict(scalars or {})
    missing = [k for k in spec.inputs if k not in arrays]
    if missing:
        raise ExerciseKernelError(f"{name} needs input arrays {missing}")
    ctx = get_context() if ctx is None else ctx
    queue = get_queue(ctx)
    mf = cl.mem_flags

    host = {k: np.ascontiguousarray(arrays[k], dtype=np.float32) for k in spec.inputs}
    x = host["x"]
    n = int(x.size)
    D = int(x.shape[-1]) if x.ndim else 1
    for k, a in host.items():  # a short buffer would be read out of range
        need = D if k in ("gamma", "beta") else n
        if a.size < need:
            raise ExerciseKernelError(f"{name}: {k} has {a.size} values, the kernel reads {need}")
    if spec.rowwise:
        rows = n // D if rows is None else int(rows)
        if rows * D > n:
            raise ExerciseKernelError(f"{name}: {rows} rows of D = {D} need {rows * D} values, x has {n}")
        L = reduction_local_size(D, ctx.devices[0]) if L is None else int(L)
        global_size, local = (rows * L,), (L,)
    else:
        rows = 0
        global_size, local = (round_up(n, local_size),), (local_size,)

    out_host = {k: np.full((rows,) if k in spec.per_row else x.shape, np.nan, dtype=np.float32) for k in spec.outputs}
    buffers = {}
    for k, a in host.items():
        buffers[k] = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a if a.size else np.zeros(1, np.float32))
    for k, a in out_host.items():
        buffers[k] = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=a if a.size else np.zeros(1, np.float32))

    values: list[Any] = []  # (buffers, int32, float32, LocalMemory: what set_args takes)
    for arg in spec.args:
        if arg in buffers:
            values.append(buffers[arg])
        elif arg == "n":
            values.append(np.int32(n))
        elif arg == "D":
            values.append(np.int32(D))
        elif arg in FLOAT_SCALARS:
            if arg not in scalars:
                raise ExerciseKernelError(f"{name} needs the scalar {arg!r}")
            values.append(np.float32(scalars[arg]))
        elif arg == "scratch":
            values.append(cl.LocalMemory(4 * local[0]))  # (a row kernel's: local is (L,))
        else:  # pragma: no cover - the table above names only these
            raise ExerciseKernelError(f"unknown argument {arg!r} of {name}")

    if global_size[0] > 0:
        kernel = cl.Kernel(program, name)
        kernel.set_args(*values)
        cl.enqueue_nd_range_kernel(queue, kernel, global_size, local)
    for k, a in out_host.items():
        if a.size:
            cl.enqueue_copy(queue, a, buffers[k])
    queue.finish()
    return out_host
