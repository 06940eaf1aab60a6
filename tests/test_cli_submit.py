"""`grade submit`: grading, recording, the three report formats, exit statuses, one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from grader.cli import cli
from grader.student.errors import SetupError, UsageError
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.store import Store


def short_report(student: str) -> GradeReport:
    return GradeReport(
        student,
        [
            ExerciseResult(
                "normalization.LayerNorm",
                "failed",
                7.0,
                10.0,
                [
                    CheckResult("forward", True, 7.0, 7.0),
                    CheckResult("backward", False, 0.0, 3.0, "dx differs at [0, 3]: received 1.5, expected 1.25"),
                ],
                duration=0.25,
            ),
            ExerciseResult("activations.ReLU", "passed", 10.0, 10.0, [CheckResult("forward", True, 10.0, 10.0)]),
        ],
        files_hash="abc123",
    )


def full_report(student: str) -> GradeReport:
    return GradeReport(student, [ExerciseResult("activations.ReLU", "passed", 10.0, 10.0)], files_hash="f")


class FakeGrading:
    """Stands in for grader.course.grading: records its calls, returns or raises what it is told."""

    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome
        self.calls: list[tuple[Path, list[str] | None, str]] = []

    def grade(
        self, path: Path, selectors: list[str] | None, student: str, limits: Any = None, workspace: Any = None
    ) -> GradeReport:
        self.calls.append((path, selectors, student))
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome(student)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("GRADE_DB", "GRADE_STUDENT", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def use_grading(monkeypatch: pytest.MonkeyPatch, outcome: Any) -> FakeGrading:
    fake = FakeGrading(outcome)
    monkeypatch.setattr("grader.course.grading.grade", fake.grade)
    return fake


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_submit_prints_report_records_and_exits_1_when_short(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = use_grading(monkeypatch, short_report)
    db = tmp_path / "p.db"
    result = invoke(
        "submit", "normalization", "activations.ReLU", "--path", "ex", "--student", "alice", "--db", str(db)
    )
    assert result.exit_code == 1
    assert fake.calls == [(Path("ex"), ["normalization", "activations.ReLU"], "alice")]
    out = result.stdout
    assert "FAIL" in out and "normalization.LayerNorm" in out and "7/10" in out
    assert "dx differs at [0, 3]: received 1.5, expected 1.25" in out
    assert "This upload: 17/20" in out
    assert "\x1b[" not in out  # not a terminal: no colour
    assert result.stderr == ""
    with Store.open(db) as store:
        rows = store.submissions("alice")
        assert [(r["exercise"], r["score"], r["status"]) for r in rows] == [
            ("normalization.LayerNorm", 7.0, "failed"),
            ("activations.ReLU", 10.0, "passed"),
        ]
        assert rows[0]["files_hash"] == "abc123" and rows[0]["duration"] == 0.25
        assert rows[0]["grader_version"] not in ("", None)
        assert len(store.check_results(rows[0]["id"])) == 2


def not_graded_report(student: str) -> GradeReport:
    return GradeReport(
        student,
        [
            ExerciseResult("activations.ReLU", "passed", 10.0, 10.0, [CheckResult("forward", True, 10.0, 10.0)]),
            ExerciseResult(
                "kernels.relu_forward",
                "not_graded",
                0.0,
                10.0,
                [],
                "no OpenCL device here can build and run a kernel (`grade doctor` shows more)",
            ),
        ],
        files_hash="f",
    )


def test_not_graded_is_exit_2_with_a_line_naming_doctor_and_no_score(monkeypatch: pytest.MonkeyPatch) -> None:
    use_grading(monkeypatch, not_graded_report)
    result = CliRunner().invoke(cli, ["submit", "--student", "alice", "--db", "p.db"])
    assert result.exit_code == 2
    assert "NOT_GRADED       kernels.relu_forward" in result.stdout and "-/10" in result.stdout
    assert "This upload: 10/10 (100.0%), 1 of 1 exercises at full marks" in result.stdout
    assert result.stderr.startswith("Error: NOT_GRADED: 1 exercise(s) (10 points) were not graded")
    assert "grade doctor" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    document = json.loads(CliRunner().invoke(cli, ["submit", "--student", "alice", "--db", "p.db", "--json"]).stdout)
    kernel = document["exercises"][1]
    assert (kernel["status"], kernel["score"]) == ("not_graded", None) and "grade doctor" in kernel["message"]
    assert (document["score"], document["max_score"]) == (10.0, 10.0)
    with Store.open(Path("p.db")) as store:
        assert {s["exercise"] for s in store.submissions(student="alice")} == {"activations.ReLU"}


def test_full_marks_exit_0_and_all_exercises_when_none_named(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = use_grading(monkeypatch, full_report)
    result = invoke("submit", "--student", "bob")
    assert result.exit_code == 0
    assert fake.calls == [(Path("exercises"), None, "bob")]


def test_default_db_is_beside_the_exercises_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    use_grading(monkeypatch, full_report)
    (tmp_path / "course" / "exercises").mkdir(parents=True)
    assert invoke("submit", "--path", "course/exercises", "--student", "bob").exit_code == 0
    with Store.open(tmp_path / "course" / ".grade" / "progress.db") as store:
        assert store.students() == ["bob"]


def test_grade_db_environment_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    use_grading(monkeypatch, full_report)
    monkeypatch.setenv("GRADE_DB", str(tmp_path / "env.db"))
    assert invoke("submit", "--student", "bob").exit_code == 0
    with Store.open(tmp_path / "env.db") as store:
        assert store.students() == ["bob"]


def test_student_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = use_grading(monkeypatch, full_report)
    monkeypatch.setattr("getpass.getuser", lambda: "osuser")
    invoke("submit")
    monkeypatch.setenv("GRADE_STUDENT", "envuser")
    invoke("submit")
    assert [call[2] for call in fake.calls] == ["osuser", "envuser"]


def test_json_prints_the_spec_document_only(monkeypatch: pytest.MonkeyPatch) -> None:
    use_grading(monkeypatch, short_report)
    for args in (["--json"], ["--format", "json"]):
        result = invoke("submit", "--student", "alice", *args)
        assert result.exit_code == 1
        assert json.loads(result.stdout) == short_report("alice").to_json()
        assert result.stderr == ""


def test_gradescope_writes_results_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    use_grading(monkeypatch, short_report)
    target = tmp_path / "results" / "results.json"
    result = invoke("submit", "--student", "alice", "--format", "gradescope", "-o", str(target))
    assert result.exit_code == 1
    doc = json.loads(target.read_text())
    assert doc["score"] == 17.0
    assert [(t["name"], t["score"], t["max_score"], t["status"]) for t in doc["tests"]] == [
        ("normalization.LayerNorm", 7.0, 10.0, "failed"),
        ("activations.ReLU", 10.0, 10.0, "passed"),
    ]
    assert "dx differs at [0, 3]" in doc["tests"][0]["output"]
    assert "normalization.LayerNorm" in result.stdout
    use_grading(monkeypatch, full_report)
    assert invoke("submit", "--format", "gradescope").exit_code == 0
    assert json.loads((tmp_path / "results.json").read_text())["score"] == 10.0


def assert_one_line_error(result: Any, fragment: str) -> None:
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ") and fragment in lines[0]


@pytest.mark.parametrize(
    "error",
    [
        UsageError("'BatchNorm' is not an exercise. Did you mean 'normalization.BatchNorm1d'?"),
        SetupError("no exercises folder at ./exercises: pass --path DIR"),
    ],
)
def test_usage_and_setup_errors_are_one_line_exit_2(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    use_grading(monkeypatch, error)
    assert_one_line_error(invoke("submit", "normalization"), str(error))


def test_gradescope_error_still_writes_results(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    use_grading(monkeypatch, SetupError("no exercises folder at ./exercises: pass --path DIR"))
    result = invoke("submit", "--format", "gradescope")
    assert result.exit_code == 2
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["score"] == 0.0 and "no exercises folder" in doc["output"]


def test_json_and_other_format_conflict(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = use_grading(monkeypatch, full_report)
    assert_one_line_error(invoke("submit", "--json", "--format", "gradescope"), "cannot be combined")
    assert fake.calls == []


def test_unusable_explicit_db_is_exit_2_before_grading(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = use_grading(monkeypatch, full_report)
    db = tmp_path / "junk.db"
    db.write_bytes(b"not a database at all" * 50)
    before = db.read_bytes()
    assert_one_line_error(invoke("submit", "--db", str(db)), "is not a normgrade progress database")
    assert fake.calls == []
    assert db.read_bytes() == before


def test_unusable_default_db_warns_but_still_reports(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    use_grading(monkeypatch, short_report)
    (tmp_path / "exercises").mkdir()
    (tmp_path / ".grade").mkdir()
    db = tmp_path / ".grade" / "progress.db"
    db.write_bytes(bytes(range(256)) * 8)
    before = db.read_bytes()
    result = invoke("submit", "--student", "alice", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["score"] == 17.0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Warning: progress not recorded:")
    assert db.read_bytes() == before


REPO = Path(__file__).resolve().parent.parent


def test_real_grading_of_the_stubs(tmp_path: Path) -> None:
    """The whole pipeline on the shipped stubs: not implemented, recorded, exit 1; errors are one line."""
    folder = tmp_path / "course" / "exercises"
    shutil.copytree(REPO / "exercises", folder)
    db = tmp_path / "p.db"
    result = invoke("submit", "activations.ReLU", "--path", str(folder), "--student", "zoe", "--db", str(db))
    assert result.exit_code == 1
    assert "NOT_IMPLEMENTED" in result.stdout and "activations.ReLU" in result.stdout
    with Store.open(db) as store:
        assert [(r["exercise"], r["status"]) for r in store.submissions("zoe")] == [
            ("activations.ReLU", "not_implemented")
        ]
    assert_one_line_error(
        invoke("submit", "BatchNorm", "--path", str(folder), "--db", str(db)),
        "Did you mean 'normalization.BatchNorm1d'?",
    )
    assert_one_line_error(invoke("submit", "--path", str(tmp_path / "nowhere"), "--db", str(db)), "nowhere")


def test_run_from_inside_exercises_uses_that_folder_and_its_progress(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`grade submit` / `grade progress` from inside exercises/: that folder, the usual database beside it."""
    course = tmp_path / "course"
    shutil.copytree(REPO / "exercises", course / "exercises", ignore=shutil.ignore_patterns("__pycache__"))
    fake = use_grading(monkeypatch, short_report)
    monkeypatch.chdir(course / "exercises")
    result = invoke("submit", "--student", "ann")
    assert result.exit_code == 1
    assert fake.calls[0][0] == Path(".")
    assert "using this folder (exercises/)" in result.stderr
    assert (course / ".grade" / "progress.db").exists()
    shown = invoke("progress", "--student", "ann")
    assert shown.exit_code == 0 and "7/10" in shown.stdout  # the attempt recorded above, not a fresh database
    monkeypatch.chdir(tmp_path)  # elsewhere, with no exercises/ and not inside one: the path is left alone
    invoke("submit", "--student", "ann")
    assert fake.calls[-1][0] == Path("exercises")


@pytest.mark.parametrize("module", ["grader", "grader.cli"])
def test_python_dash_m_runs_the_command(module: str) -> None:
    """`python -m grader` and `python -m grader.cli` are `grade` (the latter used to print nothing)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert done.returncode == 0
    assert "submit" in done.stdout and "progress" in done.stdout
    assert f"python -m {module}" in done.stdout
    missing = subprocess.run(
        [sys.executable, "-m", module, "submit", "--path", "nowhere"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert missing.returncode == 2 and "nowhere" in missing.stderr


def overflowing_gelu(folder: Path) -> Path:
    """A correct solution whose GELU.forward returns ``x * 1e308 * 10``: inf and -inf (a classic overflow)."""
    from grader.course.solution import write_solution

    write_solution(folder)
    source = folder / "activations.py"
    text = source.read_text(encoding="utf-8")
    start = text.index("def forward", text.index("class GELU"))
    body = text.index('"""', text.index('"""', start) + 3) + 3
    source.write_text(text[:body] + "\n        return x * 1e308 * 10" + text[body:], encoding="utf-8")
    return folder


def test_an_overflowing_forward_is_graded_recorded_and_said_where(tmp_path: Path) -> None:
    """The overflow that once stopped `grade submit` with a traceback: a report, exit 1, the non-finite values
    counted by kind in the check's message, and the attempt recorded with its figures."""
    folder = overflowing_gelu(tmp_path / "ex")
    db = tmp_path / "p.db"
    result = CliRunner().invoke(
        cli, ["submit", "activations.GELU", "--path", str(folder), "--student", "alice", "--db", str(db)]
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "FAILED" in result.stdout and "activations.GELU" in result.stdout
    assert "received inf at index 0" in result.stdout and "values are nan or inf: " in result.stdout
    with Store.open(db) as store:
        submission = store.submissions(student="alice")[0]
        figures = [c["figure"] for c in store.check_results(submission["id"]) if c["figure"]]
    assert submission["status"] == "failed" and figures
