"""Nothing carries from one submission to the next: a submission that sets globals, monkeypatches NumPy, sets an
environment variable and leaves files wherever it can write is graded, then a correct submission graded after
it, by the same long-lived process (as a `grade worker` or `grade batch` process grades one upload after
another), gets full marks and sees none of it: its ReLU looks for every trace and raises on the first it finds.

A control shows the look would see them: the same two pieces of code run one after the other in one plain
process (no sandbox, no fresh process) make the look raise.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.course.grading import grade
from grader.course.solution import write_solution
from grader.student.sandbox.runner import Limits

SELECTION = ["activations.ReLU", "activations.Sigmoid", "linear.Linear"]
LIMITS = Limits(wall_s=10.0)

# Every trace one student's code can try to leave for the next one's (run at import, before any case).
LEAVE = """
import builtins as _b, os as _os, sys as _sys, tempfile as _t
import numpy as _np
_b.CARRIED = "builtins"
_np.CARRIED = "numpy"
_np.maximum = lambda a, b, *r, **k: _np.full(_np.shape(a), 123.0)
_np.exp = lambda a, *r, **k: _np.zeros(_np.shape(a))
_sys.modules["carried_module"] = _sys
_os.environ["CARRIED"] = "environment"
for _folder in (_t.gettempdir(), "/tmp", "/dev/shm", _os.getcwd(), _os.path.expanduser("~"),
                _os.path.dirname(__file__)):
    try:
        with open(_os.path.join(_folder, "carried.txt"), "w") as _fh:
            _fh.write("left behind")
    except OSError:
        pass
"""

# What the correct submission's ReLU checks first (each case): any trace of LEAVE raises.
LOOK = """
import builtins as _b, os as _os, sys as _sys, tempfile as _t
import numpy as _np


def _look_for_traces():
    found = []
    if hasattr(_b, "CARRIED"):
        found.append("a builtin")
    if hasattr(_np, "CARRIED"):
        found.append("an attribute of numpy")
    if float(_np.maximum(-1.0, 0.0)) != 0.0 or float(_np.exp(0.0)) != 1.0:
        found.append("numpy patched")
    if "carried_module" in _sys.modules:
        found.append("a module")
    if "CARRIED" in _os.environ:
        found.append("an environment variable")
    for folder in (_t.gettempdir(), "/tmp", "/dev/shm", _os.getcwd(), _os.path.expanduser("~"),
                   _os.path.dirname(__file__)):
        if _os.path.exists(_os.path.join(folder, "carried.txt")):
            found.append(f"a file in {folder}")
    if found:
        raise RuntimeError("carried over: " + ", ".join(found))
"""

LOOKING_RELU = """
_CorrectReLU = ReLU


class ReLU(_CorrectReLU):
    def forward(self, x):
        _look_for_traces()
        return super().forward(x)
"""


def folder_with(root: Path, name: str, extra: str) -> Path:
    """The correct solution with ``extra`` appended to activations.py."""
    folder = write_solution(root / name)
    target = folder / "activations.py"
    target.write_text(target.read_text() + "\n" + textwrap.dedent(extra))
    return folder


def test_the_look_sees_every_trace_when_both_run_in_one_plain_process() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            LEAVE.replace("__file__", "'/tmp/x.py'")
            + LOOK.replace("__file__", "'/tmp/x.py'")
            + "\n_look_for_traces()\n",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd="/tmp",
    )
    assert done.returncode != 0
    for trace in (
        "a builtin",
        "an attribute of numpy",
        "numpy patched",
        "a module",
        "an environment variable",
        "a file in /tmp",
    ):
        assert trace in done.stderr
    Path("/tmp/carried.txt").unlink(missing_ok=True)


@pytest.mark.slow
def test_a_correct_submission_after_one_that_leaves_traces_gets_full_marks_and_sees_none(tmp_path: Path) -> None:
    leaving = folder_with(tmp_path, "leaving", LEAVE)
    looking = folder_with(tmp_path, "looking", LOOK + LOOKING_RELU)
    first = grade(leaving, SELECTION, "mallory", LIMITS)
    assert first.exercises  # it was graded (whatever its score)
    second = grade(looking, SELECTION, "alice", LIMITS)
    for result in second.exercises:
        assert result.status == "passed", (result.id, result.message)
        assert result.score == result.max_score
    assert not (Path("/tmp") / "carried.txt").exists()
    assert not (leaving / "carried.txt").exists()  # the student's folder is read, never written


@pytest.mark.slow
def test_through_the_spares_of_a_grading_process_nothing_carries_either(tmp_path: Path) -> None:
    """The same two submissions one after the other in a grading process's spares (grade worker, grade batch):
    each spare serves one submission; the next one, started while the first was graded, sees none of it."""
    from grader.student.sandbox.spares import Spares

    leaving = folder_with(tmp_path, "leaving", LEAVE)
    looking = folder_with(tmp_path, "looking", LOOK + LOOKING_RELU)
    spares = Spares(LIMITS, LIMITS.sandboxed())
    spares.fill()
    try:
        with spares.one(SELECTION) as workspace:
            first = grade(leaving, SELECTION, "mallory", LIMITS, workspace)
        assert first.exercises
        with spares.one(SELECTION) as workspace:
            second = grade(looking, SELECTION, "alice", LIMITS, workspace)
    finally:
        spares.close()
    for result in second.exercises:
        assert result.status == "passed", (result.id, result.message)
        assert result.score == result.max_score
    assert not (Path("/tmp") / "carried.txt").exists()
