"""grader.student.sandbox.spares: workers started ahead of need, one submission each, in the same sandbox."""

from __future__ import annotations

import re
import socket
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import require_program
from grader.student.engine.ops import Case
from grader.student.sandbox.runner import Job, Limits, Workspace, run_cases
from grader.student.sandbox.spares import Spares, spare_kinds

TOY = """
import os
import resource
import socket

import numpy as np

PROCESS_TOKEN = float(int.from_bytes(os.urandom(6), "little"))  # differs between processes
LEFT = []  # a global one submission could leave for the next


class Token:
    def forward(self, x):
        LEFT.append(1)
        return np.array([PROCESS_TOKEN, float(len(LEFT))])


class Limits:
    def forward(self, x):
        names = ("RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC", "RLIMIT_CORE")
        return np.array([float(resource.getrlimit(getattr(resource, n))[1]) for n in names])


class Net:
    def forward(self, x):
        try:
            socket.create_connection(("127.0.0.1", int(x[0])), timeout=2).close()
        except OSError:
            return np.array([0.0])
        return np.array([1.0])
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "student"
    root.mkdir()
    (root / "toy.py").write_text(textwrap.dedent(TOY))
    return root


def job(cls: str, x: list[float] | None = None) -> Job:
    """A job whose one case builds ``toy.<cls>`` and records its forward of ``x``."""
    script: list[dict[str, Any]] = [
        {"op": "new", "var": "m", "cls": f"toy.{cls}"},
        {"op": "call", "var": "m", "method": "forward", "args": [{"array": "x"}], "out": "y"},
    ]
    return Job(f"toy.{cls}", [Case("case0", script, {"x": np.array(x or [0.0])})], 20.0)


LIMITS = Limits(wall_s=10.0, memory_bytes=1 << 30, parallel=1)


def workers(workspace: Workspace) -> list:
    """The workers started in a workspace and not yet taken."""
    return workspace._started[False] + workspace._started[True]


def output(folder: Path, cls: str, workspace: Workspace, x: list[float] | None = None) -> list[float]:
    outcome = run_cases(folder, [job(cls, x)], LIMITS, workspace=workspace)[f"toy.{cls}"]
    assert outcome.status == "ok", outcome.message
    return list(outcome.results["case0"].outputs["y"])


def test_a_spare_serves_one_submission_then_its_workers_and_folder_are_gone(folder: Path) -> None:
    spares = Spares(LIMITS, LIMITS.sandboxed())
    spares.fill()
    try:
        first = spares._ready[0].workspace
        started = workers(first)
        with spares.one() as workspace:
            assert workspace is first  # the ready spare, not a cold workspace
            token, left = output(folder, "Token", workspace)
        assert left == 1.0
        assert all(child.proc.poll() is not None for child in started)  # its workers ended with the submission
        assert not first.private.exists()  # and its folder (the submission's copy) is removed
        assert [s.workspace for s in spares._ready] != [first]  # replaced by a new spare
        with spares.one() as workspace:
            assert workspace is not first
            second_token, second_left = output(folder, "Token", workspace)
        assert second_token != token and second_left == 1.0  # another process: nothing carried over
    finally:
        spares.close()


def test_a_killed_spare_is_replaced_not_used(folder: Path) -> None:
    spares = Spares(LIMITS, LIMITS.sandboxed())
    spares.fill()
    try:
        killed = spares._ready[0].workspace
        for child in workers(killed):
            child.kill()
            child.proc.wait()
        with spares.one() as workspace:
            assert workspace is not killed
            assert output(folder, "Token", workspace)[1] == 1.0
        assert not killed.private.exists()  # closed when found dead
    finally:
        spares.close()


def test_a_stale_spare_is_replaced_not_used(folder: Path) -> None:
    now = [100.0]
    spares = Spares(LIMITS, LIMITS.sandboxed(), max_age_s=60.0, clock=lambda: now[0])
    spares.fill()
    try:
        old = spares._ready[0].workspace
        now[0] += 61.0
        with spares.one() as workspace:
            assert workspace is not old
            assert output(folder, "Token", workspace)[1] == 1.0
        assert not old.private.exists()
        fresh = spares._ready[0].workspace
        now[0] += 30.0  # within max_age_s: used
        with spares.one() as workspace:
            assert workspace is fresh
    finally:
        spares.close()


def test_a_spare_started_in_another_environment_is_replaced(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A setting changed since the spare started (a driver's, say: its workers would start differently now)."""
    spares = Spares(LIMITS, LIMITS.sandboxed())
    spares.fill()
    try:
        old = spares._ready[0].workspace
        monkeypatch.setenv("NORMGRADE_SPARE_TEST", "changed")
        with spares.one() as workspace:
            assert workspace is not old
        assert not old.private.exists()
    finally:
        spares.close()


def test_without_a_ready_spare_a_cold_workspace_grades(folder: Path) -> None:
    spares = Spares(LIMITS, LIMITS.sandboxed(), count=0)
    with spares.one() as workspace:
        assert workers(workspace) == []
        assert output(folder, "Token", workspace)[1] == 1.0
    assert spares._ready == []


def test_a_grading_process_s_workspaces_are_frugal_the_keyboard_s_are_not() -> None:
    """A spare, or the cold workspace a pool hands out when none is ready, starts no worker of a kind beside the
    one at work (a class pays each start per student); a workspace of its own (grade submit) may."""
    for count in (1, 0):
        spares = Spares(LIMITS, LIMITS.sandboxed(), count=count, kinds=(False,))
        try:
            with spares.one() as workspace:
                assert workspace.frugal
        finally:
            spares.close()
    keyboard = Workspace(LIMITS, LIMITS.sandboxed())
    assert not keyboard.frugal
    keyboard.close()


def test_closing_the_pool_stops_the_waiting_spares() -> None:
    spares = Spares(LIMITS, LIMITS.sandboxed(), count=2)
    spares.fill()
    waiting = [s.workspace for s in spares._ready]
    children = [c for w in waiting for c in workers(w)]
    spares.close()
    spares.fill()  # a closed pool starts nothing
    assert spares._ready == [] and len(waiting) == 2
    assert all(child.proc.poll() is not None for child in children)
    assert not any(w.private.exists() for w in waiting)


def test_a_spare_starts_a_cpu_worker_and_with_two_slots_a_kernel_worker() -> None:
    assert spare_kinds(Limits(parallel=1)) == (False,)
    assert spare_kinds(Limits(parallel=2)) == (False, True)


def test_the_next_spare_starts_the_workers_the_last_submission_needed() -> None:
    """A class handing in a CPU exercise does not start a kernel worker (its driver, its compiler) each time."""
    limits = Limits(parallel=2)
    spares = Spares(limits, limits.sandboxed())
    spares.fill()
    try:
        first = spares._ready[0].workspace
        assert (len(first._started[False]), len(first._started[True])) == (1, 1)
        with spares.one(["activations.ReLU"]):
            pass
        after_cpu = spares._ready[0].workspace
        assert (len(after_cpu._started[False]), len(after_cpu._started[True])) == (1, 0)
        with spares.one(["activations.ReLU", "kernels.relu_forward"]):
            pass
        after_both = spares._ready[0].workspace
        assert (len(after_both._started[False]), len(after_both._started[True])) == (1, 1)
    finally:
        spares.close()


def _command_line(child: object, jobdir: Path) -> list[str]:
    """A worker's command line with what differs between any two workspaces blanked: the job folder's
    path, the numbers of its pipes and, as root, the sandbox's random uid."""
    argv = [str(a).replace(str(jobdir.parent), "<private>").replace(jobdir.name, "<job>") for a in child.proc.args]  # type: ignore[attr-defined]
    argv = [re.sub(r"^--re([ug])id=\d+$", r"--re\1id=<fresh>", a) for a in argv]
    return [("<fd>" if i and argv[i - 1].endswith("-fd") else a) for i, a in enumerate(argv)]


def test_a_spares_sandbox_is_a_cold_one(folder: Path) -> None:
    """The same bubblewrap command line (mounts, namespaces, environment) and limits.json as a cold
    workspace's, the same limits inside, and no network."""
    require_program("bwrap", "bubblewrap")
    limits = Limits(wall_s=10.0, memory_bytes=1 << 30, parallel=1, sandbox=True)
    spares = Spares(limits, limits.sandboxed())
    spares.fill()
    cold = Workspace(limits, True)
    cold.prestart(False)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = float(listener.getsockname()[1])
    try:
        spare = spares._ready[0].workspace
        assert _command_line(workers(spare)[0], spare.jobdir) == _command_line(workers(cold)[0], cold.jobdir)
        assert "--unshare-net" in workers(spare)[0].proc.args
        assert (spare.jobdir / "limits.json").read_text() == (cold.jobdir / "limits.json").read_text()
        with spares.one() as workspace:
            assert workspace is spare
            outcomes = run_cases(folder, [job("Limits"), job("Net", [port])], limits, workspace=workspace)
        inside = outcomes["toy.Limits"].results["case0"].outputs["y"]
        cold_inside = run_cases(folder, [job("Limits")], limits, workspace=cold)["toy.Limits"]
        np.testing.assert_array_equal(inside, cold_inside.results["case0"].outputs["y"])
        assert inside[0] == limits.memory_bytes and inside[3] == 0
        assert list(outcomes["toy.Net"].results["case0"].outputs["y"]) == [0.0]  # the host's port is unreachable
    finally:
        listener.close()
        cold.close()
        spares.close()
