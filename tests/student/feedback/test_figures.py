"""Pictures of failing checks: the data a check keeps (bounded, safe for hidden checks), its JSON, its drawing.

Known submissions (tests/figures_util.py: the reference and a mistake of each
kind) are graded in-process live (hidden checks) and on a case pack (public
checks); the figures are checked for their kind, their size, what they say
in words and what a hidden one leaves out. The command line's ``--json
--arrays``, ``--html`` and ``grade view`` are run with click's runner.
"""

from __future__ import annotations

import json
import math
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
    for ex, (exercise, mistake, kind) in zip(report.exercises, KNOWN, strict=True):
        if mistake is None:
            assert ex.status == "passed" and all(c.figure is None for c in ex.checks)
            continue
        named = [c.figure for c in failing(ex) if c.figure is not None]
        assert named, f"{exercise} {mistake}: no failing check kept a figure"
        assert kind in {f["kind"] for f in named}, (exercise, mistake, [f["kind"] for f in named])
        for check in ex.checks:
            if check.passed:
                assert check.figure is None


def compact(figure: dict[str, Any]) -> str:
    """A figure as the store keeps it: no NaN or inf (valid JSON for every front end), no spaces."""
    return json.dumps(figure, allow_nan=False, separators=(",", ":"))


def test_figures_are_small_and_json(hidden: GradeReport, public: GradeReport) -> None:
    instructor = [c.instructor_figure for ex in hidden.exercises for c in ex.checks if c.instructor_figure]
    assert instructor
    for figure in all_figures(hidden) + all_figures(public) + instructor:
        alone = {k: v for k, v in figure.items() if k != "public"}
        assert len(compact(alone)) < MAX_FIGURE_BYTES, (figure["kind"], len(compact(alone)))
        if "public" in figure:  # the public case beside it: a figure of its own size
            assert len(compact(figure["public"])) < MAX_FIGURE_BYTES
        assert figure["summary"] and figure["title"]


def test_a_huge_output_keeps_a_bounded_sample_heat_map_and_axis_summary() -> None:
    rng = np.random.default_rng(1)
    expected = rng.standard_normal((1000, 700))
    received = expected.copy()
    received[:, 333] += 1.0  # one wrong column
    figure = figures.elements_figure(received, expected, 1e-6, 1e-8, title="t", key="y")
    assert figure is not None
    assert len(figure["received"]) <= figures.MAX_POINTS and len(figure["expected"]) == len(figure["received"])
    assert any(figure["differs"])  # the differing elements are in the sample although rare (1 in 700)
    heat = figure["heat"]["values"]
    assert len(heat) <= figures.MAX_CELLS and all(len(row) <= figures.MAX_CELLS for row in heat)
    assert all(len(a["fraction"]) <= figures.MAX_AXIS for a in figure["axes"])
    assert len(compact(figure)) < MAX_FIGURE_BYTES and len(compact(figures.hidden_view(figure))) < MAX_FIGURE_BYTES
    step = figure["axes"][1]["step"]
    assert step > 1 and figure["follows"] == {"axis": 1, "indices": [333 // step * step], "more": 0, "step": step}
    assert (
        f"follows axis 1: it is concentrated at the blocks of {step} indices starting at {333 // step * step}"
        in figure["summary"]
    )


def test_the_axis_the_error_follows_in_3d_and_an_even_error() -> None:
    expected = np.zeros((4, 3, 5))
    received = expected.copy()
    received[:, 2, :] = 1.0  # every value of channel 2
    figure = hidden_elements(received, expected)
    assert figure["follows"]["axis"] == 1 and figure["follows"]["indices"] == [2]
    assert figure["axes"][1]["fraction"] == [0.0, 0.0, 1.0]
    everywhere = hidden_elements(expected + 1.0, expected)
    assert everywhere["follows"] is None and "spread over every axis" in everywhere["summary"]
    # every value wrong, but channel 2 ten times more: the public picture shows it with the mean error per index
    received[:, :2, :] = 0.1
    public = figures.elements_figure(received, expected, 1e-6, 1e-8, title="t", key="y")
    assert public is not None
    assert public["axes"][1]["error"] == [0.1, 0.1, 1.0] and public["axes"][1]["fraction"] == [1.0, 1.0, 1.0]
    assert "mean absolute error" in drawing.figure_html(public)
    assert "error" not in hidden_elements(received, expected)["axes"][1]


def hidden_elements(received: np.ndarray, expected: np.ndarray) -> dict[str, Any]:
    figure = figures.elements_figure(received, expected, 1e-6, 1e-8, title="t", key="y")
    assert figure is not None
    return figures.hidden_view(figure)


def test_equal_arrays_and_other_shapes_give_no_picture() -> None:
    a = np.ones((2, 3))
    assert figures.elements_figure(a, a, 1e-6, 1e-8, title="t", key="y") is None
    assert figures.elements_figure(np.ones(6), a, 1e-6, 1e-8, title="t", key="y") is None


def test_nan_in_the_output_is_marked_not_lost() -> None:
    expected = np.arange(6.0).reshape(2, 3)
    received = expected.copy()
    received[1, 2] = np.nan
    figure = figures.elements_figure(received, expected, 1e-6, 1e-8, title="t", key="y")
    assert figure is not None
    assert figure["received"][5] is None and figure["differs"][5] is True
    assert figure["heat"]["decades"][1][2] == figures.DECADE_HIGH  # NaN where a number was expected: the most
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
            if figure["kind"] == "elements" and figure["from_reference"]:
                assert figure["hidden"] is True and figure["expected"] is None
                assert all("error" not in axis for axis in figure.get("axes", []))
                if "heat" in figure:
                    assert figure["heat"]["measure"] == "relative error (power of ten)"
                    assert all(
                        v is None or (isinstance(v, int) and figures.DECADE_LOW <= v <= figures.DECADE_HIGH)
                        for row in figure["heat"]["values"]
                        for v in row
                    )
                assert all(d is None or isinstance(d, int) for d in figure["decades"])
                received, expected = first_pair(check.message)
                assert figure["first"]["expected"] == pytest.approx(expected, rel=1e-5)
                assert figure["first"]["received"] == pytest.approx(received, rel=1e-5)
            elif figure["kind"] == "trajectory":
                assert figure["hidden"] is True
                assert all(s["expected"] is None for s in figure["series"])
                assert all(r is None or r == figures.two_digits(r) for s in figure["series"] for r in s["ratio"])
                received, expected = first_pair(check.message)
                assert figure["first"]["expected"] == pytest.approx(expected, rel=1e-5)
            elif figure["kind"] == "histogram":
                # the student's samples and the bounds the message states (from the formula, not a reference run)
                s = figure["statistic"]
                if s is not None and s["name"].startswith("variance"):
                    assert f"{s['expected']:.5g}" in check.message
            if figure["from_reference"]:
                assert check.instructor_figure is not None and check.instructor_figure["hidden"] is False
            else:  # the expected side is the student's own data or a formula: nothing to hide
                assert check.instructor_figure is None
    assert {"elements", "trajectory", "histogram", "fit", "shapes", "masks"} <= kinds


def numbers_in(value: Any) -> list[float]:
    """Every number in a figure's JSON, the public case's (data of the handout's pack) left out."""
    if isinstance(value, dict):
        return [n for k, v in value.items() if k != "public" for n in numbers_in(v)]
    if isinstance(value, list):
        return [n for v in value for n in numbers_in(v)]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [float(value)]
    return []


def test_no_expected_value_a_student_lacks_is_in_a_hidden_figure(hidden: GradeReport) -> None:
    """Scan every number of every hidden figure (its own values aside, which the student has): none is one of the
    expected values where the student differs, to a millionth, but the first pair the message states."""
    scanned = 0
    for ex in hidden.exercises:
        for check in failing(ex):
            full, shown = check.instructor_figure, check.figure
            if full is None:
                continue
            assert shown is not None and shown["hidden"]
            if full["kind"] == "elements":
                secret = [e for e, d in zip(full["expected"], full["differs"], strict=True) if d and e is not None]
                own = set(shown["received"])
            else:
                secret = [
                    e
                    for s in full["series"]
                    for e, d in zip(s["expected"], s["differs"], strict=True)
                    if d and e is not None
                ]
                own = {r for s in shown["series"] for r in s["received"]}
            secret = [e for e in secret if e != full["first"]["expected"] and not (e == round(e) and abs(e) <= 1000)]
            found = [n for n in numbers_in({k: v for k, v in shown.items() if k != "first"}) if n not in own]
            for e in secret:
                near = [n for n in found if abs(n - e) <= 1e-6 * max(abs(e), 1e-12)]
                assert not near, (ex.id, check.name, e, near)
            scanned += len(secret)
    assert scanned > 500


def test_a_hidden_ratio_leaves_the_expected_value_a_band_wide() -> None:
    """A two-digit ratio leaves an expected value anywhere in a band at least 0.5% wide (five thousand times the
    1e-6 a check asks for): the expected value estimated from a hidden figure and one's own values fails."""
    rng = np.random.default_rng(7)
    for true_ratio in rng.uniform(0.05, 20.0, 2000):
        shown = figures.two_digits(true_ratio)
        assert shown is not None
        magnitude = 10 ** (math.floor(math.log10(shown)) - 1)
        band = [(shown - magnitude / 2) / shown, (shown + magnitude / 2) / shown]  # true / shown lies in there
        assert band[1] - band[0] >= 0.005 - 1e-12
    # AdamW without bias correction: each step's change, yours over expected, from a hidden figure
    ex = graded("optim.AdamW", "adamw-no-bias-correction")
    check = next(c for c in failing(ex) if c.figure and c.figure["kind"] == "trajectory")
    hidden_figure, full = check.figure, check.instructor_figure
    assert hidden_figure is not None and full is not None
    for s_shown, s_full in zip(hidden_figure["series"], full["series"], strict=True):
        ratios, received, expected = s_shown["ratio"], s_shown["received"], s_full["expected"]
        for t in range(1, len(received)):  # estimate each expected step from the last true value and the ratio
            guess = expected[t - 1] + (received[t] - received[t - 1]) / ratios[t]
            assert abs(guess - expected[t]) > 1e-9 * max(1.0, abs(expected[t]))  # the check's rtol 1e-9: it fails


def test_a_power_of_ten_is_never_narrower_than_the_error_itself() -> None:
    """The heat map's and the sample's powers of ten: a band [10^k, 10^(k+1)) of relative errors, on both sides of
    the student's value: the expected value is known no better than the student's own error."""
    rng = np.random.default_rng(3)
    expected = rng.standard_normal((6, 9))
    received = expected * (1 + rng.choice([-1, 1], expected.shape) * 10 ** rng.uniform(-5, 0, expected.shape))
    full = figures.elements_figure(received, expected, 1e-6, 1e-8, title="t", key="y")
    assert full is not None
    shown = figures.hidden_view(full)
    for r, e, k in zip(shown["received"], full["expected"], shown["decades"], strict=True):
        if k is None:
            continue
        rel = abs(r - e) / (abs(e) + 1e-8 / 1e-6)
        assert 10**k <= rel * (1 + 1e-6) and rel < 10 ** (k + 1) * (1 + 1e-6)  # the band holds the truth
        low, high = r / (1 + 10 ** (k + 1)), r / (1 + 10**k)  # expected values consistent with it, one side
        assert abs(high - low) >= 0.9 * 10**k * abs(e) / (1 + 10 ** (k + 1))


def test_the_biased_running_variance_shows_one_constant_factor_without_the_expected_values(
    hidden: GradeReport, public: GradeReport
) -> None:
    """Done when: the server's report of the biased running variance shows, without the expected values, that
    what each step adds is off by one constant factor at every step; the instructor's view draws the expected."""
    ex = next(e for e, (_, m, _) in zip(hidden.exercises, KNOWN, strict=True) if m == "bn-biased-running-var")
    check = next(c for c in failing(ex) if c.name == "running_var")
    figure = check.figure
    assert figure is not None and check.instructor_figure is not None
    ratios = {r for s in figure["series"] for r in s["ratio"]}
    assert len(ratios) == 1 and 0.5 < ratios.pop() < 1.0  # m/(m-1) less: one factor, every step and channel
    assert "one constant factor" in figure["summary"] and all(s["expected"] is None for s in figure["series"])
    page = drawing.figure_html(figure)
    assert "expected (dashed" not in page.split('class="ng-figure ng-public"')[0]  # the hidden picture: no expected
    assert "yours / expected, per step" in page
    full = drawing.figure_html(check.instructor_figure, instructor=True)
    assert "expected (dashed, hollow squares)" in full and "Instructor" in full
    # beside it, the public case drawn in full: the very figure the handout's own grading draws for that code
    twin = figure["public"]
    pex = next(e for e, (_, m, _) in zip(public.exercises, KNOWN, strict=True) if m == "bn-biased-running-var")
    own = next(c.figure for c in failing(pex) if c.name == "running_var")
    assert own is not None
    same = ("series", "steps", "first", "ratio_of", "kind")
    assert {k: twin[k] for k in same} == {k: own[k] for k in same}
    assert twin["public_case"] == {"mistake": "bn-biased-running-var"}


def test_every_hidden_check_with_a_named_mistake_draws_the_public_case_where_it_fails_too(
    hidden: GradeReport, public: GradeReport
) -> None:
    pairs = 0
    for hex_, pex in zip(hidden.exercises, public.exercises, strict=True):
        own = {c.name: c for c in pex.checks}
        for check in failing(hex_):
            twin = (check.figure or {}).get("public")
            if twin is None:
                own_check = own[check.name]
                assert not (
                    check.misconception
                    and check.figure
                    and check.figure.get("from_reference")
                    and not own_check.passed
                    and own_check.misconception == check.misconception
                    and own_check.figure
                    and own_check.figure["kind"] == check.figure["kind"]
                ), (hex_.id, check.name)
                continue
            pairs += 1
            theirs = own[check.name].figure
            assert theirs is not None and twin["kind"] == theirs["kind"]
            for key in ("received", "expected", "differs", "shape", "series"):
                assert twin.get(key) == theirs.get(key), (hex_.id, check.name, key)
    assert pairs >= 8


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
    figure = figures.elements_figure(received, expected, 1e-6, 1e-8, title="t", key="y")
    assert figure is not None
    picture = drawing.figure_html(figure).split('<ul class="ng-legend">')[0]
    assert picture.count('stroke-width="2.2"') == 2  # two crosses
    assert picture.count("<circle") == 8  # eight round markers


def test_damaged_figure_data_shows_its_words_and_never_breaks_the_page(hidden: GradeReport) -> None:
    figure = dict(next(f for f in all_figures(hidden) if f["kind"] == "elements"))
    damage: dict[str, Any]
    for damage in (
        {"received": None},
        {"received": ["x", "y"]},
        {"first": {}},
        {"heat": {"values": [[]]}},
        {"differs": 3},
        {"edges": []},
    ):
        broken = {**figure, **damage}
        fragment = drawing.figure_html(broken)
        assert figure["summary"].split(":")[0] in fragment
    histogram = next(f for f in all_figures(hidden) if f["kind"] == "histogram")
    assert "could not be drawn" in drawing.figure_html({**histogram, "edges": [], "counts": [1]})


def test_text_from_student_code_is_escaped_in_the_page() -> None:
    check = CheckResult(
        "forward",
        False,
        0.0,
        1.0,
        'ValueError: <script>alert("x")</script>',
        figure={"kind": "unknown", "summary": "<img src=x onerror=alert(1)>", "title": "t"},
    )
    page = format_html(GradeReport("<b>eve</b>", [ExerciseResult("activations.ReLU", "failed", 0, 1, [check])]))
    assert "<script>" not in page and "<img" not in page and "<b>eve" not in page
    assert "&lt;script&gt;" in page


def test_the_page_puts_known_mistakes_first(hidden: GradeReport) -> None:
    page = format_html(hidden)
    mistakes = page.index("Known mistakes in your code")
    assert mistakes < page.index("<table") < page.index('class="ng-check"')
    assert "ln-batch-axis" in page[mistakes : page.index("<table")]
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page  # self-contained


# --------------------------------------------------------------------------- the command line


@pytest.fixture()
def cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, hidden: GradeReport) -> Path:
    for name in ("GRADE_DB", "GRADE_STUDENT", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exercises").mkdir()
    monkeypatch.setattr(
        "grader.course.grading.grade", lambda path, selectors, student, limits=None, workspace=None: hidden
    )
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
    # the same page, its links to the course text relative to where each lies (text/ beside exercises/)
    assert 'href="text/normalization.html#' in page
    assert (cli_env / ".grade" / "last-report.html").read_text() == page.replace('href="text/', 'href="../text/')


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


def test_the_handout_command_has_the_same_options(
    cli_env: Path, monkeypatch: pytest.MonkeyPatch, hidden: GradeReport
) -> None:
    from grader.student import cli as student_cli

    monkeypatch.setattr("grader.student.engine.grading.grade", lambda *a, **k: hidden)
    result = CliRunner().invoke(
        student_cli.cli, ["submit", "--json", "--arrays", "--html", "r.html"], catch_exceptions=False
    )
    assert result.exit_code == 1 and '"figure"' in result.output and (cli_env / "r.html").exists()
    assert CliRunner().invoke(student_cli.cli, ["view", "--no-open"]).exit_code == 0


def test_every_kind_has_a_drawing_and_an_unknown_kind_shows_its_words() -> None:
    assert set(drawing.DRAW) == {"elements", "trajectory", "histogram", "fit", "shapes", "masks"}
    fragment = drawing.figure_html({"kind": "from-a-newer-grader", "title": "t", "summary": "what it shows"})
    assert "<svg" not in fragment and "what it shows" in fragment


def test_a_correct_submission_graded_alone_has_no_figures() -> None:
    ex = graded("normalization.BatchNorm1d", None)
    assert ex.status == "passed" and all(c.figure is None for c in ex.checks)


# ------------------------------------------------------------------ the store, the server's report, the dashboard


def test_figures_are_stored_with_the_attempt_and_rebuilt_for_the_server_and_the_dashboard(
    tmp_path: Path, hidden: GradeReport
) -> None:
    from grader.server import dashboard
    from grader.queue.records import report_of
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
    code.write_text(
        code.read_text().replace("return np.maximum(self.x, 0.0)", "return np.maximum(self.x, 0.1 * self.x)")
    )
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
    hidden = [f for f in shown if f["from_reference"]]
    assert hidden and all(f["kind"] == "elements" and f["hidden"] and f["expected"] is None for f in hidden)
    assert "instructor_figure" not in remote.stdout  # the student's answer carries no expected values
    page = (tmp_path / "page.html").read_text()
    assert page.count('<figure class="ng-figure">') == len(shown)
    # the server's store kept the full figures for the instructor's dashboard, the expected values drawn
    from grader.student.store import Store

    with Store.open(db) as store:
        rows = [c for sub in store.submissions(student="s1") for c in store.check_results(sub["id"])]
    full = [c["instructor_figure"] for c in rows if c["instructor_figure"]]
    assert len(full) == len(hidden) and all(f["expected"] is not None and not f["hidden"] for f in full)


# --------------------------------------------------------------------------- every failing check kind


# A failing check draws no picture only where its failure has no numbers to draw: the code raised (a crash), an
# error was expected and not raised, the values were right but the code warned, an attribute must be None, or
# the check waits for the code it needs.
MESSAGE_ONLY = (
    " raised ",
    "must raise",
    "nothing was raised",
    "must be None",
    "not graded yet",
    "earns nothing yet",
    "not implemented yet",
    "only the warning costs",
)


def catalogue_exercises() -> list[str]:
    from grader.mistakes import CATALOGUE

    return sorted({m.exercise for m in CATALOGUE.values()})


@pytest.mark.slow
@pytest.mark.parametrize("exercise", catalogue_exercises())
def test_every_failing_check_of_every_known_mistake_has_a_picture(exercise: str) -> None:
    """Done when: every failing check kind in the catalogue has a picture (graded live, as the server does), drawn
    without an error, hiding the expected values where they are the reference's."""
    import reference.opencl.emulation  # noqa: F401  (the kernels' reference side: NumPy emulations)
    from checks_util import grade_in_process
    from grader.mistakes import CATALOGUE

    pictured = 0
    for mistake in (m for m in CATALOGUE.values() if m.exercise == exercise):
        for check in grade_in_process(exercise, mistake.namespace):
            if check.passed:
                continue
            if check.figure is None:
                assert any(words in check.message for words in MESSAGE_ONLY), (mistake.id, check.name, check.message)
                continue
            pictured += 1
            for figure in (check.figure, check.figure.get("public"), check.instructor_figure):
                if figure is not None:
                    drawing.DRAW[figure["kind"]](figure)  # (figure_html would hide an error behind its words)
            if check.figure.get("from_reference"):
                assert check.figure["hidden"] and check.instructor_figure is not None
    assert pictured
