"""One place that finds the OpenCL device, builds programs and picks launch sizes.

Everything in ``reference.opencl`` (and the grader's kernel checks) goes through
these functions, so that a context, a queue and each built program exist once
per process:

- ``get_context()``: the device grading uses too
  (:func:`grader.student.engine.opencl_device.choose`: ``PYOPENCL_CTX`` when set, else the
  first device that builds and runs a probe kernel, a real device before Oclgrind,
  cached per machine). Memoised.
- ``get_queue(ctx)``: one profiling-enabled in-order queue per context.
- ``build_program(source, filename, options, ctx)``: memoised per
  (context, source, options); pyopencl's disk cache does the rest. A failed
  build raises ``KernelBuildError`` carrying the file, the options and the
  compiler log.
- ``load_program(name, options, ctx)``: reads ``reference/opencl/<name>``
  with ``importlib.resources`` and builds it.
- ``reduction_local_size(D, device)``: the work-group size L for kernels that
  give one work-group to each row. Always pass an explicit local size: left
  alone, PoCL's CPU device picks a local size of 1.

Fork warning: a process that has created an OpenCL context cannot safely
``fork()`` children that use OpenCL themselves (with PoCL the child hangs on
the driver's threads and locks inherited from the parent). Run OpenCL work in
children started with ``subprocess`` or the ``spawn`` start method, never with
``fork``, once this module has created a context.

Set ``POCL_CACHE_DIR`` (e.g. ``/tmp/pocl-cache``) to a writable folder when
running under PoCL.
"""

from __future__ import annotations

import threading
import warnings
from importlib import resources
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from grader.student.engine import opencl_device

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pyopencl as cl

INSTALL_HINT = "`grade doctor` says how to get one"


class WorkGroupLimit(Protocol):
    """What :func:`reduction_local_size` reads of a device (a ``cl.Device`` has it)."""

    max_work_group_size: int


class OpenCLUnavailable(RuntimeError):
    """No usable OpenCL device: the message says what is missing and how to get one."""


class KernelBuildError(RuntimeError):
    """An OpenCL program failed to build; carries ``filename``, ``options`` and ``log``."""

    def __init__(self, filename: str, options: tuple[str, ...], log: str) -> None:
        self.filename = filename
        self.options = tuple(options)
        self.log = log
        shown = " ".join(self.options) if self.options else "(none)"
        super().__init__(f"OpenCL build of {filename} failed (options: {shown}):\n{log.strip()}")


_lock = threading.RLock()
_context: "cl.Context | None" = None
_queues: dict[int, "cl.CommandQueue"] = {}
_programs: dict[tuple[int, str, tuple[str, ...]], "cl.Program"] = {}


def _import_cl() -> ModuleType:
    """Import pyopencl or raise OpenCLUnavailable with the reason."""
    try:
        import pyopencl as cl
    except Exception as exc:  # ImportError or a broken ICD loader
        raise OpenCLUnavailable(f"pyopencl cannot be imported ({exc}); install it with `pip install pyopencl`") from exc
    return cl


def opencl_unavailable_reason() -> str | None:
    """None when an OpenCL device builds and runs a kernel here, else one line saying why not."""
    return opencl_device.choose().problem


def get_context() -> "cl.Context":
    """The process-wide OpenCL context (memoised), on the device :func:`opencl_device.choose` picks."""
    global _context
    with _lock:
        if _context is not None:
            return _context
        choice = opencl_device.choose()
        if choice.device is None:
            raise OpenCLUnavailable(choice.problem or f"no OpenCL device; {INSTALL_HINT}")
        cl = _import_cl()
        _context = cl.Context([choice.device])
        return _context


def get_queue(ctx: "cl.Context | None" = None) -> "cl.CommandQueue":
    """The profiling-enabled command queue of ``ctx`` (default: ``get_context()``), memoised."""
    cl = _import_cl()
    with _lock:
        ctx = get_context() if ctx is None else ctx
        queue = _queues.get(id(ctx))
        if queue is None or queue.context != ctx:
            queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
            _queues[id(ctx)] = queue
        return queue


def build_program(
    source: str,
    filename: str = "<string>",
    options: tuple[str, ...] = (),
    ctx: "cl.Context | None" = None,
) -> "cl.Program":
    """Build ``source`` for every device of ``ctx``, memoised per (context, source, options).

    Raises ``KernelBuildError`` (file, options, compiler log) when the build fails.
    Compiler warnings on a successful build are not raised as Python warnings.
    """
    cl = _import_cl()
    options = tuple(options)
    with _lock:
        ctx = get_context() if ctx is None else ctx
        key = (id(ctx), source, options)
        program = _programs.get(key)
        if program is not None and program.context == ctx:
            return program
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", cl.CompilerWarning)
                program = cl.Program(ctx, source).build(options=list(options))
        except cl.Error as exc:
            raise KernelBuildError(filename, options, str(exc)) from exc
        _programs[key] = program
        return program


def read_source(name: str) -> str:
    """The text of ``reference/opencl/<name>`` (read with importlib.resources)."""
    return resources.files("reference.opencl").joinpath(name).read_text(encoding="utf-8")


def load_program(name: str, options: tuple[str, ...] = (), ctx: "cl.Context | None" = None) -> "cl.Program":
    """Build the kernel file ``reference/opencl/<name>`` (e.g. ``"rmsnorm.cl"``)."""
    return build_program(read_source(name), filename=name, options=options, ctx=ctx)


def reduction_local_size(D: int, device: WorkGroupLimit | None = None, max_size: int = 256) -> int:
    """Work-group size L for a one-work-group-per-row kernel over rows of length D.

    L is the smallest power of two >= D, capped at ``max_size`` and at the
    device's max work-group size (rounded down to a power of two); at least 1.
    """
    if device is None:
        device = get_context().devices[0]
    limit = min(int(max_size), int(device.max_work_group_size))
    cap = 1
    while cap * 2 <= limit:
        cap *= 2
    size = 1
    while size < D and size < cap:
        size *= 2
    return size
