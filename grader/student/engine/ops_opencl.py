"""The ``cl_kernel`` op: build a student's ``kernels/<file>.cl`` and run one kernel.

An op looks like (every field but ``local`` is required)::

    {"op": "cl_kernel", "file": "rmsnorm.cl", "kernel": "rmsnorm_forward",
     "args": [{"in": "x"}, {"in": "gamma"}, {"out": "y", "size": 1200},
              {"out": "rstd", "size": 4}, {"int": 300}, {"float": 1e-6},
              {"local": 64}],
     "global": 256, "local": 64}

Argument kinds, in the kernel's parameter order:

- ``{"in": KEY}``: the case array ``KEY`` as a float32 ``__global const float *`` buffer;
- ``{"out": NAME, "size": S}``: a float32 ``__global float *`` buffer of S values,
  filled with NaN before the launch; read back afterwards and recorded as output NAME;
- ``{"int": v}`` / ``{"float": v}``: a ``const int`` / ``const float`` scalar;
- ``{"local": L}``: ``__local float *scratch`` of L floats.

Where the kernel runs:

- a student namespace (the ``exercises`` package loaded from a folder): the child
  builds ``<folder>/kernels/<file>`` on the first OpenCL device and launches it
  with the op's global and local sizes. Only the spawned worker does this: a
  process that created an OpenCL context must not fork OpenCL users (PoCL hangs).
- the ``reference`` package or an ``EmulatedKernels`` object (the grader's own
  process): a NumPy float64 emulation of the reference kernel computes the
  outputs, with the same NaN sentinel where the kernel writes nothing. So the
  parent never needs an OpenCL context, and the known wrong kernels
  (``grader.mistakes.kernels``) are emulations too. The emulations themselves
  are instructor-only (``reference.opencl.emulation``: they state the answers).

A kernel whose body is still empty (the stub as released: comments at most) raises
``NotImplementedError`` before anything is built, so untouched stubs read as not
implemented on every machine, one without a working device included. Outputs that
are NaN everywhere after the launch mean the kernel wrote nothing: the same error.

The device is the one :func:`grader.student.engine.opencl_device.choose` finds by building and
running a probe kernel. None works: the op raises ``OpenCLUnavailable``, and the exercise
is ``not_graded`` (the grader's machine is at fault, not the student's kernel). A student's
file that does not build is the student's fault only while the device still builds the
probe (:func:`device_still_builds`); otherwise it is ``OpenCLUnavailable`` too.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import threading
import types
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from grader.student.engine import opencl_device
from grader.student.engine.opserrors import ScriptError


class OpenCLUnavailable(RuntimeError):
    """No OpenCL device on the grader's machine builds and runs a kernel: the exercise is not graded."""


class KernelBuildError(RuntimeError):
    """The student's .cl file does not build; the message carries the compiler log."""


class KernelLaunchError(RuntimeError):
    """The kernel could not be found or launched (wrong name, wrong arguments)."""


class KernelOpError(ScriptError):
    """The op itself is malformed (a grader bug, not a student one): propagates out of run_script."""


@dataclass(frozen=True)
class OutSpec:
    """An output buffer of ``size`` float32 values recorded as output ``name``."""

    name: str
    size: int


# --------------------------------------------------------------------------
# Kernels emulated in NumPy (the reference's and the known mistakes' emulations live with the
# instructor: reference/opencl/emulation.py, grader/mistakes/kernels.py)
# --------------------------------------------------------------------------

Emulation = Callable[[list[Any], int, int | None], dict[str, np.ndarray]]


def sentinel(size: int) -> np.ndarray:
    """An output buffer as the kernel finds it: NaN everywhere (float64)."""
    return np.full(size, np.nan, dtype=np.float64)


def launched_rows(global_size: int, local_size: int | None) -> int:
    """Rows of a one-work-group-per-row launch: global / local."""
    if not local_size:
        raise KernelOpError("a row kernel needs an explicit local size")
    return global_size // local_size


class EmulatedKernels:
    """A kernel namespace computed by NumPy: one emulation per kernel name.

    The instructor side builds them: ``reference.opencl.emulation`` (the reference's
    kernels) and ``grader.mistakes.kernels`` (the reference's with one replaced).
    """

    def __init__(self, table: Mapping[str, Emulation]) -> None:
        self.table: dict[str, Emulation] = dict(table)

    def run(self, kernel: str, args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
        """Run the emulation of ``kernel`` on resolved arguments."""
        if kernel not in self.table:
            raise KernelOpError(f"no emulation of kernel {kernel!r}")
        return self.table[kernel](args, global_size, local_size)


# The emulation used for the ``reference`` package: set by reference.opencl.emulation (instructor side only).
REFERENCE_KERNELS: EmulatedKernels | None = None


def use_reference_kernels(kernels: EmulatedKernels) -> None:
    """Make ``kernels`` the emulation of the ``reference`` package's kernels in this process."""
    global REFERENCE_KERNELS
    REFERENCE_KERNELS = kernels


# --------------------------------------------------------------------------
# The op
# --------------------------------------------------------------------------


def resolve_args(op: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> list[Any]:
    """Turn the op's argument specs into values: float32-exact float64 arrays, OutSpecs, scalars.

    Input arrays and float scalars are rounded to float32 first, so the emulation
    sees exactly the numbers the device sees.
    """
    values: list[Any] = []
    for spec in op["args"]:
        if "in" in spec:
            key = spec["in"]
            if key not in arrays:
                raise KernelOpError(f"cl_kernel input {key!r} is not a case array")
            values.append(np.asarray(arrays[key], dtype=np.float32).astype(np.float64).ravel())
        elif "out" in spec:
            values.append(OutSpec(str(spec["out"]), int(spec["size"])))
        elif "int" in spec:
            values.append(int(spec["int"]))
        elif "float" in spec:
            values.append(float(np.float32(spec["float"])))
        elif "local" in spec:
            values.append(None)
        else:
            raise KernelOpError(f"unknown cl_kernel argument {spec!r}")
    return values


def emulation_table(ns: Any) -> EmulatedKernels | None:
    """The emulation to use for ``ns``: None for a student folder (build and run the .cl file)."""
    if isinstance(ns, EmulatedKernels):
        return ns
    if is_reference_package(ns):
        if REFERENCE_KERNELS is None:
            raise KernelOpError("the reference kernels' emulation is not loaded: import reference.opencl.emulation")
        return REFERENCE_KERNELS
    return None


def is_reference_package(ns: Any) -> bool:
    """True only for the grader's own ``reference`` package (imported, beside ``grader``).

    A name alone is not enough: a submission could call its package "reference".
    """
    if not isinstance(ns, types.ModuleType) or ns.__name__ != "reference":
        return False
    expected = Path(__file__).resolve().parents[3] / "reference" / "__init__.py"
    module_file = getattr(ns, "__file__", None)
    return sys.modules.get("reference") is ns and module_file is not None and Path(module_file).resolve() == expected


def kernels_folder(ns: Any) -> str:
    """``<student folder>/kernels``: the folder of the loaded ``exercises`` package."""
    paths = list(getattr(ns, "__path__", []) or [])
    if paths:
        return os.path.join(paths[0], "kernels")
    module_file = getattr(ns, "__file__", None)
    if module_file:
        return os.path.join(os.path.dirname(module_file), "kernels")
    raise KernelOpError("cannot locate the kernels folder of this namespace")


def run_cl_kernel(ns: Any, op: Mapping[str, Any], env: Any) -> dict[str, np.ndarray]:
    """Run one ``cl_kernel`` op, record its outputs in ``env`` and return them by name.

    ``env`` is ``grader.student.engine.ops.Env`` (its ``arrays`` are the case arrays and its
    ``record(out, value, source)`` stores an output); a plain mapping of arrays
    also works (then nothing is recorded). Raises ``KernelBuildError`` (with the
    compiler log), ``KernelLaunchError``, or ``NotImplementedError`` when every
    output is still the NaN sentinel.
    """
    arrays = find_arrays(env)
    args = resolve_args(op, arrays)
    global_size = int(op["global"])
    local_size = None if op.get("local") is None else int(op["local"])
    table = emulation_table(ns)
    kernel = str(op["kernel"])
    if table is not None:
        outputs = table.run(kernel, args, global_size, local_size)
    else:
        path = os.path.join(kernels_folder(ns), str(op["file"]))
        if kernel_body_is_empty(read_kernel_file(path), kernel):
            raise NotImplementedError(f"kernels/{op['file']}: {kernel} is still the stub (its body is empty)")
        outputs = run_on_device(path, kernel, op["args"], arrays, global_size, local_size)
        if all(np.isnan(v).all() for v in outputs.values()):
            raise NotImplementedError(
                f"kernels/{op['file']}: {kernel} wrote nothing to its output buffers (is the body still empty?)"
            )
    record = getattr(env, "record", None)
    if callable(record):
        for name, value in outputs.items():
            record(name, value, kernel)
    return outputs


def read_kernel_file(path: str) -> str:
    """The text of a student's .cl file (``KernelBuildError`` when it cannot be read)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise KernelBuildError(f"kernels/{os.path.basename(path)} cannot be read: {reason}") from exc


_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)


def kernel_body_is_empty(source: str, kernel: str) -> bool:
    """Whether ``__kernel void <kernel>(...) { }`` in ``source`` has nothing but comments in its body.

    Read without a compiler, so that an untouched stub is not implemented even where no
    device builds anything. A kernel that cannot be found is not empty (the build says why).
    """
    code = _COMMENTS.sub(" ", source)
    match = re.search(r"__kernel\s+void\s+" + re.escape(kernel) + r"\s*\([^)]*\)\s*\{", code)
    if match is None:
        return False
    depth, i = 1, match.end()
    while i < len(code) and depth:
        depth += {"{": 1, "}": -1}.get(code[i], 0)
        i += 1
    return depth == 0 and not code[match.end() : i - 1].strip()


def find_arrays(env: Any) -> Mapping[str, np.ndarray]:
    """The case arrays held by ``env`` (see ``run_cl_kernel``)."""
    inner = getattr(env, "arrays", None)
    if isinstance(inner, Mapping):
        return inner
    if isinstance(env, Mapping):
        return env
    raise KernelOpError("cl_kernel: the environment holds no case arrays")


# --------------------------------------------------------------------------
# Device side (spawned worker only)
# --------------------------------------------------------------------------

_lock = threading.Lock()
_device_state: dict[str | tuple[str, int, str], Any] = {}  # "ctx", "queue", ...; ("kernel", id(program), name)
_rechecks = itertools.count()


# Student kernels are built without optimisation: half the build time on PoCL, and the
# verdicts only depend on what the kernel computes (bench and tests compare both).
STUDENT_BUILD_OPTIONS = ["-cl-opt-disable"]


def device_choice() -> opencl_device.Choice:
    """The device student kernels run on: the first that builds and runs the probe (with the students' options)."""
    return opencl_device.choose(tuple(STUDENT_BUILD_OPTIONS))


def device_context() -> tuple[Any, Any]:
    """(context, queue) on the chosen device, created once per process; ``OpenCLUnavailable`` when none works."""
    import pyopencl as cl

    with _lock:
        if "ctx" not in _device_state:
            choice = device_choice()
            if choice.device is None:
                raise OpenCLUnavailable(choice.problem)
            ctx = cl.Context([choice.device])
            _device_state["ctx"] = ctx
            _device_state["queue"] = cl.CommandQueue(ctx)
            _device_state["label"] = choice.label
        return _device_state["ctx"], _device_state["queue"]


def warm_up() -> None:
    """Choose the device: its probe is a build and a launch, the compiler's one-time start (~0.3 s on PoCL)
    paid while the parent still prepares the cases instead of in the first student file's build."""
    device_choice()


def device_still_builds() -> str | None:
    """After a student's file failed to build: None when the chosen device still builds the probe kernel
    (the file is at fault), else why not (the device is). A fresh source each time, so no cache answers."""
    import pyopencl as cl

    ctx, _queue = device_context()
    source = f"#define NORMGRADE_RECHECK {next(_rechecks)}\n{opencl_device.PROBE_SOURCE}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cl.Program(ctx, source).build(options=STUDENT_BUILD_OPTIONS)
    except cl.Error as exc:
        return opencl_device.first_line(str(exc)) or "the probe kernel no longer builds"
    return None


def build_student_program(path: str) -> Any:
    """Build the .cl file at ``path``; ``KernelBuildError`` carries the compiler log."""
    import pyopencl as cl

    ctx, _queue = device_context()
    name = "kernels/" + os.path.basename(path)
    source = read_kernel_file(path)
    key = "program:" + path + "\0" + source
    with _lock:
        program = _device_state.get(key)
    if program is not None:
        return program
    program = cl.Program(ctx, source)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program.build(options=STUDENT_BUILD_OPTIONS)
    except cl.Error as exc:
        broken = device_still_builds()
        if broken:
            raise OpenCLUnavailable(
                f"the grader's OpenCL device stopped building kernels ({broken}); {opencl_device.DOCTOR_HINT}"
            ) from exc
        log = build_log(program, ctx, source, name, exc)
        raise KernelBuildError(f"{name} does not build; the compiler says:\n{log}") from exc
    with _lock:
        _device_state[key] = program
    return program


def find_kernel(program: Any, kernel_name: str, filename: str) -> Any:
    """The kernel ``kernel_name`` of ``program``, created once per program (pyopencl warns on re-retrieval)."""
    import pyopencl as cl

    key = ("kernel", id(program), kernel_name)
    with _lock:
        kernel = _device_state.get(key)
    if kernel is not None:
        return kernel
    try:
        kernels = {k.function_name: k for k in program.all_kernels()}
    except cl.Error as exc:
        raise KernelLaunchError(f"kernels/{filename}: cannot list its kernels: {exc}") from exc
    if kernel_name not in kernels:
        found = ", ".join(sorted(kernels)) or "none"
        raise KernelLaunchError(f"kernels/{filename} has no kernel named {kernel_name} (found: {found})")
    with _lock:
        for name, k in kernels.items():
            _device_state[("kernel", id(program), name)] = k
    return kernels[kernel_name]


def build_log(program: Any, ctx: Any, source: str, name: str, exc: Exception) -> str:
    """The compiler log with temporary file names replaced by ``name`` and the offending source lines quoted."""
    import pyopencl as cl

    logs = []
    for device in ctx.devices:
        try:
            logs.append(str(program.get_build_info(device, cl.program_build_info.LOG)).strip())
        except cl.Error:
            continue
    log = "\n".join(entry for entry in logs if entry) or str(exc)
    log = re.sub(r"[^\s:]*\.cl(?=:\d+)", name, log)
    lines = source.splitlines()
    quoted = []
    for number in dict.fromkeys(int(m) for m in re.findall(re.escape(name) + r":(\d+):", log)):
        if 1 <= number <= len(lines):
            quoted.append(f"  line {number}: {lines[number - 1].strip()}")
    return log + ("\n" + "\n".join(quoted[:5]) if quoted else "")


def effective_local_size(kernel: Any, local_size: int | None) -> int | None:
    """The requested local size, halved until the device and the kernel accept it."""
    import pyopencl as cl

    if local_size is None:
        return None
    ctx, _queue = device_context()
    device = ctx.devices[0]
    limit = min(
        int(device.max_work_group_size),
        int(kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device)),
    )
    size = local_size
    while size > limit and size > 1:
        size //= 2
    return size


def run_on_device(
    path: str,
    kernel_name: str,
    specs: list[Mapping[str, Any]],
    arrays: Mapping[str, np.ndarray],
    global_size: int,
    local_size: int | None,
) -> dict[str, np.ndarray]:
    """Build ``path``, launch ``kernel_name`` once, and return every output buffer (float32)."""
    import pyopencl as cl

    program = build_student_program(path)
    ctx, queue = device_context()
    kernel = find_kernel(program, kernel_name, os.path.basename(path))
    local = effective_local_size(kernel, local_size)
    row_kernel = any("local" in spec for spec in specs)
    if local is not None and local_size is not None and local != local_size and row_kernel:
        # One work-group per row: the global size shrinks with the local size.
        # (Elementwise launches keep their global size, still a multiple of the smaller local size.)
        global_size = global_size // local_size * local
    mf = cl.mem_flags
    values: list[Any] = []
    outputs: dict[str, tuple[Any, np.ndarray]] = {}
    for spec in specs:
        if "in" in spec:
            host = np.ascontiguousarray(np.asarray(arrays[spec["in"]], dtype=np.float32).ravel())
            if host.size == 0:
                host = np.zeros(1, dtype=np.float32)
            values.append(cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=host))
        elif "out" in spec:
            host = np.full(max(int(spec["size"]), 1), np.nan, dtype=np.float32)
            buf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=host)
            outputs[str(spec["out"])] = (buf, np.empty(int(spec["size"]), dtype=np.float32))
            values.append(buf)
        elif "int" in spec:
            values.append(np.int32(spec["int"]))
        elif "float" in spec:
            values.append(np.float32(spec["float"]))
        elif "local" in spec:
            count = int(spec["local"]) if local is None else local
            values.append(cl.LocalMemory(4 * max(count, 1)))
        else:
            raise KernelOpError(f"unknown cl_kernel argument {spec!r}")
    try:
        kernel.set_args(*values)
        cl.enqueue_nd_range_kernel(queue, kernel, (global_size,), None if local is None else (local,))
        for buf, host in outputs.values():
            if host.size:
                cl.enqueue_copy(queue, host, buf)
        queue.finish()
    except cl.Error as exc:
        raise KernelLaunchError(
            f"launching {kernel_name} from kernels/{os.path.basename(path)} failed: {exc} "
            "(check the parameter list against the exercise's signature)"
        ) from exc
    return {name: host for name, (_buf, host) in outputs.items()}
