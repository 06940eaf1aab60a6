"""The parent side of the sandbox: run exercises' cases in child processes, with limits.

``run_cases(path, jobs, limits)`` spawns ``python -m grader.worker JOBDIR``
children (``subprocess``: a fresh interpreter, never a fork of this process,
so OpenCL state is never inherited), each in its own process group with
``OMP_NUM_THREADS=1`` & co, a temporary working directory and stdin from
``/dev/null``. The child sets its own rlimits first thing (RLIMIT_AS,
RLIMIT_CPU per exercise, RLIMIT_FSIZE, RLIMIT_CORE = 0): doing it there rather
than in ``preexec_fn`` keeps spawning safe while this process runs threads.

Up to ``limits.parallel`` children run at once (one thread each). A child is
fed one job at a time over a command pipe and reports ``start i`` / ``done i``
over a status pipe, so each exercise gets its own wall-clock limit. When a child
hangs or dies in exercise k, its whole process group is killed, k is marked
(timeout / crashed) and a fresh child continues with the remaining exercises.
Kernel exercises (``needs_opencl``) run in children of their own.

Results come back as ``.npz`` files read with ``np.load(..., allow_pickle=False)``
and a JSON status; anything malformed becomes an ``error`` for that exercise,
never an exception here.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from grader.ops import Case, ScriptResult

GIB = 1 << 30
MIB = 1 << 20
KIB = 1 << 10

GRADER_ROOT = str(Path(__file__).resolve().parent.parent)  # the folder holding the grader package


@dataclass(frozen=True)
class Limits:
    """Resource limits of the children that run student code.

    wall_s: cap on each exercise's wall clock (None: each exercise's own ``timeout``);
    cpu_s: CPU seconds per exercise (None: the exercise's wall-clock limit; more
    CPU than wall time means threads); memory_bytes: address space (RLIMIT_AS)
    of a CPU child; opencl_memory_bytes: the same for kernel children (PoCL maps
    more); output_bytes: captured stdout+stderr kept per exercise; file_bytes:
    largest file a child may write (RLIMIT_FSIZE); startup_s: time a fresh child
    has to import NumPy (and OpenCL) before its first exercise; parallel: children
    at once.
    """

    wall_s: float | None = None
    cpu_s: float | None = None
    memory_bytes: int = 2 * GIB
    opencl_memory_bytes: int = 4 * GIB
    output_bytes: int = 64 * KIB
    file_bytes: int = 256 * MIB
    startup_s: float = 60.0
    parallel: int = 2

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
    'timeout', 'crashed' (the process died or exited) or 'error' (the topic file
    did not import, no OpenCL device, unreadable results); ``message`` says why;
    ``output`` is the bounded captured stdout+stderr; ``duration`` the wall time.
    """

    id: str
    status: str
    results: dict[str, ScriptResult] = field(default_factory=dict)
    message: str = ""
    output: str = ""
    duration: float = 0.0


class MalformedResults(Exception):
    """A child's result files are missing or not what the worker writes."""


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


def death_message(returncode: int, exercise: str, memory_bytes: int, cpu_s: float) -> tuple[str, str]:
    """(status, message) for a child that ended while running ``exercise``."""
    if returncode >= 0:
        return "crashed", (
            f"the process exited with status {returncode} during {exercise} (sys.exit/os._exit in your code?)"
        )
    number = -returncode
    if number == signal.SIGXCPU:
        return "timeout", f"used more than {cpu_s:g} s of CPU time (infinite loop? threads?)"
    if number == signal.SIGKILL:
        return "crashed", f"the process was killed: out of memory? (limit {human_bytes(memory_bytes)})"
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    hint = _SIGNAL_HINTS.get(number, name)
    return "crashed", f"killed by signal {number} ({hint}) during {exercise}"


# --- one child process ----------------------------------------------------------------


class _Child:
    """A running worker: a command pipe to it, a status pipe from it, its own process group."""

    def __init__(self, jobdir: Path, opencl: bool, serial: int) -> None:
        status_r, status_w = os.pipe()
        command_r, command_w = os.pipe()
        env = dict(os.environ)
        env.update(
            OMP_NUM_THREADS="1",
            OPENBLAS_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
            NUMEXPR_NUM_THREADS="1",
            PYTHONDONTWRITEBYTECODE="1",
            PYTHONUNBUFFERED="1",
            PYTHONHASHSEED="0",
        )
        env.pop("PYTHONSTARTUP", None)
        env.pop("PYTHONWARNINGS", None)
        # The child runs in an empty folder: make sure it finds this very grader.
        env["PYTHONPATH"] = os.pathsep.join([GRADER_ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
        cwd = jobdir / f"cwd{serial}"
        cwd.mkdir()
        self.log_path = jobdir / f"worker{serial}.log"
        log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "grader.worker",
                    str(jobdir),
                    "--status-fd",
                    str(status_w),
                    "--command-fd",
                    str(command_r),
                ]
                + (["--opencl"] if opencl else []),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                pass_fds=(status_w, command_r),
                start_new_session=True,
                close_fds=True,
            )
        finally:
            log.close()
            os.close(status_w)
            os.close(command_r)
        self.opencl = opencl
        self.status_fd = status_r
        self.command_fd: int | None = command_w
        self.buffer = b""
        self.started_jobs = 0

    def send(self, line: str) -> bool:
        """Write a command line; False when the child is gone."""
        if self.command_fd is None:
            return False
        try:
            os.write(self.command_fd, (line + "\n").encode())
            return True
        except OSError:
            return False

    def expect(self, wanted: str, deadline: float) -> str:
        """Wait for the status line ``wanted``: 'ok', 'timeout', or 'eof' (the child closed the pipe)."""
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                if line.decode(errors="replace").strip() == wanted:
                    return "ok"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            ready, _, _ = select.select([self.status_fd], [], [], remaining)
            if not ready:
                return "timeout"
            chunk = os.read(self.status_fd, 4096)
            if not chunk:
                return "eof"
            self.buffer += chunk

    def kill(self) -> None:
        """Kill the whole process group (the child and anything it started)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def wait(self, timeout: float) -> int:
        """The exit status, killing the group if it has not ended within ``timeout``."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait()

    def close(self) -> None:
        """Ask the child to finish (EOF on its commands), then clean up its process group."""
        if self.command_fd is not None:
            os.close(self.command_fd)
            self.command_fd = None
        self.wait(timeout=5.0)
        self.kill()
        os.close(self.status_fd)

    def log_tail(self, limit: int = 2000) -> str:
        """The end of the worker's own log (what it printed before any exercise started)."""
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-limit:].decode(errors="replace").strip()


# --- reading results ---------------------------------------------------------------------


def _read_output(results: Path, index: int, limit: int, dropped: int) -> str:
    """The first ``limit`` bytes of a job's captured output, and how much more was cut."""
    path = results / f"{index}.out"
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(limit)
    except OSError:
        return ""
    text = head.decode("utf-8", errors="replace")
    more = max(0, size - limit) + max(0, dropped)
    if more:
        text += f"\n[... {human_bytes(more)} more output cut]"
    return text


def _check_error(error: Any) -> dict[str, str] | None:
    """A case error record from the results JSON, checked; MalformedResults otherwise."""
    if error is None:
        return None
    if not isinstance(error, dict) or not all(isinstance(error.get(k, ""), str) for k in ("type", "message")):
        raise MalformedResults(f"bad error record {error!r:.200}")
    return {str(k): str(v) for k, v in error.items()}


def load_results(results: Path, index: int, job: Job) -> tuple[dict[str, Any], dict[str, ScriptResult]]:
    """The worker's JSON document and one ScriptResult per case; MalformedResults otherwise."""
    try:
        document = json.loads((results / f"{index}.json").read_text())
    except (OSError, ValueError) as exc:
        raise MalformedResults(f"no readable status ({exc})") from None
    if not isinstance(document, dict) or document.get("status") not in ("ok", "error"):
        raise MalformedResults("the status document is not the worker's")
    if document["status"] == "error":
        return document, {}
    cases = document.get("cases")
    expected = [case.name for case in job.cases]
    if not isinstance(cases, list) or [c.get("name") if isinstance(c, dict) else None for c in cases] != expected:
        raise MalformedResults("the cases in the results are not the ones sent")
    out: dict[str, ScriptResult] = {}
    try:
        with np.load(results / f"{index}.npz", allow_pickle=False) as npz:
            for case in cases:
                keys = case.get("outputs")
                if not isinstance(keys, dict):
                    raise MalformedResults("bad outputs record")
                outputs: dict[str, np.ndarray] = {}
                for name, key in keys.items():
                    array = np.array(npz[key])
                    if array.dtype.kind not in "biuf":
                        raise MalformedResults(f"output {name!r} is an array of {array.dtype}")
                    outputs[str(name)] = array
                warnings = case.get("warnings") or []
                out[case["name"]] = ScriptResult(
                    outputs=outputs,
                    error=_check_error(case.get("error")),
                    warnings=[str(w) for w in warnings] if isinstance(warnings, list) else [],
                )
    except MalformedResults:
        raise
    except Exception as exc:  # zip errors, missing keys, pickled arrays refused by allow_pickle=False
        raise MalformedResults(f"unreadable arrays ({type(exc).__name__}: {exc})") from None
    return document, out


# --- the scheduler ------------------------------------------------------------------------


class _Run:
    """One ``run_cases`` call: the job queue shared by the slot threads, and the outcomes."""

    def __init__(self, jobs: list[Job], limits: Limits, jobdir: Path) -> None:
        self.jobs = jobs
        self.limits = limits
        self.jobdir = jobdir
        self.results = jobdir / "results"
        self.lock = threading.Lock()
        # Kernel jobs first (their children start slowest), then the longest-allowed
        # jobs (fit_function), so that no long job starts last on an otherwise idle machine.
        order = sorted(range(len(jobs)), key=lambda i: (not jobs[i].needs_opencl, -jobs[i].timeout))
        self.queue: list[int] = order
        self.active = {True: 0, False: 0}
        self.outcomes: dict[int, JobOutcome] = {}
        self.retried: set[int] = set()
        self.serial = 0
        self.bugs: list[BaseException] = []

    def take(self, kind: bool | None) -> int | None:
        """The next job for a slot serving ``kind`` (None: nothing yet), or None when all are taken.

        A job of the same kind comes first; otherwise the slot switches to a kind
        no other slot serves, if any (``active`` counts the slots serving each kind).
        """
        with self.lock:
            for i in self.queue:
                if self.jobs[i].needs_opencl == kind:
                    self.queue.remove(i)
                    return i
            if kind is not None:
                self.active[kind] -= 1
            if not self.queue:
                return None
            idle = [i for i in self.queue if self.active[self.jobs[i].needs_opencl] == 0]
            i = idle[0] if idle else self.queue[0]
            self.queue.remove(i)
            self.active[self.jobs[i].needs_opencl] += 1
            return i

    def requeue(self, i: int) -> None:
        """Put job ``i`` back at the front of the queue (its child died before it started)."""
        with self.lock:
            self.queue.insert(0, i)

    def spawn(self, opencl: bool) -> _Child:
        """Start a fresh child (numbered, for its own cwd and log)."""
        with self.lock:
            self.serial += 1
            serial = self.serial
        return _Child(self.jobdir, opencl, serial)

    def fail(self, i: int, status: str, message: str, output: str = "", duration: float = 0.0) -> None:
        """Record a job that produced no results."""
        self.outcomes[i] = JobOutcome(self.jobs[i].id, status, {}, message, output, duration)

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
            self.bugs.append(exc)
        finally:
            if child is not None:
                child.close()

    def run_one(self, child: _Child, i: int) -> bool:
        """Run job ``i`` on ``child``; records its outcome; False when the child must be replaced."""
        job = self.jobs[i]
        limits = self.limits
        memory = limits.opencl_memory_bytes if job.needs_opencl else limits.memory_bytes
        first = child.started_jobs == 0
        child.started_jobs += 1
        child.send(f"run {i}")
        started = child.expect(f"start {i}", time.monotonic() + limits.startup_s)
        if started != "ok":
            if started == "timeout":
                child.kill()
            code = child.wait(timeout=5.0)
            if first:
                message = f"the grader's worker did not start (exit status {code}): {child.log_tail()}"
                self.fail(i, "error", message)
                self.fail_kind(job.needs_opencl, message)
            elif i in self.retried:
                self.fail(i, "error", f"the worker stopped before {job.id} started (exit status {code})")
            else:
                self.retried.add(i)
                self.requeue(i)
            return False
        t0 = time.monotonic()
        wall = limits.wall_for(job)
        done = child.expect(f"done {i}", t0 + wall)
        duration = time.monotonic() - t0
        if done == "timeout":
            child.kill()
            child.wait(timeout=5.0)
            output = _read_output(self.results, i, limits.output_bytes, 0)
            self.fail(i, "timeout", f"timed out after {wall:g} s (infinite loop?)", output, duration)
            return False
        if done == "eof":
            code = child.wait(timeout=5.0)
            output = _read_output(self.results, i, limits.output_bytes, 0)
            status, message = death_message(code, job.id, memory, limits.cpu_for(job))
            self.fail(i, status, message, output, duration)
            return False
        self.collect(i, duration)
        return True

    def fail_kind(self, opencl: bool, message: str) -> None:
        """A worker of this kind cannot start: every queued job of the kind gets ``message``."""
        with self.lock:
            doomed = [i for i in self.queue if self.jobs[i].needs_opencl == opencl]
            for i in doomed:
                self.queue.remove(i)
        for i in doomed:
            self.fail(i, "error", message)

    def collect(self, i: int, duration: float) -> None:
        """Read job ``i``'s result files into its outcome (malformed: status error)."""
        job = self.jobs[i]
        try:
            document, results = load_results(self.results, i, job)
        except MalformedResults as exc:
            output = _read_output(self.results, i, self.limits.output_bytes, 0)
            self.fail(i, "error", f"could not read the results of {job.id}: {exc}", output, duration)
            return
        dropped = document.get("output_dropped", 0)
        output = _read_output(
            self.results, i, self.limits.output_bytes, dropped if isinstance(dropped, int) else 0
        )
        if document["status"] == "error":
            message = document.get("message")
            self.fail(i, "error", str(message), output, duration)
            return
        self.outcomes[i] = JobOutcome(job.id, "ok", results, "", output, duration)


def _write_jobs(jobdir: Path, path: Path, jobs: list[Job], limits: Limits) -> None:
    """The manifest and one inputs ``.npz`` per job."""
    (jobdir / "inputs").mkdir()
    (jobdir / "results").mkdir()
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
    cpu_total = sum(limits.cpu_for(job) for job in jobs) + limits.startup_s
    manifest = {
        "path": str(path),
        "limits": {
            "memory_bytes": limits.memory_bytes,
            "opencl_memory_bytes": limits.opencl_memory_bytes,
            "file_bytes": limits.file_bytes,
            "output_bytes": limits.output_bytes,
            "cpu_total_s": cpu_total,
        },
        "jobs": entries,
    }
    (jobdir / "manifest.json").write_text(json.dumps(manifest))


def run_cases(path: Path | str, jobs: list[Job], limits: Limits | None = None) -> dict[str, JobOutcome]:
    """Run every job's cases on the student's folder ``path`` in sandboxed children.

    Returns one JobOutcome per job id. Never raises for anything the student's
    code does; only for an unusable temporary directory or a grader bug.
    """
    limits = limits or Limits()
    folder = Path(path).resolve()
    if not jobs:
        return {}
    jobdir = Path(tempfile.mkdtemp(prefix="normgrade-"))
    try:
        _write_jobs(jobdir, folder, jobs, limits)
        run = _Run(jobs, limits, jobdir)
        n = max(1, min(limits.parallel, len(jobs)))
        threads = [threading.Thread(target=run.slot, name=f"sandbox-slot-{k}", daemon=True) for k in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if run.bugs:
            raise run.bugs[0]
        outcomes: dict[str, JobOutcome] = {}
        for i, job in enumerate(jobs):
            outcomes[job.id] = run.outcomes.get(i) or JobOutcome(
                job.id, "error", {}, f"{job.id} was not run (a bug in the grader's sandbox)"
            )
        return outcomes
    finally:
        shutil.rmtree(jobdir, ignore_errors=True)
