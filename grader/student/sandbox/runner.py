"""The parent side of the sandbox: run exercises' cases in sandboxed child processes, with limits.

``run_cases(submission, jobs, limits)`` copies the submission into a fresh job
folder (:mod:`grader.student.sandbox.ingest`; never the student's folder itself), writes the
cases there, and starts ``python -m grader.student.sandbox.worker`` children, each wrapped in
bubblewrap (:mod:`grader.student.sandbox.bwrap`: new PID, network, IPC and UTS namespaces, a
uid that owns nothing, a read-only view of Python, the job folder and the
worker's few grader modules, a capped tmpfs as the only writable place, a
cleared environment). Where bubblewrap cannot run and ``limits.sandbox`` is
not True, the children are plain processes (same worker, same limits, same
whitelisted environment): the "sandbox off" mode of ``grade submit``.

The child sets its own rlimits first thing (RLIMIT_AS, RLIMIT_CPU per
exercise, RLIMIT_FSIZE, RLIMIT_NPROC, RLIMIT_CORE = 0). Up to
``limits.parallel`` children run at once (one thread each). A child is fed
one job at a time over a command pipe and reports ``start i`` and a ``done i``
results frame over a status pipe, so each exercise gets its own wall-clock
limit; what the student prints arrives on a third pipe, drained as it comes
and kept up to ``limits.output_bytes``. When a child hangs or dies in exercise
k, it is killed (its PID namespace and everything in it with it), k is marked
(timeout / crashed) and a fresh child continues with the remaining exercises.
Kernel exercises (``needs_opencl``) run in children of their own.

One loop costs once: before a timed-out child is killed, it is asked where it
is (a :mod:`faulthandler` dump, :mod:`grader.student.sandbox.stacks`), and the timeout
names the student's function and line. A later exercise of the same submission
found (by a look every second) in a function where an earlier one ran out of
time is stopped at once. An exercise whose file imports another waits while an
exercise of that file runs (fit_function after the activations), so a loop is
found by the cheap exercise; see :func:`job_order` for the order they start in.

Results are checked before they are decoded (:mod:`grader.student.sandbox.results`);
anything malformed becomes an ``error`` for that exercise, never an exception here.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable



from grader.student.sandbox import bwrap
from grader.student.engine import catalogue, opencl_device
from grader.student.errors import SetupError
from grader.student.sandbox.ingest import Ingested, read_submission
from grader.student.engine.loader import local_dependencies
from grader.student.sandbox.private_tmp import PrivateFolder, remove_tree
from grader.student.sandbox.results import MAX_DOCUMENT_BYTES, MalformedResults, decode_results
from grader.student.sanitize import clean_text
from grader.student.sandbox.stacks import Place, locate

if TYPE_CHECKING:
    from grader.student.engine.ops import Case, ScriptResult

GIB = 1 << 30
MIB = 1 << 20
KIB = 1 << 10

GRADER_ROOT = str(Path(__file__).resolve().parents[3])  # the folder holding the grader package


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
            raise SetupError(f"{problem}; grading other people's code needs the sandbox (--no-sandbox to grade without it)")
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
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} bytes"


_SIGNAL_HINTS = {
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
        from grader.student.engine.checks.kernels import crash_causes  # the usual causes of a crashed kernel, per kernel

        message += ". " + crash_causes(exercise)
    return "crashed", message


# --- one child process ----------------------------------------------------------------


class OutputBuffer:
    """What a child printed during one job: the first ``limit`` bytes, the last :data:`TAIL` bytes,
    and how many were dropped between them (the report shows the tail: where the code stopped)."""

    TAIL = 4 * KIB

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.more = 0

    def add(self, data: bytes) -> None:
        room = max(0, self.limit - len(self.head))
        self.head += data[:room]
        rest = data[room:]
        if rest:
            self.tail += rest
            self.more += len(rest)
            del self.tail[: max(0, len(self.tail) - self.TAIL)]

    def text(self, dropped: int = 0) -> str:
        """The kept output, cleaned: head, '[... N more output cut]' when something was dropped, tail."""
        text = clean_text(bytes(self.head).decode("utf-8", errors="replace"))
        cut = self.more - len(self.tail) + max(0, dropped)
        if cut > 0 or dropped > 0:
            text += f"\n[... {human_bytes(cut)} more output cut]"
        if self.tail:
            text += "\n" + clean_text(bytes(self.tail).decode("utf-8", errors="replace"))
        return text


class _Child:
    """A running worker: command pipe to it, status and output pipes from it, in its own sandbox."""

    def __init__(self, jobdir: Path, opencl: bool, serial: int, limits: Limits, sandboxed: bool) -> None:
        status_r, status_w = os.pipe()
        command_r, command_w = os.pipe()
        output_r, output_w = os.pipe()
        stack_r, stack_w = os.pipe()
        worker = ["-m", "grader.student.sandbox.worker"]
        fds = ["--status-fd", str(status_w), "--command-fd", str(command_r), "--stack-fd", str(stack_w)]
        fds += ["--opencl"] if opencl else []
        kernel_cache = limits.kernel_cache if opencl else None
        if sandboxed:
            env = bwrap.environment(bwrap.BUNDLE_MOUNT)
            uid = None
            if kernel_cache is not None:
                env["POCL_CACHE_DIR"] = bwrap.KERNEL_CACHE_MOUNT
                if os.geteuid() == 0:  # this sandbox's fresh uid takes the cache over from the last one's
                    uid = bwrap.fresh_uid()
                    hand_over(kernel_cache, uid)
            argv = bwrap.wrap([sys.executable, *worker, bwrap.JOB_MOUNT, *fds], jobdir, limits.scratch_bytes, env,
                              kernel_cache, uid)
            popen_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
            cwd = None
        else:  # plain process isolation: same worker and environment, a scratch folder of its own
            cwd = jobdir.parent / f"scratch{serial}"
            cwd.mkdir()
            popen_env = bwrap.environment(GRADER_ROOT)
            popen_env.update(HOME=str(cwd), TMPDIR=str(cwd))
            if kernel_cache is not None:
                popen_env["POCL_CACHE_DIR"] = kernel_cache
            argv = [sys.executable, *worker, str(jobdir), *fds]
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=output_w,
                stderr=output_w,
                cwd=cwd,
                env=popen_env,
                pass_fds=(status_w, command_r, stack_w),
                start_new_session=True,
                close_fds=True,
            )
        finally:
            for fd in (status_w, command_r, output_w, stack_w):
                os.close(fd)
        os.set_blocking(output_r, False)
        os.set_blocking(stack_r, False)
        self.stack_fd: int | None = stack_r
        self.stacks = b""  # the end of what the worker's faulthandler wrote (see where())
        self.sandboxed = sandboxed
        self.opencl = opencl
        self.status_fd = status_r
        self.output_fd: int | None = output_r
        self.command_fd: int | None = command_w
        self.buffer = b""
        self.started_jobs = 0
        self.output_limit = limits.output_bytes
        # What the worker printed since it started or since its last job ended: the next job's
        # output (the worker prints nothing between jobs; a job's output all precedes its ``done``).
        self.output = OutputBuffer(limits.output_bytes)

    def send(self, line: str) -> bool:
        """Write a command line; False when the child is gone."""
        if self.command_fd is None:
            return False
        try:
            os.write(self.command_fd, (line + "\n").encode())
            return True
        except OSError:
            return False

    def take_output(self, dropped: int = 0) -> str:
        """The output of the job that just ended (drained first); collecting starts afresh for the next."""
        self.drain_output()
        text = self.output.text(dropped)
        self.output = OutputBuffer(self.output_limit)
        return text

    def drain_output(self) -> None:
        """Read whatever output is waiting, without blocking."""
        if self.output_fd is not None and not _drain(self.output_fd, self.output.add):
            os.close(self.output_fd)
            self.output_fd = None

    def _fill(self, deadline: float) -> str:
        """Read more from the status pipe (draining output meanwhile): 'ok', 'timeout' or 'eof'."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            watched = [self.status_fd] + ([self.output_fd] if self.output_fd is not None else [])
            ready, _, _ = select.select(watched, [], [], remaining)
            if not ready:
                return "timeout"
            if self.output_fd is not None and self.output_fd in ready:
                self.drain_output()
            if self.status_fd in ready:
                chunk = os.read(self.status_fd, 1 << 16)
                if not chunk:
                    self.drain_output()
                    return "eof"
                self.buffer += chunk
                self.drain_output()  # output written before this status belongs to the job it ends
                return "ok"

    def expect(self, wanted: str, deadline: float) -> tuple[str, list[str]]:
        """Wait for the status line whose first two words are ``wanted``.

        Returns ('ok', the line's words), ('timeout', []) or ('eof', []) when the
        child closed its status pipe (it died). Other lines are skipped.
        """
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                words = line.decode(errors="replace").split()
                if " ".join(words[:2]) == wanted:
                    return "ok", words
                if len(self.buffer) > 1 << 20:  # a flood of junk lines
                    return "eof", []
            if len(self.buffer) > 1 << 20:
                return "eof", []
            state = self._fill(deadline)
            if state != "ok":
                return state, []

    def read_exact(self, n: int, deadline: float) -> bytes | None:
        """The next ``n`` bytes of the status pipe (None: the child died or hung first)."""
        while len(self.buffer) < n:
            if self._fill(deadline) != "ok":
                return None
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def kill_strays(self) -> None:
        """Kill whatever the student's code left running after a job (daemons, forks), not the worker.

        In the sandbox the worker's bwrap has one child, the PID namespace's
        init, whose oldest child is the worker; everything else below that init
        (orphans are re-parented to it, whatever their session) is a stray.
        Without the sandbox only the worker's own descendants can be found.
        Passes repeat until one finds nothing alive (a stray may fork between
        a look and its kill; with nothing left alive, nothing can fork, as the
        worker itself waits for its next command). Cheap: a pass over
        /proc/*/stat; a job cannot leave a CPU hog that would slow the next
        exercise or student down.
        """
        if self._nothing_left():
            return
        for _ in range(STRAY_PASSES):
            table = _process_table()
            below = _children(table, self.proc.pid)
            if not below:
                return
            keep = set()
            if self.sandboxed:
                keep = set(below) | {self._sandboxed_worker(table)} - {None}
            strays = [pid for pid in _descendants(table, self.proc.pid) if pid not in keep and table[pid][2] != "Z"]
            if not strays:
                return
            for pid in strays:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def _nothing_left(self) -> bool:
        """The usual case, told from a few /proc files instead of the whole process table: the worker has
        no child, and in the sandbox it is the only child of the PID namespace's init (where orphans go).
        False when anything else is found or cannot be read (kill_strays then looks everywhere)."""
        top = _task_children(self.proc.pid)
        if not self.sandboxed:
            return top == []
        if top is None or len(top) != 1:
            return False
        below_init = _task_children(top[0])
        return below_init is not None and len(below_init) == 1 and _task_children(below_init[0]) == []

    def worker_pid(self) -> int | None:
        """The worker's pid as seen here (None when it is gone)."""
        return self._sandboxed_worker(_process_table()) if self.sandboxed else self.proc.pid

    def _sandboxed_worker(self, table: dict[int, tuple[int, int, str]]) -> int | None:
        """In the sandbox: bwrap's one child is the PID namespace's init, whose oldest child is the worker."""
        inits = _children(table, self.proc.pid)
        workers = _children(table, inits[0]) if inits else []
        return workers[0] if workers else None

    def drain_stacks(self) -> None:
        """Read what the worker's faulthandler wrote, keeping the last :data:`STACK_BYTES`."""

        def keep(chunk: bytes) -> None:
            self.stacks = (self.stacks + chunk)[-STACK_BYTES:]

        if self.stack_fd is not None and not _drain(self.stack_fd, keep):
            os.close(self.stack_fd)
            self.stack_fd = None

    def stack_dump(self, ask: bool) -> str:
        """The worker's latest stack dump; ``ask``: signal it for a fresh one first (None-safe, bounded wait).

        Without ``ask``, whatever it wrote when it died (SIGXCPU). With it, the
        dump must start arriving within :data:`STACK_WAIT_S` and is complete once
        the pipe stays quiet for a moment (faulthandler writes it in one go).
        """
        self.drain_stacks()
        if ask:
            pid = self.worker_pid()
            self.stacks = b""
            try:
                if pid is None:
                    return ""
                os.kill(pid, signal.SIGUSR1)
            except (ProcessLookupError, PermissionError):
                return ""
            deadline = time.monotonic() + STACK_WAIT_S
            while self.stack_fd is not None:
                wait = deadline - time.monotonic() if not self.stacks else STACK_QUIET_S
                if wait <= 0 or not select.select([self.stack_fd], [], [], wait)[0]:
                    break
                self.drain_stacks()
        return self.stacks.decode("utf-8", errors="replace")

    def kill(self) -> None:
        """Kill the child's process group; in the sandbox its PID namespace, and all in it, dies too."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def wait(self, timeout: float) -> int:
        """The exit status, killing the child if it has not ended within ``timeout``."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait()

    def close(self) -> None:
        """End the child now and leave nothing of it: its results are all read, so it is killed
        rather than left to tear its interpreter (and OpenCL runtime) down while the parent waits."""
        if self.command_fd is not None:
            os.close(self.command_fd)
            self.command_fd = None
        self.kill()
        self.wait(timeout=5.0)
        os.close(self.status_fd)
        for name in ("output_fd", "stack_fd"):
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)

    def log_tail(self) -> str:
        """The end of what the worker printed (why it did not start)."""
        return self.take_output().strip()[-2000:]


def _drain(fd: int, consume: Callable[[bytes], None]) -> bool:
    """Hand each chunk waiting on the non-blocking pipe ``fd`` to ``consume``; False once it is closed."""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not chunk:
            return False
        consume(chunk)


STRAY_PASSES = 20
STACK_BYTES = 64 * KIB  # of a stack dump kept
STACK_WAIT_S = 1.0  # for a dump to start arriving after SIGUSR1
STACK_QUIET_S = 0.05  # of silence that ends a dump
LOOP_PROBE_S = 1.0  # between looks at a job, once another job of the submission ran out of time


def _process_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, start time in clock ticks, state letter) for every process this one can see."""
    table: dict[int, tuple[int, int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        table[int(entry)] = (int(fields[1]), int(fields[19]), fields[0].decode())  # ppid, starttime, state
    return table


def _task_children(pid: int) -> list[int] | None:
    """The children of process ``pid`` from /proc/PID/task/*/children (every thread's), or None when unreadable."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", "rb") as f:
                found += [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return None
    return found


def _children(table: dict[int, tuple[int, int, str]], pid: int) -> list[int]:
    """The children of ``pid``, oldest first."""
    return sorted((p for p, (ppid, _, _) in table.items() if ppid == pid), key=lambda p: table[p][1])


def _descendants(table: dict[int, tuple[int, int, str]], pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in _children(table, todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def _in(place: Place | None) -> str:
    """' in Tanh.forward (activations.py, line 13)' for messages; '' when the place is unknown."""
    return f" in {place.describe()}" if place is not None else ""


def exit_status(returncode: int, sandboxed: bool) -> int:
    """A child's exit status as Popen reports it: bwrap turns death by signal N into exit 128 + N."""
    if sandboxed and 128 < returncode < 128 + 65:
        return -(returncode - 128)
    return returncode


# --- the scheduler ------------------------------------------------------------------------


def job_order(jobs: list[Job], after: dict[int, set[int]], parallel: int) -> list[int]:
    """The order in which slots are offered the jobs (indices into ``jobs``).

    Kernel jobs first: their child starts slowest and compiles. Then, with one
    slot, those allowed the least time first: a loop in the student's code is
    found by a short job (and a long one stuck in the same place is stopped at
    once, see ``_Run.wait_done``) rather than by fit_function, whose 60 s would
    all be spent on it. With two slots or more, the longest first, so that
    fit_function overlaps the short jobs instead of ending the run alone; each
    job behind the jobs it waits for (``after``: fit_function behind the
    activations), which are ranked by the longest job they hold up. A loop in
    the activations is then found before fit_function starts, which is stopped
    at once if stuck in it.
    """
    if parallel < 2:
        return sorted(range(len(jobs)), key=lambda i: (not jobs[i].needs_opencl, jobs[i].timeout))
    holds_up = {i: max([jobs[i].timeout] + [jobs[k].timeout for k in after if i in after[k]]) for i in range(len(jobs))}
    return sorted(range(len(jobs)), key=lambda i: (not jobs[i].needs_opencl, -holds_up[i], bool(after[i]), jobs[i].timeout))


class _Run:
    """One ``run_cases`` call: the job queue shared by the slot threads, and the outcomes."""

    def __init__(
        self, jobs: list[Job], limits: Limits, workspace: Workspace,
        on_outcome: Callable[[JobOutcome], None] | None = None,
        folder: str = "", files: dict[str, bytes] | None = None,
        deps: dict[str, set[str]] | None = None,
    ) -> None:
        self.on_outcome = on_outcome
        self.folder = folder  # the submission as the worker sees it (stack dumps name files there)
        self.files = files or {}
        # Where a job ran out of time: (file, function) -> that job's exercise id. One loop costs
        # once: a later job found stuck in the same function is stopped (see wait_done).
        self.loops: dict[tuple[str, str], str] = {}
        self.jobs = jobs
        self.limits = limits
        self.workspace = workspace
        self.sandboxed = workspace.sandboxed
        self.lock = threading.Condition()  # also notified when a job settles or is requeued
        # A job waits while a job of a file its file imports is running (fit_function while an
        # activations job is): a loop found there then stops it at once instead of costing twice.
        topic_deps = deps or {}
        self.after = {
            i: {j for j, other in enumerate(jobs) if f"{other.topic}.py" in topic_deps.get(f"{job.topic}.py", set())}
            for i, job in enumerate(jobs)
        }
        self.running: set[int] = set()
        self.queue: list[int] = job_order(jobs, self.after, limits.parallel)
        self.active = {True: 0, False: 0}
        self.outcomes: dict[int, JobOutcome] = {}
        self.retried: set[int] = set()
        self.bugs: list[BaseException] = []

    def take(self, kind: bool | None) -> int | None:
        """The next job for a slot serving ``kind`` (None: nothing yet), or None when all are taken.

        A job of the same kind comes first; otherwise the slot switches to a kind
        no other slot serves, if any (``active`` counts the slots serving each kind).
        Kernel jobs are only ever served by one slot at a time: one OpenCL child
        per submission, so no kernel file is compiled twice (its PoCL cache is
        the child's own) and only one OpenCL runtime's memory is in use; a slot
        left with nothing but kernel jobs served elsewhere ends. A job is not
        taken while a job it comes ``after`` is running; when only such jobs are
        left, the slot waits for one to settle.
        """
        with self.lock:
            while True:
                ready = [i for i in self.queue if not self.after[i] & self.running]
                same = [i for i in ready if self.jobs[i].needs_opencl == kind]
                if same:
                    return self._start(same[0])
                if kind is not None and not any(self.jobs[i].needs_opencl == kind for i in self.queue):
                    self.active[kind] -= 1
                    kind = None
                if kind is None:
                    open_jobs = [i for i in ready if not (self.jobs[i].needs_opencl and self.active[True] > 0)]
                    if open_jobs:
                        idle = [i for i in open_jobs if self.active[self.jobs[i].needs_opencl] == 0]
                        i = idle[0] if idle else open_jobs[0]
                        self.active[self.jobs[i].needs_opencl] += 1
                        return self._start(i)
                waiting = [i for i in self.queue if self.after[i] & self.running
                           and (self.jobs[i].needs_opencl == kind if kind is not None
                                else not (self.jobs[i].needs_opencl and self.active[True] > 0))]
                if not waiting:
                    return None
                self.lock.wait()

    def _start(self, i: int) -> int:
        """Take job ``i`` off the queue as running (the caller holds the lock)."""
        self.queue.remove(i)
        self.running.add(i)
        return i

    def requeue(self, i: int) -> None:
        """Put job ``i`` back at the front of the queue (its child died before it started)."""
        with self.lock:
            self.running.discard(i)
            self.queue.insert(0, i)
            self.lock.notify_all()

    def spawn(self, opencl: bool) -> _Child:
        """A worker of this kind: prestarted in the workspace, or fresh."""
        return self.workspace.take(opencl)

    def fail(self, i: int, status: str, message: str, output: str = "", duration: float = 0.0) -> None:
        """Record a job that produced no results."""
        self.settle(i, JobOutcome(self.jobs[i].id, status, {}, message, output, duration))

    def settle(self, i: int, outcome: JobOutcome) -> None:
        """Record job ``i``'s outcome and hand it to ``on_outcome`` (in this slot's thread)."""
        with self.lock:
            self.outcomes[i] = outcome
            self.running.discard(i)
            self.lock.notify_all()
        if self.on_outcome is not None:
            self.on_outcome(outcome)

    def slot(self) -> None:
        """One slot thread: feed jobs to a child, replacing it whenever it dies or hangs."""
        kind: bool | None = None
        child: _Child | None = None
        try:
            while True:
                i = self.take(kind)
                if i is None:
                    return
                kind = self.jobs[i].needs_opencl
                if child is not None and child.opencl != kind:
                    child.close()
                    child = None
                if child is None:
                    child = self.spawn(kind)
                if not self.run_one(child, i):
                    child.close()
                    child = None
        except BaseException as exc:  # a bug in the sandbox itself: re-raised by run_cases
            with self.lock:  # the other slots stop too (none may wait for a job this one left running)
                self.bugs.append(exc)
                self.queue.clear()
                self.running.clear()
                self.lock.notify_all()
        finally:
            if child is not None:
                child.close()

    def run_one(self, child: _Child, i: int) -> bool:
        """Run job ``i`` on ``child``; records its outcome; False when the child must be replaced."""
        job = self.jobs[i]
        limits = self.limits
        memory = limits.opencl_memory_bytes if job.needs_opencl else limits.memory_bytes
        first = child.started_jobs == 0
        child.send(f"run {i}")
        started, _ = child.expect(f"start {i}", time.monotonic() + limits.startup_s)
        if started != "ok":
            if started == "timeout":
                child.kill()
            code = exit_status(child.wait(timeout=5.0), self.sandboxed)
            if first:  # before any student code ran in it: the grader's machine is at fault
                message = (f"the grader's worker did not start (exit status {code}): {child.log_tail()}"
                           f" ({opencl_device.DOCTOR_HINT})")
                self.fail(i, "not_graded", message)
                self.fail_kind(job.needs_opencl, message, "not_graded")
            elif i in self.retried:
                self.fail(i, "error", f"the worker stopped before {job.id} started (exit status {code})")
            else:
                self.retried.add(i)
                self.requeue(i)
            return False
        child.started_jobs += 1
        t0 = time.monotonic()
        wall = limits.wall_for(job)
        done, words, stuck = self.wait_done(child, i, t0 + wall)
        duration = time.monotonic() - t0
        if stuck is not None:
            exercise, place = stuck
            child.kill()
            child.wait(timeout=5.0)
            message = f"stopped after {duration:.1f} s: still in {place.describe()}, where {exercise} ran out of time"
            self.fail(i, "timeout", message, child.take_output(), duration)
            return False
        if done == "timeout":
            place = self.where(child, ask=True)
            child.kill()
            child.wait(timeout=5.0)
            self.fail(i, "timeout", f"timed out after {wall:g} s{_in(place)} (infinite loop?)",
                      child.take_output(), duration)
            self.remember_loop(job.id, place)
            return False
        if done == "eof":
            code = exit_status(child.wait(timeout=5.0), self.sandboxed)
            place = self.where(child, ask=False) if code == -signal.SIGXCPU else None
            status, message = death_message(code, job.id, memory, limits.cpu_for(job), _in(place))
            self.fail(i, status, message, child.take_output(), duration)
            self.remember_loop(job.id, place)
            return False
        return self.collect(child, i, words, t0 + wall, duration)

    def wait_done(self, child: _Child, i: int, deadline: float) -> tuple[str, list[str], tuple[str, Place] | None]:
        """Wait for job ``i``'s ``done`` line until ``deadline``: (state, words, None) as :meth:`_Child.expect`.

        Once another job of this submission ran out of time in some function,
        look every :data:`LOOP_PROBE_S` at where this one is; when it is in that
        same function, stop waiting: ('stuck', [], (that job's exercise, the place)).
        """
        while True:
            state, words = child.expect(f"done {i}", min(deadline, time.monotonic() + LOOP_PROBE_S))
            if state != "timeout" or time.monotonic() >= deadline:
                return state, words, None
            with self.lock:
                if not self.loops:
                    continue
            place = self.where(child, ask=True)
            with self.lock:
                known = self.loops.get(place.key) if place is not None else None
            if known is not None and place is not None:
                return "stuck", [], (known, place)

    def where(self, child: _Child, ask: bool) -> Place | None:
        """Where in the student's code ``child`` is (``ask``: signal it now) or was when it died."""
        return locate(child.stack_dump(ask), self.folder, self.files)

    def remember_loop(self, exercise_id: str, place: Place | None) -> None:
        """Note that ``exercise_id`` ran out of time at ``place`` (the first exercise to do so there is named)."""
        if place is not None:
            with self.lock:
                self.loops.setdefault(place.key, exercise_id)

    def collect(self, child: _Child, i: int, words: list[str], deadline: float, duration: float) -> bool:
        """Read job ``i``'s results frame into its outcome (malformed: status error); False: replace the child."""
        job = self.jobs[i]
        sizes = words[2:4]
        if len(sizes) != 2 or not all(w.isdigit() for w in sizes):
            self.fail(i, "error", f"could not read the results of {job.id}: a malformed frame",
                      child.take_output(), duration)
            return False
        doc_size, array_size = int(sizes[0]), int(sizes[1])
        if doc_size > MAX_DOCUMENT_BYTES or array_size > self.limits.results_bytes:
            message = (f"{job.id} returned more than {human_bytes(self.limits.results_bytes)} of results "
                       "(the outputs of a few small cases are expected)")
            self.fail(i, "error", message, child.take_output(), duration)
            return False
        payload = child.read_exact(doc_size + array_size, deadline + 5.0)
        if payload is None:
            self.fail(i, "error", f"could not read the results of {job.id}: the worker stopped sending them",
                      child.take_output(), duration)
            return False
        try:
            document, results = decode_results(payload[:doc_size], payload[doc_size:], job.cases,
                                               self.limits.results_bytes)
        except MalformedResults as exc:
            self.fail(i, "error", f"could not read the results of {job.id}: {exc}", child.take_output(), duration)
            return True
        dropped = document.get("output_dropped", 0)
        output = child.take_output(dropped if isinstance(dropped, int) else 0)
        if isinstance(document.get("device"), dict):
            opencl_device.remember(document["device"])
        if document["status"] == "error":
            self.fail(i, "error", clean_text(document.get("message"), 2000), output, duration)
            return True
        child.kill_strays()
        self.settle(i, JobOutcome(job.id, "ok", results, "", output, duration))
        return True

    def fail_kind(self, opencl: bool, message: str, status: str = "error") -> None:
        """A worker of this kind cannot start: every queued job of the kind gets ``status`` and ``message``."""
        with self.lock:
            doomed = [i for i in self.queue if self.jobs[i].needs_opencl == opencl]
            for i in doomed:
                self.queue.remove(i)
        for i in doomed:
            self.fail(i, status, message)


def _write_jobs(jobdir: Path, submission: str, jobs: list[Job], limits: Limits) -> None:
    """The manifest and one inputs ``.npz`` per job (``submission``: the folder as the worker sees it)."""
    import numpy as np

    (jobdir / "inputs").mkdir()
    entries = []
    for i, job in enumerate(jobs):
        arrays: dict[str, np.ndarray] = {}
        cases = []
        for ci, case in enumerate(job.cases):
            keys = {}
            for ai, (name, array) in enumerate(case.arrays.items()):
                key = f"c{ci}_a{ai}"
                arrays[key] = np.asarray(array)
                keys[name] = key
            cases.append({"name": case.name, "script": case.script, "arrays": keys})
        np.savez(jobdir / "inputs" / f"{i}.npz", **arrays)
        entries.append(
            {
                "id": job.id,
                "topic": job.topic,
                "needs_opencl": job.needs_opencl,
                "cpu_s": limits.cpu_for(job),
                "inputs": f"inputs/{i}.npz",
                "cases": cases,
            }
        )
    manifest = {
        "path": submission,
        "cpu_total_s": sum(limits.cpu_for(job) for job in jobs) + limits.startup_s,
        "jobs": entries,
    }
    (jobdir / "manifest.json").write_text(json.dumps(manifest))
    for path in [jobdir, *jobdir.rglob("*")]:  # readable by the sandbox's uid, writable by nobody
        path.chmod(0o555 if path.is_dir() else 0o444)


def _write_limits(jobdir: Path, limits: Limits) -> None:
    """``limits.json``: what a worker applies to itself first thing, before its jobs are known."""
    document = {
        "memory_bytes": limits.memory_bytes,
        "opencl_memory_bytes": limits.opencl_memory_bytes,
        "file_bytes": limits.file_bytes,
        "output_bytes": limits.output_bytes,
        "processes": limits.processes,
        "opencl_processes": limits.opencl_processes,
        "startup_s": limits.startup_s,
    }
    path = jobdir / "limits.json"
    path.write_text(json.dumps(document))
    path.chmod(0o444)


class Workspace:
    """The folders one submission's jobs run in, and workers started there before the jobs are known.

    A private folder (0700) holds a job folder readable by anyone: bwrap mounts
    it at /job (read-only), where the sandbox's uid can read it; other users of
    the machine cannot reach it. :meth:`prestart` starts a worker at once: it
    applies ``limits.json`` and imports NumPy (an OpenCL worker also loads the
    driver) while the caller is still preparing the cases; it reads the jobs
    when it is sent the first one. :func:`run_cases` writes the submission and
    the jobs here, takes the prestarted workers first, and closes the workspace.
    """

    def __init__(self, limits: Limits, sandboxed: bool) -> None:
        self.limits = limits
        self.sandboxed = sandboxed
        self._folder = PrivateFolder("normgrade-")  # (a killed grader's is removed by the next one)
        self.private = self._folder.path
        self.jobdir = self.private / secrets.token_hex(16)
        self.jobdir.mkdir(mode=0o755)
        _write_limits(self.jobdir, limits)
        self._lock = threading.Lock()
        self._serial = 0
        self._started: dict[bool, list[_Child]] = {True: [], False: []}

    def prestart(self, opencl: bool) -> None:
        """Start a worker of this kind now (kept for the first slot that needs one)."""
        child = self.spawn(opencl)
        with self._lock:
            self._started[opencl].append(child)

    def take(self, opencl: bool) -> _Child:
        """A prestarted worker of this kind, or a fresh one."""
        with self._lock:
            if self._started[opencl]:
                return self._started[opencl].pop(0)
        return self.spawn(opencl)

    def alive(self) -> bool:
        """Whether every prestarted worker not yet taken is still running (a spare's check before use)."""
        with self._lock:
            return all(child.proc.poll() is None for child in self._started[True] + self._started[False])

    def wait_ready(self, timeout: float) -> bool:
        """Wait until every prestarted worker not yet taken has said ``ready`` (NumPy imported); False if one
        did not within ``timeout`` seconds (dead or slow). For benches, which time a warm spare's grading."""
        deadline = time.monotonic() + timeout
        with self._lock:
            children = self._started[True] + self._started[False]
        return all(child.expect("ready", deadline)[0] == "ok" for child in children)

    def spawn(self, opencl: bool) -> _Child:
        """Start a fresh worker (numbered, for its own cwd without the sandbox)."""
        with self._lock:
            self._serial += 1
            serial = self._serial
        return _Child(self.jobdir, opencl, serial, self.limits, self.sandboxed)

    def close(self) -> None:
        """Stop the workers nobody took, and remove the folders."""
        with self._lock:
            unused = self._started[True] + self._started[False]
            self._started = {True: [], False: []}
        for child in unused:
            child.close()
        self._folder.remove()


KERNEL_CACHE_BYTES = 64 * MIB  # a student's kernel cache is emptied when it grows past this


def kernel_cache_folder(exercises: Path | str, student: str) -> str | None:
    """The folder keeping ``student``'s built kernels between runs of ``grade submit`` on ``exercises``.

    ``<exercises>/../.grade/kernels/<hash of the student>``: beside the
    folder's progress database, one per student and folder, so a kernel cache
    is only ever filled and read by the same student's own kernels (a student
    can spoil only their own). With it, resubmitting unchanged kernel files
    skips PoCL's compiler: 0.3 s for its start plus 0.1 s per file. Made when
    missing; emptied when it holds more than :data:`KERNEL_CACHE_BYTES`.
    Run as root, each sandbox has a fresh uid of its own: the folder is then
    handed over to it (:func:`hand_over`) before the worker starts. None, and
    grading goes on without a kept cache, where it cannot be made or is not a
    plain folder of ours (a link, say).
    """
    if not Path(exercises).is_dir():
        return None  # (grading reports the missing folder)
    project = Path(exercises).resolve().parent
    folder = project / ".grade" / "kernels" / hashlib.sha256(student.encode()).hexdigest()[:16]
    root = os.geteuid() == 0
    try:
        for step in (folder.parent.parent, folder.parent, folder):  # made one by one, none may be a link
            try:
                step.mkdir(mode=0o700)
            except FileExistsError:
                pass
            info = os.lstat(step)
            if not stat.S_ISDIR(info.st_mode):
                return None
        if not (root or info.st_uid == os.geteuid()):
            return None
        if _tree_bytes(folder) > KERNEL_CACHE_BYTES:
            remove_tree(folder)  # also what the sandbox made read-only; never follows its links
            folder.mkdir(mode=0o700)
    except OSError:
        return None
    return str(folder)


def hand_over(folder: str, uid: int) -> None:
    """Make ``uid`` (and its group) the owner of ``folder`` and everything in it, links not followed (as root)."""
    os.lchown(folder, uid, uid)
    for parent, dirs, files in os.walk(folder):
        for name in dirs + files:
            try:
                os.lchown(os.path.join(parent, name), uid, uid)
            except OSError:
                pass


def _tree_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (links not followed)."""
    total = 0
    for parent, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(parent, name)).st_size
            except OSError:
                pass
    return total


def worker_kinds(limits: Limits, ids: list[str]) -> tuple[bool, ...]:
    """The workers to start ahead for the exercises ``ids`` (True: OpenCL): one for each kind of job they need
    (CPU, OpenCL: the kernel exercises), as many as run at once. Kernel jobs run first, so with one slot only
    their worker starts."""
    kinds = {catalogue.topic_of(i) not in catalogue.CPU_TOPICS for i in ids}
    return tuple(sorted(kinds, reverse=True)[: max(1, limits.parallel)])


def prestart_workspace(limits: Limits, sandboxed: bool, ids: list[str]) -> Workspace:
    """A workspace with the workers :func:`worker_kinds` names for the exercises ``ids`` started."""
    workspace = Workspace(limits, sandboxed)
    try:
        for opencl in worker_kinds(limits, ids):
            workspace.prestart(opencl)
    except BaseException:
        workspace.close()
        raise
    return workspace


def run_cases(
    submission: Ingested | Path | str,
    jobs: list[Job],
    limits: Limits | None = None,
    on_outcome: Callable[[JobOutcome], None] | None = None,
    workspace: Workspace | None = None,
    deps: dict[str, set[str]] | None = None,
) -> dict[str, JobOutcome]:
    """Run every job's cases on a copy of the student's files in sandboxed children.

    ``submission`` is what :func:`grader.student.sandbox.ingest.read_submission` took from the
    student's folder (or a folder, ingested here). Returns one JobOutcome per
    job id. ``on_outcome`` is called with each outcome as soon as it is known
    (from a slot thread: the caller can evaluate one exercise while the children
    still run the others; an exception in it is re-raised here). Never raises
    for anything the student's code does; SetupError when the sandbox is
    required (``limits.sandbox``) and cannot run. ``workspace``: one made (and
    prestarted) by the caller with the same limits; it is closed here. ``deps``:
    ``loader.local_dependencies`` of the submission, when the caller has it.
    """
    limits = limits or Limits()
    try:
        if not jobs:
            return {}
        if workspace is None:
            workspace = Workspace(limits, limits.sandboxed())
        sandboxed, jobdir = workspace.sandboxed, workspace.jobdir
        if not isinstance(submission, Ingested):
            submission = read_submission(submission)
        submission.write_into(jobdir / "submission")
        inside = f"{bwrap.JOB_MOUNT}/submission" if sandboxed else str(jobdir / "submission")
        _write_jobs(jobdir, inside, jobs, limits)
        if deps is None:
            deps = local_dependencies(submission.files)
        run = _Run(jobs, limits, workspace, on_outcome, inside, submission.files, deps)
        n = max(1, min(limits.parallel, len(jobs)))
        threads = [threading.Thread(target=run.slot, name=f"sandbox-slot-{k}", daemon=True) for k in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if run.bugs:
            raise run.bugs[0]
        for i, job in enumerate(jobs):
            if i not in run.outcomes:
                run.fail(i, "error", f"{job.id} was not run (a bug in the grader's sandbox)")
        return {job.id: run.outcomes[i] for i, job in enumerate(jobs)}
    finally:
        if workspace is not None:
            workspace.close()
