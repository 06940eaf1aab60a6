"""Isolation of student code: each submission is the correct solution with one file changed.

The attacked exercise is ``activations.ReLU`` (its class is replaced at the end
of ``activations.py``); ``activations.Sigmoid`` (same file) and
``linear.Linear`` (another file) must still be graded normally.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from grader.course.grading import grade
from grader.student.engine.model import ExerciseResult, GradeReport
from grader.student.sandbox.runner import Limits
from grader.course.solution import write_solution

ATTACKED = "activations.ReLU"
WITNESSES = ["activations.Sigmoid", "linear.Linear"]
SELECTION = [ATTACKED] + WITNESSES
LIMITS = Limits(wall_s=3.0)


def submission(tmp_path: Path, replacement: str, file: str = "activations.py", append: bool = True) -> Path:
    """The correct solution with ``replacement`` appended to (or replacing) ``file``."""
    folder = write_solution(tmp_path / "exercises")
    code = textwrap.dedent(replacement)
    target = folder / file
    target.write_text(target.read_text() + "\n" + code if append else code)
    return folder


def replaced_relu(body: str, prelude: str = "") -> str:
    """Source that rebinds ReLU to a subclass whose forward is ``body`` (indented 8 spaces)."""
    return (
        prelude
        + "\n_CorrectReLU = ReLU\n\n\nclass ReLU(_CorrectReLU):\n    def forward(self, x):\n"
        + textwrap.indent(textwrap.dedent(body), " " * 8)
    )


def by_id(report: GradeReport) -> dict[str, ExerciseResult]:
    return {e.id: e for e in report.exercises}


def assert_witnesses_pass(report: GradeReport, witnesses: list[str] = WITNESSES) -> None:
    results = by_id(report)
    for exercise in witnesses:
        assert results[exercise].status == "passed", (exercise, results[exercise].message)
        assert results[exercise].score == results[exercise].max_score


def test_infinite_loop_is_a_timeout(tmp_path: Path) -> None:
    folder = submission(tmp_path, replaced_relu("while True:\n    pass\n"))
    report = grade(folder, SELECTION, "alice", LIMITS)
    relu = by_id(report)[ATTACKED]
    assert relu.status == "timeout"
    assert relu.score == 0
    assert relu.message.startswith("timed out after 3 s in ReLU.forward (activations.py, line ")
    assert relu.message.endswith(") (infinite loop?)")
    assert_witnesses_pass(report)


def test_segfault_is_an_error(tmp_path: Path) -> None:
    body = "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"
    report = grade(submission(tmp_path, replaced_relu(body)), SELECTION, "alice", LIMITS)
    relu = by_id(report)[ATTACKED]
    assert relu.status == "error"
    assert "signal 11 (segfault)" in relu.message
    assert_witnesses_pass(report)


def test_segfault_through_ctypes(tmp_path: Path) -> None:
    body = "import ctypes\nctypes.string_at(0)\n"
    report = grade(submission(tmp_path, replaced_relu(body)), SELECTION, "alice", LIMITS)
    assert by_id(report)[ATTACKED].status == "error"
    assert "segfault" in by_id(report)[ATTACKED].message
    assert_witnesses_pass(report)


def test_sys_exit_is_an_error(tmp_path: Path) -> None:
    report = grade(submission(tmp_path, replaced_relu("import sys\nsys.exit(3)\n")), SELECTION, "alice", LIMITS)
    relu = by_id(report)[ATTACKED]
    assert relu.status == "error"
    assert "sys.exit" in relu.message
    assert_witnesses_pass(report)


def test_os_exit_is_an_error(tmp_path: Path) -> None:
    report = grade(submission(tmp_path, replaced_relu("import os\nos._exit(3)\n")), SELECTION, "alice", LIMITS)
    relu = by_id(report)[ATTACKED]
    assert relu.status == "error"
    assert relu.message == (
        "the process exited with status 3 during activations.ReLU (sys.exit/os._exit in your code?)"
    )
    assert_witnesses_pass(report)


@pytest.mark.parametrize(
    "size, limits, shown",
    [
        # 800 MB under a 512 MiB address-space limit: refused only because the limit holds.
        (10**8, Limits(wall_s=3.0, memory_bytes=512 << 20), "512 MiB"),
        (10**11, LIMITS, "2 GiB"),  # 800 GB under the default limit
    ],
)
def test_memory_hog_is_an_error(tmp_path: Path, size: int, limits: Limits, shown: str) -> None:
    body = f"import numpy as np\nreturn np.ones({size})\n"
    report = grade(submission(tmp_path, replaced_relu(body)), SELECTION, "alice", limits)
    relu = by_id(report)[ATTACKED]
    assert relu.status == "error"
    assert f"ran out of memory (limit {shown})" in relu.message
    assert_witnesses_pass(report)


def test_ten_megabytes_of_output_are_cut(tmp_path: Path) -> None:
    body = (
        "if not getattr(ReLU, 'printed', False):\n"
        "    ReLU.printed = True\n"
        "    print('spam ' * 2_000_000)\n"
        "return super().forward(x)\n"
    )
    report = grade(submission(tmp_path, replaced_relu(body)), SELECTION, "alice", LIMITS)
    relu = by_id(report)[ATTACKED]
    assert relu.status == "passed", relu.message
    assert len(relu.output.encode()) < 64 * 1024 + 100
    assert relu.output.startswith("spam spam")
    assert relu.output.rstrip().endswith("more output cut]")
    assert_witnesses_pass(report)


PATCHES = """
import sys
import types

import numpy as np

np.allclose = lambda *a, **k: True
np.array_equal = lambda *a, **k: True
np.isclose = lambda a, b, *r, **k: np.ones(np.shape(a), dtype=bool)
np.testing.assert_allclose = lambda *a, **k: None
np.testing.assert_array_equal = lambda *a, **k: None
fake = types.ModuleType("grader.student.engine.compare")
fake.compare = lambda *a, **k: types.SimpleNamespace(ok=True, message="")
fake.same_as = lambda *a, **k: True
sys.modules["grader.student.engine.compare"] = fake
for name in ("grader.student.engine.checks.context", "grader.student.engine.checks.kinds", "grader.student.engine.ops"):
    module = sys.modules.get(name)
    if module is not None:
        module.compare = fake.compare
        module.same_as = fake.same_as
"""


def test_patching_numpy_or_the_grader_does_not_turn_a_wrong_answer_into_a_pass(tmp_path: Path) -> None:
    folder = submission(tmp_path, replaced_relu("return 2 * x + 1\n", prelude=PATCHES))
    report = grade(folder, SELECTION, "alice", LIMITS)
    relu = by_id(report)[ATTACKED]
    assert relu.status == "failed"
    assert relu.score < relu.max_score
    assert not np.allclose(1.0, 2.0)  # our own NumPy is untouched
    assert_witnesses_pass(report)


@pytest.mark.parametrize(
    "line",
    [
        "import reference",
        "from reference.normalization import *",
        "__import__('reference')",
        "import grader.student.engine.compare",
    ],
)
def test_importing_the_reference_scores_zero_for_that_file(tmp_path: Path, line: str) -> None:
    folder = submission(tmp_path, line + "\n")
    report = grade(folder, SELECTION, "alice", LIMITS)
    results = by_id(report)
    for exercise in ("activations.ReLU", "activations.Sigmoid"):
        assert results[exercise].status == "error"
        assert results[exercise].score == 0
        assert "activations.py line" in results[exercise].message
        assert "scores zero" in results[exercise].message
    assert_witnesses_pass(report, ["linear.Linear"])


def test_importing_the_reference_in_a_shared_file_scores_zero_for_its_importers(tmp_path: Path) -> None:
    folder = submission(tmp_path, "import reference\n", file="base.py")
    report = grade(folder, SELECTION + ["init.kaiming_normal"], "alice", LIMITS)
    results = by_id(report)
    for exercise in SELECTION:  # activations.py and linear.py both import .base
        assert results[exercise].status == "error"
        assert results[exercise].score == 0
        assert results[exercise].message.startswith(f"{exercise.split('.')[0]}.py imports base.py, and base.py line")
    assert_witnesses_pass(report, ["init.kaiming_normal"])  # init.py does not import base.py


def test_importing_the_reference_at_run_time_scores_zero(tmp_path: Path) -> None:
    body = "import importlib\nimportlib.import_module('refer' + 'ence')\nreturn super().forward(x)\n"
    report = grade(submission(tmp_path, replaced_relu(body)), SELECTION, "alice", LIMITS)
    relu = by_id(report)[ATTACKED]
    assert relu.status == "error"
    assert relu.score == 0
    assert "importing 'reference' from a submission is not allowed" in relu.message
    assert_witnesses_pass(report)


REFERENCE_FILE = Path(__file__).resolve().parent.parent / "reference" / "activations.py"


@pytest.mark.parametrize(
    "body",
    [
        # read the reference's source and run it under another name
        f"src = open({str(REFERENCE_FILE)!r}).read()\nreturn super().forward(x)\n",
        # load the reference package by path, around the import guard
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('refpkg', {str(REFERENCE_FILE.parent / '__init__.py')!r},"
        f" submodule_search_locations=[{str(REFERENCE_FILE.parent)!r}])\n"
        "module = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\n"
        "return module.activations.ReLU().forward(x)\n",
        # a symbolic link to it, then read the link
        f"import os, tempfile\nlink = os.path.join(tempfile.mkdtemp(), 'a.py')\nos.symlink({str(REFERENCE_FILE)!r}, link)\n"
        "open(link).read()\nreturn super().forward(x)\n",
    ],
    ids=["open", "spec_from_file_location", "symlink"],
)
def test_reading_the_reference_by_path_scores_zero(tmp_path: Path, body: str) -> None:
    """In the sandbox the reference is not there at all; without it the file guard refuses."""
    report = grade(submission(tmp_path, replaced_relu(body)), SELECTION, "alice", LIMITS)
    relu = by_id(report)[ATTACKED]
    assert relu.score == 0
    if report.sandboxed:
        assert relu.status == "failed"
        assert all(
            "No such file or directory" in c.message or "FileNotFoundError" in c.message
            for c in relu.checks
            if not c.passed
        )
    else:
        assert relu.status == "error"
        assert "reading the grader's files from a submission is not allowed" in relu.message
    assert_witnesses_pass(report)


def test_starting_a_program_scores_zero(tmp_path: Path) -> None:
    body = f"import subprocess\nsubprocess.run(['cat', {str(REFERENCE_FILE)!r}])\nreturn super().forward(x)\n"
    report = grade(submission(tmp_path, replaced_relu(body)), SELECTION, "alice", LIMITS)
    relu = by_id(report)[ATTACKED]
    assert relu.status == "error"
    assert relu.score == 0
    assert "starting another program from a submission is not allowed" in relu.message
    assert_witnesses_pass(report)


def test_loading_a_c_library_scores_zero(tmp_path: Path) -> None:
    body = "import ctypes\nlibc = ctypes.CDLL('libc.so.6')\nreturn super().forward(x)\n"
    report = grade(submission(tmp_path, replaced_relu(body)), SELECTION, "alice", LIMITS)
    relu = by_id(report)[ATTACKED]
    assert relu.status == "error" and relu.score == 0
    assert "loading a C library with ctypes from a submission is not allowed" in relu.message
    assert_witnesses_pass(report)


def test_syntax_error_is_reported_with_its_line(tmp_path: Path) -> None:
    folder = submission(tmp_path, "import numpy as np\n\n\ndef broken(:\n    pass\n", append=False)
    report = grade(folder, SELECTION, "alice", LIMITS)
    results = by_id(report)
    for exercise in ("activations.ReLU", "activations.Sigmoid"):
        assert results[exercise].status == "error"
        assert results[exercise].message == "activations.py line 4: invalid syntax"
    assert_witnesses_pass(report, ["linear.Linear"])


def test_list_of_strings_is_an_error(tmp_path: Path) -> None:
    report = grade(submission(tmp_path, replaced_relu("return ['a', 'b']\n")), SELECTION, "alice", LIMITS)
    relu = by_id(report)[ATTACKED]
    assert relu.status == "error"
    assert relu.score == 0
    assert "forward returned a list of str" in relu.message
    assert_witnesses_pass(report)
