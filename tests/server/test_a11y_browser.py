"""Accessibility, tested: axe-core (tests/a11y_util.py) finds no WCAG 2.2 A/AA violation, at 1280 and 390 px, on

- every page of the student's own (/student/: the login, the page, each chapter, each quiz, each upload in
  each state, and the pages a form answers with: a verdict, an unreadable answer, a preview, a regrade sent
  or refused, a page not found), over the seeded course of tests/student_pages_util.py;
- every page of the instructor's dashboard linked from /instructor/ (each student, each exercise, the quiz
  items, the term page with an open regrade request and an extension, similarity, the LMS page) and its
  login, over a generated class;
- the ``--html`` report (``grade submit --html``) of known submissions, hidden and public checks.

Every picture keeps its text alternative (each ``svg[role=img]`` is named by its title and description) and
no page scrolls sideways.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from a11y_util import assert_accessible, unreached_by_tab
from figures_util import known_report
from grader import quiz as quiz_lib
from grader.queue import records
from bench import sample_class
from grader.student.engine.model import GradeReport
from grader.student.feedback.report_html import format_html
from grader.student.store import Store
from grader.term import extensions, regrade
from server_util import Server
from student_pages_util import Seeded, served
from test_dashboard import ClassServer
from test_dashboard_browser import WIDTHS, Watched, browser, open_page  # noqa: F401  (the browser fixture)

pytestmark = pytest.mark.slow

NAMED_PICTURES = """() => Array.from(document.querySelectorAll('svg[role=img]')).map(svg => {
  const ids = (svg.getAttribute('aria-labelledby') || '').split(' ').filter(Boolean);
  const named = ids.map(id => (document.getElementById(id) || {}).textContent || '').join(' ').trim();
  return named || svg.getAttribute('aria-label') || '';
})"""


def check_page(watched: Watched, where: str) -> None:
    """No axe violation, every picture named, no sideways scrolling of the page."""
    page = watched.page
    assert_accessible(page, where)
    assert all(len(name) > 10 for name in page.evaluate(NAMED_PICTURES)), f"a picture without a name on {where}"
    assert watched.overflow() <= 0, f"{where} scrolls sideways"


# --- the student's pages ----------------------------------------------------------------------------------


@pytest.fixture
def student_server(tmp_path: Path) -> Iterator[tuple[Server, Seeded]]:
    """The seeded course served afresh for each width (the forms below change what the next run would see)."""
    with served(tmp_path) as running:
        yield running


@pytest.mark.parametrize("width", WIDTHS)
def test_every_student_page_meets_wcag_2_2_aa(
    browser: Any,
    student_server: tuple[Server, Seeded],  # noqa: F811
    width: int,
) -> None:
    server, seeded = student_server
    context, watched = open_page(browser, width)
    page = watched.page
    try:
        page.goto(server.url + "/student/login")
        check_page(watched, "the login")
        page.fill("#token", seeded.tokens["ada"])
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(server.url + "/student/")
        check_page(watched, "/student/")
        paths = page.eval_on_selector_all('main a[href^="/student/"]', "as => as.map(a => a.getAttribute('href'))")
        paths += [f"/student/quizzes/{chapter}" for chapter in quiz_lib.CHAPTER_ORDER]
        paths += [f"/student/submissions/{job}" for name, job in seeded.jobs.items() if name != "bob"]
        for path in dict.fromkeys(paths):
            page.goto(server.url + path)
            check_page(watched, path)
        assert watched.problems == []
        # what the forms answer with: a verdict (due date passed: with its explanation), an unreadable answer,
        # a preview without the script, a regrade refused then sent, a page not found
        page.goto(server.url + "/student/quizzes/activations")
        page.locator("#q-gelu-why input[type=radio]").nth(0).check()
        page.locator("#q-gelu-why button[type=submit]").click()
        page.wait_for_url(re.compile(r".*#q-gelu-why$"))
        check_page(watched, "a verdict")
        page.fill("#a-gelu-min-x", "minus a half")
        page.locator("#q-gelu-min-x button[type=submit]").first.click()
        page.wait_for_url(re.compile(r".*#q-gelu-min-x$"))
        assert page.locator("#e-gelu-min-x").is_visible()
        check_page(watched, "an unreadable answer")
        page.fill("#a-gelu-definition", "x Phi(x)")
        page.get_by_role("button", name="Show how it is read").first.click()
        check_page(watched, "a preview")
        page.goto(server.url + f"/student/submissions/{seeded.jobs['pictures']}")
        page.fill("#r-reason", " ")
        page.get_by_role("button", name="Ask for a regrade").click()
        check_page(watched, "a refused regrade")
        page.fill("#r-reason", "The histogram shows my std, not my variance.")
        page.get_by_role("button", name="Ask for a regrade").click()
        page.wait_for_url(re.compile(r".*\?filed=1#regrades$"))
        check_page(watched, "a regrade sent")
        page.goto(server.url + "/student/submissions/424242")
        check_page(watched, "a page not found")
        page.goto(server.url + "/")  # the course page, the student's pages' other link
        check_page(watched, "the course page")
        # (a refused launch's page is checked where a course has [lti]: tests/server/test_lti_browser.py; this
        # course has none, so /lti/... is not mounted here)
    finally:
        context.close()


# --- the instructor's dashboard ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def class_with_term(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClassServer]:
    """A generated class of 6, plus what the term page shows: an upload with pictures and an open regrade request
    about it, and an extension granted on the dashboard."""
    root = tmp_path_factory.mktemp("a11y-dashboard")
    now = datetime.now(timezone.utc)
    db = root / "course.db"
    with Store.open(db) as store:
        generated = sample_class.generate(store, 6, quiz_lib.load_all(quiz_lib.default_quiz_dir()), now)
        report = known_report(student="s0002")
        job = records.create_job(
            store,
            "s0002",
            "pictures",
            {"normalization.py": "# code\n"},
            [e.id for e in report.exercises[:2]],
            generated.course,
            now - timedelta(days=1),
        ).job
        records.record_done(store, job, GradeReport("s0002", report.exercises[:2], "h"), "test")
        regrade.file_request(store, "s0002", "normalization.LayerNorm", "my axes follow the course text", job["id"])
        extensions.grant(
            store, generated.course, "s0003", "", "dropout", "2099-01-01T00:00", "sick leave", "instructor"
        )
    course = root / "course.toml"
    course.write_text(sample_class.course_toml(now), encoding="utf-8")
    server = Server(db, f"sqlite:///{root / 'queue.db'}", workers=0, course=course).start()
    try:
        yield ClassServer(server, generated, db, now)
    finally:
        server.stop()


@pytest.mark.parametrize("width", WIDTHS)
def test_every_dashboard_page_linked_from_the_overview_meets_wcag_2_2_aa(
    browser: Any,  # noqa: F811
    class_with_term: ClassServer,
    width: int,
) -> None:
    cls = class_with_term
    context, watched = open_page(browser, width)
    page = watched.page
    try:
        page.goto(cls.url + "/instructor/login")
        check_page(watched, "the dashboard's login")
        page.fill("#token", cls.generated.instructor_token)
        page.click("button[type=submit]")
        page.wait_for_url(cls.url + "/instructor/")
        check_page(watched, "/instructor/")
        links = page.eval_on_selector_all("a[href]", "as => as.map(a => a.getAttribute('href').split('#')[0])")
        pages = [
            p
            for p in dict.fromkeys(links)
            if p.startswith("/instructor/") and "/export/" not in p and p.split("?")[0] != "/instructor/"
        ]
        assert {"/instructor/term", "/instructor/similarity", "/instructor/lti", "/instructor/quizzes"} <= set(pages)
        assert sum(p.startswith("/instructor/students/") for p in pages) == 6
        assert sum(p.startswith("/instructor/exercises/") for p in pages) >= 30
        keyboard = {p.split("/")[2] if p.count("/") > 2 else p: p for p in reversed(pages)}  # one page of each kind
        for path in pages:
            page.goto(cls.url + path)
            check_page(watched, path)
            if path in keyboard.values():
                assert unreached_by_tab(page) == [], f"controls Tab never reaches on {path}"
        page.goto(cls.url + "/instructor/term")
        assert "my axes follow the course text" in page.locator("main").inner_text()  # the open request is there
        assert watched.problems == []
    finally:
        context.close()


# --- the --html report ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report_pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("a11y-report")
    pages = {}
    for name, report in (("hidden", known_report()), ("public", known_report(folder / "packs"))):
        pages[name] = folder / f"{name}.html"
        pages[name].write_text(format_html(report), encoding="utf-8")
    return pages


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("which", ["hidden", "public"])
def test_the_html_report_meets_wcag_2_2_aa(
    browser: Any,
    report_pages: dict[str, Path],
    which: str,  # noqa: F811
    width: int,
) -> None:
    context, watched = open_page(browser, width)
    try:
        watched.page.goto(report_pages[which].as_uri())
        check_page(watched, f"the {which} report")
        assert unreached_by_tab(watched.page) == [], "controls Tab never reaches in the report"
        assert watched.page.locator("svg[role=img]").count() >= 10
        assert watched.problems == []
    finally:
        context.close()
