"""The folders one submission's jobs run in (:class:`Workspace`), the jobs and limits written there for the
workers, and workers started before the jobs are known (:func:`prestart_workspace`)."""

from __future__ import annotations

import json
import secrets
import threading
import time
from pathlib import Path

from grader.student.engine import catalogue
from grader.student.sandbox.child import Child
from grader.student.sandbox.limits import Job, Limits
from grader.student.sandbox.private_tmp import PrivateFolder
from grader.student.sandbox.worker import inputs_folder, manifest_name


def write_jobs(jobdir: Path, submission: str, jobs: list[Job], limits: Limits, round_: int = 0) -> None:
    """The manifest and one inputs ``.npz`` per job (``submission``: the folder as the worker sees it) of the
    workspace's run ``round_`` (:func:`worker.manifest_name`, :func:`worker.inputs_folder`)."""
    import numpy as np

    jobdir.chmod(0o755)  # (ours: read-only again below; the sandbox mounts it read-only in any case)
    inputs = inputs_folder(round_)
    (jobdir / inputs).mkdir()
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
        np.savez(jobdir / inputs / f"{i}.npz", allow_pickle=True, **arrays)
        entries.append(
            {
                "id": job.id,
                "topic": job.topic,
                "needs_opencl": job.needs_opencl,
                "cpu_s": limits.cpu_for(job),
                "inputs": f"{inputs}/{i}.npz",
                "cases": cases,
            }
        )
    manifest = {
        "path": submission,
        "cpu_total_s": sum(limits.cpu_for(job) for job in jobs) + limits.startup_s,
        "jobs": entries,
    }
    (jobdir / manifest_name(round_)).write_text(json.dumps(manifest))
    for path in [jobdir, *jobdir.rglob("*")]:  # readable by the sandbox's uid, writable by nobody
        path.chmod(0o555 if path.is_dir() else 0o444)


def write_limits(jobdir: Path, limits: Limits) -> None:
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

    Rounds: a run asked to ``keep`` the workspace leaves it open, and its slots :meth:`park` the CPU workers
    they end with (alive, idle) among the started ones. A later run of the SAME submission here (the
    location's traced cases, :func:`grader.student.engine.grading._located`) is the workspace's next
    :attr:`rounds`: its jobs are written beside the first ones (``manifest-1.json``) and the parked workers
    take them first, loading the student's package afresh for them (``run i 1``, see
    :class:`grader.student.sandbox.worker.Submission`): no second start of bubblewrap, Python and NumPy.
    No other student's code ever runs here: a workspace serves one submission and is closed after.

    ``frugal``: its slots start no worker of a kind beside the one at work (``runner._Run.take``): for a
    long-lived grading process's spares, where a class pays every worker's start per student; at the
    keyboard (False) a second worker of a kind shortens the wait.
    """

    def __init__(self, limits: Limits, sandboxed: bool, frugal: bool = False) -> None:
        self.limits = limits
        self.sandboxed = sandboxed
        self.frugal = frugal
        self._folder = PrivateFolder("normgrade-")  # (a killed grader's is removed by the next one)
        self.private = self._folder.path
        self.jobdir = self.private / secrets.token_hex(16)
        self.jobdir.mkdir(mode=0o755)
        write_limits(self.jobdir, limits)
        self._lock = threading.Lock()
        self._serial = 0
        self._started: dict[bool, list[Child]] = {True: [], False: []}
        self.rounds = 0  # the runs written here so far (the next run is round ``rounds``)

    def prestart(self, opencl: bool) -> None:
        """Start a worker of this kind now (kept for the first slot that needs one)."""
        child = self.spawn(opencl)
        with self._lock:
            self._started[opencl].append(child)

    def park(self, child: Child) -> None:
        """Keep ``child`` (alive, its job done) for a later round of this submission (closed with the workspace)."""
        with self._lock:
            self._started[child.opencl].append(child)

    def take(self, opencl: bool) -> Child:
        """A prestarted (or parked) worker of this kind, or a fresh one (a parked one found dead is closed)."""
        while True:
            with self._lock:
                child = self._started[opencl].pop(0) if self._started[opencl] else None
            if child is None:
                return self.spawn(opencl)
            if child.started_jobs == 0 or child.proc.poll() is None:
                return child
            child.close()

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

    def spawn(self, opencl: bool) -> Child:
        """Start a fresh worker (numbered, for its own cwd without the sandbox)."""
        with self._lock:
            self._serial += 1
            serial = self._serial
        return Child(self.jobdir, opencl, serial, self.limits, self.sandboxed)

    def close(self) -> None:
        """Stop the workers nobody took, and remove the folders."""
        with self._lock:
            unused = self._started[True] + self._started[False]
            self._started = {True: [], False: []}
        for child in unused:
            child.close()
        self._folder.remove()


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
