"""The report's web page in a real browser (Playwright driving Debian's chromium), at 1280 and 390 px.

The pages of the known submissions (tests/figures_util.py: a correct one and a
mistake of each kind of picture), as the student gets them: the handout's
``grade submit --html`` (public checks, from case packs) and ``grade view`` of
a course server's report (hidden checks, graded live). Each is held to: no
console error, no failed request, no horizontal scroll; no picture cut off
by the window or drawing outside its view box; no label box overlapping
another label, a line or a mark (tests/figures_util.py LAYOUT_JS); exercise
names broken across lines only after a dot; one picture per failing check,
every kind of picture there; the known mistakes before the summary table.
Screenshots go to tests/artifacts/: the top of each page, and one check of
each kind of picture (report-<html|view>-<kind>-<width>.png).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from grader.student.client.wire import report_to_dict
from grader.student.engine.model import GradeReport
from grader.student.feedback.report import write_json

from figures_util import LAYOUT_JS, MIDWORD_JS, known_report
from test_dashboard_browser import ARTIFACTS, WIDTHS, Watched, browser  # noqa: F401  (the browser fixture)

pytestmark = pytest.mark.slow

# Every kind of picture the known submissions draw (kind_of below): the 2-D heat map and the 3-D axis summary
# are two looks of "elements".
KINDS = {"elements-2d", "elements-3d", "elements", "trajectory", "histogram", "fit", "shapes", "masks"}


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """``html``: the handout's `grade submit --html` page (public checks); ``view``: `grade view` of a course
    server's report (hidden checks), both written by the handout's own command line."""
    from grader.student import cli as student_cli

    folder = tmp_path_factory.mktemp("report-pages")
    (folder / "exercises").mkdir()
    public, hidden = known_report(folder / "packs"), known_report()
    runner = CliRunner()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        for name in ("GRADE_DB", "GRADE_STUDENT", "NO_COLOR"):
            patch.delenv(name, raising=False)
        patch.setattr("grader.student.engine.grading.grade", lambda *a, **k: public)
        submitted = runner.invoke(student_cli.cli, ["submit", "--html", "report.html"], catch_exceptions=False)
        assert submitted.exit_code == 1, submitted.output
        # a remote submission keeps the server's report (hidden checks) where `grade view` reads it
        write_json(report_to_dict(hidden), folder / ".grade" / "last-report.json")
        viewed = runner.invoke(student_cli.cli, ["view", "--no-open"], catch_exceptions=False)
        assert viewed.exit_code == 0, viewed.output
    assert "instructor_figure" not in (folder / ".grade" / "last-report.json").read_text()
    yield {"html": folder / "report.html", "view": folder / ".grade" / "last-report.html"}


def open_file(browser: Any, path: Path, width: int) -> tuple[Any, Watched]:  # noqa: F811  (the browser fixture)
    context = browser.new_context(viewport={"width": width, "height": 900})
    watched = Watched(context.new_page())
    watched.page.goto(path.as_uri())
    return context, watched


def kind_of(check: Any) -> str:
    """Which picture a check shows first (its own, not the public case beside it), from its SVG titles."""
    own = check.locator(".ng-figure:not(.ng-public)").first
    titles = " ".join(own.locator("svg[role=img] title").all_text_contents())
    caption = own.locator("figcaption").inner_text()
    if "which axis the error follows" in titles:
        return "elements-3d"
    if "where the error is" in titles:
        return "elements-2d"
    if caption.startswith("Shapes:"):
        return "shapes"
    if "Which elements" in caption:
        return "masks"
    if "Histogram" in caption:
        return "histogram"
    if "after each of" in caption:
        return "trajectory"
    if "g(x)" in caption:
        return "fit"
    return "elements"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("which", ["html", "view"])
def test_the_report_page_reads_at_this_width(browser: Any, pages: dict[str, Path], which: str, width: int) -> None:  # noqa: F811  (the browser fixture)
    ARTIFACTS.mkdir(exist_ok=True)
    context, watched = open_file(browser, pages[which], width)
    page = watched.page
    try:
        page.screenshot(path=str(ARTIFACTS / f"report-{which}-top-{width}.png"))
        assert watched.overflow() <= 0, f"the page is wider than {width} px"
        names = page.eval_on_selector_all(
            "svg[role=img]",
            "els => els.map(e => e.getAttribute('aria-labelledby').split(' ')"
            "  .map(id => (document.getElementById(id) || {}).textContent || '').join(' ').trim())",
        )
        assert len(names) >= 40 and all(len(n) > 20 for n in names)
        assert page.evaluate(LAYOUT_JS, ".ng-report") == []
        assert page.evaluate(MIDWORD_JS, ".ng-report .ng-id") == []
        order = page.evaluate("""() => {
            const m = document.querySelector('.ng-mistakes'), t = document.querySelector('table');
            return m.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING ? 'mistakes first' : 'table first';
        }""")
        assert order == "mistakes first"
        kinds_seen = set()
        for check in page.locator(".ng-check").all():
            own = check.locator(".ng-figure:not(.ng-public)")
            assert own.count() <= 1 and check.locator(".ng-public").count() <= 1  # one picture per failing check
            if own.count() == 0:
                continue
            kind = kind_of(check)
            if kind in kinds_seen:
                continue
            kinds_seen.add(kind)
            check.scroll_into_view_if_needed()
            check.screenshot(path=str(ARTIFACTS / f"report-{which}-{kind}-{width}.png"))
        assert kinds_seen == KINDS
        # a hidden check that names a known mistake draws the public case beside it; the handout's page has none
        assert (page.locator(".ng-public").count() > 0) == (which == "view")
        assert watched.problems == []
    finally:
        context.close()


def test_the_links_of_known_mistakes_lead_to_their_checks(browser: Any, pages: dict[str, Path]) -> None:  # noqa: F811  (the browser fixture)
    context, watched = open_file(browser, pages["html"], 1280)
    try:
        links = watched.page.locator(".ng-mistakes a")
        assert links.count() >= 7
        target = links.first.get_attribute("href")
        links.first.click()
        assert watched.page.evaluate("location.hash") == target
        assert watched.page.locator(target).is_visible()
        assert watched.problems == []
    finally:
        context.close()


def test_a_label_on_a_line_and_a_name_broken_mid_word_are_caught(browser: Any, tmp_path: Path) -> None:  # noqa: F811  (the browser fixture)
    """The layout checks themselves fail where they should: a label drawn over a line, two labels on each other,
    a picture drawing past its view box, a name broken inside a word."""
    page_text = """<!DOCTYPE html><html><body style="width:120px">
    <svg viewBox="0 0 200 100" width="400" height="200" role="img"><title>t</title>
    <polyline class="ng-data" points="0,50 200,50" stroke="black"/>
    <text x="10" y="55" font-size="12">on the line</text><text x="150" y="20" font-size="12">a</text>
    <text x="152" y="20" font-size="12">b</text><text x="190" y="90" font-size="12">past the edge</text></svg>
    <p class="ng-id" style="overflow-wrap:anywhere">activations.Sigmoid</p></body></html>"""
    (tmp_path / "bad.html").write_text(page_text)
    context, watched = open_file(browser, tmp_path / "bad.html", 390)
    try:
        found = " | ".join(watched.page.evaluate(LAYOUT_JS, "body"))
        assert 'crosses the label "on the line"' in found and '"a" overlaps "b"' in found
        assert "outside its view box" in found and "cut off by the window" in found
        assert watched.page.evaluate(MIDWORD_JS, ".ng-id")
    finally:
        context.close()


def test_the_dashboards_student_page_draws_the_expected_values_of_hidden_checks(
    browser: Any,
    tmp_path_factory: pytest.TempPathFactory,  # noqa: F811
) -> None:
    """An upload recorded as the server records it (hidden checks: the student's figure and the full one) is
    drawn on the instructor's page of that student with the expected values, at 1280 and 390 px, held to the same
    layout rules; the total over time fits the window."""
    from grader.student.store import Store
    from test_dashboard import class_server
    from test_dashboard_browser import log_in

    running = class_server(tmp_path_factory.mktemp("dashboard-pictures"), students=3)
    try:
        student = "s0001"
        report: GradeReport = known_report(student=student)
        with Store.open(running.db) as store:
            store.record_report(report, "test")
        pictures = sum(1 for ex in report.exercises for c in ex.checks if c.figure and not c.passed)
        full = sum(1 for ex in report.exercises for c in ex.checks if c.instructor_figure and not c.passed)
        assert 0 < full < pictures
        for width in WIDTHS:
            context = browser.new_context(viewport={"width": width, "height": 900})
            watched = Watched(context.new_page())
            try:
                log_in(running, watched)
                watched.page.goto(running.url + f"/instructor/students/{student}")
                latest = watched.page.locator("details.attempt").first
                if latest.get_attribute("open") is None:
                    latest.locator("summary").click()
                own = latest.locator(".pictures .ng-figure:not(.ng-public)")
                assert own.count() == pictures
                assert latest.locator(".pictures .ng-which", has_text="Instructor").count() == full
                assert latest.locator(".pictures li", has_text="expected (dashed, hollow squares)").count() >= 1
                latest.locator(".pictures h4").first.scroll_into_view_if_needed()
                watched.page.screenshot(path=str(ARTIFACTS / f"dashboard-student-pictures-{width}.png"))
                chart = watched.page.locator("h3", has_text="Exercise total over time").locator(
                    "xpath=following-sibling::div[1]"
                )
                chart.screenshot(path=str(ARTIFACTS / f"dashboard-student-total-{width}.png"))
                assert watched.overflow() <= 0
                assert watched.page.evaluate(LAYOUT_JS, "main") == []
                assert watched.page.evaluate(MIDWORD_JS, ".pictures .ng-id") == []
                assert json.dumps(watched.problems) == "[]"
            finally:
                context.close()
    finally:
        running.server.stop()
