"""The limits of the children that run student code, the jobs they run, and what a child's end is called.

:class:`Limits` caps each child (memory, CPU and wall time, output, files, processes); a :class:`Job` is one
exercise's cases for a child; a :class:`JobOutcome` what the sandbox saw of it (:mod:`grader.student.sandbox.runner`
runs them). :func:`death_message` names a limit's breach or a crash for the student.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from grader.student.sandbox import bwrap
from grader.student.errors import SetupError

if TYPE_CHECKING:
    from grader.student.engine.ops import Case, ScriptResult

GIB = 1 << 30
MIB = 1 << 20
KIB = 1 << 10


@dataclass(frozen=True)
class Limits:
    """Resource limits of the children that run student code.

    wall_s: cap on each exercise's wall clock (None: each exercise's own ``timeout``);
    cpu_s: CPU seconds per exercise (None: the exercise's wall-clock limit; more
    CPU than wall time means threads); memory_bytes: address space (RLIMIT_AS)
    of a CPU child; opencl_memory_bytes: the same for kernel children (PoCL maps
    more); output_bytes: captured stdout+stderr kept per exercise; file_bytes:
    largest file a child may write (RLIMIT_FSIZE); scratch_bytes: size of the
    sandbox's writable tmpfs; results_bytes: largest results frame a child may
    send; processes / opencl_processes: RLIMIT_NPROC (processes and threads of
    the sandbox's own uid; PoCL runs threads and a linker); startup_s: time a
    fresh child has to import NumPy (and OpenCL) before its first exercise;
    parallel: children at once; sandbox: True requires bubblewrap, False runs
    plain child processes, None uses bubblewrap where it works; kernel_cache: a
    folder where the OpenCL driver keeps the kernels it built, for the next run
    (bound writable in the sandbox, see :func:`kernel_cache_folder`): only ever
    one student's own, for ``grade submit`` at the keyboard; None (batch, the
    server, Gradescope): a fresh cache in the sandbox's tmpfs, gone with the job.
    """

    def sandboxed(self) -> bool:
        """Whether children run in bubblewrap; SetupError when it is required and cannot run."""
        if self.sandbox is False:
            return False
        problem = bwrap.problem()
        if problem is None:
            return True
        if self.sandbox:
            raise SetupError(
                f"{problem}; grading other people's code needs the sandbox (--no-sandbox to grade without it)"
            )
        return False

    def sandbox_expected(self) -> bool:
        """What :meth:`sandboxed` will most likely say, without waiting: True unless --no-sandbox or the
        sandbox surely cannot run here; starts the probe that :meth:`sandboxed` then waits for.

        Workers started on this guess run meanwhile; the caller replaces them when
        :meth:`sandboxed` disagrees (a probe that failed).
        """
        return self.sandbox is not False and bwrap.start_probe()

    def sandbox_off_reason(self) -> str:
        """Why children run without bubblewrap: '--no-sandbox', or what is missing."""
        return "--no-sandbox" if self.sandbox is False else (bwrap.problem() or "")

    wall_s: float | None = None
    cpu_s: float | None = None
    memory_bytes: int = 2 * GIB
    opencl_memory_bytes: int = 4 * GIB
    output_bytes: int = 64 * KIB
    file_bytes: int = 32 * MIB
    scratch_bytes: int = 64 * MIB
    results_bytes: int = 64 * MIB
    processes: int = 16
    opencl_processes: int = 128
    startup_s: float = 60.0
    parallel: int = 2
    sandbox: bool | None = None
    kernel_cache: str | None = None

    def wall_for(self, job: "Job") -> float:
        """The wall-clock limit of one exercise: its own timeout, capped by ``wall_s``."""
        return job.timeout if self.wall_s is None else min(job.timeout, self.wall_s)

    def cpu_for(self, job: "Job") -> float:
        """The CPU-time limit of one exercise (whole seconds, at least 1)."""
        seconds = self.wall_for(job) if self.cpu_s is None else self.cpu_s
        return float(max(1, int(-(-seconds // 1))))


@dataclass
class Job:
    """One exercise to run in a child: its id, cases and limits."""

    id: str
    cases: list[Case]
    timeout: float = 10.0
    needs_opencl: bool = False

    @property
    def topic(self) -> str:
        """The file part of the id: 'normalization' for 'normalization.BatchNorm1d'."""
        return self.id.split(".", 1)[0]


@dataclass
class JobOutcome:
    """What the sandbox saw of one exercise.

    status: 'ok' (the cases ran; ``results`` holds one ScriptResult per case),
    'timeout', 'crashed' (the process died or exited), 'error' (the topic file
    did not import, unreadable results) or 'not_graded' (the grader's own worker
    did not start: the machine is at fault, not the student); ``message`` says why;
    ``output`` is the bounded captured stdout+stderr; ``duration`` the wall time.
    """

    id: str
    status: str
    results: dict[str, ScriptResult] = field(default_factory=dict)
    message: str = ""
    output: str = ""
    duration: float = 0.0


# --- messages --------------------------------------------------------------------


def human_bytes(n: float) -> str:
    """Sizes for messages: exact limits in binary units ('2 GiB', '512 MiB'), others decimal ('3.2 MB')."""
    for unit, size in (("GiB", GIB), ("MiB", MIB)):
        if n >= size and n % size == 0:
            return f"{n // size:.0f} {unit}"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} bytes"


_SIGNAL_HINTS: dict[int, str] = {
    signal.SIGSEGV: "segfault",
    signal.SIGBUS: "bus error",
    signal.SIGFPE: "floating-point exception",
    signal.SIGILL: "illegal instruction",
    signal.SIGABRT: "abort; out of memory?",
}


def death_message(returncode: int, exercise: str, memory_bytes: int, cpu_s: float, where: str = "") -> tuple[str, str]:
    """(status, message) for a child that ended while running ``exercise`` (``where``: ' in f (file, line n)')."""
    if returncode >= 0:
        return "crashed", (
            f"the process exited with status {returncode} during {exercise} (sys.exit/os._exit in your code?)"
        )
    number = -returncode
    if number == signal.SIGXCPU:
        return "timeout", f"used more than {cpu_s:g} s of CPU time{where} (infinite loop? threads?)"
    if number == signal.SIGKILL:
        return "crashed", f"the process was killed: out of memory? (limit {human_bytes(memory_bytes)})"
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    hint = _SIGNAL_HINTS.get(number, name)
    message = f"killed by signal {number} ({hint}) during {exercise}"
    if exercise.startswith("kernels."):
        from grader.student.engine.checks.kernels import (
            crash_causes,
        )  # the usual causes of a crashed kernel, per kernel

        message += ". " + crash_causes(exercise)
    return "crashed", message
