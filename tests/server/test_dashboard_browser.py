"""The instructor's dashboard in a real browser: Playwright driving Debian's chromium.

A server over a generated class (test_dashboard.class_server); every page at
390 px and 1280 px wide with no console error, no failed request and no
horizontal overflow of the page; sorting and filtering clicked; a student
and an exercise followed; the keyboard path and its visible focus; the
override form; the offline ``grade report --format html`` file. Screenshots
of every page at both widths go to tests/artifacts/ (ignored by git).
Playwright's own browser download is not used: the system chromium is.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import require_program
from grader.term import class_report
from grader.server import class_html
from grader import quiz as quiz_lib
from grader.server import dashboard
from grader.student.store import Store
from test_dashboard import ClassServer, class_server

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
WIDTHS = (390, 1280)
PAGES = {
    "overview": "/instructor/",
    "student": "/instructor/students/s0003",
    "exercise": "/instructor/exercises/activations.ReLU",
    "quizzes": "/instructor/quizzes",
    "login": "/instructor/login",
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_program("chromium", "chromium")
    playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]' installs playwright")
    args = ["--no-sandbox"] if os.geteuid() == 0 else []  # chromium refuses its sandbox as root
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=shutil.which("chromium"), args=args)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def cls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClassServer]:
    running = class_server(tmp_path_factory.mktemp("dashboard-browser"))
    try:
        yield running
    finally:
        running.server.stop()


class Watched:
    """A page with everything that went wrong on it: console errors, page errors, failed requests."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.problems: list[str] = []
        page.on(
            "console",
            lambda m: self.problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None,
        )
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: self.problems.append(f"request failed: {r.url} {r.failure}"))
        page.on("response", lambda r: self.problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)

    def overflow(self) -> int:
        """How many pixels the page is wider than the window (0: no horizontal scrolling)."""
        return int(self.page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))


def open_page(browser: Any, width: int) -> tuple[Any, Watched]:
    context = browser.new_context(viewport={"width": width, "height": 900})
    return context, Watched(context.new_page())


def log_in(cls: ClassServer, watched: Watched) -> None:
    watched.page.goto(cls.url + "/instructor/")  # redirected to the login form
    assert "/instructor/login" in watched.page.url
    watched.page.fill("#token", cls.generated.instructor_token)
    watched.page.click("button[type=submit]")
    watched.page.wait_for_url(cls.url + "/instructor/")


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_reads_at_this_width_without_errors(browser: Any, cls: ClassServer, width: int) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    context, watched = open_page(browser, width)
    try:
        log_in(cls, watched)
        for name, path in PAGES.items():
            watched.page.goto(cls.url + path)
            watched.page.screenshot(path=str(ARTIFACTS / f"dashboard-{name}-{width}.png"), full_page=True)
            assert watched.overflow() <= 0, f"{name} is wider than {width} px"
            assert watched.page.locator("h1").first.is_visible()
        assert watched.problems == []
    finally:
        context.close()


def visible_totals(page: Any) -> list[float]:
    return [
        float(v)
        for v in page.eval_on_selector_all(
            "#grid tbody tr:not([hidden])", "rows => rows.map(r => r.getAttribute('data-total'))"
        )
    ]


def test_sort_and_filter_in_the_page(browser: Any, cls: ClassServer) -> None:
    context, watched = open_page(browser, 1280)
    page = watched.page
    try:
        log_in(cls, watched)
        total = page.locator('th[data-sort="total"] a')
        total.click()
        assert page.get_attribute('th[data-sort="total"]', "aria-sort") == "ascending"
        assert page.get_attribute('th[data-sort="name"]', "aria-sort") == "none"
        totals = visible_totals(page)
        assert len(totals) == 40 and totals == sorted(totals)
        # the script's order is the server's order for the same address (ties included)
        ids = page.eval_on_selector_all("#grid tbody tr", "rows => rows.map(r => r.dataset.id)")
        served = httpx.get(cls.url + "/instructor/?sort=total&order=asc", headers=cls.teacher, timeout=60).text
        assert ids == re.findall(r'<tr data-id="([^"]+)"', served)
        total.click()
        assert visible_totals(page) == sorted(totals, reverse=True)
        assert "sort=total" in page.url and "order=desc" in page.url  # kept in the address
        # struggling: the rows the server would show for the same filter
        page.fill("#f-threshold", "40")
        page.fill("#f-days", "10")
        page.check("#f-struggling")
        shown = page.eval_on_selector_all("#grid tbody tr:not([hidden])", "rows => rows.map(r => r.dataset.id)")
        report = cls.report()
        now = datetime.fromisoformat(page.get_attribute("#grid", "data-now"))
        expected = [
            s.name
            for s in report.students
            if dashboard.is_struggling(report, s, dashboard.Filters(struggling=True, threshold=40, days=10), now)
        ]
        assert sorted(shown) == sorted(expected) and 0 < len(shown) < 40
        assert page.inner_text("#shown") == f"Showing {len(shown)} of 40 students."
        # a chapter: its columns only
        page.select_option("#f-chapter", "linear")
        assert page.locator('#grid thead a[title="linear.Linear"]').is_visible()
        assert not page.locator('#grid thead a[title="activations.ReLU"]').is_visible()
        assert not page.locator("#grid tbody tr:not([hidden]) td.g0").first.is_visible()
        # reloading the address gives the same view from the server, without the script's help
        page.reload()
        assert page.get_attribute("#grid", "data-show") is not None and page.is_checked("#f-struggling")
        assert page.inner_text("#shown").startswith("Showing ")
        assert watched.problems == []
    finally:
        context.close()


def test_follow_a_student_and_an_exercise(browser: Any, cls: ClassServer) -> None:
    context, watched = open_page(browser, 1280)
    page = watched.page
    try:
        log_in(cls, watched)
        link = page.locator('#grid tbody tr:not([data-progress=""])').nth(5).locator("th a")
        name = link.inner_text()
        link.click()
        page.wait_for_url(re.compile(r".*/instructor/students/s\d+$"))
        assert name in page.inner_text("h1")
        assert page.locator("svg polyline.line").count() == 1  # the total over time
        latest = page.locator("details.attempt").first  # the report as the student saw it
        assert latest.get_attribute("open") is not None
        assert "normgrade report for" in latest.locator("pre").inner_text()
        latest.locator("summary").click()  # folds away
        assert not latest.locator("pre").is_visible()
        page.locator("table.data a", has_text="activations.").first.click()  # to an exercise
        page.wait_for_url(re.compile(r".*/instructor/exercises/activations\.\w+$"))
        assert page.inner_text("h1").startswith("activations.")
        page.go_back()
        page.go_back()
        page.locator('#grid thead th.ex a[title="linear.Linear"]').click()  # from the grid's header
        page.wait_for_url(cls.url + "/instructor/exercises/linear.Linear")
        assert "Pass rate over time" in page.inner_text("main")
        assert watched.problems == []
    finally:
        context.close()


def test_keyboard_reaches_the_controls_with_a_visible_focus(browser: Any, cls: ClassServer) -> None:
    context, watched = open_page(browser, 1280)
    page = watched.page
    try:
        log_in(cls, watched)
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.className") == "skip"
        assert page.evaluate("getComputedStyle(document.activeElement).left") == "8px"  # shown when focused
        for _ in range(40):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.closest('th[data-sort=\"late\"]') !== null"):
                break
        else:
            raise AssertionError("Tab never reached the Late column's sort link")
        outline = page.evaluate(
            "(() => { const s = getComputedStyle(document.activeElement); return [s.outlineStyle, s.outlineWidth]; })()"
        )
        assert outline[0] != "none" and outline[1] == "3px"
        page.keyboard.press("Enter")
        assert page.get_attribute('th[data-sort="late"]', "aria-sort") == "descending"
        assert watched.problems == []
    finally:
        context.close()


def test_override_form_in_the_browser(browser: Any, cls: ClassServer) -> None:
    context, watched = open_page(browser, 390)
    page = watched.page
    try:
        log_in(cls, watched)
        page.goto(cls.url + "/instructor/students/s0020")
        page.select_option("#o-exercise", "linear.Linear")
        page.fill("#o-score", "7")
        page.click("form.override-form button[type=submit]")
        assert page.evaluate("document.querySelector('#o-comment').validity.valueMissing")  # the browser asks first
        page.fill("#o-comment", "late work accepted: illness")
        page.click("form.override-form button[type=submit]")
        page.wait_for_url(re.compile(r".*/instructor/students/s0020\?saved=1.*"))
        assert "Override saved." in page.inner_text("main")
        assert "late work accepted: illness" in page.inner_text("main")
        assert watched.problems == []
    finally:
        context.close()
    with Store.open(cls.db) as store:
        assert [(o["exercise"], o["score"]) for o in store.score_overrides("s0020")] == [("linear.Linear", 7.0)]


def test_offline_report_file_works_in_the_browser(browser: Any, cls: ClassServer) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    quizzes = quiz_lib.load_all(quiz_lib.default_quiz_dir())
    with Store.open(cls.db) as store:
        report = class_report.build(store, quizzes=quizzes, course=cls.generated.course)
        text = class_html.format_html(report, store)
    target = ARTIFACTS / "report.html"
    target.write_text(text, encoding="utf-8")
    for width in WIDTHS:
        context, watched = open_page(browser, width)
        page = watched.page
        try:
            page.goto(target.as_uri())
            page.screenshot(path=str(ARTIFACTS / f"report-{width}.png"))
            assert watched.overflow() <= 0
            page.locator('th[data-sort="late"] a').click()
            late = [
                int(v)
                for v in page.eval_on_selector_all(
                    "#grid tbody tr", "rows => rows.map(r => r.getAttribute('data-late'))"
                )
            ]
            assert late == sorted(late, reverse=True)
            page.locator("#grid tbody tr").first.locator("th a").click()  # an anchor in the same file
            assert re.search(r"#student-\d+$", page.url)
            assert watched.problems == []
        finally:
            context.close()


def test_the_overview_reads_without_javascript(browser: Any, cls: ClassServer) -> None:
    """Sorting and filtering through the address alone (the links and the form), with scripts off."""
    context = browser.new_context(viewport={"width": 390, "height": 900}, java_script_enabled=False)
    watched = Watched(context.new_page())
    page = watched.page
    try:
        page.goto(cls.url + "/instructor/login")
        page.fill("#token", cls.generated.instructor_token)
        page.click("button[type=submit]")
        page.wait_for_url(cls.url + "/instructor/")
        page.click('th[data-sort="total"] a')  # a plain link now
        page.wait_for_url(re.compile(r".*sort=total&order=asc.*"))
        assert visible_totals(page) == sorted(visible_totals(page))
        page.check("#f-struggling")
        page.fill("#f-threshold", "40")
        page.fill("#f-days", "10")
        page.click("#filters button[type=submit]")  # a GET of the form
        page.wait_for_url(re.compile(r".*struggling=1.*"))
        shown = page.locator("#grid tbody tr:not([hidden])").count()
        assert 0 < shown < 40 and page.inner_text("#shown") == f"Showing {shown} of 40 students."
        assert watched.overflow() <= 0 and watched.problems == []
    finally:
        context.close()


def test_the_grids_overflow_is_visible_at_1280_px(browser: Any, cls: ClassServer) -> None:
    """The quiz columns sit past the right edge: the note above the grid says so, and the grid's box (with its
    scrollbar, which headless chromium does not draw) fits in the window, so the scrollbar is on screen."""
    context, watched = open_page(browser, 1280)
    page = watched.page
    try:
        log_in(cls, watched)
        wrap = page.locator(".grid-wrap")
        sizes = page.evaluate(
            "(() => { const w = document.querySelector('.grid-wrap'); w.scrollIntoView();"
            " const r = w.getBoundingClientRect();"
            " return {scroll: w.scrollWidth, client: w.clientWidth,"
            " bottom: r.bottom, top: r.top, inner: window.innerHeight}; })()"
        )
        assert sizes["scroll"] > sizes["client"], "at 1280 px the grid is wider than its box"
        assert sizes["bottom"] <= sizes["inner"], "the grid's box, scrollbar included, fits in the window"
        assert page.locator("#grid-more").is_visible() and "quiz columns" in page.inner_text("#grid-more")
        quiz = page.locator("#grid thead th.ex a", has_text="Quiz:").last
        before = quiz.bounding_box()
        assert before is not None and before["x"] > sizes["client"], "the last quiz column starts out of view"
        wrap.evaluate("w => { w.scrollLeft = w.scrollWidth; }")
        box = quiz.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 1280, "scrolled, the quiz columns come into view"
        assert watched.problems == []
    finally:
        context.close()


def test_the_student_page_is_cards_at_390_px(browser: Any, cls: ClassServer) -> None:
    context, watched = open_page(browser, 390)
    page = watched.page
    try:
        log_in(cls, watched)
        with Store.open(cls.db) as store:  # a student with uploads (the generated class has some without)
            student = next(s for s in sorted(r["student"] for r in store.submissions()) if s)
        page.goto(cls.url + f"/instructor/students/{student}")
        page.screenshot(path=str(ARTIFACTS / "dashboard-student-cards-390.png"), full_page=True)
        table = page.locator("table.data.stack").first
        assert table.evaluate("t => getComputedStyle(t.tBodies[0].rows[0]).display") == "block"
        assert table.evaluate("t => t.scrollWidth <= t.parentElement.clientWidth"), "no sideways scrolling"
        label = table.evaluate("t => getComputedStyle(t.tBodies[0].rows[0].cells[1], '::before').content")
        assert "Counts" in label
        assert watched.overflow() <= 0 and watched.problems == []
    finally:
        context.close()


def test_the_offline_report_shows_one_page_at_a_time(browser: Any, cls: ClassServer) -> None:
    quizzes = quiz_lib.load_all(quiz_lib.default_quiz_dir())
    with Store.open(cls.db) as store:
        report = class_report.build(store, quizzes=quizzes, course=cls.generated.course)
        text = class_html.format_html(report, store)
    target = ARTIFACTS / "report-pages.html"
    ARTIFACTS.mkdir(exist_ok=True)
    target.write_text(text, encoding="utf-8")
    shown = (
        "(() => Array.from(document.querySelectorAll('.page')).filter(p => p.offsetParent !== null)"
        ".map(p => p.querySelector('[id]').id))()"
    )
    for width in WIDTHS:
        context, watched = open_page(browser, width)
        page = watched.page
        try:
            page.goto(target.as_uri())
            assert page.evaluate(shown) == ["overview"]
            home = page.evaluate("document.documentElement.scrollHeight")
            for anchor, first in (
                ("#students", "students"),
                ("#student-3", "student-3"),
                ("#exercises", "exercises"),
                ("#exercise-activations.ReLU", "exercise-activations.ReLU"),
                (f"#quiz-{report.chapters[0][0]}", "quiz-items"),
                ("#overview", "overview"),
            ):
                page.goto(target.as_uri() + anchor)
                assert page.evaluate(shown) == [first], anchor
            page.goto(target.as_uri() + "#student-3")
            page.screenshot(path=str(ARTIFACTS / f"report-student-{width}.png"), full_page=True)
            student = page.evaluate("document.documentElement.scrollHeight")
            page.goto(target.as_uri() + "#students")
            page.locator("#students .index a").nth(5).click()  # its own navigation
            assert re.search(r"#student-5$", page.url) and page.evaluate(shown) == ["student-5"]
            total = page.evaluate("Array.from(document.querySelectorAll('.page')).length")
            assert total == 1 + 1 + 1 + len(report.exercise_ids) + 1 + len(report.students)
            assert home < 20000 and student < 20000, (home, student)
            assert watched.problems == []
        finally:
            context.close()
