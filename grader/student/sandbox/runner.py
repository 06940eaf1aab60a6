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

This module is the scheduler (which job runs where, and what its end means) and the kernel cache kept
between runs; the pieces it drives each have a module: the limits, jobs and outcomes
(:mod:`~grader.student.sandbox.limits`), one child process and its pipes (:mod:`~grader.student.sandbox.child`),
and the folders the jobs are written to (:mod:`~grader.student.sandbox.workspace`).
"""

import hashlib
import os
import signal
import stat
import threading
import time
from pathlib import Path
from typing import Callable

from grader.student.sandbox import bwrap
from grader.student.engine import opencl_device
from grader.student.sandbox.ingest import Ingested, read_submission
from grader.student.engine.loader import local_dependencies
from grader.student.sandbox.private_tmp import remove_tree
from grader.student.sandbox.results import MAX_DOCUMENT_BYTES, MalformedResults, decode_results
from grader.student.sanitize import clean_text
from grader.student.sandbox.stacks import Place, locate

# The pieces, re-exported by name: the grading pipeline, the command lines and the tests import them from here.
from grader.student.sandbox.child import Child, exit_status, hand_over
from grader.student.sandbox.limits import (
    GIB,
    KIB,
    MIB,
    Job,
    JobOutcome,
    Limits,
    death_message,
    human_bytes,
)
from grader.student.sandbox.workspace import Workspace, write_jobs, prestart_workspace, worker_kinds

__all__ = [
    "GIB",
    "KIB",
    "MIB",
    "KERNEL_CACHE_BYTES",
    "Job",
    "JobOutcome",
    "Limits",
    "Workspace",
    "death_message",
    "hand_over",
    "human_bytes",
    "job_order",
    "kernel_cache_folder",
    "prestart_workspace",
    "run_cases",
    "worker_kinds",
]

LOOP_PROBE_S = 1.0  # between looks at a job, once another job of the submission ran out of time


def _in(place: Place | None) -> str:
    """' in Tanh.forward (activations.py, line 13)' for messages; '' when the place is unknown."""
    return f" in {place.describe()}" if place is not None else ""


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
    return sorted(
        range(len(jobs)), key=lambda i: (not jobs[i].needs_opencl, -holds_up[i], bool(after[i]), jobs[i].timeout)
    )


class _Run:
    """One ``run_cases`` call: the job queue shared by the slot threads, and the outcomes."""

    def __init__(
        self,
        jobs: list[Job],
        limits: Limits,
        workspace: Workspace,
        on_outcome: Callable[[JobOutcome], None] | None = None,
        folder: str = "",
        files: dict[str, bytes] | None = None,
        deps: dict[str, set[str]] | None = None,
        round_: int = 0,
        keep: bool = False,
    ) -> None:
        self.on_outcome = on_outcome
        self.round = round_  # the workspace's run this is (its jobs' manifest)
        self.keep = keep  # park the CPU workers the slots end with, for a later round
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
        the child's own) and only one OpenCL runtime's memory is in use. In a
        frugal workspace (a grading process's spares) a slot whose kind ran out
        ends while another slot serves the other kind: that slot's worker is
        started and has the student's package loaded, where a switch would start
        another worker (Python, NumPy, the package: about 0.15 CPU-s) for what is
        left, which a class pays per student. A job is not
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
                    if self.workspace.frugal and self.active[not kind] > 0:
                        return None
                    kind = None
                if kind is None:
                    open_jobs = [i for i in ready if not (self.jobs[i].needs_opencl and self.active[True] > 0)]
                    if open_jobs:
                        idle = [i for i in open_jobs if self.active[self.jobs[i].needs_opencl] == 0]
                        i = idle[0] if idle else open_jobs[0]
                        self.active[self.jobs[i].needs_opencl] += 1
                        return self._start(i)
                waiting = [
                    i
                    for i in self.queue
                    if self.after[i] & self.running
                    and (
                        self.jobs[i].needs_opencl == kind
                        if kind is not None
                        else not (self.jobs[i].needs_opencl and self.active[True] > 0)
                    )
                ]
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

    def spawn(self, opencl: bool) -> Child:
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
        child: Child | None = None
        try:
            while True:
                i = self.take(kind)
                if i is None:
                    if child is not None and self.keep and self.parkable(child):
                        self.workspace.park(child)  # idle, its job done: for the next round
                        child = None
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

    def parkable(self, child: Child) -> bool:
        """Whether a slot may park ``child`` for a later round: a CPU worker (the traced cases' kind), alive,
        started by another thread than this slot's (the workspace's prestarted workers; one this slot started
        would die with it, see :attr:`Child.thread`)."""
        return not child.opencl and child.proc.poll() is None and child.thread != threading.get_ident()

    def run_one(self, child: Child, i: int) -> bool:
        """Run job ``i`` on ``child``; records its outcome; False when the child must be replaced."""
        job = self.jobs[i]
        limits = self.limits
        memory = limits.opencl_memory_bytes if job.needs_opencl else limits.memory_bytes
        first = child.started_jobs == 0
        child.send(f"run {i} {self.round}" if self.round else f"run {i}")
        started, _ = child.expect(f"start {i}", time.monotonic() + limits.startup_s)
        if started != "ok":
            if started == "timeout":
                child.kill()
            code = exit_status(child.wait(timeout=5.0), self.sandboxed)
            if first:  # before any student code ran in it: the grader's machine is at fault
                message = (
                    f"the grader's worker did not start (exit status {code}): {child.log_tail()}"
                    f" ({opencl_device.DOCTOR_HINT})"
                )
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
            exercise, at = stuck
            child.kill()
            child.wait(timeout=5.0)
            message = f"stopped after {duration:.1f} s: still in {at.describe()}, where {exercise} ran out of time"
            self.fail(i, "timeout", message, child.take_output(), duration)
            return False
        if done == "timeout":
            place = self.where(child, ask=True)
            child.kill()
            child.wait(timeout=5.0)
            self.fail(
                i, "timeout", f"timed out after {wall:g} s{_in(place)} (infinite loop?)", child.take_output(), duration
            )
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

    def wait_done(self, child: Child, i: int, deadline: float) -> tuple[str, list[str], tuple[str, Place] | None]:
        """Wait for job ``i``'s ``done`` line until ``deadline``: (state, words, None) as :meth:`Child.expect`.

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

    def where(self, child: Child, ask: bool) -> Place | None:
        """Where in the student's code ``child`` is (``ask``: signal it now) or was when it died."""
        return locate(child.stack_dump(ask), self.folder, self.files)

    def remember_loop(self, exercise_id: str, place: Place | None) -> None:
        """Note that ``exercise_id`` ran out of time at ``place`` (the first exercise to do so there is named)."""
        if place is not None:
            with self.lock:
                self.loops.setdefault(place.key, exercise_id)

    def collect(self, child: Child, i: int, words: list[str], deadline: float, duration: float) -> bool:
        """Read job ``i``'s results frame into its outcome (malformed: status error); False: replace the child."""
        job = self.jobs[i]
        sizes = words[2:4]
        if len(sizes) != 2 or not all(w.isdigit() for w in sizes):
            self.fail(
                i, "error", f"could not read the results of {job.id}: a malformed frame", child.take_output(), duration
            )
            return False
        doc_size, array_size = int(sizes[0]), int(sizes[1])
        if doc_size > MAX_DOCUMENT_BYTES or array_size > self.limits.results_bytes:
            message = (
                f"{job.id} returned more than {human_bytes(self.limits.results_bytes)} of results "
                "(the outputs of a few small cases are expected)"
            )
            self.fail(i, "error", message, child.take_output(), duration)
            return False
        payload = child.read_exact(doc_size + array_size, deadline + 5.0)
        if payload is None:
            self.fail(
                i,
                "error",
                f"could not read the results of {job.id}: the worker stopped sending them",
                child.take_output(),
                duration,
            )
            return False
        try:
            document, results = decode_results(
                payload[:doc_size], payload[doc_size:], job.cases, self.limits.results_bytes
            )
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


def run_cases(
    submission: Ingested | Path | str,
    jobs: list[Job],
    limits: Limits | None = None,
    on_outcome: Callable[[JobOutcome], None] | None = None,
    workspace: Workspace | None = None,
    deps: dict[str, set[str]] | None = None,
    keep: bool = False,
) -> dict[str, JobOutcome]:
    """Run every job's cases on a copy of the student's files in sandboxed children.

    ``submission`` is what :func:`grader.student.sandbox.ingest.read_submission` took from the
    student's folder (or a folder, ingested here). Returns one JobOutcome per
    job id. ``on_outcome`` is called with each outcome as soon as it is known
    (from a slot thread: the caller can evaluate one exercise while the children
    still run the others; an exception in it is re-raised here). Never raises
    for anything the student's code does; SetupError when the sandbox is
    required (``limits.sandbox``) and cannot run. ``workspace``: one made (and
    prestarted) by the caller with the same limits; it is closed here, unless ``keep``: then it stays open,
    with the CPU workers the run ended with parked in it (alive), and a later call with the same workspace
    and the SAME submission runs its jobs there as the workspace's next round, on those workers first
    (see :class:`Workspace`); the caller closes it. ``deps``:
    ``loader.local_dependencies`` of the submission, when the caller has it.
    """
    limits = limits or Limits()
    keep = keep and workspace is not None  # (only the caller's workspace can be used again)
    try:
        if not jobs:
            return {}
        if workspace is None:
            workspace = Workspace(limits, limits.sandboxed())
        sandboxed, jobdir = workspace.sandboxed, workspace.jobdir
        if not isinstance(submission, Ingested):
            submission = read_submission(submission)
        round_, workspace.rounds = workspace.rounds, workspace.rounds + 1
        if round_ == 0:  # (a later round runs the same submission: its files are there)
            submission.write_into(jobdir / "submission")
        inside = f"{bwrap.JOB_MOUNT}/submission" if sandboxed else str(jobdir / "submission")
        write_jobs(jobdir, inside, jobs, limits, round_)
        if deps is None:
            deps = local_dependencies(submission.files)
        run = _Run(jobs, limits, workspace, on_outcome, inside, submission.files, deps, round_, keep)
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
        if workspace is not None and not keep:
            workspace.close()
