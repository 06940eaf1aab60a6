"""Spares: sandboxed workers started ahead of need, each for exactly one submission.

A grading's time goes mostly to its children's start: bubblewrap, Python,
NumPy and the worker's grader modules (docs/measured.md, the profile). A
long-lived grading process (``grade worker``'s, ``grade batch``'s) therefore
keeps ``count`` *spares* ready: a spare is a
:class:`grader.student.sandbox.runner.Workspace` whose workers were started
(:meth:`Workspace.prestart`) before any submission came, so they have set
their limits, imported NumPy and the grader inside their own sandbox, and wait
on their command pipe with nothing but ``limits.json`` in their job folder.

A spare is exactly a cold workspace started earlier: the same ``_Child``
command line (same bubblewrap mounts, namespaces, uid, environment), the same
``limits.json``; it serves ONE submission (the submission's files, manifest
and inputs are written into its job folder and its workers are sent ``run i``)
and is then closed, its workers killed and its folder removed, like any
workspace after :func:`grader.student.sandbox.runner.run_cases`. No student's
code ever shares a process or a folder with another's.

:meth:`Spares.one` hands out a ready spare (or a cold workspace when none is
ready) and, once that submission is graded, starts its replacement (the
``Popen`` returns at once: the new workers import NumPy in the background,
while the grading process waits for the next job). A spare is not handed out
when one of its workers has died (killed, say, or out of memory) or when it
is older than ``max_age_s``, or when the grading process's environment
changed since it started (a spare is a snapshot of the grader's modules and
its machine, an OpenCL driver's settings say: a cold worker would start
differently now); it is closed and another is used.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from grader.student.sandbox.runner import Limits, Workspace, worker_kinds

DEFAULT_COUNT = 1  # spares kept by each grading process (it grades one submission at a time)
MAX_AGE_S = 600.0  # a spare older than this is replaced before it is used


def spare_kinds(limits: Limits) -> tuple[bool, ...]:
    """The workers a spare starts before any submission was seen (True: OpenCL): a CPU worker, and with two
    slots or more a kernel worker, so that a submission of either kind starts warm."""
    return (False, True)[: max(1, limits.parallel)]


@dataclass
class _Spare:
    workspace: Workspace
    born: float  # on the pool's clock
    environment: dict[str, str]  # the grading process's, when the spare started (its workers' come from it)


class Spares:
    """Up to ``count`` workspaces with workers started ahead of need, for one submission each.

    ``kinds``: the workers each spare starts (default :func:`spare_kinds`); after
    each submission, those that submission needed (:func:`runner.worker_kinds`
    of its exercises: a class handing in one CPU exercise does not start a
    kernel worker, with its driver and compiler, for every upload). A job of
    another kind starts a fresh worker in the spare's workspace, as a cold one
    would. ``clock``: seconds, for ``max_age_s`` (injected by tests).
    """

    def __init__(
        self,
        limits: Limits,
        sandboxed: bool,
        count: int = DEFAULT_COUNT,
        kinds: tuple[bool, ...] | None = None,
        max_age_s: float = MAX_AGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self.sandboxed = sandboxed
        self.count = max(0, count)
        self.kinds = spare_kinds(limits) if kinds is None else kinds
        self.max_age_s = max_age_s
        self.clock = clock
        self._lock = threading.Lock()
        self._ready: list[_Spare] = []
        self._closed = False

    def _start(self) -> _Spare:
        """A new spare: a workspace and its workers, started now (they import in the background)."""
        workspace = Workspace(self.limits, self.sandboxed, frugal=True)
        try:
            for opencl in self.kinds:
                workspace.prestart(opencl)
        except BaseException:
            workspace.close()
            raise
        return _Spare(workspace, self.clock(), dict(os.environ))

    def fill(self) -> None:
        """Start spares until ``count`` are waiting (nothing once closed)."""
        while True:
            with self._lock:
                if self._closed or len(self._ready) >= self.count:
                    return
            spare = self._start()
            with self._lock:
                if not self._closed and len(self._ready) < self.count:
                    self._ready.append(spare)
                    continue
            spare.workspace.close()
            return

    def wait_ready(self, timeout: float = 60.0) -> bool:
        """Wait until the waiting spares' workers are ready (benches: a warm spare, as between two jobs)."""
        with self._lock:
            ready = list(self._ready)
        return all(spare.workspace.wait_ready(timeout) for spare in ready)

    def usable(self, spare: _Spare) -> bool:
        """Whether a spare may serve a submission: all its workers alive, younger than ``max_age_s``, and
        started in the environment a cold worker would start in now."""
        return (
            spare.workspace.alive()
            and self.clock() - spare.born <= self.max_age_s
            and spare.environment == dict(os.environ)
        )

    def take(self) -> Workspace:
        """A ready spare's workspace for one submission (spares found dead or stale are closed), else a cold one.

        The caller grades exactly one submission in it and closes it; :meth:`fill` replaces it.
        """
        while True:
            with self._lock:
                spare = self._ready.pop(0) if self._ready else None
            if spare is None:
                return Workspace(self.limits, self.sandboxed, frugal=True)
            if self.usable(spare):
                return spare.workspace
            spare.workspace.close()

    @contextmanager
    def one(self, ids: list[str] | None = None) -> Iterator[Workspace]:
        """``with spares.one(ids) as workspace:`` grade one submission of the exercises ``ids`` in it; it is
        closed after, and replaced by a spare with the workers those exercises needed (None: as before)."""
        workspace = self.take()
        try:
            yield workspace
        finally:
            workspace.close()  # (grading closes it already; a second close does nothing)
            if ids:
                self.kinds = worker_kinds(self.limits, ids)
            self.fill()

    def close(self) -> None:
        """Stop every waiting spare's workers and remove their folders; the pool starts no more."""
        with self._lock:
            self._closed = True
            ready, self._ready = self._ready, []
        for spare in ready:
            spare.workspace.close()


_POOLS: dict[tuple[Limits, bool], Spares] = {}
_POOLS_PID: list[int] = [0]
_POOLS_LOCK = threading.Lock()


def for_process(limits: Limits, count: int = DEFAULT_COUNT) -> Spares:
    """This process's spares for ``limits`` (made, and filled, on the first call; closed at exit).

    Kept per process: a forked grading process (``grade worker``'s) never uses its
    parent's spares (their pipes belong to the parent), it makes its own.
    SetupError when the sandbox is required and cannot run (``limits.sandboxed``).
    """
    sandboxed = limits.sandboxed()
    with _POOLS_LOCK:
        if _POOLS_PID[0] != os.getpid():
            _POOLS.clear()  # the parent's (after a fork): not ours to use or close
            _POOLS_PID[0] = os.getpid()
        pool = _POOLS.get((limits, sandboxed))
        if pool is None:
            pool = _POOLS[(limits, sandboxed)] = Spares(limits, sandboxed, count)
            atexit.register(pool.close)
    pool.fill()
    return pool
