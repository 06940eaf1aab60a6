"""grader.course.grading.grade: the whole pipeline on the correct solution, the stubs, and bad folders."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from grader.student.engine.catalogue import EXERCISES
from grader.student.errors import SetupError, UsageError
from grader.course.grading import files_hash, grade
from grader.student.engine.grading import _status
from grader.student.engine.model import CheckResult
from grader.student.engine.ops import Case, ScriptResult
from grader.student.sandbox.runner import Limits
from grader.course.solution import EXERCISE_KERNELS, write_solution

ROOT = Path(__file__).resolve().parents[3]

REPO = Path(__file__).resolve().parents[3]
STUBS = REPO / "exercises"


@pytest.fixture(scope="module")
def solution(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_solution(tmp_path_factory.mktemp("solution") / "exercises")


def test_solution_layout(solution: Path) -> None:
    assert (solution / "base.py").read_text() == (STUBS / "base.py").read_text()
    for stub in STUBS.glob("*.py"):
        assert (solution / stub.name).is_file(), stub.name
    assert sorted(p.name for p in (solution / "kernels").glob("*.cl")) == sorted(EXERCISE_KERNELS)
    assert sorted(p.name for p in (STUBS / "kernels").glob("*.cl")) == sorted(EXERCISE_KERNELS)


CPU_EXERCISES = [e for e in EXERCISES if not e.startswith("kernels.")]
KERNEL_EXERCISES = [e for e in EXERCISES if e.startswith("kernels.")]


@pytest.fixture
def pocl_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernel children create OpenCL contexts: give PoCL a shared build cache."""
    monkeypatch.setenv("POCL_CACHE_DIR", os.environ.get("POCL_CACHE_DIR", "/tmp/pocl-cache"))


def assert_full_marks_twice(folder: Path, selectors: list[str]) -> None:
    first = grade(folder, selectors, "alice")
    assert [e.id for e in first.exercises] == selectors
    failures = {
        e.id: (e.status, e.message, [c.message for c in e.checks if not c.passed])
        for e in first.exercises
        if e.status != "passed"
    }
    assert failures == {}
    assert all(e.score == e.max_score for e in first.exercises)
    assert first.full_marks
    second = grade(folder, selectors, "alice")
    assert json.dumps(second.to_json(), sort_keys=True) == json.dumps(first.to_json(), sort_keys=True)
    assert second.files_hash == first.files_hash


def test_complete_correct_submission_gets_full_marks_twice(solution: Path) -> None:
    assert_full_marks_twice(solution, CPU_EXERCISES)


@pytest.mark.opencl
def test_correct_kernels_get_full_marks_twice(solution: Path, pocl_cache: None) -> None:
    assert_full_marks_twice(solution, KERNEL_EXERCISES)


def test_untouched_stubs_are_not_implemented_everywhere() -> None:
    report = grade(STUBS, CPU_EXERCISES, "alice")
    assert {e.id: (e.status, e.message) for e in report.exercises if e.status != "not_implemented"} == {}
    assert not report.full_marks


@pytest.mark.opencl
def test_untouched_kernel_stubs_are_not_implemented(pocl_cache: None) -> None:
    report = grade(STUBS, ["kernels"], "alice")
    assert [e.id for e in report.exercises] == KERNEL_EXERCISES
    assert {e.id: (e.status, e.message) for e in report.exercises if e.status != "not_implemented"} == {}


def test_one_topic_and_one_exercise(solution: Path) -> None:
    report = grade(solution, ["linear"], "bob")
    assert [e.id for e in report.exercises] == ["linear.Linear"]
    assert report.exercises[0].status == "passed"
    assert report.student == "bob"


def test_unknown_selector_is_a_usage_error(solution: Path) -> None:
    with pytest.raises(UsageError, match="Did you mean 'normalization.BatchNorm1d'"):
        grade(solution, ["BatchNorm1"], "alice")


def test_missing_folder_is_a_setup_error(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match="does not exist: pass --path"):
        grade(tmp_path / "nowhere", None, "alice")


def test_file_instead_of_folder_is_a_setup_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(SetupError, match="is not a folder"):
        grade(tmp_path / "notes.txt", None, "alice")


def test_folder_without_exercise_files_is_a_setup_error(tmp_path: Path) -> None:
    (tmp_path / "readme.md").write_text("nothing here")
    with pytest.raises(SetupError, match="has no exercise files"):
        grade(tmp_path, None, "alice")


def test_missing_topic_file_is_an_error_for_its_exercises_only(tmp_path: Path) -> None:
    folder = write_solution(tmp_path / "exercises")
    (folder / "linear.py").unlink()
    report = grade(folder, ["linear", "activations.ReLU"], "alice", Limits(wall_s=5.0))
    results = {e.id: e for e in report.exercises}
    assert results["linear.Linear"].status == "error"
    assert results["linear.Linear"].message.startswith("linear.py is missing from")
    assert results["activations.ReLU"].status == "passed"


def test_partly_working_exercise_is_failed_not_not_implemented(tmp_path: Path) -> None:
    folder = write_solution(tmp_path / "exercises")
    source = (folder / "activations.py").read_text()
    source += (
        "\n\n_CorrectReLU = ReLU\n\n\nclass ReLU(_CorrectReLU):\n"
        "    def backward(self, dout):\n        raise NotImplementedError('ReLU.backward')\n"
    )
    (folder / "activations.py").write_text(source)
    relu = grade(folder, ["activations.ReLU"], "alice", Limits(wall_s=5.0)).exercises[0]
    assert relu.status == "failed"
    assert 0 < relu.score < relu.max_score


@pytest.mark.parametrize(
    "fault, says",
    [
        ("no-device", "no OpenCL device is installed"),
        ("unknown-cpu", "unknown target CPU 'generic'"),  # PoCL's LLVM older than the CPU (a Zen 5)
    ],
)
def test_a_machine_without_a_working_device_grades_kernels_not_graded(
    solution: Path, monkeypatch: pytest.MonkeyPatch, fault: str, says: str
) -> None:
    """The grader's fault is never the student's zero: not_graded, no score, the rest graded, exit status 2."""
    monkeypatch.setenv("GRADE_OPENCL_FAULT", fault)
    report = grade(solution, ["kernels.relu_forward", "activations.ReLU"], "alice", Limits(wall_s=10.0))
    results = {e.id: e for e in report.exercises}
    kernel = results["kernels.relu_forward"]
    assert kernel.status == "not_graded" and not kernel.graded
    assert says in kernel.message and "grade doctor" in kernel.message
    assert results["activations.ReLU"].status == "passed"
    assert (report.score, report.max_score, report.exit_status) == (10.0, 10.0, 2)
    document = report.to_json()
    shown = {e["id"]: e for e in document["exercises"]}["kernels.relu_forward"]
    assert shown["score"] is None and shown["status"] == "not_graded" and says in shown["message"]


def test_untouched_kernel_stubs_are_not_implemented_without_a_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stub's empty body is read, not built: NOT_IMPLEMENTED even where no device builds anything."""
    folder = write_solution(tmp_path / "exercises")
    for stub in (ROOT / "exercises" / "kernels").glob("*.cl"):
        (folder / "kernels" / stub.name).write_text(stub.read_text())
    monkeypatch.setenv("GRADE_OPENCL_FAULT", "unknown-cpu")
    report = grade(folder, ["kernels"], "alice", Limits(wall_s=10.0))
    assert {e.status for e in report.exercises} == {"not_implemented"}
    assert report.exit_status == 1


def test_duration_and_output_are_recorded(tmp_path: Path) -> None:
    folder = write_solution(tmp_path / "exercises")
    source = (folder / "linear.py").read_text()
    (folder / "linear.py").write_text(source + "\nprint('linear.py was imported')\n")
    linear = grade(folder, ["linear.Linear"], "alice", Limits(wall_s=5.0)).exercises[0]
    assert linear.status == "passed"
    assert linear.duration > 0
    assert linear.output == "linear.py was imported\n"


# --- files_hash ---------------------------------------------------------------------


def test_files_hash_follows_contents_and_names(tmp_path: Path) -> None:
    a = write_solution(tmp_path / "a")
    b = write_solution(tmp_path / "b")
    assert files_hash(a) == files_hash(b)
    (b / "__pycache__").mkdir()
    (b / "__pycache__" / "linear.cpython-311.pyc").write_bytes(b"\0junk")
    (b / "notes.txt").write_text("not a submitted file")
    assert files_hash(a) == files_hash(b)
    (b / "linear.py").write_text((b / "linear.py").read_text() + "\n")
    assert files_hash(a) != files_hash(b)
    shutil.copyfile(a / "linear.py", b / "linear.py")
    assert files_hash(a) == files_hash(b)
    (b / "kernels" / "rmsnorm.cl").write_text("// changed\n")
    assert files_hash(a) != files_hash(b)


# --- status rules -----------------------------------------------------------------


def _case(name: str, calls: bool) -> Case:
    script: list[dict[str, Any]] = [{"op": "new", "var": "m", "cls": "t.M"}]
    if calls:
        script.append({"op": "call", "var": "m", "method": "forward", "args": [], "out": "y"})
    return Case(name, script, {})


NIE = {"type": "NotImplementedError", "message": "t.M.forward", "traceback": ""}


def _check(score: float, max_score: float = 5.0) -> CheckResult:
    return CheckResult("c", score >= max_score, score, max_score)


def test_status_not_implemented_when_only_the_stub_constructor_scores() -> None:
    cases = [_case("ctor", calls=False), _case("fwd", calls=True)]
    results = {"ctor": ScriptResult(), "fwd": ScriptResult(error=NIE)}
    assert _status([_check(1.0), _check(0.0)], cases, results, 10.0, None) == "not_implemented"


def test_status_failed_when_partly_working() -> None:
    cases = [_case("fwd", calls=True), _case("bwd", calls=True)]
    results = {"fwd": ScriptResult(), "bwd": ScriptResult(error=NIE)}
    assert _status([_check(5.0), _check(0.0)], cases, results, 10.0, None) == "failed"


def test_status_error_passed_failed() -> None:
    cases = [_case("fwd", calls=True)]
    clean = {"fwd": ScriptResult()}
    assert _status([_check(5.0), _check(5.0)], cases, clean, 10.0, None) == "passed"
    assert _status([_check(5.0), _check(0.0)], cases, clean, 10.0, None) == "failed"
    assert _status([_check(5.0), _check(5.0)], cases, clean, 10.0, "out of memory") == "error"


def test_heavy_printing_is_reported_as_output_limit_reached() -> None:
    """A timeout whose captured output filled the limit is the prints' doing, not an endless loop."""
    from grader.student.engine.checks import CHECKS
    from grader.course.grading import LiveExpected
    from grader.student.engine.grading import _exercise_result
    from grader.student.sandbox.runner import JobOutcome

    limits = Limits()
    definition = CHECKS["activations.ReLU"]
    printed = ("debug value 42\n" * (limits.output_bytes // 15 + 1))[: limits.output_bytes]
    outcome = JobOutcome("activations.ReLU", "timeout", {}, "timed out after 10 s (infinite loop?)", printed, 10.0)
    result = _exercise_result(
        "activations.ReLU", 1, definition, [], outcome, LiveExpected("activations.ReLU", {}), limits
    )
    assert result.status == "timeout"
    assert result.message.startswith("output limit reached: your code printed more than")
    assert "infinite loop" not in result.message and "timed out after 10 s" in result.message
    quiet = JobOutcome("activations.ReLU", "timeout", {}, "timed out after 10 s (infinite loop?)", "step 1\n", 10.0)
    assert (
        _exercise_result(
            "activations.ReLU", 1, definition, [], quiet, LiveExpected("activations.ReLU", {}), limits
        ).message
        == "timed out after 10 s (infinite loop?)"
    )


def test_knock_on_failures_name_the_exercise_to_fix_first() -> None:
    from grader.student.engine.grading import _with_knock_on_note
    from grader.student.engine.model import ExerciseResult

    deps = {
        "blocks.py": {"linear.py", "normalization.py", "activations.py", "dropout.py", "base.py"},
        "approximation.py": {"linear.py", "optim.py", "activations.py", "base.py"},
    }
    graded = [
        ExerciseResult("dropout.Dropout", "failed", 6.5, 10.0),
        ExerciseResult("normalization.LayerNorm", "failed", 5.0, 10.0),  # imported file, not used by the block
        ExerciseResult("linear.Linear", "passed", 10.0, 10.0),
        ExerciseResult("optim.AdamW", "timeout", 0.0, 10.0),
        ExerciseResult("blocks.MLPBlock", "failed", 4.0, 10.0, message="case x: it broke"),
        ExerciseResult("blocks.fold_batchnorm", "failed", 8.0, 10.0),
        ExerciseResult("approximation.fit_function", "timeout", 0.0, 10.0),
        ExerciseResult("activations.GELU", "not_implemented", 0.0, 10.0),
    ]
    by_id = {ex.id: _with_knock_on_note(ex, graded, deps) for ex in graded}
    assert by_id["blocks.MLPBlock"].message == (
        "blocks.MLPBlock uses your dropout.Dropout, which fails its own checks: fix that first.\n"
        "blocks.MLPBlock uses your activations.GELU, which is not implemented yet: implement that first.\n"
        "case x: it broke"
    )
    assert by_id["blocks.fold_batchnorm"].message == ""  # neither Linear nor BatchNorm1d falls short
    assert by_id["approximation.fit_function"].message == (
        "approximation.fit_function imports your optim.py, where optim.AdamW times out: fix that first.\n"
        "approximation.fit_function imports your activations.py, where activations.GELU is not implemented yet:"
        " implement that first."
    )
    assert by_id["dropout.Dropout"].message == "" and by_id["linear.Linear"] is graded[2]


def test_knock_on_note_end_to_end(tmp_path: Path) -> None:
    """A Dropout that keeps dropping in eval fails its own checks; MLPBlock, built on it, says to fix it first."""
    folder = write_solution(tmp_path / "exercises")
    (folder / "dropout.py").write_text(
        (folder / "dropout.py").read_text()
        + """

class Dropout(Dropout):
    def forward(self, x):
        self.mask = (self.rng.random(x.shape) >= self.p) / (1 - self.p) if self.p < 1 else np.zeros(x.shape)
        return x * self.mask

    def backward(self, dout):
        return dout * self.mask
"""
    )
    report = grade(folder, ["dropout.Dropout", "blocks.MLPBlock", "linear.Linear"], "kim")
    by_id = {e.id: e for e in report.exercises}
    assert by_id["dropout.Dropout"].status == "failed"
    assert by_id["blocks.MLPBlock"].status == "failed"
    assert by_id["blocks.MLPBlock"].message.startswith(
        "blocks.MLPBlock uses your dropout.Dropout, which fails its own checks: fix that first."
    )
    assert by_id["linear.Linear"].status == "passed" and by_id["linear.Linear"].message == ""


def test_a_package_beyond_numpy_and_the_standard_library_is_refused_also_when_imported_by_a_computed_name(
    tmp_path: Path,
) -> None:
    """The static scan cannot see ``import_module("sci" + "py")``: the worker's import guard refuses it, one line."""
    folder = write_solution(tmp_path / "sol")
    source = (folder / "activations.py").read_text()
    line = "        self.x = np.array(x, dtype=np.float64)\n        return np.maximum(self.x, 0.0)\n"
    assert line in source
    (folder / "activations.py").write_text(
        source.replace(line, '        __import__("importlib").import_module("sci" + "py")\n' + line, 1)
    )
    ex = grade(folder, ["activations.ReLU"], "s").exercises[0]
    assert ex.status == "error" and ex.score == 0
    assert ex.message == (
        "importing 'scipy' from a submission is not allowed: only numpy and the Python standard "
        "library may be imported: this exercise scores zero"
    )
    (folder / "activations.py").write_text(source.replace(line, '        __import__("functools")\n' + line, 1))
    assert grade(folder, ["activations.ReLU"], "s").exercises[0].status == "passed"  # the standard library is fine
