"""Round 5's location classes (issue 44): each locator with a correct submission (located nowhere), a wrong one
(its line) and, where a student may write it otherwise, a correct alternative formulation (located nowhere).

A submission here is the reference solution with one line changed; it is graded in this process against the
reference (tests/checks_util.py), and each failing check's case is traced and aligned as live grading does.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from checks_util import grade_in_process

from grader.course import align
from grader.course.solution import write_solution
from grader.student.engine import trace
from grader.student.engine.checks import CHECKS
from grader.student.engine.loader import load_exercises
from grader.student.engine.ops import run_script

SEED = 7


def _solved(tmp_path: Path, topic: str, old: str = "", new: str = "") -> tuple[Path, str]:
    """A solved folder with ``old`` replaced by ``new`` in ``topic``.py; (folder, the file's text)."""
    folder = write_solution(tmp_path / "ex")
    path = folder / f"{topic}.py"
    text = path.read_text()
    if old:
        assert old in text, old
        text = text.replace(old, new, 1)
        path.write_text(text)
    return folder, text


def _where(exercise: str, folder: Path, text: str) -> dict | None:
    """The location of the first failing check's case that locates (None: nothing failed, or nothing located)."""
    topic = exercise.split(".", 1)[0]
    ns = load_exercises(folder)
    cases = {case.name: case for case in CHECKS[exercise].checked_plan(SEED).cases}
    failing = [r.case for r in grade_in_process(exercise, ns, SEED, fresh=True) if not r.passed]
    for name in dict.fromkeys(failing):
        assert name, "a failing check carries the case it failed on"
        run = trace.traced(cases[name], topic)
        where = align.locate(
            exercise,
            topic,
            run_script(ns, run.script, run.arrays),
            align.reference_trace(cases[name], topic),
            text,
            align.reference_source(topic),
        )
        if where is not None:
            return where
    return None


def _line_of(text: str, code: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.strip() == code)


# --------------------------------------------------------------------------- initialisers: a statistical check's case

KAIMING = "return math.sqrt(2.0 / ((1.0 + negative_slope**2) * fan))"


def test_an_initialiser_is_located_at_the_number_it_gets_wrong(tmp_path: Path) -> None:
    folder, text = _solved(tmp_path / "right", "init")
    assert _where("init.kaiming_normal", folder, text) is None
    wrong = "return math.sqrt(1.0 / ((1.0 + negative_slope**2) * fan))"
    folder, text = _solved(tmp_path / "wrong", "init", KAIMING, wrong)
    where = _where("init.kaiming_normal", folder, text)
    assert where is not None and where["line"] == _line_of(text, wrong)


def test_an_initialiser_written_otherwise_is_located_nowhere(tmp_path: Path) -> None:
    folder, text = _solved(
        tmp_path, "init", KAIMING, "gain = math.sqrt(2.0 / (1.0 + negative_slope**2))\n    return gain / math.sqrt(fan)"
    )
    assert _where("init.kaiming_normal", folder, text) is None


# --------------------------------------------------------------------------- a KeyError: where the key was stored

CACHE = 'self.cache = {"x_hat": x_hat, "inv_std": inv_std, "shape": x.shape}'


def test_a_key_stored_under_another_name_is_located_where_it_was_stored(tmp_path: Path) -> None:
    folder, text = _solved(tmp_path / "right", "normalization")
    assert CACHE in text and _where("normalization.GroupNorm", folder, text) is None
    wrong = CACHE.replace('"inv_std"', '"inv_sd"')
    folder, text = _solved(tmp_path / "wrong", "normalization", CACHE, wrong)
    where = _where("normalization.GroupNorm", folder, text)
    assert where is not None and where["line"] == _line_of(text, wrong)
    assert "'inv_sd'" in where["words"] and "KeyError" in where["words"]


def test_a_key_misspelt_where_it_is_read_is_located_where_it_is_read(tmp_path: Path) -> None:
    read = 'x_hat, inv_std, shape = self.cache["x_hat"], self.cache["inv_std"], self.cache["shape"]'
    wrong = read.replace('self.cache["inv_std"]', 'self.cache["inv_sd"]')
    folder, text = _solved(tmp_path, "normalization", read, wrong)
    where = _where("normalization.GroupNorm", folder, text)
    assert where is not None and where["line"] == _line_of(text, wrong)  # not the line that stores "inv_std"


def test_a_cache_kept_under_other_keys_is_located_nowhere(tmp_path: Path) -> None:
    folder, text = _solved(
        tmp_path, "normalization", CACHE, 'self.cache = {"xh": x_hat, "s": inv_std, "shape": x.shape}'
    )
    text = text.replace(
        'self.cache["x_hat"], self.cache["inv_std"], self.cache["shape"]',
        'self.cache["xh"], self.cache["s"], self.cache["shape"]',
    )
    (folder / "normalization.py").write_text(text)
    assert _where("normalization.GroupNorm", folder, text) is None


# --------------------------------------------------------------------------- a crash: where the shapes parted

LN_VAR = "var = x.var(axis=axes, keepdims=True)"


def test_a_broadcast_error_is_located_where_the_shape_first_parted(tmp_path: Path) -> None:
    wrong = "var = np.var(x, axis=axes)"
    folder, text = _solved(tmp_path, "normalization", LN_VAR, wrong)
    where = _where("normalization.LayerNorm", folder, text)
    assert where is not None and where["line"] == _line_of(text, wrong)
    assert "`var` has shape" in where["words"] and "raised ValueError" in where["words"]


def test_keepdims_added_later_is_located_nowhere(tmp_path: Path) -> None:
    folder, text = _solved(tmp_path, "normalization", LN_VAR, "var = x.var(axis=axes).reshape(mean.shape)")
    assert _where("normalization.LayerNorm", folder, text) is None


# --------------------------------------------------------------------------- a valid input refused: the if's test

GN_CHECK = "if x.ndim < 2 or x.shape[1] != self.num_channels:"


def test_a_valid_input_refused_is_located_at_the_test_that_refused_it(tmp_path: Path) -> None:
    wrong = "if x.ndim < 3 or x.shape[1] != self.num_channels:"
    folder, text = _solved(tmp_path, "normalization", GN_CHECK, wrong)
    where = _where("normalization.GroupNorm", folder, text)
    assert where is not None and where["line"] == _line_of(text, wrong)
    assert "raise" in where["words"]


def test_a_test_reading_a_none_is_located_where_the_none_began(tmp_path: Path) -> None:
    folder, text = _solved(tmp_path, "normalization", "self.num_channels = num_channels", "self.num_channels = None")
    where = _where("normalization.GroupNorm", folder, text)
    assert where is not None and where["line"] == _line_of(text, "self.num_channels = None")
    assert "is None from here" in where["words"]


def test_a_validation_written_otherwise_is_located_nowhere(tmp_path: Path) -> None:
    folder, text = _solved(
        tmp_path, "normalization", GN_CHECK, "if not (x.ndim >= 2 and x.shape[1] == self.num_channels):"
    )
    assert _where("normalization.GroupNorm", folder, text) is None


# --------------------------------------------------------------------------- None: followed back to where it began

SGD_BUFFER = "self.buffers[key] = self.momentum * self.buffers[key] + g"


def test_a_none_is_followed_back_to_the_line_that_made_it(tmp_path: Path) -> None:
    folder, text = _solved(tmp_path / "right", "optim")
    assert SGD_BUFFER in text and _where("optim.SGD", folder, text) is None
    wrong = "self.buffers[key] = None"
    folder, text = _solved(tmp_path / "wrong", "optim", SGD_BUFFER, wrong)
    where = _where("optim.SGD", folder, text)
    assert where is not None and where["line"] == _line_of(text, wrong)
    assert "is None from here" in where["words"]


def test_an_array_of_objects_returned_is_located_at_its_line(tmp_path: Path) -> None:
    right = "return np.where(self.x > 0, dout, 0.0)"
    folder, text = _solved(tmp_path / "right", "activations")
    assert right in text and _where("activations.ReLU", folder, text) is None
    wrong = "return np.where(self.x > 0, dout, None)"
    folder, text = _solved(tmp_path / "wrong", "activations", right, wrong)
    where = _where("activations.ReLU", folder, text)
    assert where is not None and where["line"] == _line_of(text, wrong)
    assert "not an array of numbers" in where["words"]


# --------------------------------------------------------------------------- dropout: a mask among the reference's values

DROP = "return x * self.keep / (1.0 - self.p)"


def test_dropout_is_located_beside_the_references_mask(tmp_path: Path) -> None:
    """The reference's values include its boolean mask: compared as numbers, never a grader's error."""
    folder, text = _solved(tmp_path / "right", "dropout")
    assert DROP in text and _where("dropout.Dropout", folder, text) is None
    wrong = "return x * self.keep * (1.0 - self.p)"
    folder, text = _solved(tmp_path / "wrong", "dropout", DROP, wrong)
    where = _where("dropout.Dropout", folder, text)
    assert where is not None and where["line"] == _line_of(text, wrong)


def test_a_fault_of_the_locator_leaves_the_check_without_a_location(monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.course.grading import LiveSource

    def broken(*args: object) -> None:
        raise TypeError("the locator's own bug")

    monkeypatch.setattr(align, "locate", broken)
    monkeypatch.setattr(align, "reference_trace", lambda case, topic: None)
    case = CHECKS["activations.ReLU"].checked_plan(SEED).cases[0]
    assert LiveSource().locate("activations.ReLU", case, None, "x = 1\n") is None  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_correct_submission_starts_no_location_worker_and_traces_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The location's cost is a wrong submission's alone: no second sandbox run, no reference trace, no alignment."""
    from grader.course.grading import LiveSource, grade
    from grader.student.engine import grading as engine_grading

    runs: list[list[str]] = []
    run_cases = engine_grading.run_cases

    def counted(submission: object, jobs: list, *args: object, **kwargs: object) -> object:
        runs.append([job.id for job in jobs])
        return run_cases(submission, jobs, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine_grading, "run_cases", counted)
    monkeypatch.setattr(LiveSource, "trace_reference", lambda *a: pytest.fail("a correct submission traced"))
    monkeypatch.setattr(LiveSource, "locate", lambda *a: pytest.fail("a correct submission ran the locator"))
    folder, _ = _solved(tmp_path, "activations")
    assert grade(folder, ["activations.ReLU"], "alice").exercises[0].status == "passed"
    assert runs == [["activations.ReLU"]]  # the grading's own sandbox run only
    monkeypatch.undo()
    monkeypatch.setattr(engine_grading, "run_cases", counted)
    wrong, _ = _solved(
        tmp_path / "wrong",
        "activations",
        "return np.where(self.x > 0, dout, 0.0)",
        "return np.where(self.x > 0, 2 * dout, 0.0)",
    )
    report = grade(wrong, ["activations.ReLU"], "alice")
    assert report.exercises[0].status == "failed" and len(runs) == 3  # then one more, traced, for the location
    assert any(c.where for c in report.exercises[0].checks)


def _counting_worker_starts(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """A list that grows by one for each sandbox worker started from now on (any workspace, any round)."""
    from grader.student.sandbox import workspace as workspace_module

    starts: list[bool] = []

    class Counted(workspace_module.Child):
        def __init__(self, *args: object, **kwargs: object) -> None:
            starts.append(True)
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(workspace_module, "Child", Counted)
    return starts


@pytest.mark.slow
def test_a_wrong_submission_is_graded_and_located_by_one_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The traced run is the grading workspace's second round: the worker that graded runs it, none starts."""
    from grader.course.grading import grade

    starts = _counting_worker_starts(monkeypatch)
    wrong, _ = _solved(
        tmp_path, "activations", "return np.where(self.x > 0, dout, 0.0)", "return np.where(self.x > 0, 2 * dout, 0.0)"
    )
    report = grade(wrong, ["activations.ReLU"], "alice")
    assert report.exercises[0].status == "failed" and any(c.where for c in report.exercises[0].checks)
    assert len(starts) == 1


# A ReLU whose first backward pass in a process is wrong: the state is kept in a sibling module (base.Module), so
# only a fresh import of the student's package (not only of the traced topic file) starts it again.
_FIRST_CALL_WRONG = """        Module.backward_calls = getattr(Module, "backward_calls", 0) + 1
        if Module.backward_calls == 1:
            return np.where(self.x > 0, 2 * dout, 0.0)
        return np.where(self.x > 0, dout, 0.0)"""


@pytest.mark.slow
def test_the_traced_run_imports_the_student_afresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Traced on the grading's own worker, a submission whose first run left state behind is located as traced
    in a fresh worker (cold): at its first call's line, which a run seeing the state would not reach wrong."""
    from grader.course.grading import grade
    from grader.student.engine import grading as engine_grading

    folder, text = _solved(tmp_path, "activations", "        return np.where(self.x > 0, dout, 0.0)", _FIRST_CALL_WRONG)

    def wheres() -> list[dict | None]:
        report = grade(folder, ["activations.ReLU"], "alice")
        assert report.exercises[0].status == "failed"
        return [c.where for c in report.exercises[0].checks if not c.passed]

    starts = _counting_worker_starts(monkeypatch)
    kept = wheres()
    assert len(starts) == 1  # the traced run was the grading worker's
    located = engine_grading._located
    monkeypatch.setattr(
        engine_grading,
        "_located",
        lambda *args: located(*args[:7], None, *args[8:]),  # type: ignore[call-arg]  # traced in a fresh worker
    )
    cold = wheres()
    assert len(starts) == 3
    assert kept == cold and any(kept)
    assert {w["line"] for w in kept if w} <= {_line_of(text, line.strip()) for line in _FIRST_CALL_WRONG.splitlines()}


# --------------------------------------------------------------------------- the words: what the reference has there


def test_differing_names_a_number_and_a_regrouping() -> None:
    import ast

    def pair(mine: str, theirs: str) -> tuple[str, str] | None:
        return align.differing(ast.parse(mine, mode="eval").body, ast.parse(theirs, mode="eval").body)

    assert pair("np.where(x > 1, dout, 0.0)", "np.where(x > 0, dout, 0.0)") == ("1", "0")
    assert pair("c * (x + 0.04 * x * 3)", "c * (x + 0.04 * x ** 3)") == ("0.04 * x * 3", "0.04 * x ** 3")
    assert pair("np.where(x > 0, dout, 0.0)", "np.where(x > 0, dout, 0)") is None  # the same number
    assert pair("a * b", "a * b") is None


def test_a_wrong_return_is_said_against_the_references_return(tmp_path: Path) -> None:
    right = "return 0.5 * x * (1.0 + np.tanh(inner))"
    wrong = "return 0.5 * x * (1.0 - np.tanh(inner))"
    folder, text = _solved(tmp_path, "activations", right, wrong)
    where = _where("activations.GELU", folder, text)
    assert where is not None and where["line"] == _line_of(text, wrong)
    assert "where you have `1.0 - tanh(inner)` the reference has `1.0 + tanh(inner)`" in where["words"]
