"""The report's web page in a real browser (Playwright driving Debian's chromium), at 1280 and 390 px.

The page of the known submissions (tests/figures_util.py: a correct one and a
mistake of each kind), graded live (hidden checks) and on case packs (public
checks): no console error, no failed request, no horizontal overflow of the
page, every picture an image with an accessible name, the known mistakes
before the summary table. Screenshots go to tests/artifacts/: the top of the
page, and one picture of each kind (report-<hidden|public>-<kind>-<width>.png).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.student.engine.model import GradeReport
from grader.student.feedback.report_html import format_html

from figures_util import known_report
from test_dashboard_browser import ARTIFACTS, WIDTHS, Watched, browser  # noqa: F401  (the browser fixture)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    folder = tmp_path_factory.mktemp("report-pages")
    reports: dict[str, GradeReport] = {"hidden": known_report(), "public": known_report(folder / "packs")}
    paths = {}
    for name, report in reports.items():
        paths[name] = folder / f"{name}.html"
        paths[name].write_text(format_html(report), encoding="utf-8")
    yield paths


def open_file(browser: Any, path: Path, width: int) -> tuple[Any, Watched]:
    context = browser.new_context(viewport={"width": width, "height": 900})
    watched = Watched(context.new_page())
    watched.page.goto(path.as_uri())
    return context, watched


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("which", ["hidden", "public"])
def test_the_report_page_reads_at_this_width(browser: Any, pages: dict[str, Path], which: str, width: int) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    context, watched = open_file(browser, pages[which], width)
    page = watched.page
    try:
        page.screenshot(path=str(ARTIFACTS / f"report-{which}-top-{width}.png"))
        assert watched.overflow() <= 0, f"the page is wider than {width} px"
        images = page.get_by_role("img")
        count = images.count()
        assert count >= 10
        names = page.eval_on_selector_all(
            "svg[role=img]",
            "els => els.map(e => e.getAttribute('aria-labelledby').split(' ')"
            "  .map(id => (document.getElementById(id) || {}).textContent || '').join(' ').trim())")
        assert len(names) == count and all(len(n) > 20 for n in names)
        # every picture fits its box or scrolls inside it; none is cut off by the page
        boxes = page.eval_on_selector_all(".ng-figure", "els => els.map(e => e.getBoundingClientRect().right)")
        assert all(right <= width + 0.5 for right in boxes)
        order = page.evaluate("""() => {
            const m = document.querySelector('.ng-mistakes'), t = document.querySelector('table');
            return m.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING ? 'mistakes first' : 'table first';
        }""")
        assert order == "mistakes first"
        kinds_seen = set()
        for check in page.locator(".ng-check").all():
            figure = check.locator(".ng-figure")
            if figure.count() == 0:
                continue
            kind = kind_of(check)
            if kind in kinds_seen:
                continue
            kinds_seen.add(kind)
            check.scroll_into_view_if_needed()
            check.screenshot(path=str(ARTIFACTS / f"report-{which}-{kind}-{width}.png"))
        assert {"elements-2d", "elements-3d", "trajectory", "histogram", "fit"} <= kinds_seen
        assert watched.problems == []
    finally:
        context.close()


def kind_of(check: Any) -> str:
    """Which picture a check shows, from its SVG titles (heat map: 2-D; axis summary: 3-D)."""
    titles = " ".join(check.locator("svg[role=img] title").all_text_contents())
    text = check.inner_text()
    if "which axis the error follows" in titles:
        return "elements-3d"
    if "where the error is" in titles:
        return "elements-2d"
    if "Histogram" in text:
        return "histogram"
    if "after each of" in text:
        return "trajectory"
    if "g(x)" in text:
        return "fit"
    return "elements"


def test_the_links_of_known_mistakes_lead_to_their_checks(browser: Any, pages: dict[str, Path]) -> None:
    context, watched = open_file(browser, pages["public"], 1280)
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


def test_the_dashboards_student_page_shows_the_same_pictures(
    browser: Any, tmp_path_factory: pytest.TempPathFactory  # noqa: F811
) -> None:
    """An upload recorded with its figures (hidden checks, as the server grades) is drawn on the instructor's
    page of that student, as the student's own page draws it."""
    from grader.student.store import Store
    from test_dashboard import class_server
    from test_dashboard_browser import log_in

    running = class_server(tmp_path_factory.mktemp("dashboard-pictures"), students=3)
    try:
        student = "s0001"
        report = known_report(student=student)
        with Store.open(running.db) as store:
            store.record_report(report, "test")
        pictures = sum(1 for ex in report.exercises for c in ex.checks if c.figure and not c.passed)
        for width in WIDTHS:
            context = browser.new_context(viewport={"width": width, "height": 900})
            watched = Watched(context.new_page())
            try:
                log_in(running, watched)
                watched.page.goto(running.url + f"/instructor/students/{student}")
                latest = watched.page.locator("details.attempt").first
                if latest.get_attribute("open") is None:
                    latest.locator("summary").click()
                figures = latest.locator(".pictures .ng-figure")
                assert figures.count() == pictures
                assert latest.locator(".pictures svg[role=img]").count() >= pictures
                latest.locator(".pictures h4").first.scroll_into_view_if_needed()
                watched.page.screenshot(path=str(ARTIFACTS / f"dashboard-student-pictures-{width}.png"))
                assert watched.overflow() <= 0
                assert watched.problems == []
            finally:
                context.close()
    finally:
        running.server.stop()
