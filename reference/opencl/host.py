"""Host-side helpers shared by the OpenCL wrappers: cached kernels, pooled buffers, launches.

Every wrapper module (normalization, activations, linear, dropout, init, optim)
launches its kernels through these few functions, so buffer handling and
argument conversion live in one place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .runtime import get_context, get_queue, load_program, reduction_local_size

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pyopencl as cl
    import pyopencl.array as cl_array
    import pyopencl.tools as cl_tools

CPU_ROW_LOCAL = 16  # work-group size of the row kernels on CPU devices (measured best 8-32 on PoCL)
COLUMN_LOCAL = 64  # work-group width of the column kernels
COLUMN_ROWS = 32  # rows summed by one work-item of a (c, p) column reduction
ROW_BLOCK = 64  # rows streamed by one work-group of a *_rows4 column reduction
ELEMENTWISE_LOCAL = 64  # work-group size of the one-work-item-per-element kernels

_kernels: dict[tuple[int, str, str, tuple[str, ...]], "cl.Kernel"] = {}
_pools: dict[int, Any] = {}


def on_cpu() -> bool:
    """Whether the context's device is a CPU (PoCL): row kernels then take contiguous chunks."""
    import pyopencl as cl

    return bool(get_context().devices[0].type & cl.device_type.CPU)


def build_options() -> tuple[str, ...]:
    """Options for the row kernels: ``-DROW_CHUNKS=1`` on CPU devices, none on GPUs."""
    return ("-DROW_CHUNKS=1",) if on_cpu() else ()


def row_local_size(D: int) -> int:
    """L for a one-work-group-per-row kernel: up to 16 on CPU devices, up to 256 on GPUs."""
    return reduction_local_size(D, max_size=CPU_ROW_LOCAL if on_cpu() else 256)


def kernel(filename: str, name: str) -> "cl.Kernel":
    """The kernel ``name`` of ``reference/opencl/<filename>``, built once per context with ``build_options()``."""
    import pyopencl as cl

    ctx = get_context()
    options = build_options()
    key = (id(ctx), filename, name, options)
    kernel = _kernels.get(key)
    if kernel is None:
        kernel = cl.Kernel(load_program(filename, options, ctx=ctx), name)
        _kernels[key] = kernel
    return kernel


def pool() -> "cl_tools.MemoryPool":
    """A memory pool, so repeated calls reuse device buffers (no page faults on PoCL)."""
    import pyopencl.tools as cl_tools

    queue = get_queue()
    pool = _pools.get(id(queue))
    if pool is None:
        pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
        _pools[id(queue)] = pool
    return pool


def empty(shape: tuple[int, ...]) -> "cl_array.Array":
    """An uninitialised float32 device array from the pool."""
    import pyopencl.array as cl_array

    return cl_array.empty(get_queue(), shape, np.float32, allocator=pool())


def to_device(a: Any) -> tuple["cl_array.Array", bool]:
    """(contiguous float32 device array with no offset, whether ``a`` was already on the device)."""
    import pyopencl.array as cl_array

    queue = get_queue()
    if isinstance(a, cl_array.Array):
        if a.dtype != np.float32:
            a = a.astype(np.float32)
        if not a.flags.c_contiguous or a.offset != 0:
            a = a.copy()
        return a, True
    host = np.ascontiguousarray(a, dtype=np.float32)
    return cl_array.to_device(queue, host, allocator=pool()), False


def param(a: np.ndarray) -> "cl_array.Array":
    """Upload a parameter or buffer (gamma, beta, running statistics) as float32."""
    import pyopencl.array as cl_array

    host = np.ascontiguousarray(a, dtype=np.float32).reshape(-1)
    return cl_array.to_device(get_queue(), host, allocator=pool())


class Uploads:
    """Device copies of a layer's parameters, uploaded again only when the host values change.

    A parameter may be replaced or edited in place between calls; comparing the
    values (a few KiB) is cheaper than a blocking upload per call.
    """

    def __init__(self) -> None:
        self.copies: dict[str, tuple[np.ndarray, "cl_array.Array"]] = {}

    def get(self, name: str, a: np.ndarray) -> "cl_array.Array":
        host = np.ascontiguousarray(a, dtype=np.float32).reshape(-1)
        hit = self.copies.get(name)
        if hit is not None and hit[0].shape == host.shape and np.array_equal(hit[0], host):
            return hit[1]
        device = param(host)
        self.copies[name] = (host.copy(), device)
        return device


def check_dout(dy: Any, x: Any) -> None:
    """backward's dout must have the shape of the last forward input (``x``: None before any forward)."""
    if x is None:
        raise RuntimeError("backward called before forward")
    if dy.shape != x.shape:
        raise ValueError(f"dout has shape {tuple(dy.shape)}, expected {tuple(x.shape)} (the forward input's)")


def result(a: "cl_array.Array", on_device: bool) -> Any:
    """Return ``a`` as is for device callers, as a NumPy float32 array otherwise."""
    return a if on_device else a.get()


def run(kernel: "cl.Kernel", global_size: tuple[int, ...], local_size: tuple[int, ...], *args: Any) -> "cl.Event":
    """Launch with explicit sizes; device arrays pass their buffer, ints int32, floats float32."""
    import pyopencl as cl
    import pyopencl.array as cl_array

    values: list[Any] = []  # (buffers, int32, float32, LocalMemory: what set_args takes)
    for a in args:
        if isinstance(a, cl_array.Array):
            values.append(a.data)
        elif isinstance(a, (bool, int, np.integer)):
            values.append(np.int32(a))
        elif isinstance(a, (float, np.floating)):
            values.append(np.float32(a))
        else:  # LocalMemory or a raw buffer
            values.append(a)
    kernel.set_args(*values)
    return cl.enqueue_nd_range_kernel(get_queue(), kernel, global_size, local_size)


def launch_elementwise(filename: str, name: str, n: int, *args: Any) -> None:
    """Launch ``<filename>:name(*args, n)``, one work-item per element (global n rounded up to ELEMENTWISE_LOCAL)."""
    if n:
        run(kernel(filename, name), (round_up(n, ELEMENTWISE_LOCAL),), (ELEMENTWISE_LOCAL,), *args, n)


def round_up(n: int, k: int) -> int:
    """The smallest multiple of k that is >= n."""
    return -(-n // k) * k


def local_memory(n_floats: int) -> "cl.LocalMemory":
    """A __local argument of n_floats float32 values."""
    import pyopencl as cl

    return cl.LocalMemory(4 * n_floats)
