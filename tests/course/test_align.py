"""Round 5: the student's own line where the computation leaves the reference's (grader.course.align)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.course import align
from grader.course.grading import LiveSource, grade
from grader.course.solution import write_solution
from grader.student.engine import trace
from grader.student.engine.checks import CHECKS
from grader.student.engine.loader import load_exercises
from grader.student.engine.ops import run_script

BN = "normalization.BatchNorm1d"
EPS_LINE = "inv_std = _channel_view(1.0 / np.sqrt(var + bn.eps), x.ndim)"


def _folder(tmp_path: Path, old: str = "", new: str = "") -> tuple[Path, str]:
    """A solved folder with ``old`` replaced by ``new`` in normalization.py; (folder, the file's text)."""
    folder = write_solution(tmp_path / "ex")
    path = folder / "normalization.py"
    text = path.read_text()
    if old:
        assert old in text
        text = text.replace(old, new, 1)
        path.write_text(text)
    return folder, text


def _locate(folder: Path, text: str, case_name: str = "main") -> dict | None:
    """The student's traced run of a BatchNorm1d case (in this process) aligned with the reference's."""
    case = next(c for c in CHECKS[BN].checked_plan(7).cases if c.name == case_name)
    run = trace.traced(case, "normalization")
    student = run_script(load_exercises(folder), run.script, run.arrays)
    return align.locate(
        BN,
        "normalization",
        student,
        align.reference_trace(case, "normalization"),
        text,
        align.reference_source("normalization"),
    )


def _line_of(text: str, code: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if code in line)


def test_trace_records_assignments_returns_and_arguments(tmp_path: Path) -> None:
    folder, text = _folder(tmp_path)
    case = next(c for c in CHECKS[BN].checked_plan(7).cases if c.name == "main")
    run = trace.traced(case, "normalization")
    records = trace.read(run_script(load_exercises(folder), run.script, run.arrays))
    names = {(r.role, r.name) for r in records}
    assert ("assign", "inv_std") in names and ("arg", "x") in names and ("return", "return") in names
    assert all(r.role != "expr" for r in records)  # only the reference records its inline expressions
    line = _line_of(text, EPS_LINE)
    assert any(r.name == "inv_std" and r.line == line for r in records)


def test_a_correct_submission_is_located_nowhere(tmp_path: Path) -> None:
    folder, text = _folder(tmp_path)
    assert _locate(folder, text) is None


def test_a_correct_alternative_formulation_is_located_nowhere(tmp_path: Path) -> None:
    folder, text = _folder(
        tmp_path, EPS_LINE, "std = np.sqrt(var + bn.eps)\n    inv_std = _channel_view(1 / std, x.ndim)"
    )
    assert _locate(folder, text) is None


def test_eps_outside_the_square_root_is_located_at_its_line(tmp_path: Path) -> None:
    wrong = "inv_std = _channel_view(1.0 / (np.sqrt(var) + bn.eps), x.ndim)"
    folder, text = _folder(tmp_path, EPS_LINE, wrong)
    where = _locate(folder, text)
    assert where is not None
    assert (where["file"], where["line"], where["code"]) == ("normalization.py", _line_of(text, wrong), wrong)
    assert "sqrt(var + bn.eps)" in where["words"]


def test_a_sign_is_located_and_named_as_a_factor(tmp_path: Path) -> None:
    old = "x_hat = (x - _channel_view(mean, x.ndim)) * inv_std"
    wrong = "x_hat = (_channel_view(mean, x.ndim) - x) * inv_std"
    folder, text = _folder(tmp_path, old, wrong)
    where = _locate(folder, text)
    assert where is not None and where["line"] == _line_of(text, wrong)
    assert "opposite sign" in where["words"]


def test_a_crash_names_its_line_and_the_shapes_it_read(tmp_path: Path) -> None:
    old = "x_hat = (x - _channel_view(mean, x.ndim)) * inv_std"
    wrong = "x_hat = (x - mean[:, None]) * inv_std"
    folder, text = _folder(tmp_path, old, wrong)
    where = _locate(folder, text)
    assert where is not None and where["line"] == _line_of(text, wrong)
    assert "raised ValueError" in where["words"] and "`x` has shape (6, 4)" in where["words"]


def test_differing_names_the_first_structural_difference() -> None:
    import ast

    mine, theirs = ast.parse("(x - mu) / np.sqrt(v)", mode="eval"), ast.parse("(x - m) / np.sqrt(v + eps)", mode="eval")
    assert align.differing(mine.body, theirs.body) == ("v", "v + eps")
    assert align.differing(mine.body, mine.body) is None


@pytest.mark.slow
def test_live_grading_locates_a_wrong_submission_and_runs_nothing_for_a_right_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    right, _ = _folder(tmp_path / "right")
    monkeypatch.setattr(LiveSource, "locate", lambda *a: pytest.fail("a correct submission ran the locator"))
    report = grade(right, [BN], "alice")
    assert report.exercises[0].status == "passed"
    monkeypatch.undo()
    wrong_code = "inv_std = _channel_view(1.0 / (np.sqrt(var) + bn.eps), x.ndim)"
    wrong, text = _folder(tmp_path / "wrong", EPS_LINE, wrong_code)
    report = grade(wrong, [BN], "alice")
    forward = next(c for c in report.exercises[0].checks if c.name == "forward")
    assert forward.where is not None
    assert forward.where == {
        "file": "normalization.py",
        "line": _line_of(text, wrong_code),
        "code": wrong_code,
        "words": forward.where["words"],
    }
    assert forward.to_json()["where"] == {
        "file": "normalization.py",
        "line": _line_of(text, wrong_code),
        "code": wrong_code,
    }
    assert forward.message.startswith(f"Where: normalization.py line {_line_of(text, wrong_code)}:")
    assert forward.misconception == "bn-eps-outside-sqrt"


def test_a_crash_on_none_is_located_where_the_value_became_none(tmp_path: Path) -> None:
    old = "mean = x.mean(axis=axes)"
    folder, text = _folder(tmp_path, old, "mean = None")
    where = _locate(folder, text)
    assert where is not None and where["line"] == _line_of(text, "mean = None")
    assert "`mean` is None from here" in where["words"] and "raised TypeError" in where["words"]


@pytest.mark.slow
def test_offline_grading_says_a_location_needs_the_course_server(tmp_path: Path) -> None:
    from grader.course.packs import write_packs
    from grader.student.engine.grading import NEEDS_SERVER_TO_LOCATE, grade as grade_with
    from grader.student.engine.pack import PackSource

    write_packs(tmp_path / "packs", [BN])
    wrong, _ = _folder(tmp_path, EPS_LINE, "inv_std = _channel_view(1.0 / (np.sqrt(var) + bn.eps), x.ndim)")
    report = grade_with(wrong, [BN], "bob", None, PackSource(tmp_path / "packs"))
    assert report.exercises[0].status == "failed"
    assert NEEDS_SERVER_TO_LOCATE in report.notices
    assert all(c.where is None for c in report.exercises[0].checks)
    right, _ = _folder(tmp_path / "right")
    assert NEEDS_SERVER_TO_LOCATE not in grade_with(right, [BN], "bob", None, PackSource(tmp_path / "packs")).notices


LN = "normalization.LayerNorm"
LN_VAR = "var = x.var(axis=axes, keepdims=True)"
LN_WRONG_VAR = "var = np.var(x, axis=axes)"  # (no keepdims: the next line's broadcast raises ValueError)


@pytest.mark.slow
def test_offline_grading_locates_a_shape_crash_from_the_pack_shapes_alone(tmp_path: Path) -> None:
    """The case pack carries the reference's names, kinds and shapes (no value): the handout locates the line
    where the shapes parted, and still says that a value divergence needs the course server."""
    from grader.course.packs import write_packs
    from grader.student.engine.grading import NEEDS_SERVER_TO_LOCATE, grade as grade_with
    from grader.student.engine.pack import PackSource, load_pack, pack_path

    write_packs(tmp_path / "packs", [LN])
    pack = load_pack(pack_path(tmp_path / "packs", LN))
    assert pack.shapes and all(r.value is None and r.line == 0 for records in pack.shapes.values() for r in records)
    wrong, text = _folder(tmp_path, LN_VAR, LN_WRONG_VAR)
    report = grade_with(wrong, [LN], "bob", None, PackSource(tmp_path / "packs"))
    located = [c.where for c in report.exercises[0].checks if not c.passed and c.where is not None]
    assert located and all(w["line"] == _line_of(text, LN_WRONG_VAR) for w in located)
    assert "`var` has shape" in located[0]["words"] and "raised ValueError" in located[0]["words"]
    assert NEEDS_SERVER_TO_LOCATE not in report.notices


@pytest.mark.slow
def test_offline_grading_traces_a_crash_and_never_a_wrong_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pack locates crashes only: a wrong value (eps outside the root) runs no second, traced, sandbox run;
    a crash (a shape error) does."""
    from grader.course.packs import write_packs
    from grader.student.engine import grading as engine_grading
    from grader.student.engine.pack import PackSource

    write_packs(tmp_path / "packs", [BN, LN])
    runs: list[list[str]] = []
    run_cases = engine_grading.run_cases

    def counted(submission: object, jobs: list, *args: object, **kwargs: object) -> object:
        runs.append([job.id for job in jobs])
        return run_cases(submission, jobs, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine_grading, "run_cases", counted)
    wrong, _ = _folder(tmp_path / "value", EPS_LINE, "inv_std = _channel_view(1.0 / (np.sqrt(var) + bn.eps), x.ndim)")
    report = engine_grading.grade(wrong, [BN], "bob", None, PackSource(tmp_path / "packs"))
    assert report.exercises[0].status == "failed" and runs == [[BN]]
    crash, _ = _folder(tmp_path / "crash", LN_VAR, LN_WRONG_VAR)
    report = engine_grading.grade(crash, [LN], "bob", None, PackSource(tmp_path / "packs"))
    assert runs[1:] == [[LN], [LN]] and any(c.where for c in report.exercises[0].checks)


def test_below_guided_a_location_quotes_no_reference_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = "inv_std = _channel_view(1.0 / (np.sqrt(var) + bn.eps), x.ndim)"
    folder, text = _folder(tmp_path, EPS_LINE, wrong)
    monkeypatch.setattr(align, "level_of", lambda exercise: "derive")
    where = _locate(folder, text)
    assert where is not None and where["line"] == _line_of(text, wrong)
    assert "reference has" not in where["words"] and "`" not in where["words"]


def test_a_trace_keeps_at_most_its_budget_of_values(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    monkeypatch.setattr(trace, "MAX_TOTAL_ELEMENTS", 10)
    outputs: dict = {}
    record = trace.Recorder(outputs)
    record(1, "f", "assign", "a", np.zeros(8))
    record(2, "f", "assign", "b", np.zeros((3, 4)))
    kept = {r.name: r for r in trace.read(trace.ScriptResult(outputs=outputs))}
    assert kept["a"].kind == "v" and kept["b"].kind == "big" and kept["b"].shape == (3, 4)
