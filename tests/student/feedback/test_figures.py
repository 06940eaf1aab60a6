"""Pictures of failing checks: the data a check keeps (bounded, safe for hidden checks), its JSON, its drawing.

Known submissions (tests/figures_util.py: the reference and a mistake of each
kind) are graded in-process live (hidden checks) and on a case pack (public
checks); the figures are checked for their kind, their size, what they say
in words and what a hidden one leaves out. The command line's ``--json
--arrays``, ``--html`` and ``grade view`` are run with click's runner.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from grader.cli import cli
from grader.student.feedback import drawing, figures
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.feedback.report_html import format_html
from grader.student.client.wire import report_from_dict, report_to_dict

from figures_util import KNOWN, graded, known_report

MAX_FIGURE_BYTES = 16_000


@pytest.fixture(scope="module")
def hidden() -> GradeReport:
    return known_report()


@pytest.fixture(scope="module")
def public(tmp_path_factory: pytest.TempPathFactory) -> GradeReport:
    return known_report(tmp_path_factory.mktemp("packs"))


def failing(ex: ExerciseResult) -> list[CheckResult]:
    return [c for c in ex.checks if not c.passed]


def all_figures(report: GradeReport) -> list[dict[str, Any]]:
    return [c.figure for ex in report.exercises for c in ex.checks if c.figure is not None]


# --------------------------------------------------------------------------- the data


@pytest.mark.parametrize("which", ["hidden", "public"])
def test_each_known_mistake_keeps_the_picture_of_its_kind_and_a_correct_submission_none(
    which: str, request: pytest.FixtureRequest
) -> None:
    report: GradeReport = request.getfixturevalue(which)
    for ex, (exercise, mistake, kind) in zip(report.exercises, KNOWN):
        if mistake is None:
            assert ex.status == "passed" and all(c.figure is None for c in ex.checks)
            continue
        named = [c for c in failing(ex) if c.figure is not None]
        assert named, f"{exercise} {mistake}: no failing check kept a figure"
        assert kind in {c.figure["kind"] for c in named}, (exercise, mistake, [c.figure["kind"] for c in named])
        for check in ex.checks:
            if check.passed:
                assert check.figure is None


def test_figures_are_small_and_json(hidden: GradeReport, public: GradeReport) -> None:
    for figure in all_figures(hidden) + all_figures(public):
        text = json.dumps(figure, allow_nan=False)  # no NaN or inf: valid JSON for every front end
        assert len(text) < MAX_FIGURE_BYTES, (figure["kind"], len(text))
        assert figure["summary"] and figure["title"]


def test_a_huge_output_keeps_a_bounded_sample_heat_map_and_axis_summary() -> None:
    rng = np.random.default_rng(1)
    expected = rng.standard_normal((1000, 700))
    received = expected.copy()
    received[:, 333] += 1.0  # one wrong column
    figure = figures.elements_figure(received, expected, 1e-6, 1e-8, title="t", key="y", hidden=False)
    assert figure is not None
    assert len(figure["received"]) <= figures.MAX_POINTS and len(figure["expected"]) == len(figure["received"])
    assert any(figure["differs"])  # the differing elements are in the sample although rare (1 in 700)
    heat = figure["heat"]["values"]
    assert len(heat) <= figures.MAX_CELLS and all(len(row) <= figures.MAX_CELLS for row in heat)
    assert all(len(a["fraction"]) <= figures.MAX_AXIS for a in figure["axes"])
    assert len(json.dumps(figure)) < MAX_FIGURE_BYTES
    step = figure["axes"][1]["step"]
    assert step > 1 and figure["follows"] == {"axis": 1, "indices": [333 // step * step], "more": 0, "step": step}
    assert f"follows axis 1: it is concentrated at the blocks of {step} indices starting at {333 // step * step}" \
        in figure["summary"]


def test_the_axis_the_error_follows_in_3d_and_an_even_error() -> None:
    expected = np.zeros((4, 3, 5))
    received = expected.copy()
    received[:, 2, :] = 1.0  # every value of channel 2
    figure = figures.elements_figure(received, expected, 1e-6, 1e-8, title="t", key="y", hidden=True)
    assert figure["follows"]["axis"] == 1 and figure["follows"]["indices"] == [2]
    assert figure["axes"][1]["fraction"] == [0.0, 0.0, 1.0]
    everywhere = figures.elements_figure(expected + 1.0, expected, 1e-6, 1e-8, title="t", key="y", hidden=True)
    assert everywhere["follows"] is None and "spread over every axis" in everywhere["summary"]
    # every value wrong, but channel 2 ten times more: the public picture shows it with the mean error per index
    received[:, :2, :] = 0.1
    public = figures.elements_figure(received, expected, 1e-6, 1e-8, title="t", key="y", hidden=False)
    assert public["axes"][1]["error"] == [0.1, 0.1, 1.0] and public["axes"][1]["fraction"] == [1.0, 1.0, 1.0]
    assert "mean absolute error" in drawing.figure_html(public)
    assert "error" not in figures.elements_figure(received, expected, 1e-6, 1e-8, title="t", key="y",
                                                  hidden=True)["axes"][1]


def test_equal_arrays_and_other_shapes_give_no_picture() -> None:
    a = np.ones((2, 3))
    assert figures.elements_figure(a, a, 1e-6, 1e-8, title="t", key="y", hidden=False) is None
    assert figures.elements_figure(np.ones(6), a, 1e-6, 1e-8, title="t", key="y", hidden=False) is None


def test_nan_in_the_output_is_marked_not_lost() -> None:
    expected = np.arange(6.0).reshape(2, 3)
    received = expected.copy()
    received[1, 2] = np.nan
    figure = figures.elements_figure(received, expected, 1e-6, 1e-8, title="t", key="y", hidden=False)
    assert figure["received"][5] is None and figure["differs"][5] is True
    assert figure["heat"]["differs"][1][2] == 1
    json.dumps(figure, allow_nan=False)


# --------------------------------------------------------------------------- hidden checks


def first_pair(message: str) -> tuple[float, float]:
    found = re.search(r"received (\S+), expected (\S+?);", message)
    assert found, message
    return float(found.group(1)), float(found.group(2))


def test_a_hidden_figure_holds_no_expected_values_beyond_the_messages_first_pair(hidden: GradeReport) -> None:
    kinds = set()
    for ex in hidden.exercises:
        for check in failing(ex):
            figure = check.figure
            if figure is None:
                continue
            kinds.add(figure["kind"])
            if figure["kind"] == "elements":
                assert figure["hidden"] is True and figure["expected"] is None
                assert all("error" not in axis for axis in figure.get("axes", []))
                if "heat" in figure:
                    assert figure["heat"]["measure"] == "fraction differing"
                    assert all(0.0 <= v <= 1.0 for row in figure["heat"]["values"] for v in row)
                received, expected = first_pair(check.message)
                assert figure["first"]["expected"] == pytest.approx(expected, rel=1e-5)
                assert figure["first"]["received"] == pytest.approx(received, rel=1e-5)
            elif figure["kind"] == "trajectory":
                assert figure["hidden"] is True
                assert all(s["expected"] is None for s in figure["series"])
                received, expected = first_pair(check.message)
                assert figure["first"]["expected"] == pytest.approx(expected, rel=1e-5)
            elif figure["kind"] == "histogram":
                # the student's samples and the bounds the message states (from the formula, not a reference run)
                s = figure["statistic"]
                if s is not None and s["name"].startswith("variance"):
                    assert f"{s['expected']:.5g}" in check.message
    assert {"elements", "trajectory", "histogram", "fit"} <= kinds


def test_a_public_figure_shows_the_expected_values_the_pack_holds(public: GradeReport, hidden: GradeReport) -> None:
    ln = next(ex for ex in public.exercises if ex.id == "normalization.LayerNorm")
    figure = next(c.figure for c in ln.checks if c.figure and c.figure["kind"] == "elements")
    assert figure["hidden"] is False and figure["expected"] is not None
    assert figure["heat"]["measure"] == "largest absolute error"
    adam = next(ex for ex in public.exercises if ex.id == "optim.AdamW")
    trajectory = next(c.figure for c in adam.checks if c.figure and c.figure["kind"] == "trajectory")
    assert all(s["expected"] is not None for s in trajectory["series"])


# --------------------------------------------------------------------------- the report's forms


def test_json_leaves_figures_out_unless_asked_and_the_wire_keeps_them(hidden: GradeReport) -> None:
    plain = json.dumps(hidden.to_json())
    assert '"figure"' not in plain  # the contract's --json document is unchanged
    with_arrays = hidden.to_json(arrays=True)
    checks = [c for ex in with_arrays["exercises"] for c in ex["checks"]]
    assert all("figure" in c for c in checks) and any(c["figure"] for c in checks)
    back = report_from_dict(json.loads(json.dumps(report_to_dict(hidden))))
    assert all_figures(back) == all_figures(hidden)
    old = report_to_dict(hidden)
    for ex in old["exercises"]:
        for c in ex["checks"]:
            del c["figure"]  # a document from before figures
    assert all_figures(report_from_dict(old)) == []


# --------------------------------------------------------------------------- drawing


def svgs(fragment: str) -> list[ET.Element]:
    found = re.findall(r"<svg .*?</svg>", fragment, flags=re.S)
    return [ET.fromstring(s) for s in found]


@pytest.mark.parametrize("which", ["hidden", "public"])
def test_every_picture_is_well_formed_svg_with_a_text_alternative(which: str, request: pytest.FixtureRequest) -> None:
    report: GradeReport = request.getfixturevalue(which)
    ns = "{http://www.w3.org/2000/svg}"
    for figure in all_figures(report):
        fragment = drawing.figure_html(figure)
        every = svgs(fragment)
        pictures = [svg for svg in every if svg.get("aria-hidden") != "true"]  # legend symbols are decoration
        assert pictures, figure["kind"]
        assert all(svg.get("role") == "img" for svg in pictures)
        for svg in pictures:
            assert svg.get("role") == "img"
            title, desc = svg.find(ns + "title"), svg.find(ns + "desc")
            assert title is not None and title.text and desc is not None and desc.text
            assert svg.get("aria-labelledby") == f"{title.get('id')} {desc.get('id')}"
        assert "<figcaption>" in fragment and '<ul class="ng-legend">' in fragment  # words, not colour alone


def test_differing_elements_are_crosses_not_only_another_colour() -> None:
    expected = np.zeros(10)
    received = expected.copy()
    received[[2, 7]] = 1.0
    figure = figures.elements_figure(received, expected, 1e-6, 1e-8, title="t", key="y", hidden=False)
    picture = drawing.figure_html(figure).split('<ul class="ng-legend">')[0]
    assert picture.count('stroke-width="2.2"') == 2          # two crosses
    assert picture.count("<circle") == 8                      # eight round markers


def test_damaged_figure_data_shows_its_words_and_never_breaks_the_page(hidden: GradeReport) -> None:
    figure = dict(next(f for f in all_figures(hidden) if f["kind"] == "elements"))
    for damage in ({"received": None}, {"received": ["x", "y"]}, {"first": {}}, {"heat": {"values": [[]]}},
                   {"differs": 3}, {"edges": []}):
        broken = {**figure, **damage}
        fragment = drawing.figure_html(broken)
        assert figure["summary"].split(":")[0] in fragment
    histogram = next(f for f in all_figures(hidden) if f["kind"] == "histogram")
    assert "could not be drawn" in drawing.figure_html({**histogram, "edges": [], "counts": [1]})


def test_text_from_student_code_is_escaped_in_the_page() -> None:
    check = CheckResult("forward", False, 0.0, 1.0, 'ValueError: <script>alert("x")</script>',
                        figure={"kind": "unknown", "summary": "<img src=x onerror=alert(1)>", "title": "t"})
    page = format_html(GradeReport("<b>eve</b>", [ExerciseResult("activations.ReLU", "failed", 0, 1, [check])]))
    assert "<script>" not in page and "<img" not in page and "<b>eve" not in page
    assert "&lt;script&gt;" in page


def test_the_page_puts_known_mistakes_first(hidden: GradeReport) -> None:
    page = format_html(hidden)
    mistakes = page.index("Known mistakes in your code")
    assert mistakes < page.index("<table") < page.index('class="ng-check"')
    assert "ln-batch-axis" in page[mistakes:page.index("<table")]
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page  # self-contained


# --------------------------------------------------------------------------- the command line


@pytest.fixture()
def cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, hidden: GradeReport) -> Path:
    for name in ("GRADE_DB", "GRADE_STUDENT", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exercises").mkdir()
    monkeypatch.setattr("grader.course.grading.grade", lambda path, selectors, student, limits=None, workspace=None: hidden)
    return tmp_path


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_json_arrays_html_and_view(cli_env: Path) -> None:
    plain = invoke("submit", "--json")
    assert plain.exit_code == 1 and '"figure"' not in plain.output
    arrays = invoke("submit", "--json", "--arrays", "--html", "report.html")
    doc = json.loads(arrays.stdout)
    assert f"Report page written to {(cli_env / 'report.html').resolve()}" in arrays.stderr  # says where
    kinds = {c["figure"]["kind"] for ex in doc["exercises"] for c in ex["checks"] if c["figure"]}
    assert {"elements", "trajectory", "histogram", "fit"} <= kinds
    page = (cli_env / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count('role="img"') >= 9
    kept = cli_env / ".grade" / "last-report.json"
    assert kept.exists()
    viewed = invoke("view", "--no-open")
    assert viewed.exit_code == 0 and "last-report.html" in viewed.output
    assert (cli_env / ".grade" / "last-report.html").read_text() == page


def test_arrays_without_json_and_view_without_a_report_are_one_line_errors(cli_env: Path) -> None:
    result = invoke("submit", "--arrays")
    assert result.exit_code == 2 and result.output.count("\n") == 1 and "--arrays goes with --json" in result.output
    result = invoke("view", "--no-open")
    assert result.exit_code == 2 and "run `grade submit` first" in result.output
    (cli_env / ".grade").mkdir()
    (cli_env / ".grade" / "last-report.json").write_text("{not json")
    result = invoke("view", "--no-open")
    assert result.exit_code == 2 and "cannot be read" in result.output and "Traceback" not in result.output


def test_an_unwritable_html_path_is_a_one_line_error_after_the_attempt_is_recorded(cli_env: Path) -> None:
    (cli_env / "notes.txt").write_text("a file, not a folder")
    result = invoke("submit", "--html", str(cli_env / "notes.txt" / "report.html"))
    assert result.exit_code == 2 and "cannot write the web page" in result.output
    assert "normgrade report for" in result.output  # the text report was printed before the error
    assert result.output.rstrip().splitlines()[-1].startswith("Error: cannot write the web page")
    assert (cli_env / ".grade" / "progress.db").exists()


def test_the_handout_command_has_the_same_options(cli_env: Path, monkeypatch: pytest.MonkeyPatch,
                                                  hidden: GradeReport) -> None:
    from grader.student import cli as student_cli

    monkeypatch.setattr("grader.student.engine.grading.grade", lambda *a, **k: hidden)
    result = CliRunner().invoke(student_cli.cli, ["submit", "--json", "--arrays", "--html", "r.html"],
                                catch_exceptions=False)
    assert result.exit_code == 1 and '"figure"' in result.output and (cli_env / "r.html").exists()
    assert CliRunner().invoke(student_cli.cli, ["view", "--no-open"]).exit_code == 0


def test_every_kind_has_a_drawing_and_an_unknown_kind_shows_its_words() -> None:
    assert set(drawing.DRAW) == {"elements", "trajectory", "histogram", "fit"}
    fragment = drawing.figure_html({"kind": "from-a-newer-grader", "title": "t", "summary": "what it shows"})
    assert "<svg" not in fragment and "what it shows" in fragment


def test_a_correct_submission_graded_alone_has_no_figures() -> None:
    ex = graded("normalization.BatchNorm1d", None)
    assert ex.status == "passed" and all(c.figure is None for c in ex.checks)


# --------------------------------------------------------------------------- the store, the server's report, the dashboard


def test_figures_are_stored_with_the_attempt_and_rebuilt_for_the_server_and_the_dashboard(
    tmp_path: Path, hidden: GradeReport
) -> None:
    from grader.server import dashboard
    from grader.server.records import report_of
    from grader.student.store import Store

    with Store.open(tmp_path / "c.db") as store:
        attempt = store.record_report(hidden, "test")
        rows = store.submissions(student=hidden.student)
        rebuilt = dashboard._rebuild_report(store, hidden.student, rows)
        assert all_figures(rebuilt) == all_figures(hidden)
        served = report_of(store, {"status": "done", "attempt_id": attempt, "student": hidden.student})
        assert served is not None and all_figures(served) == all_figures(hidden)
        html = dashboard.pictures_html(rebuilt)
        assert html.count('<figure class="ng-figure">') == len(all_figures(hidden))
        # a damaged figure cell is no picture, never an error
        store.db.execute("UPDATE check_results SET figure = '{broken' WHERE figure IS NOT NULL")
        store.db.conn.commit()
        assert all_figures(dashboard._rebuild_report(store, hidden.student, rows)) == []
        assert dashboard.pictures_html(dashboard._rebuild_report(store, hidden.student, rows)) == ""


@pytest.mark.slow
def test_a_course_server_hands_back_the_same_hidden_pictures_as_the_instructors_own_grading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Graded on the server (worker, store, report_of, wire, client): `--json --arrays` carries the very figures
    of local live grading for the same student, and `--html` draws them."""
    from grader.course.solution import write_solution
    from grader.student.client.connection import Login, save_login
    from server_util import Server, issue_tokens

    monkeypatch.setenv("NO_COLOR", "1")
    folder = write_solution(tmp_path / "leaky")
    code = folder / "activations.py"
    code.write_text(code.read_text().replace("return np.maximum(self.x, 0.0)", "return np.maximum(self.x, 0.1 * self.x)"))
    runner = CliRunner()
    args = ["submit", "activations.ReLU", "--path", str(folder), "--json", "--arrays"]
    local = runner.invoke(cli, [*args, "--local", "--student", "s1", "--db", str(tmp_path / "own.db")])
    db = tmp_path / "course.db"
    tokens, _ = issue_tokens(db, ["s1"])
    server = Server(db, f"sqlite:///{tmp_path / 'queue.db'}", workers=1).start()
    try:
        save_login(Login(server.url, tokens["s1"], "s1"))
        remote = runner.invoke(cli, [*args, "--html", str(tmp_path / "page.html")])
    finally:
        server.stop()
    assert local.exit_code == remote.exit_code == 1, remote.output
    figures_of = lambda doc: [c["figure"] for ex in doc["exercises"] for c in ex["checks"]]  # noqa: E731
    remote_figures = figures_of(json.loads(remote.stdout))
    assert remote_figures == figures_of(json.loads(local.stdout))
    shown = [f for f in remote_figures if f]
    assert shown and all(f["kind"] == "elements" and f["hidden"] and f["expected"] is None for f in shown)
    page = (tmp_path / "page.html").read_text()
    assert page.count('<figure class="ng-figure">') == len(shown)
