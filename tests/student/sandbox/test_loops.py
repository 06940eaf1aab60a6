"""One loop costs once: a timeout says where the student's code was, and a later job stuck
in the same function is stopped at once (grader/student/sandbox/stacks.py, runner.py wait_done)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grader.student.engine.ops import Case
from grader.student.sandbox.runner import Job, Limits, job_order, run_cases
from grader.student.sandbox.stacks import enclosing_function, locate, student_frame

LOOPS = """
def spin_forever():
    n = 0
    while True:
        n += 1


def spin_elsewhere():
    while True:
        pass


class A:
    def forward(self, x):
        return spin_forever()


class B:
    def forward(self, x):
        return spin_forever()


class C:
    def forward(self, x):
        return spin_elsewhere()


class Fine:
    def forward(self, x):
        return 2 * x
"""

USES_LOOPS = """
from .loops import spin_forever


class D:
    def forward(self, x):
        return spin_forever()


class E:
    def forward(self, x):
        return 3 * x
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "student"
    root.mkdir()
    (root / "loops.py").write_text(textwrap.dedent(LOOPS))
    (root / "uses.py").write_text(textwrap.dedent(USES_LOOPS))
    return root


def job(cls: str, timeout: float = 60.0) -> Job:
    """A job whose one case builds ``<cls>`` (module.Class) and calls its forward."""
    script: list[dict[str, Any]] = [
        {"op": "new", "var": "m", "cls": cls},
        {"op": "call", "var": "m", "method": "forward", "args": [{"array": "x"}], "out": "y"},
    ]
    return Job(cls, [Case("case0", script, {"x": np.arange(3.0)})], timeout)


@pytest.mark.parametrize("sandbox", [None, False], ids=["sandbox-where-it-works", "no-sandbox"])
def test_a_timeout_says_where_the_code_was(folder: Path, sandbox: bool | None) -> None:
    outcome = run_cases(folder, [job("loops.A")], Limits(wall_s=3.0, sandbox=sandbox))["loops.A"]
    assert outcome.status == "timeout"
    assert outcome.message.startswith("timed out after 3 s in spin_forever (loops.py, line ")
    assert outcome.message.endswith("(infinite loop?)")


def test_running_out_of_cpu_time_says_where_the_code_was(folder: Path) -> None:
    outcome = run_cases(folder, [job("loops.C")], Limits(wall_s=60.0, cpu_s=1.0))["loops.C"]
    assert outcome.status == "timeout"
    assert "1 s of CPU time in spin_elsewhere (loops.py, line " in outcome.message


@pytest.mark.parametrize("sandbox", [None, False], ids=["sandbox-where-it-works", "no-sandbox"])
def test_a_later_job_stuck_in_the_same_function_is_stopped_at_once(folder: Path, sandbox: bool | None) -> None:
    jobs = [job("loops.A"), job("loops.B"), job("loops.Fine")]
    outcomes = run_cases(folder, jobs, Limits(wall_s=5.0, parallel=1, sandbox=sandbox))
    assert outcomes["loops.A"].message.startswith("timed out after 5 s in spin_forever")
    b = outcomes["loops.B"]
    assert b.status == "timeout"
    assert b.message.startswith("stopped after ")
    assert "still in spin_forever (loops.py, line " in b.message
    assert b.message.endswith("where loops.A ran out of time")
    assert outcomes["loops.Fine"].status == "ok"


def test_a_loop_somewhere_else_gets_its_own_full_time(folder: Path) -> None:
    outcomes = run_cases(folder, [job("loops.A"), job("loops.C")], Limits(wall_s=3.0, parallel=1))
    assert outcomes["loops.C"].message.startswith("timed out after 3 s in spin_elsewhere (loops.py, line ")


def test_a_job_waits_while_a_job_of_a_file_it_imports_runs(folder: Path) -> None:
    # Two slots: uses.D would start beside loops.A, but uses.py imports loops.py, so it waits for
    # loops.A to end; loops.A runs out of time in spin_forever, and D, found there, is stopped at once.
    outcomes = run_cases(folder, [job("loops.A", 3.0), job("uses.D", 3.0)], Limits(wall_s=3.0, parallel=2))
    assert outcomes["loops.A"].message.startswith("timed out after 3 s in spin_forever")
    assert outcomes["uses.D"].message.startswith("stopped after ")
    assert outcomes["uses.D"].message.endswith("where loops.A ran out of time")


DUMP = """Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait

Current thread 0x00007f0000000002 (most recent call first):
  File "/job/submission/activations.py", line 13 in forward
  File "/job/submission/helpers/util.py", line 4 in helper
  File "/opt/normgrade/grader/student/engine/ops.py", line 200 in _run_op
"""

SOURCE = b"""
import numpy as np


class Sigmoid:
    def forward(self, x):
        return x


class Tanh:
    @staticmethod
    def forward(x):
        while True:
            pass
"""


def test_student_frame_is_the_innermost_frame_in_the_submission() -> None:
    assert student_frame(DUMP, "/job/submission") == ("activations.py", 13)
    assert student_frame(DUMP, "/elsewhere") is None
    assert student_frame("garbage\n\x1b[2J", "/job/submission") is None


def test_enclosing_function_names_the_class_and_method() -> None:
    assert enclosing_function(SOURCE, 13) == "Tanh.forward"
    assert enclosing_function(SOURCE, 7) == "Sigmoid.forward"
    assert enclosing_function(SOURCE, 11) == "Tanh.forward"  # the decorator line
    assert enclosing_function(SOURCE, 2) == "<module>"
    assert enclosing_function(b"def broken(:\n", 1) == "<module>"


def test_locate_needs_a_file_of_the_submission() -> None:
    place = locate(DUMP, "/job/submission", {"activations.py": SOURCE})
    assert place is not None and place.describe() == "Tanh.forward (activations.py, line 13)"
    assert place.key == ("activations.py", "Tanh.forward")
    assert locate(DUMP, "/job/submission", {}) is None


def test_a_bug_in_one_slot_stops_the_slot_waiting_for_its_job(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # uses.E waits while loops.Fine runs; a grader bug while collecting loops.Fine must end the run
    # with that bug, not leave the other slot waiting for a job nobody will finish.
    import threading

    from grader.student.sandbox import runner as sandbox

    collect = sandbox._Run.collect

    def broken(self, child, i, *args):
        if self.jobs[i].id == "loops.Fine":
            raise RuntimeError("a bug in the grader")
        return collect(self, child, i, *args)

    monkeypatch.setattr(sandbox._Run, "collect", broken)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            run_cases(folder, [job("loops.Fine"), job("uses.E")], Limits(wall_s=20.0, parallel=2))
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(120)  # a bound for a hang, not a timing assertion: the run takes about a second
    assert not thread.is_alive(), "run_cases hung"
    assert [str(e) for e in raised] == ["a bug in the grader"]


def test_with_two_slots_the_longest_job_starts_early_behind_what_it_waits_for() -> None:
    """fit_function (60 s allowed, ~0.5 s of work) used to run last and end the run alone; it now starts as
    soon as the activations it imports are done (a loop there is found first and stops it at once), the
    files it waits for ranked by the longest job they hold up. Kernel jobs still come first."""
    jobs = [
        job("other.F", 10.0),
        job("uses.D", 60.0),
        job("loops.A", 10.0),
        job("kernels.k", 30.0),
        job("other.G", 10.0),
        job("loops.B", 10.0),
    ]
    jobs[3] = Job("kernels.k", jobs[3].cases, 30.0, True)
    after = {0: set(), 1: {2, 5}, 2: set(), 3: set(), 4: set(), 5: set()}
    ids = lambda order: [jobs[i].id for i in order]  # noqa: E731
    assert ids(job_order(jobs, after, 2)) == ["kernels.k", "loops.A", "loops.B", "uses.D", "other.F", "other.G"]
    # One slot: the least time allowed first, so a loop costs a short job's time, not fit_function's.
    assert ids(job_order(jobs, after, 1)) == ["kernels.k", "other.F", "loops.A", "other.G", "loops.B", "uses.D"]


def test_a_slot_whose_kind_ran_out_ends_while_the_other_slot_serves_the_other_kind() -> None:
    """One worker of each kind per submission in a frugal workspace (a grading process's spares, issue 47): once
    its kernel jobs are done, the kernel slot does not start a CPU worker for the CPU jobs left while the CPU
    slot, its worker started and the package loaded, is still at work; that slot runs them all, and takes any
    kind once no other slot serves it. At the keyboard the kernel slot takes CPU jobs beside it."""
    from types import SimpleNamespace

    from grader.student.sandbox.runner import _Run

    jobs = [job("other.F", 10.0), job("other.G", 10.0), job("other.H", 10.0), Job("kernels.k", [], 30.0, True)]
    run = _Run(jobs, Limits(parallel=2), SimpleNamespace(sandboxed=False, frugal=True))  # type: ignore[arg-type]
    taken = lambda kind: None if (i := run.take(kind)) is None else jobs[i].id  # noqa: E731
    assert taken(None) == "kernels.k"  # the first slot: kernel jobs first
    assert taken(None) == "other.F"  # the second slot: the kind nobody serves yet
    run.fail(3, "error", "done")
    assert taken(True) is None  # the kernel slot ends: no second CPU worker
    assert taken(False) == "other.G"
    assert taken(False) == "other.H"
    assert taken(False) is None
    # A slot whose kind ran out while no other slot serves the other kind still switches to it.
    run = _Run(jobs, Limits(parallel=2), SimpleNamespace(sandboxed=False, frugal=True))  # type: ignore[arg-type]
    assert taken(None) == "kernels.k"  # (the second slot has not started yet)
    run.fail(3, "error", "done")
    assert taken(True) == "other.F"
    # At the keyboard (not frugal) the kernel slot starts a CPU worker for the CPU jobs left.
    run = _Run(jobs, Limits(parallel=2), SimpleNamespace(sandboxed=False, frugal=False))  # type: ignore[arg-type]
    assert taken(None) == "kernels.k" and taken(None) == "other.F"
    run.fail(3, "error", "done")
    assert taken(True) == "other.G"
